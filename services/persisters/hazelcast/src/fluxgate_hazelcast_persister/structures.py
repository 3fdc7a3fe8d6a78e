"""What a KCQL statement means in Hazelcast: which structure (``STOREAS``) and value format.

``STOREAS`` names the structure: ``RING_BUFFER`` (the default, as Stream-Reactor's seed
statements expect), ``QUEUE``, ``IMAP`` and ``RELIABLE_TOPIC``; ``WITHFORMAT`` JSON (the
default) or AVRO. Only an IMap is idempotent (keyed by the PK values); the three others
append, so the sink keeps a per-partition record of what it wrote (``written_offsets.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from fluxgate_sink.errors import KcqlError
from fluxgate_sink.kcql import Statement


class Structure(Enum):
    RING_BUFFER = "RING_BUFFER"
    QUEUE = "QUEUE"
    IMAP = "IMAP"
    RELIABLE_TOPIC = "RELIABLE_TOPIC"

    @property
    def idempotent(self) -> bool:
        """Writing the same items twice leaves one entry per key (only a map)."""
        return self is Structure.IMAP


# Spellings Stream-Reactor's Hazelcast sink and its users write.
_ALIASES = {
    "RING_BUFFER": Structure.RING_BUFFER,
    "RINGBUFFER": Structure.RING_BUFFER,
    "QUEUE": Structure.QUEUE,
    "IMAP": Structure.IMAP,
    "MAP": Structure.IMAP,
    "RELIABLE_TOPIC": Structure.RELIABLE_TOPIC,
    "RELIABLETOPIC": Structure.RELIABLE_TOPIC,
}


def structure_of(statement: Statement) -> Structure:
    """The structure a statement writes to; no ``STOREAS`` is a ringbuffer."""
    if statement.store_as is None:
        return Structure.RING_BUFFER
    try:
        return _ALIASES[statement.store_as.upper()]
    except KeyError:
        raise KcqlError(
            f"{statement.text}: STOREAS {statement.store_as} is not a Hazelcast structure;"
            " expected RING_BUFFER, QUEUE, IMAP or RELIABLE_TOPIC"
        ) from None


def passes_avro_through(statement: Statement) -> bool:
    """AVRO with ``SELECT *`` (nothing ignored): the consumed bytes are the value, as they are."""
    return statement.format == "AVRO" and statement.selects_everything


def check_value_format(statements: Sequence[Statement], value_format: str) -> None:
    """WITHFORMAT AVRO passes the consumed bytes through: only Avro values can be (a KcqlError)."""
    for statement in statements:
        if statement.format == "AVRO" and value_format != "avro":
            raise KcqlError(
                f"{statement.text}: WITHFORMAT AVRO writes the consumed Avro bytes as they are, and the topics' "
                f"values are {value_format} (sink.value_format): use WITHFORMAT JSON"
            )


def check_statements(statements: Sequence[Statement]) -> None:
    """Refuse, at start, what Hazelcast cannot do with a statement (a KcqlError naming it)."""
    for statement in statements:
        structure = structure_of(statement)
        if statement.ttl is not None and structure is not Structure.IMAP:
            raise KcqlError(
                f"{statement.text}: TTL applies to STOREAS IMAP only; a {structure.value}'s time-to-live"
                " is the member's configuration"
            )
        if statement.format == "AVRO" and not passes_avro_through(statement):
            raise KcqlError(
                f"{statement.text}: WITHFORMAT AVRO writes the consumed Avro bytes as they are, so it needs"
                " SELECT * without IGNORE; use WITHFORMAT JSON for a projection"
            )
        if statement.index_suffix:
            raise KcqlError(f"{statement.text}: WITHINDEXSUFFIX is for Elasticsearch; a Hazelcast name is fixed")
