"""What the stack needs to know about a server; one small subclass per server.

Adding a server (Elasticsearch, Cassandra, Hazelcast ...) means one new subclass and one
line in ``servers/__init__.py``: the lifecycle (pidfiles, readiness wait, reuse, logs)
lives in ``stack.py`` and is shared.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from fluxgate_stack import users
from fluxgate_stack.errors import InstallError
from fluxgate_stack.fetch import find_binary
from fluxgate_stack.process import Proto
from fluxgate_stack.settings import StackSettings


@dataclass(frozen=True)
class Port:
    number: int
    proto: Proto = "tcp"


class Server(ABC):
    name: ClassVar[str]
    # False for servers only some tests need: a bare `up` leaves them out.
    default: ClassVar[bool] = True
    ready_timeout: ClassVar[float] = 60.0
    # Servers that must be ready before this one starts; `up` brings them up too.
    requires: ClassVar[tuple[str, ...]] = ()
    stop_grace: ClassVar[float] = 20.0
    # binary -> Debian package providing it
    debian_packages: ClassVar[dict[str, str]] = {}

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        user = self.unprivileged_user()
        local = settings.local_dir
        if user is not None:
            local = users.unprivileged_local_dir(local, user, settings.unprivileged_home)
        self.dist_dir = local / "dist"
        self.run_dir = local / "run" / self.name
        self.data_dir = local / "data" / self.name
        self.build_dir = local / "build" / self.name
        self.log_file = self.run_dir / f"{self.name}.log"
        self.pid_file = self.run_dir / f"{self.name}.pid"

    def unprivileged_user(self) -> str | None:
        """The user the server runs as when the stack runs as root; None: as whoever runs the stack."""
        return None

    def needs_to_read(self) -> list[Path]:
        """Files the server's user must be able to read to start (checked before anything starts)."""
        return []

    def check_reachable(self) -> None:
        """Fail before anything starts, in one line, when the server's user cannot read what it runs."""
        user = self.unprivileged_user()
        if user is None or os.geteuid() != 0:
            return
        users.ensure_system_user(user)
        for wanted in self.needs_to_read():
            # A folder the start creates (a config folder) only needs its way in to be open.
            path = next(p for p in [wanted, *wanted.parents] if p.exists())
            test = "-r" if path == wanted else "-x"
            if subprocess.run([*users.run_as(user), "test", test, str(path)], check=False).returncode != 0:
                raise InstallError(
                    f"{self.name}: runs as user {user!r}, who cannot read {path}; give it the way in (chmod o+x "
                    "on every folder above it) or set FLUXGATE_STACK_UNPRIVILEGED_HOME to a folder it can reach"
                )

    @property
    def timeout(self) -> float:
        return self.settings.timeout or self.ready_timeout

    @abstractmethod
    def ports(self) -> list[Port]:
        """Every port the server binds; the first one is the one clients use."""

    @abstractmethod
    def command(self) -> list[str]:
        """The foreground command line (no daemon mode: the pid we record must be the server's)."""

    @abstractmethod
    def probe(self) -> bool:
        """One quick readiness check through the server's own protocol."""

    @abstractmethod
    def env(self) -> dict[str, str]:
        """Connection settings for clients, as environment variables."""

    def is_installed(self) -> bool:
        return all(find_binary(binary) for binary in self.debian_packages)

    def toolchain(self) -> dict[str, str]:
        """Executables the server runs on or is fetched with, and the Debian package of each;
        checked on every install, since the server's own files may already be there."""
        return {}

    def install(self) -> None:  # noqa: B027 - optional hook, most servers need nothing
        """Fetch what is missing beyond Debian packages (those are batched by the stack)."""

    def config_files(self) -> dict[Path, str]:
        """Config files to (re)write before every start, by path."""
        return {}

    def prepare(self) -> None:  # noqa: B027 - optional hook, most servers need nothing
        """Make data folders ready (e.g. format storage); runs before every start, so it is idempotent."""

    def configure(self) -> None:
        unprivileged = self.unprivileged_user() is not None
        if unprivileged:  # its user must reach the config and data folders
            users.open_to_all(self.run_dir)
            users.open_to_all(self.data_dir.parent)
        for path, text in self.config_files().items():
            if unprivileged:
                users.open_to_all(path.parent)
            write_if_changed(path, text)
            if unprivileged:
                path.chmod(0o644)  # root's umask may be 077
        self.prepare()

    def fingerprint(self) -> str:
        """Changes whenever the settings would start the server differently (port, version, heap...)."""
        files = {str(path): text for path, text in self.config_files().items()}
        payload = json.dumps([self.command(), files], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def fingerprints_served(self) -> set[str]:
        """The fingerprints of a running server that serves what these settings ask: its own."""
        return {self.fingerprint()}

    def provision(self) -> None:  # noqa: B027 - optional hook, most servers need nothing
        """Idempotent set-up once ready (topics, registry rules); also runs when reusing a server."""

    def process_env(self) -> dict[str, str] | None:
        """Environment for the server process; ``None`` inherits ours."""
        return None

    def wipe(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)


class JavaServer(Server):
    """A server that runs on the JVM; checks the java executable before starting."""

    min_java: ClassVar[int] = 17

    def toolchain(self) -> dict[str, str]:
        return {self.settings.java: "openjdk-17-jre-headless", self.settings.mvn: "maven"}

    def java(self) -> str:
        java = shutil.which(self.settings.java)
        if java is None:
            raise InstallError(f"{self.name}: java not found ({self.settings.java}); install Java {self.min_java}+")
        if java_major(java) < self.min_java:
            raise InstallError(f"{self.name}: needs Java {self.min_java}+, {java} is older")
        return java

    def fingerprints_served(self) -> set[str]:
        """Its own fingerprint and, asked for a quick start (C1 only, the tests' default), the
        full-JIT one: a benchmark's JVM serves a test as well, and restarting it would take the
        servers from under the benchmark (a fleet run's 300,000-device point lost Kafka, the
        registry, Cassandra and Hazelcast to a console test, 2026-11-28). Full JIT asked of a
        quick-start JVM still restarts it: its figures would be C1's."""
        served = {self.fingerprint()}
        if self.settings.jvm_quick_start:
            asked = self.settings
            self.settings = asked.model_copy(update={"jvm_quick_start": False})
            try:
                served.add(self.fingerprint())
            finally:
                self.settings = asked
        return served

    def jit_options(self) -> list[str]:
        # C1 only: on a 2-core machine two JVMs booting side by side spend their time in the
        # C2 compiler; without it `up` takes ~8 s instead of ~14 s, at a lower peak throughput.
        return ["-XX:TieredStopAtLevel=1"] if self.settings.jvm_quick_start else []


@functools.cache
def java_major(java: str) -> int:
    """Feature version of ``java``, read from ``-XshowSettings:properties`` (stable across vendors)."""
    out = subprocess.run(
        [java, "-XshowSettings:properties", "-version"], capture_output=True, text=True, check=False
    ).stderr
    for line in out.splitlines():
        key, _, value = line.strip().partition(" = ")
        if key == "java.specification.version":
            return int(value.removeprefix("1."))
    return 0


def write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
