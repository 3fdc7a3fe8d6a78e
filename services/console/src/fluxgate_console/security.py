"""What keeps another site from acting through an operator's browser, and the page from being
framed or fed script: an ASGI middleware around the whole app.

Every response carries a Content-Security-Policy (scripts and styles only with the response's
nonce, no framing), ``X-Frame-Options``, ``X-Content-Type-Options`` and ``Referrer-Policy``
(and HSTS when the console serves TLS itself). A request that may change state (any method but
GET, HEAD and OPTIONS) passes only when its ``Origin`` (or, without one, its ``Referer``) is the
console's own or a trusted one, and it carries a CSRF token the console issued (and any
request only with a ``Host`` the console is known by): the origin
check alone trusts the browser's headers, the token alone trusts that no other page can read
the console's; together a forged post needs both broken.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# A page left open longer than this must be reloaded before it replays: a token that leaked
# (a screenshot, a log) stops working on its own.
TOKEN_TTL_S = 12 * 3600


class CsrfTokens:
    """Tokens signed with a key of this process: ``<issued at>.<HMAC>``. No state is kept, and
    a restart (a new key) makes every open page reload before it may post."""

    def __init__(self, key: bytes | None = None, clock: Callable[[], float] = time.time) -> None:
        self._key = key or secrets.token_bytes(32)
        self._now = clock

    def issue(self) -> str:
        issued = str(int(self._now()))
        return f"{issued}.{self._sign(issued)}"

    def problem(self, token: str) -> str | None:
        """Why ``token`` is refused, or None."""
        issued, _, signature = token.partition(".")
        if not token or not hmac.compare_digest(signature.encode(), self._sign(issued).encode()):
            return f"a missing or wrong CSRF token ({CSRF_HEADER} header): reload the console's page"
        if not issued.isdigit() or self._now() - int(issued) > TOKEN_TTL_S:
            return f"the {CSRF_HEADER} is older than {TOKEN_TTL_S // 3600} h: reload the console's page"
        return None

    def _sign(self, issued: str) -> str:
        return hmac.new(self._key, issued.encode(), hashlib.sha256).hexdigest()


def content_security_policy(nonce: str) -> str:
    return "; ".join(
        (
            "default-src 'none'",
            f"script-src 'nonce-{nonce}'",
            f"style-src 'nonce-{nonce}'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        )
    )


def origin_problem(request: Request, trusted: Iterable[str]) -> str | None:
    """Why the request's origin may not change state, or None. Its own origin is the one its
    ``Host`` names (so a port-forward or a proxy keeping ``Host`` works); ``trusted`` adds
    others (``scheme://host[:port]``), for a proxy that rewrites ``Host``."""
    claimed = request.headers.get("origin") or _origin_of(request.headers.get("referer", ""))
    if not claimed or claimed == "null":
        return "a request that changes state needs an Origin or Referer header of the console's own origin"
    host = request.headers.get("host", "").lower()
    if urlsplit(claimed).netloc.lower() == host or claimed.rstrip("/") in {t.rstrip("/") for t in trusted}:
        return None
    return f"origin {claimed} may not change state here (web.trusted_origins adds origins)"


def host_name(host: str) -> str:
    """``Host`` without its port: ``[::1]:9108`` is ``[::1]``, ``Console:9108`` is ``console``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _origin_of(referer: str) -> str:
    parts = urlsplit(referer)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


class SecurityMiddleware:
    """Adds the security headers to every response and refuses cross-site state changes."""

    def __init__(
        self, app: ASGIApp, tokens: CsrfTokens, trusted_origins: Iterable[str], allowed_hosts: Iterable[str], tls: bool
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.trusted = tuple(trusted_origins)
        self.hosts = frozenset(h.lower() for h in allowed_hosts)
        self.tls = tls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(18)
        scope.setdefault("state", {})["csp_nonce"] = nonce

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._add_headers(MutableHeaders(scope=message), nonce)
            await send(message)

        status, refused = self._refusal(Request(scope))
        if refused:
            await JSONResponse({"error_code": status, "message": refused}, status_code=status)(
                scope, receive, send_secured
            )
            return
        await self.app(scope, receive, send_secured)

    def _host_refusal(self, request: Request) -> str | None:
        """A ``Host`` the console is not known by: a page of another site whose name was made
        to resolve to the console's address (DNS rebinding) would be its own origin."""
        if "*" in self.hosts:
            return None
        host = host_name(request.headers.get("host", ""))
        return None if host in self.hosts else f"host {host or '(none)'} is not in web.allowed_hosts"

    def _refusal(self, request: Request) -> tuple[int, str | None]:
        """The status and reason a request is refused with, or no reason."""
        wrong_host = self._host_refusal(request)
        if wrong_host or request.method in SAFE_METHODS:
            return 400, wrong_host
        return 403, origin_problem(request, self.trusted) or self.tokens.problem(request.headers.get(CSRF_HEADER, ""))

    def _add_headers(self, headers: MutableHeaders, nonce: str) -> None:
        headers["Content-Security-Policy"] = content_security_policy(nonce)
        headers["X-Frame-Options"] = "DENY"
        headers["X-Content-Type-Options"] = "nosniff"
        headers["Referrer-Policy"] = "same-origin"  # the Referer check needs it on the console's own requests
        headers.setdefault("Cache-Control", "no-store")  # dead letters' bytes stay out of shared caches
        if self.tls:
            headers["Strict-Transport-Security"] = "max-age=31536000"
