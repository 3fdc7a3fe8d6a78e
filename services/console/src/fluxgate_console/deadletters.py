"""Dead letters explained: each record's ``fluxgate.dlq.*`` headers, its root cause, a safe
preview of the original bytes, and where a replay would send it back to.

The headers are written by ``fluxgate_core.deadletter`` (gateways), the aggregator (its
``source`` is ``<topic>/<partition>/<offset>``) and the sink runtime, which adds where the
record came from (``fluxgate.dlq.topic``/``partition``/``offset``, see
``libs/fluxgate-sink/src/fluxgate_sink/writer.py``; a unit test keeps the names equal).
"""

from __future__ import annotations

import collections
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from fluxgate_console.settings import DeadLetterSettings
from fluxgate_console.timeline import Timeline
from fluxgate_core import deadletter as dlq

PREFIX = "fluxgate.dlq."
REPLAY_OF = "fluxgate.replay.of"  # set on each replayed record: <dead-letter topic>/<partition>/<offset>
REPLAY_ID = "fluxgate.replay.id"  # and the replay it was part of (its audit record's key)
_KAFKA_SOURCE = re.compile(r"^([A-Za-z0-9._-]{1,249})/(\d+)/(\d+)$")  # the aggregator's source header
_CAUSE_SPLIT = re.compile(r"(?i)caused by:\s*")
OVERVIEW_MINUTES = 30  # each topic's own bars, above its tables: the last half hour at a glance

RawHeaders = Sequence[tuple[str, bytes | None]]


