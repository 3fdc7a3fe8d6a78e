"""The processes the MQTT benchmark drives: ``mosquitto_pub``/``mosquitto_sub`` and the proxy."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from _common import reap

from fluxgate_stack import Endpoints


def mqtt_client(endpoints: Endpoints, name: str, *options: str) -> list[str]:
    binary = shutil.which(name)
    if binary is None:
        raise SystemExit(f"{name} not found: run `fluxgate-stack install mosquitto`")
    return [binary, "-h", endpoints.mqtt_host, "-p", str(endpoints.mqtt_port), *options]


class Publisher:
    """``mosquitto_pub -l`` fed through a pipe that stays open until the messages have arrived.

    mosquitto_pub reads its input far ahead of what the broker has acknowledged, and at the
    end of its input it exits without sending what it still holds: a closed pipe would lose
    the tail of every run longer than a few seconds.
    """

    def __init__(self, endpoints: Endpoints, topic: str, payloads: Path, qos: int, inflight: int) -> None:
        options = ("-t", topic, "-q", str(qos), "-M", str(inflight), "-l")
        command = mqtt_client(endpoints, "mosquitto_pub", *options)
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE)
        self._feeder = threading.Thread(target=self._feed, args=(payloads.read_bytes(),), daemon=True)
        self._feeder.start()

    def _feed(self, data: bytes) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # it died: close() reports its exit
            self.process.stdin.write(data)
            self.process.stdin.flush()

    def close(self) -> float:
        """End its input, wait for it to exit, and return the CPU seconds it used."""
        self._feeder.join(30)
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        return reap(self.process, 30)


@dataclass
class ProxyProcess:
    """A running ``fluxgate-mqtt-proxy``, its health port, and its log for error messages."""

    process: subprocess.Popen[bytes]
    http_port: int
    log: Path

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/readyz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            self.check_alive()
            if time.monotonic() > deadline:
                raise SystemExit(f"mqtt-proxy not ready in {timeout:.0f}s:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise SystemExit(f"mqtt-proxy exited with {self.process.returncode}:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
