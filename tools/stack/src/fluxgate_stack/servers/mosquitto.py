"""Eclipse Mosquitto 2.x from Debian, started by us (no systemd) with a generated config."""

from __future__ import annotations

import getpass
import subprocess
from pathlib import Path

from fluxgate_stack import probes, secured_mqtt
from fluxgate_stack.errors import InstallError
from fluxgate_stack.fetch import find_binary
from fluxgate_stack.pki import Pki, ensure_pki
from fluxgate_stack.private_files import write_private
from fluxgate_stack.servers.base import Port, Server
from fluxgate_stack.settings import StackSettings


class MosquittoServer(Server):
    """Eclipse Mosquitto MQTT broker."""

    name = "mosquitto"
    ready_timeout = 15.0
    stop_grace = 10.0
    debian_packages = {
        "mosquitto": "mosquitto",
        # the clients are what tests and people use to poke the broker
        "mosquitto_pub": "mosquitto-clients",
        "mosquitto_sub": "mosquitto-clients",
    }

    @property
    def config_file(self) -> Path:
        return self.run_dir / "mosquitto.conf"

    @property
    def password_file(self) -> Path:
        return self.run_dir / "passwords"

    @property
    def acl_file(self) -> Path:
        return self.run_dir / "acl"

    def ports(self) -> list[Port]:
        return [Port(self.settings.mqtt_port), Port(self.settings.mqtt_secure_port)]

    def config_files(self) -> dict[Path, str]:
        conf = mosquitto_conf(self.settings, str(self.data_dir), str(self.log_file))
        secured = secured_listener(self.settings, self.password_file, self.acl_file)
        return {self.config_file: conf + secured, self.acl_file: secured_mqtt.acl(self.settings)}

    def prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ensure_pki(self.settings.pki_dir, self.settings.host)
        # Plain "user:password" lines, hashed in place by Mosquitto's own tool: never kept plain.
        write_private(self.password_file, secured_mqtt.plain_passwords(self.settings))
        tool = find_binary("mosquitto_passwd")
        if tool is None:
            raise InstallError("mosquitto_passwd: not found; run `fluxgate-stack install mosquitto`")
        subprocess.run([tool, "-U", str(self.password_file)], check=True, capture_output=True, timeout=30)

    def command(self) -> list[str]:
        binary = find_binary("mosquitto")
        if binary is None:
            raise InstallError("mosquitto: binary not found; run `fluxgate-stack install mosquitto`")
        # Foreground (no -d): the pid we record is the broker's own.
        return [binary, "-c", str(self.config_file)]

    def probe(self) -> bool:
        return probes.mqtt_connect(self.settings.host, self.settings.mqtt_port)

    def env(self) -> dict[str, str]:
        return {"FLUXGATE_MQTT_HOST": self.settings.host, "FLUXGATE_MQTT_PORT": str(self.settings.mqtt_port)}


def secured_listener(settings: StackSettings, password_file: Path, acl_file: Path) -> str:
    """The TLS listener: the stack's server certificate, a client certificate from the stack's
    CA and a password required, every user held to its ACL (:mod:`fluxgate_stack.secured_mqtt`)."""
    pki = Pki(settings.pki_dir)
    lines = [
        f"listener {settings.mqtt_secure_port} {settings.host}",
        f"cafile {pki.ca_cert}",
        f"certfile {pki.server_cert}",
        f"keyfile {pki.server_key}",
        "require_certificate true",
        f"password_file {password_file}",
        f"acl_file {acl_file}",
        "allow_anonymous false",
    ]
    return "\n".join(lines) + "\n"


def mosquitto_conf(settings: StackSettings, data_dir: str, log_file: str) -> str:
    lines = [
        # Each listener its own authentication: the lab's plain one open, the TLS one not.
        "per_listener_settings true",
        # Started as root, mosquitto would switch to the "mosquitto" user and lose access to
        # our data folder; naming the current user keeps it (ignored when not root).
        f"user {getpass.getuser()}",
        f"listener {settings.mqtt_port} {settings.host}",
        "allow_anonymous true",
        # Persistent sessions and their queued QoS 1/2 messages survive a broker restart.
        "persistence true",
        f"persistence_location {data_dir.rstrip('/')}/",
        # Saved every second, so even a SIGKILLed broker loses at most a second of state.
        "autosave_interval 1",
        f"max_queued_messages {settings.mqtt_max_queued_messages}",
        "max_inflight_messages 100",
        # Not stdout: mosquitto does not flush it, so a log tail would lag behind. Errors
        # printed before this file is open still land in it through our stdout redirect.
        f"log_dest file {log_file}",
        # "information" would add a line per autosave, i.e. every second or two.
        "log_type error",
        "log_type warning",
        "log_type notice",
        "connection_messages true",
        "log_timestamp_format %Y-%m-%dT%H:%M:%S",
    ]
    return "\n".join(lines) + "\n"
