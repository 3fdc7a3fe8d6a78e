"""Who may do what: two roles, each with its credentials (HTTP basic or a bearer token,
compared in constant time).

- **viewer** (``page_auth``): the page, its JSON and the Kafka Connect API; read-only.
- **operator** (``replay_auth``): everything a viewer may, and replay (the one thing that writes).

``none`` lets everyone in, chosen explicitly for local use. An operator whose mode is ``none``
is whoever the page lets in: replay is then open to every viewer, never to someone the page
refuses.
"""

from __future__ import annotations

import base64
import binascii
import hmac

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fluxgate_console.settings import AuthSettings, ConsoleSettings

ANONYMOUS = "anonymous"


def viewer(request: Request, settings: ConsoleSettings) -> str | None:
    """Who may look, or None: the viewer's credentials, or an operator's (who may look too)."""
    if settings.replay_auth.mode == "none":
        return user_of(request, settings.page_auth)
    return user_of(request, settings.page_auth) or user_of(request, settings.replay_auth)


def operator(request: Request, settings: ConsoleSettings) -> str | None:
    """Who may replay, or None."""
    if settings.replay_auth.mode == "none":
        return user_of(request, settings.page_auth)
    return user_of(request, settings.replay_auth)


def operator_refusal(request: Request, settings: ConsoleSettings) -> Response:
    """The answer to someone who may not replay: 403 for a signed-in viewer (credentials
    will not help), else 401 with the challenge of the credentials that would."""
    signed_in = viewer(request, settings)
    if signed_in is not None and signed_in != ANONYMOUS:
        message = f"{signed_in} is a viewer: replay needs the operator's credentials (REPLAY_AUTH)"
        return JSONResponse({"error_code": 403, "message": message}, status_code=403)
    auth = settings.page_auth if settings.replay_auth.mode == "none" else settings.replay_auth
    return challenge(auth, "fluxgate replay")


def user_of(request: Request, auth: AuthSettings) -> str | None:
    """Who the request is, or None when it may not pass."""
    if auth.mode == "none":
        return ANONYMOUS
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if auth.mode == "bearer":
        token = auth.token.get_secret_value() if auth.token else ""
        ok = scheme.lower() == "bearer" and bool(token) and _same(credentials.strip(), token)
        return "bearer" if ok else None
    if scheme.lower() != "basic":
        return None
    try:
        user, _, password = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    expected = auth.password.get_secret_value() if auth.password else ""
    # both compared, always: the time taken says nothing about which one was wrong
    ok = _same(user, auth.username or "") & _same(password, expected)
    return user if ok and expected else None


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def challenge(auth: AuthSettings, realm: str) -> Response:
    scheme = "Bearer" if auth.mode == "bearer" else "Basic"
    return JSONResponse(
        {"error_code": 401, "message": f"{realm}: authentication required"},
        status_code=401,
        headers={"WWW-Authenticate": f'{scheme} realm="{realm}"'},
    )
