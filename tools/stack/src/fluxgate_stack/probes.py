"""Readiness checks that speak each server's own protocol; each one answers within seconds.

An open port only proves a socket is listening; these prove the server can serve a client.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
from pathlib import Path

import httpx

PROBE_TIMEOUT = 2.0


def tcp_open(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def kafka_ready(bootstrap: str, timeout: float = PROBE_TIMEOUT) -> bool:
    """A metadata request answered with at least one broker, through librdkafka like our services."""
    host, _, port = bootstrap.rpartition(":")
    # Cheap gate first: librdkafka would otherwise log a connection error per attempt.
    if not tcp_open(host, int(port), timeout):
        return False
    from confluent_kafka.admin import AdminClient  # heavy import, only when Kafka is probed

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "client.id": "fluxgate-stack-probe"})
    try:
        return len(admin.list_topics(timeout=timeout).brokers) > 0
    except Exception:  # any failure just means "not ready yet"
        return False


def tls_handshake(host: str, port: int, ca_file: Path, timeout: float = PROBE_TIMEOUT) -> bool:
    """A TLS handshake that verifies the server's certificate against ``ca_file`` and ``host``."""
    if not ca_file.is_file():
        return False
    try:
        context = ssl.create_default_context(cafile=str(ca_file))
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


def http_ok(url: str, timeout: float = PROBE_TIMEOUT) -> bool:
    try:
        return httpx.get(url, timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def mqtt_connect(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """A real MQTT 3.1.1 CONNECT answered by CONNACK "accepted", then a clean DISCONNECT."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_mqtt_connect_packet(f"fluxgate-stack-probe-{os.getpid()}"))
            connack = _recv_exactly(sock, 4)
            sock.sendall(b"\xe0\x00")
    except OSError:
        return False
    return connack[:2] == b"\x20\x02" and connack[3] == 0


def coap_ping(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """CoAP ping (RFC 7252 §4.3): an empty confirmable message must come back as a reset."""
    message_id = os.getpid() & 0xFFFF
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        try:
            # connect() so an ICMP "port unreachable" fails fast instead of waiting out the timeout
            sock.connect((host, port))
            sock.send(struct.pack("!BBH", 0x40, 0x00, message_id))
            reply = sock.recv(64)
        except OSError:
            return False
    return len(reply) >= 4 and reply[0] & 0x30 == 0x30 and struct.unpack("!H", reply[2:4])[0] == message_id


def cql_ready(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """A CQL STARTUP answered READY, then ``SELECT release_version FROM system.local`` answered
    with a row: the node serves queries, not only a socket."""
    return cql_release_version(host, port, timeout) is not None


def cql_release_version(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> str | None:
    """The server's ``release_version`` over the native protocol v4 (spoken by Cassandra 3+ and
    Scylla alike), without a driver; ``None`` when it does not answer so."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            opcode, _ = _cql_request(sock, CQL_STARTUP, _cql_string_map({"CQL_VERSION": "3.0.0"}))
            if opcode != CQL_READY:  # AUTHENTICATE: a password is needed; ERROR: not serving yet
                return None
            query = b"SELECT release_version FROM system.local"
            # [long string] query, [short] consistency ONE, [byte] no flags
            body = struct.pack("!i", len(query)) + query + struct.pack("!HB", 0x0001, 0)
            opcode, result = _cql_request(sock, CQL_QUERY, body)
            return _cql_first_text(result) if opcode == CQL_RESULT else None
    except (OSError, struct.error):
        return None


CQL_V4_REQUEST, CQL_STARTUP, CQL_READY, CQL_QUERY, CQL_RESULT = 0x04, 0x01, 0x02, 0x07, 0x08
CQL_ROWS, CQL_GLOBAL_TABLES_SPEC, CQL_HAS_MORE_PAGES, CQL_NO_METADATA = 2, 0x0001, 0x0002, 0x0004


def _cql_request(sock: socket.socket, opcode: int, body: bytes) -> tuple[int, bytes]:
    """One request frame on stream 1; the reply's opcode and body."""
    sock.sendall(struct.pack("!BBhBi", CQL_V4_REQUEST, 0, 1, opcode, len(body)) + body)
    _version, _flags, _stream, reply, length = struct.unpack("!BBhBi", _recv_exactly(sock, 9))
    return reply, _recv_exactly(sock, length)


def _cql_string_map(entries: dict[str, str]) -> bytes:
    out = struct.pack("!H", len(entries))
    for key, value in entries.items():
        out += _cql_string(key) + _cql_string(value)
    return out


def _cql_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("!H", len(raw)) + raw


def _cql_first_text(result: bytes) -> str | None:
    """The first cell of a Rows result whose columns are all text (what our probe selects)."""
    reader = _Reader(result)
    if reader.read_int() != CQL_ROWS:
        return None
    flags, columns = reader.read_int(), reader.read_int()
    if flags & CQL_HAS_MORE_PAGES:
        reader.read_bytes()
    if not flags & CQL_NO_METADATA:
        if flags & CQL_GLOBAL_TABLES_SPEC:
            reader.read_string(), reader.read_string()
        for _ in range(columns):
            if not flags & CQL_GLOBAL_TABLES_SPEC:
                reader.read_string(), reader.read_string()
            reader.read_string()
            if reader.read_short() not in (0x000A, 0x000D):  # ascii, varchar: no type parameters follow
                return None
    if reader.read_int() < 1:
        return None
    cell = reader.read_bytes()
    return cell.decode(errors="replace") if cell is not None else None


class _Reader:
    """Big-endian reads over a CQL body; a short body raises struct.error."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def _take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def read_int(self) -> int:
        return self._take("!i")

    def read_short(self) -> int:
        return self._take("!H")

    def read_string(self) -> str:
        size = self.read_short()
        self.at += size
        return self.data[self.at - size : self.at].decode(errors="replace")

    def read_bytes(self) -> bytes | None:
        size = self.read_int()
        if size < 0:
            return None
        self.at += size
        return self.data[self.at - size : self.at]


def _mqtt_connect_packet(client_id: str) -> bytes:
    ident = client_id.encode()
    # protocol name "MQTT", level 4 (3.1.1), clean session, keep-alive 10 s
    variable = b"\x00\x04MQTT\x04\x02\x00\x0a" + struct.pack("!H", len(ident)) + ident
    if len(variable) > 127:
        raise ValueError("client id too long for a one-byte remaining length")
    return bytes([0x10, len(variable)]) + variable


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed before a full reply")
        data += chunk
    return data
