"""Timestamps for the generated Avro reader: fastavro's datetimes, built for less.

fastavro turns a ``timestamp-millis`` long into ``epoch + timedelta(microseconds=ms * 1000)``:
about 0.35 µs here, plus a six-byte varint (every date from mid-1970 to 2039), and an
aggregate has four. The varint's first two bytes hold the value's low 13 bits, its last
four the rest, which changes every 8.192 s. So the datetime of each 8.192 s block is
remembered by those four bytes, and the first two bytes pick one of 8192 precomputed
``timedelta``s to add. Exact: ``epoch + block + offset`` is the same datetime, since
``timedelta`` arithmetic is integer microseconds. Readings and aggregates of one stream
share blocks (the window bounds, the first and last events of a minute's windows, every
reading of the same 8 s), so nearly every timestamp is a hit; a miss computes the block
from the same bytes (or decodes as fastavro does, for other lengths and negative values).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_BLOCKS = 65_536  # remembered 8 s blocks (6 days of one stream); cleared when full
_blocks: dict[bytes, datetime] = {}
# Two first bytes that both continue the varint, the first of a non-negative value (an
# even zig-zag): the value's low 13 bits. Any other pair is absent and takes the slow path.
_OFFSETS = {
    bytes((low, high)): timedelta(milliseconds=((low & 0x7F) >> 1) | (high & 0x7F) << 6)
    for low in range(128, 256, 2)
    for high in range(128, 256)
}


def millis_slow(data: bytes, pos: int, read_long: Callable[[bytes, int], tuple[int, int]]) -> tuple[datetime, int]:
    """The ``timestamp-millis`` at ``pos``, as fastavro makes it; a six-byte one's block remembered."""
    offset = _OFFSETS.get(data[pos : pos + 2])
    key = data[pos + 2 : pos + 6]
    if offset is not None and len(key) == 4 and key[0] & key[1] & key[2] & 0x80 and key[3] < 0x80:
        n = int.from_bytes(key, "little")
        high = (n & 0x7F) | (n >> 1 & 0x3F80) | (n >> 2 & 0x1FC000) | (n >> 3 & 0xFE00000)
        block = EPOCH + timedelta(milliseconds=high << 13)
        if len(_blocks) >= MAX_BLOCKS:
            _blocks.clear()
        _blocks[key] = block
        return block + offset, pos + 6
    millis, end = read_long(data, pos)
    return EPOCH + timedelta(microseconds=millis * 1000), end


def forget_blocks() -> None:
    """Forget every remembered block (benchmarks of the cold path)."""
    _blocks.clear()


def micros(value: int) -> datetime:
    """A ``timestamp-micros`` long, as fastavro makes it."""
    return EPOCH + timedelta(microseconds=value)


TIME_HELPERS: dict[str, Any] = {"_tsb": _blocks, "_tso": _OFFSETS, "_tsm": millis_slow, "_tsu": micros}


def timestamp_millis_code(out: str, is_micros: bool) -> list[tuple[int, str]]:
    """Source lines (indent, text) reading a timestamp at ``p`` of ``d`` into ``out``."""
    if is_micros:
        return [(0, f"{out}, p = _long(d, p)"), (0, f"{out} = _tsu({out})")]
    return [
        (0, "o = _tso.get(d[p : p + 2])"),
        (0, "t = _tsb.get(d[p + 2 : p + 6]) if o is not None else None"),
        (0, "if t is None:"),
        (1, f"{out}, p = _tsm(d, p, _long)"),
        (0, "else:"),
        (1, f"{out} = t + o"),
        (1, "p += 6"),
    ]
