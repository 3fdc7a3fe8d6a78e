"""Readiness checks that speak each server's own protocol; each one answers within seconds.

An open port only proves a socket is listening; these prove the server can serve a client.
"""

from __future__ import annotations

import os
import socket
import struct

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
