"""What a persister implements: a :class:`Sink`. Everything else is the runner's.

The runner polls, decodes, routes each record through the KCQL statements that read
its topic (one :class:`SinkItem` per statement), batches per partition, calls
:meth:`Sink.write_batch`, sends the failed items through the error policy, and commits
offsets only once the batch is written and its dead letters are confirmed by Kafka.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_sink.errors import SinkError

if TYPE_CHECKING:
    from fluxgate_sink.kcql import Statement


class SinkItem(NamedTuple):
    """One record routed to one target by one KCQL statement.

    A named tuple, not a frozen dataclass: the router makes one per record and statement,
    and a frozen dataclass's ``__init__`` (each field set through ``object.__setattr__``)
    cost about 0.5 µs a record more. Immutable all the same.

    ``document`` is, for ``SELECT *`` without IGNORE, the decoded record itself, not a copy
    (a copy per record cost as much again): a sink reads it and must not change it."""

    source: ConsumedRecord  # raw bytes and coordinates, for dead letters and logs
    statement: Statement  # the statement that routed it (mode, PK, TTL, STOREAS, properties ...)
    target: str  # resolved: e.g. the daily index ``temperatures-2026.11.23``
    id: str  # stable id from the statement's PK: a replay writes the same id again; "" if unused (needs_ids)
    document: dict[str, Any]  # the projected fields (SELECT/AS/IGNORE applied); datetimes stay datetimes
    event_time: datetime  # UTC; what dates a daily index, never the wall clock


@dataclass(frozen=True, slots=True)
class ItemFailure:
    """Item ``index`` of a batch failed; ``error.retriable`` says whether writing it again can help."""

    index: int
    error: SinkError


class Sink(ABC):
    """A store. ``write_batch`` must be idempotent: writing the same items twice changes nothing."""

    #: short name for logs, metrics and dead-letter headers (``elasticsearch``, ``scylla`` ...)
    name: str = "sink"
    #: whether StringConverter values (``sink.value_format=string``) are stored as the consumed
    #: text, whatever it holds; if not, each must be the text of a JSON object, read as the document
    stores_whole_text: bool = False
    #: whether it deletes by the record key of a tombstone whose statement names no key field (its
    #: item's document holds the decoded key as ``_key``): the runner then reads Avro keys' schemas ahead
    reads_tombstone_keys: bool = False

    @abstractmethod
    async def setup(self, statements: Sequence[Statement]) -> None:
        """Connect and prepare targets (templates, tables ...); fail fast with a clear error."""

    @abstractmethod
    async def write_batch(self, items: Sequence[SinkItem]) -> list[ItemFailure]:
        """Write ``items``; return the ones that failed (an empty list when all were written).

        Raise :class:`~fluxgate_sink.errors.StoreUnavailable` when the store as a whole
        cannot take the batch now (down, timing out, 5xx, 429): the runner pauses and
        writes the same batch again later.

        A request the store refuses as a whole over one item (an id too long, a value it
        cannot take) must not be raised: find that item (send the request again in halves)
        and report it as a failed item, writing the rest. Raise any other
        :class:`~fluxgate_sink.errors.SinkError` only for what no item causes (credentials,
        permissions): it stops the persister.
        """

    def needs_ids(self, statement: Statement) -> bool:
        """Whether the store keys the items of ``statement`` by their id (the PK's values).

        A store that only appends (a ringbuffer, a queue) says no: for a statement without a
        PK the router then skips deriving the id from every record, and the items' ``id`` is
        empty."""
        return True

    def takes_tombstones(self, statement: Statement) -> bool:
        """Whether a record of ``statement`` without a value (a tombstone) is written, as an item
        whose value fields are all null (a delete), instead of going to the dead letters as a
        value that does not decode. Asked after :meth:`setup`."""
        return False

    async def ping(self) -> bool:
        """Whether the store answers; the runner asks this before resuming after an outage."""
        return True

    async def close(self) -> None:
        """Release connections; safe to call twice."""
        return None
