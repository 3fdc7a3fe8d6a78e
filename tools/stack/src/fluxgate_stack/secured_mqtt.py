"""Mosquitto's secured listener: TLS from the stack's CA, a client certificate and a password
required, and an ACL per user.

Two users: ``device`` (the simulated devices: publish readings, nothing else) and
``mqtt-proxy`` (subscribe to them, nothing else). Passwords are random, made once, kept 0600
in ``.local/pki/mosquitto-secured.json``; each user's client certificate is issued by the
stack's CA with the user name as its common name (:func:`fluxgate_stack.pki.client_certificate`).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from fluxgate_stack.errors import StackError
from fluxgate_stack.pki import Pki, client_certificate
from fluxgate_stack.private_files import locked, write_private
from fluxgate_stack.settings import StackSettings

# user -> its broker user name and what it may do: Mosquitto's ACL lines for it
USERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "device": ("fluxgate-device", ("topic write sensors/#", "topic write devices/#")),
    # A shared subscription's filter is checked with its $share/<group>/ prefix as well.
    "mqtt-proxy": (
        "fluxgate-mqtt-proxy",
        (
            "topic read sensors/#",
            "topic read devices/#",
            "topic read $share/+/sensors/#",
            "topic read $share/+/devices/#",
        ),
    ),
}


def users_file(settings: StackSettings) -> Path:
    return settings.pki_dir / "mosquitto-secured.json"


def mqtt_user(role: str, settings: StackSettings | None = None) -> tuple[str, str]:
    """``(username, password)`` of ``role`` ("device" or "mqtt-proxy"); made once."""
    settings = settings or StackSettings()
    if role not in USERS:
        raise StackError(f"unknown MQTT user {role!r}: want one of {', '.join(USERS)}")
    return USERS[role][0], _passwords(settings)[role]


def mqtt_client_certificate(role: str, settings: StackSettings | None = None) -> tuple[Path, Path]:
    """``role``'s client certificate and key (PEM files) from the stack's CA."""
    settings = settings or StackSettings()
    return client_certificate(settings.pki_dir, settings.host, mqtt_user(role, settings)[0])


def acl(settings: StackSettings) -> str:
    lines = ["# written by fluxgate-stack: each user of the TLS listener, and what it may do"]
    for username, rules in USERS.values():
        lines += ["", f"user {username}", *rules]
    return "\n".join(lines) + "\n"


def plain_passwords(settings: StackSettings) -> str:
    """``user:password`` lines, which ``mosquitto_passwd -U`` hashes in place."""
    return "".join(f"{mqtt_user(role, settings)[0]}:{_passwords(settings)[role]}\n" for role in USERS)


def mqtt_proxy_env(settings: StackSettings | None = None) -> dict[str, str]:
    """mqtt-proxy's ``MQTT__*`` settings (no prefix) for the TLS listener, as user ``mqtt-proxy``."""
    settings = settings or StackSettings()
    username, password = mqtt_user("mqtt-proxy", settings)
    cert, key = mqtt_client_certificate("mqtt-proxy", settings)
    return {
        "MQTT__HOST": settings.host,
        "MQTT__PORT": str(settings.mqtt_secure_port),
        "MQTT__TLS": "true",
        "MQTT__CA_FILE": str(Pki(settings.pki_dir).ca_cert),
        "MQTT__CERT_FILE": str(cert),
        "MQTT__KEY_FILE": str(key),
        "MQTT__USERNAME": username,
        "MQTT__PASSWORD": password,
    }


def device_args(folder: Path, settings: StackSettings | None = None) -> list[str]:
    """The simulator's options for the TLS listener, as user ``device`` (its password in a
    0600 file under ``folder``)."""
    settings = settings or StackSettings()
    username, password = mqtt_user("device", settings)
    cert, key = mqtt_client_certificate("device", settings)
    password_file = folder / "mqtt-device.password"
    write_private(password_file, password + "\n")
    return ["--mqtt-port", str(settings.mqtt_secure_port), "--mqtt-ca-file", str(Pki(settings.pki_dir).ca_cert),
            "--mqtt-cert-file", str(cert), "--mqtt-key-file", str(key),
            "--mqtt-username", username, "--mqtt-password-file", str(password_file)]  # fmt: skip


def _passwords(settings: StackSettings) -> dict[str, str]:
    path = users_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path.with_name(".mosquitto-secured.lock")):
        stored: dict[str, str] = json.loads(path.read_text()) if path.is_file() else {}
        if not all(role in stored for role in USERS):
            stored |= {role: secrets.token_urlsafe(24) for role in USERS if role not in stored}
            write_private(path, json.dumps(stored, indent=1, sort_keys=True) + "\n")
    return stored
