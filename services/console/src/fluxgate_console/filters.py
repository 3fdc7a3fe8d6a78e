"""The dead-letter filter form (and the same query parameters on ``/api/deadletters`` and in a
replay's ``filter``) turned into a :class:`LetterFilter`.

``since_min`` counts back from the book's clock; ``from`` and ``until`` are absolute times as
an HTML ``datetime-local`` input sends them (``2024-05-01T12:30``, seconds optional), read as
UTC: the browser's input has no zone, and every time on the page is UTC. A time with its own
offset (``...+02:00``) is taken as it says. Both ends are included.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from fluxgate_console.deadletters import LetterFilter


class FilterError(ValueError):
    """A filter field the console cannot use; the message names the field and is shown as it is."""


def letter_filter(params: Mapping[str, str], now_ms: int) -> LetterFilter:
    """The filter in ``params``; raise :class:`FilterError` for a field that is not usable."""
    start, until = utc_ms(params, "from"), utc_ms(params, "until")
    if start is not None and until is not None and until < start:
        raise FilterError(f"until ({params['until']}) is before from ({params['from']}): nothing can match")
    last = last_minutes(params)
    recent_ms = None if last is None else now_ms - int(last * 60_000)
    given = [x for x in (start, recent_ms) if x is not None]
    return LetterFilter(
        topic=params.get("topic", ""), reason=params.get("reason", ""), source=params.get("source", ""),
        since_ms=max(given, default=None), until_ms=until,
    )  # fmt: skip


def utc_ms(params: Mapping[str, str], name: str) -> int | None:
    """The time in field ``name`` as epoch ms (no zone: UTC); None when the field is empty."""
    text = params.get(name, "").strip()
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise FilterError(f"{name}: {text!r} is not a date and time (YYYY-MM-DDTHH:MM, UTC)") from None
    return int((at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp() * 1000)


def last_minutes(params: Mapping[str, str]) -> float | None:
    """The ``since_min`` field: how many minutes back; None when empty."""
    text = params.get("since_min", "").strip()
    if not text:
        return None
    try:
        minutes = float(text)
    except ValueError:
        minutes = -1.0  # reported below, with the same message as a negative number
    if not 0 <= minutes < float("inf"):
        raise FilterError(f"last minutes: {text!r} is not a number of minutes")
    return minutes
