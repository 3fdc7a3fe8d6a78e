"""A minimal CQL client over TLS with a password: what the stack needs to provision the
secured Cassandra node (roles, grants, a keyspace) without cassandra-driver, which is the
scylla-persister's dependency, not the stack tool's.

Native protocol v4, one request at a time on one connection: STARTUP, then the
PasswordAuthenticator's SASL PLAIN exchange, then plain QUERY frames. A server ``ERROR``
becomes :class:`CqlError` with the server's code and message.
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from fluxgate_stack.probes import (
    CQL_QUERY,
    CQL_READY,
    CQL_RESULT,
    CQL_STARTUP,
    _cql_request,
    _cql_string_map,
    _Reader,
)

CQL_ERROR, CQL_AUTHENTICATE, CQL_AUTH_RESPONSE, CQL_AUTH_SUCCESS = 0x00, 0x03, 0x0F, 0x10
BAD_CREDENTIALS = 0x0100
UNAUTHORIZED = 0x2100
CONSISTENCY_ONE = 0x0001
TIMEOUT = 10.0


class CqlError(Exception):
    """The server answered ERROR (``code``: the protocol's error code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"CQL error 0x{code:04x}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Node:
    """Where the node is and the CA its certificate comes from."""

    host: str
    port: int
    ca_file: Path


def tls_context(ca_file: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_file))


class CqlSession:
    """One TLS connection logged in as ``username``; ``execute`` runs a statement (no result
    rows are decoded: provisioning only needs to know that it worked)."""

    def __init__(self, node: Node, username: str, password: str, timeout: float = TIMEOUT) -> None:
        raw = socket.create_connection((node.host, node.port), timeout=timeout)
        try:
            self._sock = tls_context(node.ca_file).wrap_socket(raw, server_hostname=node.host)
            self._sock.settimeout(timeout)
            self._login(username, password)
        except BaseException:
            raw.close()
            raise

    def _login(self, username: str, password: str) -> None:
        opcode, body = _cql_request(self._sock, CQL_STARTUP, _cql_string_map({"CQL_VERSION": "3.0.0"}))
        _raise_on_error(opcode, body)
        if opcode == CQL_READY:
            return  # no authenticator: nothing to log in to
        if opcode != CQL_AUTHENTICATE:
            raise CqlError(0, f"unexpected reply 0x{opcode:02x} to STARTUP")
        token = b"\0" + username.encode() + b"\0" + password.encode()  # SASL PLAIN
        opcode, body = _cql_request(self._sock, CQL_AUTH_RESPONSE, struct.pack("!i", len(token)) + token)
        _raise_on_error(opcode, body)
        if opcode != CQL_AUTH_SUCCESS:
            raise CqlError(0, f"unexpected reply 0x{opcode:02x} to AUTH_RESPONSE")

    def execute(self, cql: str) -> None:
        query = cql.encode()
        body = struct.pack("!i", len(query)) + query + struct.pack("!HB", CONSISTENCY_ONE, 0)
        opcode, reply = _cql_request(self._sock, CQL_QUERY, body)
        _raise_on_error(opcode, reply)
        if opcode != CQL_RESULT:
            raise CqlError(0, f"unexpected reply 0x{opcode:02x} to QUERY")

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> CqlSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def asks_for_password(node: Node, timeout: float = 2.0) -> bool:
    """TLS verified against the node's CA, then STARTUP answered AUTHENTICATE: the node serves
    CQL and holds every client to a login."""
    try:
        with (
            socket.create_connection((node.host, node.port), timeout=timeout) as raw,
            tls_context(node.ca_file).wrap_socket(raw, server_hostname=node.host) as sock,
        ):
            sock.settimeout(timeout)
            opcode, _ = _cql_request(sock, CQL_STARTUP, _cql_string_map({"CQL_VERSION": "3.0.0"}))
            return opcode == CQL_AUTHENTICATE
    except (OSError, ssl.SSLError, struct.error):
        return False


def _raise_on_error(opcode: int, body: bytes) -> None:
    if opcode == CQL_ERROR:
        reader = _Reader(body)
        code = reader.read_int()
        raise CqlError(code, reader.read_string())


def quoted(text: str) -> str:
    """A CQL string literal (a password, a role name)."""
    return "'" + text.replace("'", "''") + "'"
