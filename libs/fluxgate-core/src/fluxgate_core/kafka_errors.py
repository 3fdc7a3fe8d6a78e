"""confluent-kafka's exceptions turned into Fluxgate errors, at the one place they cross.

librdkafka reports through ``KafkaException`` (wrapping a ``KafkaError`` that knows whether
it is retriable), plain ``RuntimeError`` for a closed client and ``ValueError``/``TypeError``
for bad arguments. Callers only ever see a :class:`~fluxgate_core.errors.FluxgateError`.
"""

from __future__ import annotations

from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from fluxgate_core.errors import CommitError, ConfigError, FluxgateError

E = TypeVar("E", bound=FluxgateError)

# What a commit fails with when the partitions are no longer ours (seen against Kafka 4:
# ILLEGAL_GENERATION while a cooperative rebalance runs; the others are the classic
# protocol's and librdkafka's words for the same situation).
REBALANCE_CODES = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError._STATE,
        KafkaError._ASSIGNMENT_LOST,
    }
)


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    """The ``KafkaError`` inside a ``KafkaException`` (None for anything else)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def describe(exc: BaseException) -> str:
    error = kafka_error_of(exc)
    return f"{error.name()}: {error.str()}" if error is not None else str(exc) or type(exc).__name__


def converted(exc: BaseException, cls: type[E], what: str) -> E:
    """``cls`` saying ``what`` failed and why, retriable when librdkafka says so."""
    error = kafka_error_of(exc)
    retriable = bool(error.retriable()) if error is not None else False
    return cls(f"{what}: {describe(exc)}", retriable=retriable)


def config_error(exc: BaseException, client: str) -> ConfigError:
    """A client librdkafka refused to create: a property is unknown or has a bad value."""
    return ConfigError(f"invalid Kafka {client} configuration [env *_KAFKA__*]: {describe(exc)}")


def commit_error(exc: BaseException) -> CommitError:
    """A failed commit; ``rebalanced`` when the partitions moved (see :class:`CommitError`)."""
    error = kafka_error_of(exc)
    if isinstance(exc, RuntimeError):  # "Consumer closed": it left the group, nothing is ours
        return CommitError(f"commit failed: {exc}", rebalanced=True)
    if error is not None and error.code() in REBALANCE_CODES:
        return CommitError(f"commit failed, the partitions moved: {describe(exc)}", rebalanced=True)
    return converted(exc, CommitError, "commit failed")
