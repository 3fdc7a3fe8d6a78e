"""Mosquitto's TLS listener: the stack's CA, a client certificate and a password required, and
each user held to its ACL (the devices publish, mqtt-proxy subscribes), against the real broker
with its own command-line clients."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from fluxgate_stack import Stack
from fluxgate_stack.pki import Pki
from fluxgate_stack.secured_mqtt import mqtt_client_certificate, mqtt_user

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def settings() -> object:
    stack = Stack()
    stack.up(["mosquitto"])
    return stack.settings


def client(settings: object, tool: str, role: str | None, *args: str, certificate: bool = True) -> list[str]:
    stack = Stack().settings
    argv = [tool, "-h", stack.host, "-p", str(stack.mqtt_secure_port), "--cafile", str(Pki(stack.pki_dir).ca_cert)]
    if role is not None:
        username, password = mqtt_user(role)
        argv += ["-u", username, "-P", password]
        if certificate:
            cert, key = mqtt_client_certificate(role)
            argv += ["--cert", str(cert), "--key", str(key)]
    return [*argv, *args]


def run(argv: list[str], timeout: float = 15) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def test_a_device_publishes_and_the_proxy_receives(settings: object) -> None:
    topic = f"sensors/dev-{uuid.uuid4().hex[:8]}/temperature"
    with subprocess.Popen(
        client(settings, "mosquitto_sub", "mqtt-proxy", "-t", topic, "-C", "1", "-W", "15", "-q", "1"),
        stdout=subprocess.PIPE,
        text=True,
    ) as subscriber:
        published = None
        for _ in range(20):  # until the subscription is in place: a QoS 1 message waits for nobody before it
            published = run(client(settings, "mosquitto_pub", "device", "-t", topic, "-m", "21.5", "-q", "1"))
            assert published.returncode == 0, published.stderr
            if subscriber.poll() is not None:
                break
            subprocess.run(["sleep", "0.5"], check=True)
        out, _ = subscriber.communicate(timeout=20)
    assert out.strip().splitlines()[0] == "21.5"


@pytest.mark.parametrize(
    ("role", "certificate", "password"),
    [(None, True, None), ("device", False, None), ("device", True, "not-the-password")],
    ids=["anonymous", "no-client-certificate", "wrong-password"],
)
def test_the_tls_listener_refuses(settings: object, role: str | None, certificate: bool, password: str | None) -> None:
    argv = client(settings, "mosquitto_pub", role, "-t", "sensors/x/temperature", "-m", "1", certificate=certificate)
    if password is not None:
        argv[argv.index("-P") + 1] = password
    assert run(argv).returncode != 0


def received(settings: object, reader: str, writer: str, topic: str) -> str:
    """What ``reader``'s subscription to ``topic`` got while ``writer`` published on it four times."""
    with subprocess.Popen(
        client(settings, "mosquitto_sub", reader, "-t", topic, "-C", "1", "-W", "4", "-q", "1"),
        stdout=subprocess.PIPE,
        text=True,
    ) as subscriber:
        for _ in range(4):
            run(client(settings, "mosquitto_pub", writer, "-t", topic, "-m", "1", "-q", "1"))
            subprocess.run(["sleep", "0.5"], check=True)
        out, _ = subscriber.communicate(timeout=10)
    return out


def test_a_device_may_not_subscribe_nor_the_proxy_publish(settings: object) -> None:
    topic = f"sensors/dev-{uuid.uuid4().hex[:8]}/temperature"
    # The broker accepts the SUBSCRIBE but grants nothing: no message reaches the device.
    assert received(settings, "device", "device", topic) == ""
    # The proxy's publish is dropped by the ACL: its own subscription gets nothing.
    assert received(settings, "mqtt-proxy", "mqtt-proxy", topic) == ""


def test_passwords_are_private_and_stored_hashed(settings: object, tmp_path: Path) -> None:
    from fluxgate_stack.secured_mqtt import users_file
    from fluxgate_stack.servers.mosquitto import MosquittoServer

    stack = Stack().settings
    assert users_file(stack).stat().st_mode & 0o777 == 0o600
    hashed = MosquittoServer(stack).password_file.read_text()
    assert mqtt_user("device")[1] not in hashed and "fluxgate-device:$7$" in hashed
