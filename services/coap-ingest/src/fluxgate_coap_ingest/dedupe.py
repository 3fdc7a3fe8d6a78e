"""Which notifications are duplicates of one already produced.

aiocoap already drops CoAP retransmissions: a confirmable message repeated with the
same message id is answered from its cache and never reaches us. What remains:

* a re-registration (after a timeout, an error or a server restart) answers with the
  resource's *current* state, which we usually produced already;
* a device (or a proxy) that sends the same reading twice in two notifications.

The rule, per resource, over the last ``window`` notifications:

* a payload that carries its own time for every measurement is identified by its
  bytes alone: the same bytes are the same reading, whatever the observe number;
* a payload without a device time (``21.5``) may legitimately repeat (the temperature
  did not change), so it is a duplicate only with the same observe number too, or when
  it is the first answer after a re-registration and equals the last payload produced
  (the replayed current state).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

DedupeKey = tuple[int | None, bytes]


def payload_digest(payload: bytes) -> bytes:
    """A short, collision-safe fingerprint of a payload."""
    return hashlib.blake2b(payload, digest_size=16).digest()


class DedupeWindow:
    """Remembers the last ``size`` notification keys of one resource."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("dedupe window size must be at least 1")
        self._size = size
        self._seen: OrderedDict[DedupeKey, None] = OrderedDict()
        self._last_digest: bytes | None = None

    @staticmethod
    def key(payload: bytes, observe: int | None, *, device_timed: bool) -> DedupeKey:
        """The identity of a notification under the rule in the module docstring."""
        return (None if device_timed else observe, payload_digest(payload))

    def is_duplicate(self, key: DedupeKey, *, first_after_register: bool = False) -> bool:
        """True when ``key`` was seen within the window (or replays the last state)."""
        if key in self._seen:
            self._seen.move_to_end(key)
            return True
        return first_after_register and key[1] == self._last_digest

    def remember(self, key: DedupeKey) -> None:
        """Record a produced notification, forgetting the oldest beyond the window."""
        self._seen[key] = None
        self._seen.move_to_end(key)
        self._last_digest = key[1]
        while len(self._seen) > self._size:
            self._seen.popitem(last=False)

    def __len__(self) -> int:
        return len(self._seen)
