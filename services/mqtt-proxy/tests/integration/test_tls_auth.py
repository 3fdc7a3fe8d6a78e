"""mqtt-proxy against a Mosquitto of its own that demands TLS and a password."""

from __future__ import annotations

import contextlib
import getpass
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fluxgate_testing import free_port

Setup = Any  # the `setup` fixture's type lives in conftest.py, which tests cannot import
pytestmark = pytest.mark.integration


@dataclass
class SecureBroker:
    port: int
    ca_file: Path
    users: dict[str, str]
    folder: Path
    mutual: bool = False  # the broker wants a client certificate too

    def publish(self, topic: str, payload: str, user: str) -> None:
        certificate = ["--cert", str(self.folder / "client.crt"), "--key", str(self.folder / "client.key")]
        subprocess.run(
            ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(self.port), "--cafile", str(self.ca_file),
             *(certificate if self.mutual else []),
             "-u", user, "-P", self.users[user], "-q", "1", "-t", topic, "-m", payload],
            check=True, timeout=30, capture_output=True,
        )  # fmt: skip


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(folder: Path) -> None:
    """A throwaway CA and a server certificate for 127.0.0.1, as an operator would make them."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=fluxgate-test-ca", cwd=folder)  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=localhost", cwd=folder)  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "2", "-extfile", "san.ext", cwd=folder)  # fmt: skip
    # A client certificate signed by the same CA, for a broker that asks for one (mutual TLS).
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out", "client.csr",
            "-subj", "/CN=fluxgate-mqtt-proxy", cwd=folder)  # fmt: skip
    (folder / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "client.crt", "-days", "2", "-extfile", "client.ext", cwd=folder)  # fmt: skip


@pytest.fixture
def secure_broker(tmp_path: Path) -> Iterator[SecureBroker]:
    with running_broker(tmp_path, mutual=False) as broker:
        yield broker


@pytest.fixture
def mutual_tls_broker(tmp_path: Path) -> Iterator[SecureBroker]:
    with running_broker(tmp_path, mutual=True) as broker:
        yield broker


@contextlib.contextmanager
def running_broker(tmp_path: Path, mutual: bool) -> Iterator[SecureBroker]:
    folder = tmp_path / "broker"
    folder.mkdir()
    make_certificates(folder)
    users = {"proxy": "proxy-secret", "device": "device-secret"}
    for number, (user, password) in enumerate(users.items()):
        create = ["-c"] if number == 0 else []
        subprocess.run(["mosquitto_passwd", *create, "-b", str(folder / "passwd"), user, password], check=True)
    port = free_port()
    (folder / "mosquitto.conf").write_text(
        "\n".join(
            [
                f"user {getpass.getuser()}",
                f"listener {port} 127.0.0.1",
                f"cafile {folder / 'ca.crt'}",
                f"certfile {folder / 'server.crt'}",
                f"keyfile {folder / 'server.key'}",
                "allow_anonymous false",
                f"require_certificate {'true' if mutual else 'false'}",
                f"password_file {folder / 'passwd'}",
                "persistence false",
                f"log_dest file {folder / 'mosquitto.log'}",
                "",
            ]
        )
    )
    broker = subprocess.Popen(["mosquitto", "-c", str(folder / "mosquitto.conf")])
    try:
        deadline = time.monotonic() + 15
        while True:
            assert broker.poll() is None, "mosquitto exited at start"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "mosquitto never listened"
                time.sleep(0.05)
        yield SecureBroker(port, folder / "ca.crt", users, folder, mutual)
    finally:
        broker.terminate()
        broker.wait(timeout=10)


def secure_proxy(setup: Setup, broker: SecureBroker, password: str, **more: str) -> Any:
    settings = {
        "MQTT__HOST": "127.0.0.1",
        "MQTT__PORT": str(broker.port),
        "MQTT__TLS": "true",
        "MQTT__CA_FILE": str(broker.ca_file),
        "MQTT__USERNAME": "proxy",
        "MQTT__PASSWORD": password,
        "MQTT__RECONNECT_MAX_S": "1",
    }
    return setup.proxy(**{**settings, **more})


def test_tls_and_password_authentication(setup: Setup, secure_broker: SecureBroker) -> None:
    secure_proxy(setup, secure_broker, secure_broker.users["proxy"]).start()
    payload = json.dumps({"sensorId": "s1", "timestamp": int(time.time() * 1000), "temperature": 19.75, "seq": 7})
    secure_broker.publish(f"{setup.prefix}/s1/temperature", payload, user="device")
    [got] = setup.readings_in_kafka(expected=1)
    assert got.record is not None
    assert (got.record["device_id"], got.record["value"], got.record["sequence"]) == ("s1", 19.75, 7)


def test_wrong_password_is_fatal_and_says_why(setup: Setup, secure_broker: SecureBroker) -> None:
    proxy = secure_proxy(setup, secure_broker, "not-the-password").start(wait_ready=False)
    assert proxy.process is not None
    assert proxy.process.wait(timeout=30) == 1
    log = proxy.log_text()
    assert "refused" in log.lower(), log[-2000:]
    assert "not-the-password" not in log


def test_mutual_tls_with_the_proxys_client_certificate(setup: Setup, mutual_tls_broker: SecureBroker) -> None:
    broker = mutual_tls_broker
    certificate = {
        "MQTT__CERT_FILE": str(broker.folder / "client.crt"),
        "MQTT__KEY_FILE": str(broker.folder / "client.key"),
    }
    secure_proxy(setup, broker, broker.users["proxy"], **certificate).start()
    payload = json.dumps({"sensorId": "s2", "timestamp": int(time.time() * 1000), "temperature": 21.5})
    broker.publish(f"{setup.prefix}/s2/temperature", payload, user="device")
    [got] = setup.readings_in_kafka(expected=1)
    assert got.record is not None and (got.record["device_id"], got.record["value"]) == ("s2", 21.5)


def test_a_broker_certificate_the_ca_file_does_not_verify_stops_the_proxy_naming_the_setting(
    setup: Setup, secure_broker: SecureBroker
) -> None:
    other_ca = "/etc/ssl/certs/ca-certificates.crt"  # Debian's bundle: it never signed the test broker
    proxy = secure_proxy(setup, secure_broker, secure_broker.users["proxy"], MQTT__CA_FILE=other_ca)
    proxy.start(wait_ready=False)
    assert proxy.process is not None
    assert proxy.process.wait(timeout=60) == 2, proxy.log_text()[-2000:]
    assert "[env FLUXGATE_MQTT_MQTT__CA_FILE]" in proxy.log_text()
