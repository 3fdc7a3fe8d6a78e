"""Apicurio Registry: a schema registry with a Confluent-compatible API (``/apis/ccompat/v7``).

Confluent's own registry is not on Maven Central; Apicurio's is. 3.0.9 is chosen because
it is the newest ``apicurio-registry-app`` on Central that runs on Java 17 (3.3.x needs
Java 21; no 3.1.x/3.2.x app archive is published there).

Storage is KafkaSQL: every change is a record in a Kafka topic (the journal), replayed on
start, as Confluent's registry keeps ``_schemas``. Schemas then live exactly as long as the
records that name their ids: a registry restart answers the same id with the same schema,
and ids are never handed out again. In-memory storage (the 3.x default) forgot them, so
records written before a restart named ids that answered 404 or, worse, another schema.
Tests that want a clean registry use subjects of their own.
"""

from __future__ import annotations

import ssl
import time
from pathlib import Path
from typing import ClassVar

import httpx

from fluxgate_stack import fetch, probes
from fluxgate_stack.errors import StackError
from fluxgate_stack.servers.base import JavaServer, Port

CCOMPAT_PATH = "/apis/ccompat/v7"


class RegistryServer(JavaServer):
    """Apicurio Registry (Confluent-compatible API)."""

    name = "registry"
    requires: ClassVar[tuple[str, ...]] = ("kafka",)  # the journal lives there; started and ready first
    ready_timeout = 90.0
    stop_grace = 20.0

    @property
    def home(self) -> Path:
        return self.dist_dir / f"apicurio-registry-{self.settings.registry_version}"

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.registry_port}{CCOMPAT_PATH}"

    def ports(self) -> list[Port]:
        return [Port(self.settings.registry_port)]

    def is_installed(self) -> bool:
        return self._runner_jar() is not None

    def install(self) -> None:
        fetch.install_atomically(self.home, self._fetch_app)

    def _fetch_app(self, into: Path) -> None:
        coordinate = f"io.apicurio:apicurio-registry-app:{self.settings.registry_version}:tar.gz:all"
        archive = fetch.maven_copy_artifact(self.settings.mvn, coordinate, self.build_dir, self.build_dir)
        fetch.unpack_tar(archive, into)
        archive.unlink()  # ~100 MB, and ~/.m2 keeps a copy anyway

    def command(self) -> list[str]:
        jar = self._runner_jar()
        if jar is None:
            raise StackError(f"registry: no runnable jar under {self.home}; run `fluxgate-stack install registry`")
        heap = f"-Xmx{self.settings.registry_heap}"
        return [self.java(), heap, *self.jit_options(), *self._properties(), "-jar", str(jar)]

    def prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)  # where snapshots of the journal go

    def probe(self) -> bool:
        return probes.http_ok(f"{self.url}/subjects")

    def provision(self) -> None:
        set_compatibility(self.url, self.settings.registry_compatibility)

    def env(self) -> dict[str, str]:
        return {"FLUXGATE_REGISTRY_URL": self.url}

    def _properties(self) -> list[str]:
        props = {
            "quarkus.http.host": self.settings.host,
            "quarkus.http.port": str(self.settings.registry_port),
            # Confluent clients put the id returned by registration into every record and look
            # it up again with GET /schemas/ids/{id}. With legacy mode off (the 3.x default, set
            # here so an upgrade cannot flip it) both are Apicurio *content* ids, which, like
            # Confluent ids, are equal for the same schema under different subjects.
            "apicurio.ccompat.legacy-id-mode.enabled": "false",
            **self._kafkasql_properties(),
            # Tests clean up after themselves with DELETE /subjects/...
            "apicurio.rest.deletion.artifact.enabled": "true",
            "apicurio.rest.deletion.artifact-version.enabled": "true",
            "apicurio.rest.deletion.group.enabled": "true",
        }
        return [f"-D{key}={value}" for key, value in props.items()]

    def _kafkasql_properties(self) -> dict[str, str]:
        return {
            "apicurio.storage.kind": "kafkasql",
            "apicurio.kafkasql.bootstrap.servers": f"{self.settings.host}:{self.settings.kafka_port}",
            "apicurio.kafkasql.topic": self.settings.registry_journal_topic,
            "apicurio.kafkasql.snapshots.topic": f"{self.settings.registry_journal_topic}-snapshots",
            # The journal *is* the registry: Kafka's default 7-day retention would delete
            # schemas that records still name. Passed to the topic Apicurio creates.
            "apicurio.kafkasql.topic.retention.ms": "-1",
            "apicurio.storage.snapshot.location": str(self.data_dir),
        }

    def _runner_jar(self) -> Path | None:
        # The archive layout changed across 3.x: *-runner.jar (3.0) or quarkus-run.jar (later).
        for pattern in ("*-runner.jar", "quarkus-run.jar", "quarkus-app/quarkus-run.jar"):
            found = sorted(self.home.glob(pattern)) if self.home.is_dir() else []
            if found:
                return found[0]
        return None


def set_compatibility(
    url: str,
    level: str,
    patience: float = 60.0,
    *,
    auth: tuple[str, str] | None = None,
    verify: ssl.SSLContext | bool = True,
) -> None:
    """Set the global compatibility level (PUT /config), which Apicurio then enforces.

    On a registry restarted over its journal, readiness (subjects answering) can come before
    the journal's replay has reached the existing rule: the PUT then tries to create the rule
    and answers 409 "already exists". Once the replay is through, the same PUT is an update,
    so a 409 is asked again until ``patience`` runs out. A write is answered only once Kafka
    has it back from the journal, which took over 10 s when every server of the stack started
    at once at full JIT: a PUT that times out is asked again too (it sets what it sets, however
    often). ``auth`` and ``verify``: for the secured registry (an admin's client credentials,
    the stack's CA)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            response = httpx.put(
                f"{url}/config",
                json={"compatibility": level},
                headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
                timeout=10,
                auth=auth,
                verify=verify,
            )
        except httpx.TimeoutException as exc:
            if time.monotonic() > deadline:
                raise StackError(f"registry: PUT /config {level} got no answer within {patience:.0f} s") from exc
            continue
        if response.status_code == 200:
            return
        if response.status_code != 409 or time.monotonic() > deadline:
            raise StackError(f"registry: PUT /config {level} answered {response.status_code}: {response.text}")
        time.sleep(0.2)
