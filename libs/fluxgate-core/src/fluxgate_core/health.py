"""``/healthz``, ``/readyz`` and ``/metrics`` on one HTTP port per service.

A plain threaded HTTP server, so it works the same beside an asyncio gateway and
beside Spark's blocking driver loop, and keeps answering when the event loop is busy.
``/healthz`` says the process is alive. ``/readyz`` calls every readiness check the server
was given, by name, and answers 200 when all return true, else 503; the JSON body holds each
check's result (``{"ready": false, "checks": {"ready": false}}``), and a check that raises
counts as false. A service started by :func:`fluxgate_core.lifecycle.run_service` has one
check, ``ready``: its own ``Service.ready()``, which folds whatever that service waits for
(Kafka, the broker, its store) into one answer, so the body does not say which of those is
missing; the service's logs and metrics do. A service that runs but needs an operator's
attention (the aggregator after input offsets were lost) says why through ``attention()``:
each reason is a failing check of its own, named by the reason, so ``/readyz`` answers 503 and
the console shows the reason itself.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Gauge, generate_latest

from fluxgate_core.settings import HttpSettings

ReadyCheck = Callable[[], bool]
log = structlog.get_logger(__name__)


class HealthServer:
    """Serves health and metrics in a daemon thread; ``stop()`` is safe to call twice."""

    def __init__(
        self,
        settings: HttpSettings,
        checks: Mapping[str, ReadyCheck] | None = None,
        registry: CollectorRegistry = REGISTRY,
        attention: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        self._checks = dict(checks or {})
        self._attention = attention
        self._registry = registry
        self._server = ThreadingHTTPServer((settings.host, settings.port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def add_check(self, name: str, check: ReadyCheck) -> None:
        """One more check for ``/readyz``, reported under ``name``."""
        self._checks[name] = check

    def start(self) -> HealthServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="health-http", daemon=True)
        self._thread.start()
        log.info("health.listening", port=self.port)
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread = None

    def readiness(self) -> dict[str, bool]:
        """Each check's result by name; a check that raises is false."""
        results: dict[str, bool] = {}
        for name, check in self._checks.items():
            try:
                results[name] = bool(check())
            except Exception:  # a check that raises is a check that failed
                results[name] = False
        return results | self._reasons()

    def _reasons(self) -> dict[str, bool]:
        """What needs attention, each reason a failing check; ``attention`` raising is one too."""
        if self._attention is None:
            return {}
        try:
            return dict.fromkeys(self._attention(), False)
        except Exception:  # as a raising check: failed, under the name it would have had
            return {"attention": False}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    self._reply(200, "application/json", b'{"status":"ok"}')
                elif path == "/readyz":
                    checks = server.readiness()
                    ready = all(checks.values())
                    body = json.dumps({"ready": ready, "checks": checks}).encode()
                    self._reply(200 if ready else 503, "application/json", body)
                elif path == "/metrics":
                    body = generate_latest(server._registry) + readiness_metrics(server.readiness())
                    self._reply(200, CONTENT_TYPE_LATEST, body)
                else:
                    self._reply(404, "text/plain", b"not found\n")

            def _reply(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return  # scrapes every few seconds would drown the service's own logs

        return Handler


def readiness_metrics(checks: Mapping[str, bool]) -> bytes:
    """``fluxgate_ready``: 1 when ``/readyz`` answers 200, as of this scrape, so an alert can
    page on a service that runs but is not ready (Prometheus sees only ``/metrics``), and
    ``fluxgate_ready_check`` per check (a reason needing attention is a failing check)."""
    registry = CollectorRegistry()  # per scrape: the checks are asked now, not cached in a global
    Gauge("fluxgate_ready", "1 when /readyz answers 200 (every check passes)", registry=registry).set(
        all(checks.values())
    )
    check = Gauge("fluxgate_ready_check", "Each /readyz check, 1 when it passes", ["check"], registry=registry)
    for name, passed in checks.items():
        check.labels(name).set(passed)
    return generate_latest(registry)
