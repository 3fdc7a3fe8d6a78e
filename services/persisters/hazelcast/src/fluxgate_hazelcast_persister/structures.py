"""What a KCQL statement means in Hazelcast: which structure (``STOREAS``) and value format.

``STOREAS`` names the structure: ``RING_BUFFER`` (the default, as Stream-Reactor's seed
statements expect), ``QUEUE``, ``IMAP`` and ``RELIABLE_TOPIC``; ``WITHFORMAT`` JSON (the
default) or AVRO. Only an IMap is idempotent (keyed by the PK values); the three others
append, so the sink keeps a per-partition record of what it wrote (``written_offsets.py``).

``sink.semantics=stream-reactor`` (what ``fluxgate connect`` sets) reads a statement as
Stream-Reactor's Hazelcast sink does instead (lensesio/stream-reactor, kafka-connect-hazelcast:
``config/HazelCastSinkSettings.scala``, ``writers/HazelCastWriter.scala``, ``writers/MapWriter.scala``):
no ``STOREAS``, and any name that is not one of its ``TargetType`` values (``MAP``, ``RINGBUFFER``
included), is a reliable topic; ``TTL`` is in milliseconds and only an IMap honours it.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Literal

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


#: fluxgate: our reading of a statement (the default); stream-reactor: its Hazelcast sink's.
Semantics = Literal["fluxgate", "stream-reactor"]

# Stream-Reactor structures the Python client cannot write as it does (no JCache client; a set,
# list or multimap append would need their own record of what was written): refused at start.
_UNSUPPORTED = {
    "SET": "use STOREAS IMAP with a PK (one entry per key, as a set keeps one per value)",
    "LIST": "use STOREAS QUEUE or RING_BUFFER (ordered appends)",
    "MULTI_MAP": "use STOREAS IMAP with a PK (the latest value per key)",
    "ICACHE": "use STOREAS IMAP with a PK (the Python client has no JCache)",
}

# HazelCastSinkSettings.scala (getTopicTables): TargetType.withName(storedAs.toUpperCase), exact
# names only, case-insensitive; a failure (no STOREAS: a null, or an unknown name) is RELIABLE_TOPIC.
_STREAM_REACTOR_NAMES = {
    "RELIABLE_TOPIC": Structure.RELIABLE_TOPIC,
    "RING_BUFFER": Structure.RING_BUFFER,
    "QUEUE": Structure.QUEUE,
    "IMAP": Structure.IMAP,
}

# Spellings Stream-Reactor's Hazelcast sink and its users write (fluxgate semantics).
_ALIASES = {
    "RING_BUFFER": Structure.RING_BUFFER,
    "RINGBUFFER": Structure.RING_BUFFER,
    "QUEUE": Structure.QUEUE,
    "IMAP": Structure.IMAP,
    "MAP": Structure.IMAP,
    "RELIABLE_TOPIC": Structure.RELIABLE_TOPIC,
    "RELIABLETOPIC": Structure.RELIABLE_TOPIC,
}


def structure_of(statement: Statement, semantics: Semantics = "fluxgate") -> Structure:
    """The structure a statement writes to; no ``STOREAS`` is a ringbuffer (ours) or a reliable
    topic (Stream-Reactor's)."""
    name = (statement.store_as or "").upper()
    if name in _UNSUPPORTED:
        raise KcqlError(f"{statement.text}: STOREAS {statement.store_as} is not supported: {_UNSUPPORTED[name]}")
    if semantics == "stream-reactor":
        return _STREAM_REACTOR_NAMES.get(name, Structure.RELIABLE_TOPIC)
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


def check_value_format(statements: Sequence[Statement], value_format: str, semantics: Semantics = "fluxgate") -> None:
    """WITHFORMAT AVRO passes the consumed bytes through: only Avro values can be (a KcqlError). A
    StringConverter text is stored whole (values.text_json): our semantics refuse a projection of it,
    Stream-Reactor's apply none, as its sink (a warning at start, HazelcastSink.setup)."""
    for statement in statements:
        if statement.format == "AVRO" and value_format != "avro":
            raise KcqlError(
                f"{statement.text}: WITHFORMAT AVRO writes the consumed Avro bytes as they are, and the topics' "
                f"values are {value_format} (sink.value_format): use WITHFORMAT JSON"
            )
        if value_format == "string" and semantics == "fluxgate" and not statement.selects_everything:
            raise KcqlError(
                f"{statement.text}: string values (StringConverter text) are stored whole, as one JSON string, "
                "so a projection or IGNORE cannot apply: use SELECT *, or sink.value_format=json with "
                "sink.value_schemas_enable=false to store the document's fields"
            )


def ttl_seconds(statement: Statement, semantics: Semantics = "fluxgate") -> float | None:
    """An IMap entry's time-to-live in seconds (the client's unit), or None for none.

    Ours: TTL in seconds. Stream-Reactor's MapWriter.scala: ``if (ttl > 0) put(key, value, ttl,
    TimeUnit.MILLISECONDS)``, else a put without one; the KCQL parser reads ``TTL=0`` as no TTL
    (fluxgate_sink.kcql), so the statement has none then."""
    if statement.ttl is None:
        return None
    return statement.ttl / 1000 if semantics == "stream-reactor" else float(statement.ttl)


def check_statements(statements: Sequence[Statement], semantics: Semantics = "fluxgate") -> None:
    """Refuse, at start, what Hazelcast cannot do with a statement (a KcqlError naming it)."""
    for statement in statements:
        structure = structure_of(statement, semantics)
        # Stream-Reactor ignores a TTL off an IMap (only MapWriter.scala reads it): so do we then.
        if statement.ttl is not None and structure is not Structure.IMAP and semantics == "fluxgate":
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
