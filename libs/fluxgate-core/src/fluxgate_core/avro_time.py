"""Timestamps for the generated Avro reader: fastavro's datetimes, built for less.

fastavro turns a ``timestamp-millis`` long into ``epoch + timedelta(microseconds=ms * 1000)``:
about 0.35 µs here, plus a six-byte varint (every date from mid-1970 to 2039), and an
aggregate has four. The varint's last five bytes hold the value's bits from
the 64 ms one up; they change only every 64 ms, so the datetime of that 64 ms block is
remembered by those five bytes, and the first byte's six value bits add one of 64
precomputed ``timedelta``s. Exact: ``epoch + block + offset`` is the same datetime, since
``timedelta`` arithmetic is integer microseconds. Readings and aggregates of one stream
share blocks (every window bound of a minute, every event of the same 64 ms), so nearly
every timestamp is a hit; a miss decodes as fastavro does and remembers the block.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_BLOCKS = 65_536  # remembered 64 ms blocks (70 minutes of one stream); cleared when full
_blocks: dict[bytes, datetime] = {}
_OFFSETS = tuple(timedelta(milliseconds=offset) for offset in range(64))


def millis_slow(data: bytes, pos: int, millis: int, end: int) -> tuple[datetime, int]:
    """The ``timestamp-millis`` read from ``pos`` to ``end``, as fastavro makes it; its block remembered."""
    value = EPOCH + timedelta(microseconds=millis * 1000)
    if end - pos == 6 and millis >= 0:
        if len(_blocks) >= MAX_BLOCKS:
            _blocks.clear()
        _blocks[data[pos + 1 : end]] = value - _OFFSETS[millis & 63]
    return value, end


def micros(value: int) -> datetime:
    """A ``timestamp-micros`` long, as fastavro makes it."""
    return EPOCH + timedelta(microseconds=value)


TIME_HELPERS: dict[str, Any] = {"_tsb": _blocks, "_tso": _OFFSETS, "_tsm": millis_slow, "_tsu": micros}


def timestamp_millis_code(out: str, is_micros: bool) -> list[tuple[int, str]]:
    """Source lines (indent, text) reading a timestamp at ``p`` of ``d`` into ``out``."""
    if is_micros:
        return [(0, f"{out}, p = _long(d, p)"), (0, f"{out} = _tsu({out})")]
    # A first byte with its continuation bit set and its sign bit clear, and five more
    # bytes whose block is known: the datetime is that block's plus the offset.
    return [
        (0, "b = d[p]"),
        (0, "t = _tsb.get(d[p + 1 : p + 6]) if b & 129 == 128 else None"),
        (0, "if t is None:"),
        (1, f"{out}, p = _tsm(d, p, *_long(d, p))"),
        (0, "else:"),
        (1, f"{out} = t + _tso[(b & 127) >> 1]"),
        (1, "p += 6"),
    ]
