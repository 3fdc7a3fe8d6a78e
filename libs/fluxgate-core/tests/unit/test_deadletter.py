from typing import Any

from fluxgate_core.deadletter import (
    MAX_REASON_BYTES,
    REASON,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TOPIC,
    TARGET,
    DeadLetterWriter,
    dead_letter_headers,
)
from fluxgate_core.errors import PayloadError


def test_headers_explain_the_rejection() -> None:
    headers = dict(
        dead_letter_headers(reason="not JSON", error_class="PayloadError", source="a/b", service="mqtt", now_ms=5)
    )
    assert headers == {
        "fluxgate.dlq.reason": b"not JSON",
        "fluxgate.dlq.error.class": b"PayloadError",
        "fluxgate.dlq.source": b"a/b",
        "fluxgate.dlq.service": b"mqtt",
        "fluxgate.dlq.timestamp": b"5",
    }


def test_long_reasons_are_truncated() -> None:
    headers = dict(dead_letter_headers(reason="x" * 10_000, error_class="E", source="s", service="v"))
    assert len(headers["fluxgate.dlq.reason"]) == MAX_REASON_BYTES


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, object, list[tuple[str, bytes]]]] = []

    async def deliver(self, topic: str, value: bytes, *, key: object = None, headers: object = None) -> None:
        self.sent.append((topic, value, key, list(headers or ())))  # type: ignore[call-overload]


async def _dead_letter(headers: list[tuple[str, bytes]], **described: Any) -> list[tuple[str, bytes]]:
    producer = RecordingProducer()
    writer = DeadLetterWriter(producer, "dlq", "demo")  # type: ignore[arg-type]
    await writer.send(b"x", error=PayloadError("bad"), source="a/b", headers=headers, **described)
    ((_, _, _, sent),) = producer.sent
    return sent


async def test_reserved_headers_that_came_with_the_input_do_not_pass_as_ours() -> None:
    # e.g. a record read back from a dead-letter topic, or a device's own header
    incoming = [("origin", b"kept"), ("fluxgate.dlq.topic", b"temperatures.aggregated"),
                ("fluxgate.dlq.payload.truncated", b"true"), ("fluxgate.replay.of", b"dlq/0/1")]  # fmt: skip
    sent = await _dead_letter(incoming)
    names = [name for name, _ in sent]
    assert not {"fluxgate.dlq.topic", "fluxgate.dlq.payload.truncated", "fluxgate.replay.of"} & set(names)
    assert sent[:4] == [
        ("origin", b"kept"),
        ("received.fluxgate.dlq.topic", b"temperatures.aggregated"),
        ("received.fluxgate.dlq.payload.truncated", b"true"),
        ("received.fluxgate.replay.of", b"dlq/0/1"),
    ]
    assert dict(sent)["fluxgate.dlq.reason"] == b"bad"


async def test_described_headers_are_the_callers_own_and_follow_the_inputs() -> None:
    provenance = [(SOURCE_TOPIC, b"aggs"), (SOURCE_OFFSET, b"2")]
    sent = await _dead_letter([(SOURCE_TOPIC, b"forged")], described=provenance)
    assert sent[:3] == [("received.fluxgate.dlq.topic", b"forged"), *provenance]


async def test_no_header_of_the_input_passes_as_ours_wherever_it_stands() -> None:
    # A sink's provenance goes as ``described``; an earlier dead letter's provenance, or a
    # device's forged one, among the input's headers is renamed even when it comes last.
    record = [(SOURCE_TOPIC, b"sensors.readings"), (REASON, b"earlier"), ("k", b"v"), (TARGET, b"forged")]
    provenance = [(SOURCE_TOPIC, b"aggs"), (SOURCE_PARTITION, b"0"), (SOURCE_OFFSET, b"2"), (TARGET, b"idx")]
    sent = await _dead_letter(record, described=provenance)
    assert sent[:8] == [
        ("received.fluxgate.dlq.topic", b"sensors.readings"),
        ("received.fluxgate.dlq.reason", b"earlier"),
        ("k", b"v"),
        ("received.fluxgate.dlq.target", b"forged"),
        *provenance,
    ]
    assert [value for name, value in sent if name == REASON] == [b"bad"]
    alone = await _dead_letter([(SOURCE_TOPIC, b"forged")])
    assert alone[0] == ("received.fluxgate.dlq.topic", b"forged") and SOURCE_TOPIC not in dict(alone)
