"""Basic or bearer auth for one part of the console (the page, or replay), compared in
constant time; ``none`` lets everyone in (chosen explicitly, for local use)."""

from __future__ import annotations

import base64
import binascii
import hmac

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fluxgate_console.settings import AuthSettings

ANONYMOUS = "anonymous"


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
