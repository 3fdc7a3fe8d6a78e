"""The dedupe rule: timed payloads by bytes, untimed ones by (observe, bytes) plus the replay rule."""

from __future__ import annotations

import pytest

from fluxgate_coap_ingest.dedupe import DedupeWindow

TIMED = b'{"sensorId":"d","timestamp":1700000000000,"temperature":21.5}'
UNTIMED = b"21.5"


def seen(window: DedupeWindow, payload: bytes, observe: int | None, timed: bool, first: bool = False) -> bool:
    """Offer one notification; remember it when it is new, as the handler does after Kafka's ack."""
    key = DedupeWindow.key(payload, observe, device_timed=timed)
    if window.is_duplicate(key, first_after_register=first):
        return True
    window.remember(key)
    return False


def test_timed_payload_is_a_duplicate_whatever_the_observe_number() -> None:
    window = DedupeWindow(8)
    assert not seen(window, TIMED, 10, timed=True)
    assert seen(window, TIMED, 11, timed=True)  # the device sent it twice
    assert seen(window, TIMED, 2, timed=True, first=True)  # replayed by a re-registration
    assert not seen(window, TIMED.replace(b"21.5", b"21.6"), 12, timed=True)


def test_untimed_payload_may_repeat_with_a_new_observe_number() -> None:
    window = DedupeWindow(8)
    assert not seen(window, UNTIMED, 10, timed=False)
    assert not seen(window, UNTIMED, 11, timed=False)  # same value, new reading
    assert seen(window, UNTIMED, 11, timed=False)  # the same notification again


def test_replayed_current_state_after_reregistration_is_dropped_once() -> None:
    window = DedupeWindow(8)
    assert not seen(window, b"20.0", 3, timed=False)
    assert not seen(window, UNTIMED, 4, timed=False)
    assert seen(window, UNTIMED, 1, timed=False, first=True)  # new registration, same state
    assert not seen(window, b"20.0", 2, timed=False, first=True)  # not the last state: a new reading
    assert not seen(window, UNTIMED, 5, timed=False)  # later notifications are never replays


def test_window_is_bounded_and_forgets_the_oldest() -> None:
    window = DedupeWindow(3)
    payloads = [f"{i}".encode() for i in range(5)]
    for payload in payloads:
        assert not seen(window, payload, None, timed=True)
    assert len(window) == 3
    assert not seen(window, payloads[0], None, timed=True)  # forgotten
    assert seen(window, payloads[4], None, timed=True)


def test_window_needs_room() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        DedupeWindow(0)
