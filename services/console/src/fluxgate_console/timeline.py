"""Dead letters counted per key (a reason, a source) and per minute, over a bounded window.

Memory stays bounded however many distinct keys arrive (a reason often carries a value or an
id): at most ``keys_kept`` keys have their own tally, the rest are folded into ``OTHER``. A
kept key with nothing left in the window gives its place to a new key (its total goes into
``OTHER``), so a new failure shows under its own name instead of behind old, quiet ones.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

OTHER = "(other)"


@dataclass
class Tally:
    """One key's dead letters: every one counted, and per epoch minute within the window."""

    total: int = 0
    minutes: collections.Counter[int] = field(default_factory=collections.Counter)

    def series(self, last_minute: int, minutes: int) -> list[int]:
        """The count in each of the ``minutes`` minutes up to ``last_minute``, oldest first."""
        return [self.minutes[m] for m in range(last_minute - minutes + 1, last_minute + 1)]


@dataclass(frozen=True)
class Row:
    """One key as the page shows it: its total and its last minutes, oldest first."""

    key: str
    total: int
    series: list[int]

    @property
    def peak(self) -> int:
        return max(self.series, default=0)

    @property
    def is_other(self) -> bool:
        return self.key == OTHER


class Timeline:
    """Tallies of at most ``keys_kept`` keys plus ``OTHER``, per minute for the last ``window``
    minutes. Not thread-safe: the book that holds it locks around it."""

    def __init__(self, keys_kept: int, window: int) -> None:
        self.keys_kept = keys_kept
        self.window = window
        self._tallies: dict[str, Tally] = {}
        self._pruned_at: int | None = None

    def add(self, key: str, minute: int, now_minute: int) -> None:
        """Count one dead letter of ``key`` stamped ``minute``, seen at ``now_minute`` (epoch minutes)."""
        self._prune(now_minute)
        tally = self._tallies.get(key) or self._make_room(key)
        tally.total += 1
        minute = min(minute, now_minute)  # a producer clock ahead of ours: counted as now, not kept forever
        if minute > now_minute - self.window:
            tally.minutes[minute] += 1

    def rows(self, last_minute: int) -> list[Row]:
        """Every key, most dead letters first, ``OTHER`` last, with its window up to ``last_minute``."""
        keys = sorted(self._tallies, key=lambda k: (k == OTHER, -self._tallies[k].total, k))
        return [Row(k, self._tallies[k].total, self._tallies[k].series(last_minute, self.window)) for k in keys]

    def total_series(self, last_minute: int, minutes: int) -> list[int]:
        """All keys together, per minute, oldest first."""
        per_key = [tally.series(last_minute, minutes) for tally in self._tallies.values()]
        return [sum(counts) for counts in zip(*per_key, strict=True)] if per_key else [0] * minutes

    def copy(self) -> Timeline:
        twin = Timeline(self.keys_kept, self.window)
        twin._tallies = {k: Tally(t.total, collections.Counter(t.minutes)) for k, t in self._tallies.items()}
        twin._pruned_at = self._pruned_at
        return twin

    def _make_room(self, key: str) -> Tally:
        kept = [k for k in self._tallies if k != OTHER]
        if len(kept) >= self.keys_kept:
            quiet = [k for k in kept if not self._tallies[k].minutes]
            if not quiet:
                return self._tallies.setdefault(OTHER, Tally())
            gone = self._tallies.pop(min(quiet, key=lambda k: self._tallies[k].total))
            self._tallies.setdefault(OTHER, Tally()).total += gone.total
        return self._tallies.setdefault(key, Tally())

    def _prune(self, now_minute: int) -> None:
        # Once per minute is enough: a minute leaves the window only when the clock moves on.
        if self._pruned_at is not None and now_minute <= self._pruned_at:
            return
        self._pruned_at = now_minute
        for tally in self._tallies.values():
            for old in [m for m in tally.minutes if m <= now_minute - self.window]:
                del tally.minutes[old]
