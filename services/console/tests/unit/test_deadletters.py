"""Dead letters explained: headers, root cause, safe preview, replay target; counted and filtered."""

from __future__ import annotations

from console_recorded import aggregator_letter, gateway_letter, sink_letter

from fluxgate_console.deadletters import DeadLetter, DeadLetterBook, LetterFilter, reason_kind, root_cause
from fluxgate_console.settings import DeadLetterSettings
from fluxgate_core import deadletter as core


def test_the_sink_runtime_header_names_are_the_ones_read() -> None:
    # The sink runtime writes where a refused record was read from under fluxgate-core's names.
    headers = [(core.SOURCE_TOPIC, b"temperatures.aggregated"), (core.SOURCE_PARTITION, b"2"),
               (core.SOURCE_OFFSET, b"77")]  # fmt: skip
    letter = DeadLetter("persisters.deadletter", 0, 1, 0, None, b"x", headers)
    assert letter.replay_target == "temperatures.aggregated"


def test_a_gateway_letter_explained_and_not_replayable_to_kafka() -> None:
    letter = gateway_letter(5)
    assert (letter.reason, letter.error_class, letter.service) == (
        "value 'warm' is not a number", "PayloadError", "mqtt-proxy",
    )  # fmt: skip
    assert letter.source == "sensors/dev-7/temperature"
    assert letter.explained[core.TIMESTAMP] == "1700000000000"
    assert letter.original_headers == [("mqtt.qos", b"1")]
    assert letter.replay_target is None
    assert "sensors/dev-7/temperature" in (letter.not_replayable_because or "")


def test_aggregator_and_sink_letters_go_back_to_their_topic() -> None:
    assert aggregator_letter(1, 99).replay_target == "sensors.readings"
    sink = sink_letter(3)
    assert sink.replay_target == "temperatures.aggregated"
    assert sink.root_cause == "mapper_parsing_exception: failed to parse [mean]"


def test_a_bounded_letter_is_not_replayable() -> None:
    letter = aggregator_letter(1, 99)
    bounded = DeadLetter(letter.topic, 1, 2, 0, None, b"head", (*letter.headers, (core.TRUNCATED, b"true")))
    assert bounded.replay_target is None and "bounded" in (bounded.not_replayable_because or "")


def test_root_cause_of_a_traceback_and_of_plain_text() -> None:
    trace = "Traceback (most recent call last):\n  File 'x.py', line 1\nValueError: bad value"
    assert root_cause(trace) == "ValueError: bad value"
    assert root_cause("plain reason") == "plain reason"


def test_preview_is_bounded_and_shows_binary_safely() -> None:
    letter = DeadLetter("t", 0, 0, 0, None, b"ok\x00\xff\x1b[31m" + b"x" * 100)
    hexed, text = letter.preview(8)
    assert hexed == "6f 6b 00 ff 1b 5b 33 31…"
    assert text == "ok\\x00\\xff\\x1b[31…"  # no raw control bytes reach the page
    assert "\x1b" not in text


def test_counts_by_reason_source_and_minute_and_filters() -> None:
    clock = 1_700_000_120.0  # two minutes after the first letter
    book = DeadLetterBook(DeadLetterSettings(recent=3), clock=lambda: clock)
    book.add([gateway_letter(i, at_ms=1_700_000_000_000 + i * 30_000) for i in range(4)])
    book.add([aggregator_letter(9, 99), sink_letter(1), DeadLetter("other.topic", 0, 0, 0, None, b"")])
    summary = book.summary("sensors.deadletter")
    assert summary.count == 5 and len(summary.recent) == 3  # counted all, kept the newest 3
    reasons = {row.key: (row.total, row.series[-3:]) for row in summary.reasons.rows(book.now_minute())}
    assert reasons == {
        "PayloadError: value 'warm' is not a number": (4, [2, 2, 0]),
        "SerializationError: unknown schema id N: not registered when the job started": (1, [0, 1, 0]),
    }  # fmt: skip
    assert {row.key: row.total for row in summary.sources.rows(book.now_minute())} == {"mqtt-proxy": 4, "aggregator": 1}
    assert summary.per_minute(book.now_minute(), minutes=3) == [2, 3, 0]
    assert [x.id for x in book.select(LetterFilter(reason="schema"))] == ["sensors.deadletter/1/9"]
    assert [x.id for x in book.select(LetterFilter(source="es-persister"))] == ["persisters.deadletter/0/1"]
    assert [x.id for x in book.select(LetterFilter(topic="sensors.deadletter", since_ms=1_700_000_060_000))] == [
        "sensors.deadletter/0/3",
        "sensors.deadletter/1/9",
        "sensors.deadletter/0/2",
    ]  # fmt: skip  (newest first; 0/1 was pushed out of the kept three)
    assert [x.id for x in book.select(LetterFilter(), ["persisters.deadletter/0/1"])] == ["persisters.deadletter/0/1"]


def test_the_same_error_at_another_place_counts_as_one_reason() -> None:
    one = "Expecting ',' delimiter: line 1 column 40 (char 39)"
    other = "Expecting ',' delimiter: line 1 column 38 (char 37)"
    assert reason_kind(one) == reason_kind(other) == "Expecting ',' delimiter: line N column N (char N)"
    assert reason_kind("unknown schema id 42: not registered") == "unknown schema id N: not registered"
    # Numbers inside names, versions and keys stay: they tell errors apart.
    assert reason_kind("no field sensor2 in v1.2 of temperatures-2026.11.25") == (
        "no field sensor2 in v1.2 of temperatures-2026.11.25"
    )