@dataclass(frozen=True)
class DeadLetter:
    """One dead-lettered record, as read from its topic."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes
    headers: RawHeaders = ()

    @property
    def id(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    @property
    def explained(self) -> dict[str, str]:
        """Every ``fluxgate.dlq.*`` header, as text."""
        return {name: _text(value) for name, value in self.headers if name.startswith(PREFIX)}

    @property
    def original_headers(self) -> list[tuple[str, bytes | None]]:
        """The headers the record had before it was dead-lettered (what a replay sends)."""
        return [(name, value) for name, value in self.headers if not name.startswith(PREFIX)]

    def _header(self, name: str) -> str:
        return self.explained.get(name, "")

    @property
    def reason(self) -> str:
        return self._header(dlq.REASON) or "(no reason header)"

    @property
    def error_class(self) -> str:
        return self._header(dlq.ERROR_CLASS) or "(unknown)"

    @property
    def source(self) -> str:
        return self._header(dlq.SOURCE)

    @property
    def service(self) -> str:
        return self._header(dlq.SERVICE)

    @property
    def truncated(self) -> bool:
        return self._header(dlq.TRUNCATED) == "true"

    @property
    def root_cause(self) -> str:
        return root_cause(self.reason)

    @property
    def replay_target(self) -> str | None:
        """The Kafka topic the original record was read from; None when it did not come from
        Kafka (a gateway's MQTT topic or CoAP resource) or was kept only in part."""
        if self.truncated:
            return None
        if self._header(dlq.SOURCE_TOPIC):
            return self._header(dlq.SOURCE_TOPIC)
        match = _KAFKA_SOURCE.match(self.source)
        return match.group(1) if match else None

    @property
    def repeated_headers(self) -> list[str]:
        """``fluxgate.dlq.*`` names present more than once: one of them was not written by the
        dead-lettering service (a sender's own header kept among the originals)."""
        names = collections.Counter(name for name, _ in self.headers if name.startswith(PREFIX))
        return sorted(name for name, seen in names.items() if seen > 1)

    @property
    def not_replayable_because(self) -> str | None:
        if self.truncated:
            return "only the first bytes of the payload were kept (bounded dead letter)"
        if self.repeated_headers:
            return f"{', '.join(self.repeated_headers)} appears more than once: which is genuine cannot be told"
        if self.replay_target is None:
            return f"came from {self.source or 'an unknown source'}, not a Kafka topic: replay through its device"
        return None

    def preview(self, limit: int) -> tuple[str, str]:
        """The first ``limit`` bytes as hex and as UTF-8 (undecodable and control bytes shown as escapes)."""
        head = self.value[:limit]
        more = "…" if len(self.value) > limit else ""
        text = head.decode("utf-8", "backslashreplace")
        printable = "".join(ch if ch.isprintable() or ch in "\n\t" else f"\\x{ord(ch):02x}" for ch in text)
        return head.hex(" ") + more, printable + more


def replay_refusal(letter: DeadLetter, targets: Mapping[str, Sequence[str]]) -> str | None:
    """Why ``letter`` may not be replayed, or None. ``targets``: the topics each dead-letter
    topic's letters may go back to. The target is read from the letter's own headers, which a
    sender may have forged: only the allowed ones are ever written to."""
    why = letter.not_replayable_because
    if why:
        return why
    allowed = targets.get(letter.topic, ())
    if letter.replay_target not in allowed:
        listed = ", ".join(allowed) or "none"
        return (f"{letter.replay_target} is not an allowed replay target for dead letters of {letter.topic} "
                f"(replay.targets allows: {listed})")  # fmt: skip
    return None


def root_cause(reason: str) -> str:
    """The innermost cause in a reason: the last ``caused by:`` part, or a traceback's last line."""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Traceback"):
        return lines[-1]
    parts = [part.strip(" ;:,") for part in _CAUSE_SPLIT.split(reason) if part.strip(" ;:,")]
    return parts[-1] if parts else reason


# A number standing alone in a reason (a column, an offset, an id): the same error at another
# place is the same reason, or one malformed-JSON error fills the kept reasons by itself.
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def reason_kind(reason: str) -> str:
    """``reason`` with its standalone numbers as ``N``: what the counts group by."""
    return _NUMBER.sub("N", reason)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


@dataclass(frozen=True)
class LetterFilter:
    """Which dead letters: every given part must match (substrings, case-insensitive; times in ms)."""

    topic: str = ""
    reason: str = ""
    source: str = ""
    since_ms: int | None = None
    until_ms: int | None = None

    def matches(self, letter: DeadLetter) -> bool:
        return (
            (not self.topic or self.topic == letter.topic)
            and self.reason.lower() in f"{letter.error_class} {letter.reason}".lower()
            and self.source.lower() in f"{letter.service} {letter.source}".lower()
            and (self.since_ms is None or letter.timestamp_ms >= self.since_ms)
            and (self.until_ms is None or letter.timestamp_ms <= self.until_ms)
        )


@dataclass
class TopicBook:
    """What one dead-letter topic held since the console started reading it: every letter
    counted by reason (error class and root cause) and by source (service), per minute too."""

    recent: collections.deque[DeadLetter]
    reasons: Timeline
    sources: Timeline
    count: int = 0

    @classmethod
    def empty(cls, settings: DeadLetterSettings) -> TopicBook:
        minutes = settings.timeline_minutes
        recent: collections.deque[DeadLetter] = collections.deque(maxlen=settings.recent)
        return cls(recent, Timeline(settings.kept_reasons, minutes), Timeline(settings.kept_services, minutes))

    @property
    def overview_minutes(self) -> int:
        """The minutes :meth:`per_minute` shows: no more than the timeline keeps (older ones are gone)."""
        return min(OVERVIEW_MINUTES, self.reasons.window)

    def per_minute(self, last_minute: int, minutes: int | None = None) -> list[int]:
        """Dead letters in each of the ``minutes`` (default :attr:`overview_minutes`) minutes up to
        ``last_minute`` (epoch minutes), oldest first."""
        shown = minutes or self.overview_minutes
        return self.reasons.total_series(last_minute, shown)  # every letter has exactly one reason

    def copy(self) -> TopicBook:
        recent = collections.deque(self.recent, maxlen=self.recent.maxlen)
        return TopicBook(recent, self.reasons.copy(), self.sources.copy(), self.count)


class DeadLetterBook:
    """Counts by reason and source, per minute, and the newest letters, per topic (how many of
    each: ``settings``); thread-safe (a reader thread adds, the web handlers read). ``clock``
    says what minute it is now."""

    def __init__(self, settings: DeadLetterSettings, clock: Callable[[], float] = time.time) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._books = {topic: TopicBook.empty(settings) for topic in settings.topics}

    def now_minute(self) -> int:
        return int(self._clock() // 60)

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def add(self, letters: Iterable[DeadLetter]) -> None:
        now = self.now_minute()
        with self._lock:
            for letter in letters:
                book = self._books.get(letter.topic)
                if book is None:
                    continue
                book.recent.append(letter)
                book.count += 1
                minute = letter.timestamp_ms // 60_000
                book.reasons.add(f"{letter.error_class}: {reason_kind(letter.root_cause)}", minute, now)
                book.sources.add(letter.service or "(unknown)", minute, now)

    def topics(self) -> list[str]:
        return list(self._books)

    def summary(self, topic: str) -> TopicBook:
        """A copy of one topic's book, safe to read while the reader adds."""
        with self._lock:
            return self._books[topic].copy()

    def select(self, chosen: LetterFilter, ids: Iterable[str] = ()) -> list[DeadLetter]:
        """The kept letters matching ``chosen`` (and among ``ids`` when given), newest first."""
        wanted = set(ids)
        with self._lock:
            letters = [letter for book in self._books.values() for letter in book.recent]
        matching = [x for x in letters if chosen.matches(x) and (not wanted or x.id in wanted)]
        return sorted(matching, key=lambda x: (x.timestamp_ms, x.id), reverse=True)
