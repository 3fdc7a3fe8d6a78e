"""What the driver knows between micro-batches, shared by the job, its routing, the
supervisor and the progress listener."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql.streaming.query import StreamingQuery

if TYPE_CHECKING:
    from fluxgate_aggregator.ledger import Ledger
    from fluxgate_aggregator.losses import LossWatch
    from fluxgate_aggregator.writers import WriterSchemas


@dataclass
class JobState:
    """What the driver knows between batches: the watermark and the routing counts."""

    watermark_ms: int | None = None
    late_rows: int = 0
    dead_letters: int = 0
    ledger_rows: int = 0
    ledger: Ledger | None = None
    writers: WriterSchemas | None = None
    losses: LossWatch | None = None
    queries: list[StreamingQuery] = field(default_factory=list)
    starters: dict[str, Callable[[], StreamingQuery]] = field(default_factory=dict)

    def settled(self, watermark_ms: int, late: int, dead: int, ledger_rows: int) -> None:
        """A micro-batch was routed and committed to the ledger."""
        self.watermark_ms = watermark_ms
        self.late_rows += late
        self.dead_letters += dead
        self.ledger_rows = ledger_rows

    def failed(self) -> list[StreamingQuery]:
        return [query for query in self.queries if not query.isActive]

    def restart(self, query: StreamingQuery) -> StreamingQuery:
        """Start ``query`` again from its checkpoint, in place of the stopped one."""
        again = self.starters[query.name]()
        self.queries = [again if old is query else old for old in self.queries]
        return again
