"""The transition decisions, on plain dicts: no Kafka, no clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fluxgate_device_status.device_state import (
    CatchUp,
    Reading,
    apply_reading,
    caught_up,
    heard_ms,
    is_replay,
    is_silent,
    mark_offline,
    transition_record,
    unreadable_because,
    view,
)

T0 = 1_800_000_000_000
THRESHOLD = 60_000


def reading(offset: int = 0, ingest: int = T0, metric: str = "temperature", value: float = 20.0) -> Reading:
    return Reading("dev-1", metric, value, "Cel", ingest - 10, ingest, "COAP", "coap://h/dev-1", 2, offset)


def test_the_first_reading_turns_a_new_device_online() -> None:
    state, turned = apply_reading(None, reading(), now_ms=T0 + 5)
    assert turned == "ONLINE"
    assert state["status"] == "ONLINE" and state["status_since_ms"] == T0 + 5
    assert state["first_seen_ms"] == T0 and state["readings"] == 1
    assert state["metrics"] == {"temperature": {"value": 20.0, "unit": "Cel", "event_time_ms": T0 - 10}}
    assert (state["protocol"], state["source"], state["partition"], state["offset"]) == ("COAP", "coap://h/dev-1", 2, 0)


def test_further_readings_change_nothing_but_the_data() -> None:
    first, _ = apply_reading(None, reading(), now_ms=T0)
    second, turned = apply_reading(first, reading(1, T0 + 1000, "humidity", 40.0), now_ms=T0 + 1001)
    assert turned is None
    assert second["status_since_ms"] == T0 and second["readings"] == 2
    assert set(second["metrics"]) == {"temperature", "humidity"}
    assert second["last_ingest_time_ms"] == T0 + 1000


def test_an_older_reading_does_not_move_last_seen_backwards() -> None:
    first, _ = apply_reading(None, reading(0, T0 + 5000), now_ms=T0 + 5000)
    second, _ = apply_reading(first, reading(1, T0), now_ms=T0 + 5001)
    assert second["last_ingest_time_ms"] == T0 + 5000 and second["last_event_time_ms"] == T0 + 4990


def test_a_reading_after_offline_turns_it_online_again() -> None:
    state, _ = apply_reading(None, reading(), now_ms=T0)
    offline = mark_offline(state, T0 + THRESHOLD)
    back, turned = apply_reading(offline, reading(1, T0 + 90_000), now_ms=T0 + 90_000)
    assert turned == "ONLINE" and back["status_since_ms"] == T0 + 90_000


def test_a_replayed_reading_is_recognised_by_partition_and_offset() -> None:
    state, _ = apply_reading(None, reading(offset=7), now_ms=T0)
    assert is_replay(state, reading(offset=7)) and is_replay(state, reading(offset=3))
    assert not is_replay(state, reading(offset=8)) and not is_replay(None, reading())


@pytest.mark.parametrize(
    ("now", "silent"), [(T0 + THRESHOLD - 1, False), (T0 + THRESHOLD, True), (T0 + 10 * THRESHOLD, True)]
)
def test_silence_is_the_threshold_since_last_heard(now: int, silent: bool) -> None:
    state, _ = apply_reading(None, reading(), now_ms=T0)
    assert is_silent(state, now, THRESHOLD, watch_start_ms=0) is silent


def test_heard_counts_when_this_service_processed_a_backlogged_reading() -> None:
    state, _ = apply_reading(None, reading(ingest=T0), now_ms=T0 + 120_000)  # read from a backlog
    assert heard_ms(state) == T0 + 120_000
    assert not is_silent(state, T0 + 150_000, THRESHOLD, watch_start_ms=0)


def test_after_a_restart_silence_counts_only_from_when_watching_started() -> None:
    """Restored state says the device was last heard long ago; its next readings may still be
    waiting in the topic, so no OFFLINE before a full threshold of watching."""
    state, _ = apply_reading(None, reading(), now_ms=T0)
    restart = T0 + 10 * THRESHOLD
    assert not is_silent(state, restart + THRESHOLD - 1, THRESHOLD, watch_start_ms=restart)
    assert is_silent(state, restart + THRESHOLD, THRESHOLD, watch_start_ms=restart)


def test_a_partition_is_caught_up_once_read_to_the_end_noted_at_restore() -> None:
    assert caught_up(CatchUp(end=0, read=-1))  # an empty partition
    assert caught_up(CatchUp(end=10, read=9))
    assert not caught_up(CatchUp(end=10, read=8))


def test_an_offline_device_is_never_silent_again() -> None:
    state, _ = apply_reading(None, reading(), now_ms=T0)
    assert not is_silent(mark_offline(state, T0 + THRESHOLD), T0 + 99 * THRESHOLD, THRESHOLD, 0)


def test_transition_record_and_view() -> None:
    state, _ = apply_reading(None, reading(), now_ms=T0)
    offline = mark_offline(state, T0 + THRESHOLD)
    record = transition_record(offline, "ONLINE", THRESHOLD)
    assert record["status"] == "OFFLINE" and record["previous_status"] == "ONLINE"
    assert record["changed_at"] == T0 + THRESHOLD and record["silence_threshold_ms"] == THRESHOLD
    assert "offset" not in view(offline) and view(offline)["status"] == "OFFLINE"


def test_reading_from_a_decoded_record_converts_datetimes() -> None:
    when = datetime.fromtimestamp(T0 / 1000, tz=UTC)
    record = {"device_id": "d", "metric": "temperature", "value": 1, "unit": None, "event_time": when,
              "ingest_time": when, "source_protocol": "MQTT", "source": "s"}  # fmt: skip
    parsed = Reading.from_record(record, partition=1, offset=9)
    assert (parsed.event_time_ms, parsed.ingest_time_ms, parsed.value) == (T0, T0, 1.0)


def test_a_state_this_version_wrote_is_readable() -> None:
    state, _ = apply_reading(None, reading(), now_ms=T0)
    assert unreadable_because(state) is None
    assert unreadable_because(mark_offline(state, T0 + 1)) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"partition": None}, "'partition' is NoneType, not int"),
        ({"readings": True}, "'readings' is bool, not int"),
        ({"status": "MAYBE"}, "'status' is 'MAYBE'"),
        ({"metrics": []}, "'metrics' is list, not dict"),
    ],
)
def test_an_entry_that_is_no_state_says_why(change: dict[str, object], reason: str) -> None:
    state, _ = apply_reading(None, reading(), now_ms=T0)
    assert unreadable_because({**state, **change}) == reason
    assert unreadable_because({k: v for k, v in state.items() if k != "offset"}) == "no 'offset'"
    assert unreadable_because([1, 2]) == "not an object: list"
