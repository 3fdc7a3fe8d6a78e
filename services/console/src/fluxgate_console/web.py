"""The console's HTTP face (Starlette): the page and its live parts, JSON, replay and the
Kafka Connect API. Each part of the page renders on its own: one that fails shows its error
in its place and the others render as usual."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from fluxgate_console import connect
from fluxgate_console.auth import challenge, operator, operator_refusal, viewer
from fluxgate_console.deadletters import DeadLetter, LetterFilter, replay_refusal
from fluxgate_console.filters import FilterError, letter_filter
from fluxgate_console.refresh import Console
from fluxgate_console.replay import Replayer, ReplayError
from fluxgate_console.security import CsrfTokens, SecurityMiddleware
from fluxgate_console.sparkline import bar_px, sparkline
from fluxgate_console.view import flow, span

log = structlog.get_logger(__name__)
SECTIONS = ("summary", "flow", "services", "stores", "deadletters")  # the long list of letters last
SHOWN_LETTERS = 50
FAILED_PART = '<section class="card failed" id="{}"><h2>{}</h2><p class="err">this part failed: {}</p></section>'
Handler = Callable[[Request], Any]


def templates() -> Environment:
    env = Environment(loader=PackageLoader("fluxgate_console"), autoescape=select_autoescape(), trim_blocks=True)
    env.filters.update(
        ago=ago, rate=rate, count=count, clock=clock, age_tag=age_tag, sparkline=sparkline, bar_px=bar_px
    )
    return env


def ago(at: float | None, now: float | None = None) -> str:
    """How long before the wall clock ``at`` was; a time after it (a watermark moved by a
    device's clock that runs ahead) says so, never "0s ago"."""
    if not at:
        return "never"
    seconds = int((now or time.time()) - at)
    if seconds < -1:  # a second's difference is the two clocks' reading, not a time ahead
        return f"{span(-seconds)} ahead of the clock"
    seconds = max(0, seconds)
    if seconds < 120:
        return f"{seconds}s ago"
    return f"{seconds // 60}m ago" if seconds < 7200 else f"{seconds // 3600}h ago"


def age_tag(at: float | None) -> Markup:
    """How old a figure is, kept current in the browser (``data-at``)."""
    return Markup('<span class="age" data-at="{}">{}</span>').format(at or 0, ago(at))


def rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}/s"


