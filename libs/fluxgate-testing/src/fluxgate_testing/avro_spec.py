"""Avro's encodings as the specification states them: oracles for the tests of
``fluxgate_core``'s own readers and writers, written apart from them on purpose."""

from __future__ import annotations


def spec_long(value: int) -> bytes:
    """An Avro ``long``: zig-zag, then a base-128 varint, low groups first."""
    number, out = (value << 1) ^ (value >> 63), bytearray()
    while number >= 0x80:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    return bytes([*out, number])
