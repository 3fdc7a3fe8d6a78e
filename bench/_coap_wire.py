"""The few CoAP messages (RFC 7252 §3) the bench's simulated devices read and write, byte by byte."""

from __future__ import annotations

from typing import NamedTuple

CON, NON, ACK, RST = 0, 1, 2, 3
CONTENT, NOT_FOUND = 0x45, 0x84  # 2.05, 4.04
OBSERVE, URI_PATH, CONTENT_FORMAT = 6, 11, 12
PAYLOAD_MARKER = 0xFF


class Incoming(NamedTuple):
    """What a device needs of a message it received."""

    kind: int
    code: int
    message_id: int
    token: bytes
    observe: int | None
    path: tuple[str, ...]


def encode(
    kind: int,
    code: int,
    message_id: int,
    token: bytes,
    observe: int | None = None,
    content_format: int | None = None,
    payload: bytes = b"",
) -> bytes:
    """One message: header, token, the Observe and Content-Format options, payload."""
    parts = [bytes((0x40 | kind << 4 | len(token), code)), message_id.to_bytes(2, "big"), token]
    previous = 0
    for number, value in ((OBSERVE, observe), (CONTENT_FORMAT, content_format)):
        if value is not None:
            parts.append(_option(number - previous, _uint(value)))
            previous = number
    if payload:
        parts += [bytes((PAYLOAD_MARKER,)), payload]
    return b"".join(parts)


def parse(data: bytes) -> Incoming | None:
    """The message in ``data``, or None when it is not one (too short, bad version, bad options)."""
    if len(data) < 4 or data[0] >> 6 != 1 or data[0] & 0x0F > 8:
        return None
    end = 4 + (data[0] & 0x0F)
    observe: int | None = None
    path: list[str] = []
    try:
        for number, value in _options(data, end):
            if number == OBSERVE:
                observe = int.from_bytes(value, "big")
            elif number == URI_PATH:
                path.append(value.decode())
    except (IndexError, ValueError):
        return None
    kind = data[0] >> 4 & 0x03
    return Incoming(kind, data[1], int.from_bytes(data[2:4], "big"), bytes(data[4:end]), observe, tuple(path))


def _options(data: bytes, at: int) -> list[tuple[int, bytes]]:
    found: list[tuple[int, bytes]] = []
    number = 0
    while at < len(data) and data[at] != PAYLOAD_MARKER:
        head = data[at]
        delta, at = _extended(head >> 4, data, at + 1)
        length, at = _extended(head & 0x0F, data, at)
        if at + length > len(data):
            raise ValueError("option runs past the message")
        number += delta
        found.append((number, data[at : at + length]))
        at += length
    return found


def _extended(nibble: int, data: bytes, at: int) -> tuple[int, int]:
    """An option delta or length: the nibble, or 13/14 plus the one or two bytes that follow."""
    if nibble < 13:
        return nibble, at
    if nibble == 13:
        return 13 + data[at], at + 1
    if nibble == 14:
        return 269 + int.from_bytes(data[at : at + 2], "big"), at + 2
    raise ValueError("reserved option nibble 15")


def _option(delta: int, value: bytes) -> bytes:
    # The devices write Observe and Content-Format only: every delta and length is under 13.
    return bytes((delta << 4 | len(value),)) + value


def _uint(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")
