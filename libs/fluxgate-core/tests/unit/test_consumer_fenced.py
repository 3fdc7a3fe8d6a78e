"""A fenced static member is replaced, but not for ever: a second live consumer with the
same group.instance.id would be fenced by each replacement in turn."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from fluxgate_core import consumer as consumer_module
from fluxgate_core.consumer import FENCES_ALLOWED, RecordConsumer
from fluxgate_core.errors import ConsumeError


class FencedMessage:
    def error(self) -> KafkaError:
        return KafkaError(KafkaError._FATAL, "Fatal error: Broker: Static consumer fenced (fake)")


class AlwaysFenced:
    """A librdkafka consumer that is fenced at every poll."""

    made: list[AlwaysFenced] = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.closed = False
        AlwaysFenced.made.append(self)

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.callbacks = callbacks

    def consume(self, count: int, timeout: float) -> list[FencedMessage]:
        return [FencedMessage()]

    def assignment(self) -> list[Any]:
        return []

    def close(self) -> None:
        self.closed = True


def test_fenced_again_and_again_is_an_error_naming_the_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    AlwaysFenced.made.clear()
    monkeypatch.setattr(consumer_module, "Consumer", AlwaysFenced)
    consumer = RecordConsumer({"group.id": "g", "group.instance.id": "persister-0"}, ["t"])
    for _ in range(FENCES_ALLOWED):
        assert consumer.poll_batch() == []
    assert len(AlwaysFenced.made) == FENCES_ALLOWED + 1, "each fence replaces the consumer"
    assert all(c.closed for c in AlwaysFenced.made[:-1]), "a replaced consumer is closed"
    with pytest.raises(ConsumeError, match=r"group\.instance\.id 'persister-0' was fenced 4 times") as raised:
        consumer.poll_batch()
    assert not raised.value.retriable
    assert "same group.instance.id" in str(raised.value)