def count(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def clock(at: float | int | None, millis: bool = False) -> str:
    if not at:
        return "–"
    seconds = at / 1000 if millis else at
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Web:
    """Builds the Starlette app around a :class:`Console` (and a :class:`Replayer`, when replay is on)."""

    def __init__(
        self,
        console: Console,
        replayer: Replayer | None,
        cluster_id: Callable[[], str | None],
        tokens: CsrfTokens | None = None,
    ) -> None:
        self.console = console
        self.replayer = replayer
        self._cluster_id = cluster_id
        self._env = templates()
        self._tokens = tokens or CsrfTokens()

    def app(self) -> Starlette:
        page = self._guarded
        routes = [
            Route("/", page(self.page)),
            Route("/parts", page(self.parts)),
            Route("/api/state", page(self.state)),
            Route("/api/deadletters", page(self.deadletters)),
            Route("/api/replay", self.replay, methods=["POST"]),
            Route("/connect/", page(self.connect_root)),
            Route("/connect/connectors", page(self.connectors)),
            Route("/connect/connector-plugins", page(self.plugins)),
            Route("/connect/connectors/{name}", page(self.connector)),
            Route("/connect/connectors/{name}/{what:str}", page(self.connector)),
        ]
        web = self.console.settings.web
        secured = Middleware(SecurityMiddleware, tokens=self._tokens, trusted_origins=web.trusted_origins,
                             allowed_hosts=web.allowed_hosts, tls=web.tls_certfile is not None)  # fmt: skip
        return Starlette(routes=routes, middleware=[secured])

    def _guarded(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if viewer(request, self.console.settings) is None:
                return challenge(self.console.settings.page_auth, "fluxgate console")
            response: Response = await handler(request)
            return response

        return guarded

    def _filter(self, params: Any) -> LetterFilter:
        """The letters ``params`` choose; raises :class:`FilterError`."""
        return letter_filter(params, self.console.book.now_ms())  # the book's clock: the counts' one too

    def _letters(self, params: Any) -> tuple[list[DeadLetter], str | None]:
        """The kept letters ``params`` choose, newest first, or none and why the filter is unusable."""
        try:
            return self.console.book.select(self._filter(params)), None
        except FilterError as exc:
            return [], str(exc)

    def _refusal(self, letter: DeadLetter) -> str | None:
        return replay_refusal(letter, self.console.settings.replay.targets)

    # -- the page -------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        body = self._env.get_template("page.html").render(
            parts=self._render_parts(request),
            refresh_ms=int(self.console.settings.refresh_s * 1000),
            topics=self.console.book.topics(),
            replay_on=self.replayer is not None,
            replay_mode=self.console.settings.replay_auth.mode,
            nonce=request.state.csp_nonce,
            csrf=self._tokens.issue(),
        )
        return HTMLResponse(body)

    async def parts(self, request: Request) -> Response:
        return HTMLResponse(self._render_parts(request))

    def _render_parts(self, request: Request) -> Markup:
        snapshot = self.console.snapshot
        letters, filter_error = self._letters(request.query_params)
        context = {
            "s": snapshot,
            "columns": flow(snapshot.services),
            "books": {t: self.console.book.summary(t) for t in self.console.book.topics()},
            "letters": letters[:SHOWN_LETTERS],
            "filter_error": filter_error,
            "reader": self.console.reader,
            "preview_bytes": self.console.settings.deadletters.preview_bytes,
            "refusal": self._refusal,
            "now_minute": self.console.book.now_minute(),
            "now": time.time(),
        }
        rendered = []
        for section in SECTIONS:
            try:
                # autoescaped by the environment: safe to splice into the page as it is
                rendered.append(Markup(self._env.get_template(f"{section}.html").render(**context)))  # noqa: S704
            except Exception as exc:  # one part failing shows as that part's error, never a blank page
                log.exception("console.part_failed", part=section)
                failed = Markup(FAILED_PART)  # noqa: S704 - a constant; format() escapes what goes in
                rendered.append(failed.format(section, section, f"{type(exc).__name__}: {exc}"))
        return Markup("\n").join(rendered)

    # -- JSON -----------------------------------------------------------------------------

    async def state(self, request: Request) -> Response:
        s = self.console.snapshot
        services = [
            {
                "name": v.name, "state": v.state, "reason": v.reason, "at": v.at, "uptime_s": v.uptime_s,
                "instances": len(v.instances), "ready_instances": v.ready_instances,
                "rate_in": v.rate_in, "rate_out": v.rate_out,
                "lag": v.group.lag if v.group else None, "piling_up": v.piling_up,
                "group_members": len(v.group.members) if v.group else None,
                "lag_by_partition": [
                    {"topic": p.topic, "partition": p.partition, "committed": p.committed, "end": p.end, "lag": p.lag}
                    for p in (v.group.partitions if v.group else ())
                ],
                "figures": {f.label: f.value for f in v.figures}, "late_share": v.late_share,
            }
            for v in s.services
        ]  # fmt: skip
        stores = [x.as_json() for x in s.stores]
        kafka = {"at": s.kafka.at, "error": s.kafka.error, "topic_rates": dict(s.topic_rates)}
        alerts = [{"kind": a.kind, "service": a.service, "text": a.text} for a in s.alerts]
        return JSONResponse(
            {"at": s.at, "failing": s.failing, "services": services, "kafka": kafka, "stores": stores, "alerts": alerts}
        )

    async def deadletters(self, request: Request) -> Response:
        limit = self.console.settings.deadletters.preview_bytes
        letters, filter_error = self._letters(request.query_params)
        if filter_error:
            return JSONResponse({"error_code": 400, "message": filter_error}, status_code=400)
        return JSONResponse([letter_json(x, limit, self._refusal(x)) for x in letters[: SHOWN_LETTERS * 4]])

    # -- replay ---------------------------------------------------------------------------

    async def replay(self, request: Request) -> Response:
        who = operator(request, self.console.settings)
        if who is None:
            return operator_refusal(request, self.console.settings)
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            # a cross-site form can post JSON-looking text/plain; a script must ask CORS first for JSON
            message = "send the replay request as Content-Type: application/json"
            return JSONResponse({"error_code": 415, "message": message}, status_code=415)
        if self.replayer is None:
            return JSONResponse({"error_code": 404, "message": "replay is off"}, status_code=404)
        try:
            body = await request.json()
            chosen = self._filter({k: str(v) for k, v in dict(body.get("filter") or {}).items()})
            ids = [str(i) for i in body.get("ids") or []]
            confirm = body.get("confirm") is True
        except FilterError as exc:  # a ValueError too, but one that says what to change
            return JSONResponse({"error_code": 400, "message": str(exc)}, status_code=400)
        except (ValueError, TypeError, AttributeError) as exc:
            return JSONResponse({"error_code": 400, "message": f"unreadable request: {exc}"}, status_code=400)
        if not ids and chosen == LetterFilter():
            return JSONResponse({"error_code": 400, "message": "choose dead letters: a filter or ids"}, status_code=400)
        letters = self.console.book.select(chosen, ids)
        selection = {"filter": body.get("filter") or {}, "ids": ids}
        try:
            if not confirm:
                plan = await asyncio.to_thread(self.replayer.plan, letters)
                return JSONResponse({"confirmed": False, **plan.as_json()})
            outcome = await asyncio.to_thread(self.replayer.replay, letters, who, selection)
        except ReplayError as exc:
            return JSONResponse({"error_code": 503, "message": str(exc)}, status_code=503)
        plan_json = outcome.plan.as_json() if outcome.plan else {}
        return JSONResponse({"confirmed": True, "replay_id": outcome.replay_id, "sent": outcome.sent, **plan_json})

    # -- Kafka Connect --------------------------------------------------------------------

    async def connect_root(self, request: Request) -> Response:
        return JSONResponse(connect.root(await asyncio.to_thread(self._cluster_id)))

    async def connectors(self, request: Request) -> Response:
        expand = request.query_params.getlist("expand")
        return JSONResponse(connect.connectors(self.console.snapshot.services, expand))

    async def plugins(self, request: Request) -> Response:
        return JSONResponse(connect.plugins(self.console.snapshot.services))

    async def connector(self, request: Request) -> Response:
        name, what = request.path_params["name"], request.path_params.get("what", "")
        view = next((v for v in self.console.snapshot.services if v.name == name), None)
        if view is None:
            return JSONResponse(connect.not_found(name), status_code=404)
        answers: dict[str, Callable[[], Any]] = {
            "": lambda: connect.info(view),
            "status": lambda: connect.status(view),
            "config": lambda: connect.config(view),
            "tasks": lambda: connect.tasks(view),
        }
        if what not in answers:
            return JSONResponse({"error_code": 404, "message": "HTTP 404 Not Found"}, status_code=404)
        return JSONResponse(answers[what]())


def letter_json(letter: DeadLetter, preview_bytes: int, refusal: str | None) -> dict[str, Any]:
    """A letter as ``/api/deadletters`` gives it: ``replay_target`` only when a replay may write there."""
    hex_preview, text_preview = letter.preview(preview_bytes)
    return {
        "id": letter.id, "topic": letter.topic, "partition": letter.partition, "offset": letter.offset,
        "timestamp_ms": letter.timestamp_ms, "reason": letter.reason, "root_cause": letter.root_cause,
        "error_class": letter.error_class, "source": letter.source, "service": letter.service,
        "headers": letter.explained, "size": len(letter.value), "preview_hex": hex_preview,
        "preview_text": text_preview, "replay_target": None if refusal else letter.replay_target,
        "not_replayable_because": refusal,
    }  # fmt: skip
