"""``fluxgate-console``: the page, its JSON, replay and the Kafka Connect API on ``web.port``;
``/healthz``, ``/readyz`` (Kafka answered the last refresh) and ``/metrics`` on ``http.port``
like every service.

Exit codes: 0 after a clean stop, 2 for bad configuration (one line naming the field, e.g.
auth asked for without credentials), 1 when the page's port cannot be served.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import structlog
import uvicorn

from fluxgate_console.deadletters import DeadLetterBook
from fluxgate_console.kafka_state import AdminKafka
from fluxgate_console.reader import DeadLetterReader
from fluxgate_console.refresh import Console
from fluxgate_console.replay import AuditCodec, AuditLog, Replayer, transactional_config
from fluxgate_console.settings import SERVICE, ConsoleSettings
from fluxgate_console.store_clients import check_elasticsearch, check_scylla
from fluxgate_console.web import Web
from fluxgate_core.errors import DeliveryError, FluxgateError
from fluxgate_core.kafka_access import verify_kafka
from fluxgate_core.lifecycle import run_service
from fluxgate_core.registry_access import verify_registry

log = structlog.get_logger(__name__)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the service's (run_service) decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ConsoleService:
    """Refreshes the console, reads the dead letters and serves the page until stopped."""

    def __init__(self, settings: ConsoleSettings) -> None:
        settings = settings.checked()
        kafka = settings.kafka
        self.settings = settings
        self.admin = AdminKafka(kafka.client_config(SERVICE), settings.request_timeout_s)
        self.book = DeadLetterBook(settings.deadletters)
        reader_config = kafka.consumer_config(f"{SERVICE}-reader", SERVICE)  # assigned, never joins the group
        self.reader = DeadLetterReader(
            reader_config, self.book, settings.deadletters.lookback, settings.request_timeout_s
        )
        self.console = Console(settings, self.admin, self.book, self.reader)
        codec = AuditCodec(settings.registry, kafka.client_config(SERVICE), settings.replay.audit_topic)
        audit = AuditLog(kafka.consumer_config(f"{SERVICE}-audit", SERVICE), settings.replay.audit_topic, codec.decode,
                         codec.prepare)  # fmt: skip
        self.replayer = Replayer(
            transactional_config(kafka.producer_config(SERVICE), settings.replay.transactional_id),
            audit, settings.replay.audit_topic, codec.encode, settings.replay.max_records,
            targets=settings.replay.targets,
        )  # fmt: skip
        self.web = Web(self.console, self.replayer, self.admin.cluster_id)

    def ready(self) -> bool:
        return self.console.ready()

    async def run(self, stop: asyncio.Event) -> None:
        web = self.settings.web
        config = uvicorn.Config(
            self.web.app(), host=web.host, port=web.port, log_level="warning", lifespan="off",
            ssl_certfile=web.tls_certfile, ssl_keyfile=web.tls_keyfile,  # both None: plain HTTP
        )  # fmt: skip
        server = _Server(config)
        await self._check_kafka()
        # A refused secret or CA stops it (exit 2, named); a registry away only delays replay's audit.
        await asyncio.to_thread(verify_registry, self.settings.registry, self._env_prefix(), away_ok=True)
        await check_elasticsearch(self.console.es_client, self.settings.elasticsearch)
        await check_scylla(self.settings.scylla, self.settings.request_timeout_s)
        self.reader.start()
        serving = asyncio.create_task(server.serve())
        refreshing = asyncio.create_task(self.console.run(stop))
        try:
            await asyncio.wait([serving, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
            if serving.done() and not stop.is_set():  # uvicorn gave up (its port is taken): say so, exit 1
                raise FluxgateError(f"cannot serve the console on {web.host}:{web.port}")
            log.info("console.stopping")
        finally:
            stop.set()
            server.should_exit = True
            await asyncio.gather(serving, refreshing, return_exceptions=True)
            await asyncio.to_thread(self.reader.stop)
            await asyncio.to_thread(self.replayer.close)
            await self.console.close()

    async def _check_kafka(self) -> None:
        """A refused login or handshake stops the console at start (exit 2, naming the setting);
        Kafka away does not: showing that is the console's job, and /readyz says it."""
        prefix = self._env_prefix()
        try:
            await asyncio.to_thread(verify_kafka, self.settings.kafka, SERVICE, prefix, (), timeout=5.0)
        except DeliveryError as exc:
            log.warning("console.kafka_unreachable", error=str(exc))

    @staticmethod
    def _env_prefix() -> str:
        return str(ConsoleSettings.model_config.get("env_prefix", ""))


def main() -> None:
    raise SystemExit(run_service(SERVICE, ConsoleSettings, ConsoleService, quiet_loggers=["httpx", "uvicorn"]))
