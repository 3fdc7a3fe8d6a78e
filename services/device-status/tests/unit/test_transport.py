"""The rewind after a rebalance reaches every source partition, committed or not."""

from __future__ import annotations

from typing import Any

import pytest
from faust.types import TP, Message
from mode.utils.queues import FlowControlQueue

from fluxgate_device_status.transport import (
    RewindingConsumerThread,
    StatusApp,
    changelog_rewind,
    without_committed_offset,
)

READINGS, CHECKS, CHANGELOG = "sensors.readings", "status-silence-checks", "status-devices-changelog"


class FakeAiokafka:
    """What ``seek_to_committed`` and the seeks after it do to an aiokafka consumer."""

    def __init__(self, committed: dict[TP, int | None], assigned: set[TP] | None = None) -> None:
        self.committed = committed
        self.assigned = set(committed) if assigned is None else assigned
        self.positions: dict[TP, int | str] = {}

    async def seek_to_committed(self) -> dict[TP, int | None]:
        for tp, offset in self.committed.items():
            if offset and offset > 0:  # aiokafka 0.14's own rule
                self.positions[tp] = offset
        return dict(self.committed)

    def assignment(self) -> set[TP]:
        return self.assigned

    def seek(self, tp: TP, offset: int) -> None:
        assert tp in self.assigned
        self.positions[tp] = offset


def consumer_thread(aiokafka: FakeAiokafka, reset: str = "earliest") -> RewindingConsumerThread:
    app = StatusApp("status", broker="kafka://127.0.0.1:1", consumer_auto_offset_reset=reset)
    thread = app.consumer._thread
    assert isinstance(thread, RewindingConsumerThread)
    thread._consumer = aiokafka  # type: ignore[assignment]
    app.consumer._is_changelog_tp = lambda tp: tp.topic == CHANGELOG  # type: ignore[method-assign]
    return thread


def test_without_committed_offset_is_what_aiokafka_leaves_in_place() -> None:
    committed: dict[TP, Any] = {TP(READINGS, 0): None, TP(READINGS, 1): 0, TP(READINGS, 2): 7}
    assert without_committed_offset(committed) == [TP(READINGS, 0), TP(READINGS, 1)]


async def test_a_source_partition_without_a_committed_offset_goes_back_to_the_beginning() -> None:
    aiokafka = FakeAiokafka({TP(READINGS, 0): None, TP(READINGS, 1): 0, TP(READINGS, 2): 7, TP(CHECKS, 0): None})
    committed = await consumer_thread(aiokafka)._seek_to_committed_or_reset()
    assert aiokafka.positions == {TP(READINGS, 0): 0, TP(READINGS, 1): 0, TP(READINGS, 2): 7, TP(CHECKS, 0): 0}
    assert committed == aiokafka.committed  # faust's own bookkeeping gets what aiokafka says


async def test_changelogs_and_partitions_revoked_meanwhile_are_left_alone() -> None:
    aiokafka = FakeAiokafka({TP(CHANGELOG, 0): None, TP(READINGS, 0): None, TP(READINGS, 1): None})
    aiokafka.assigned = {TP(CHANGELOG, 0), TP(READINGS, 1)}  # READINGS 0 revoked during the look-up
    await consumer_thread(aiokafka)._seek_to_committed_or_reset()
    assert aiokafka.positions == {TP(READINGS, 1): 0}


async def test_with_the_latest_reset_policy_nothing_uncommitted_is_rewound() -> None:
    aiokafka = FakeAiokafka({TP(READINGS, 0): None, TP(READINGS, 1): 3})
    await consumer_thread(aiokafka, reset="latest")._seek_to_committed_or_reset()
    assert aiokafka.positions == {TP(READINGS, 1): 3}


def message(offset: int, generation: int) -> Message:
    return Message(READINGS, 0, offset, 0.0, 0, None, b"dev", b"", None, tp=TP(READINGS, 0), generation_id=generation)


def acking_app() -> StatusApp:
    app = StatusApp("status", broker="kafka://127.0.0.1:1")
    app.topics.acks_enabled_for = lambda topic: True  # type: ignore[method-assign]
    app.consumer_generation_id = 4
    app.flow_control.resume()
    return app


def test_an_event_applied_in_the_current_generation_is_acknowledged() -> None:
    app = acking_app()
    applied = message(10, generation=4)
    app.consumer.track_message(applied)
    assert app.consumer.ack(applied)
    assert list(app.consumer._acked[TP(READINGS, 0)]) == [10]
    assert applied not in app.consumer.unacked


def test_what_a_stream_drops_during_a_rebalance_is_not_acknowledged_so_it_is_not_committed() -> None:
    app = acking_app()
    from_an_earlier_generation, taken_while_stopped = message(10, generation=3), message(11, generation=4)
    for dropped in (from_an_earlier_generation, taken_while_stopped):
        app.consumer.track_message(dropped)
    assert not app.consumer.ack(from_an_earlier_generation)
    app.flow_control.suspend()  # a rebalance started
    assert not app.consumer.ack(taken_while_stopped)
    assert list(app.consumer._acked[TP(READINGS, 0)]) == []
    assert len(app.consumer.unacked) == 0  # nothing for a rebalance to wait on


async def test_resuming_a_running_flow_keeps_the_queued_events_and_resuming_a_suspended_one_drops_them() -> None:
    app = StatusApp("status", broker="kafka://127.0.0.1:1")
    queue: FlowControlQueue[int] = FlowControlQueue(flow_control=app.flow_control, clear_on_resume=True)
    app.flow_control.resume()
    queue.put_nowait(1)  # fetched after the seek to the committed offsets, not applied yet
    app.flow_control.resume()  # what the end of a recovery does to a flow that already runs
    assert queue.qsize() == 1
    app.flow_control.suspend()  # a rebalance: what is queued is read again after the rewind
    app.flow_control.resume()
    assert queue.qsize() == 0


class Recovery:
    """The part of faust's ``Recovery`` that says what it restores and how far it got."""

    def __init__(
        self, in_recovery: bool, applied: dict[TP, int | None], standby: dict[TP, int | None] | None = None
    ) -> None:
        self.in_recovery = in_recovery
        self.active_tps = set(applied)
        self.active_offsets = {tp: offset for tp, offset in applied.items() if offset is not None}
        self.standby_tps = set(standby or {})
        self.standby_offsets = dict(standby or {})


def test_changelogs_under_recovery_are_read_again_after_what_was_applied() -> None:
    applied: dict[TP, int | None] = {TP(CHANGELOG, 0): 4, TP(CHANGELOG, 1): -1, TP(CHANGELOG, 2): 9}
    applied[TP(CHANGELOG, 3)] = None  # just assigned: the recovery has not looked its start up yet
    assigned = {TP(CHANGELOG, 0), TP(CHANGELOG, 1), TP(CHANGELOG, 3), TP(READINGS, 0)}  # 2 revoked meanwhile
    assert changelog_rewind(Recovery(True, applied), assigned) == {TP(CHANGELOG, 0): 5, TP(CHANGELOG, 1): 0}
    assert changelog_rewind(Recovery(False, applied), assigned) == {}  # restored: the input flows, nothing to redo


def test_standby_changelogs_are_read_again_after_what_the_copy_applied_recovery_or_not() -> None:
    standby: dict[TP, int | None] = {TP(CHANGELOG, 1): 6, TP(CHANGELOG, 2): -1, TP(CHANGELOG, 4): None}
    assigned = {TP(CHANGELOG, 0), TP(CHANGELOG, 1), TP(CHANGELOG, 2), TP(CHANGELOG, 4)}
    for in_recovery in (True, False):
        targets = changelog_rewind(Recovery(in_recovery, {TP(CHANGELOG, 0): 3}, standby), assigned)
        expected = {TP(CHANGELOG, 1): 7, TP(CHANGELOG, 2): 0}
        assert targets == ({**expected, TP(CHANGELOG, 0): 4} if in_recovery else expected)


async def test_the_seek_after_a_dropped_fetch_rewinds_the_changelogs_under_recovery(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stall the takeover test caught: the recovery had sought to 0, a fetch returning
    with the flow stopped took every changelog record, faust dropped them and sought back to
    the committed offsets only. Now the changelogs go back after what was applied. (The
    consumer thread's calls run inline here: no thread, no Kafka.)"""
    aiokafka = FakeAiokafka({TP(READINGS, 0): 3, TP(CHANGELOG, 0): None})
    thread = consumer_thread(aiokafka)
    monkeypatch.setattr(type(thread.app.tables), "recovery", Recovery(True, {TP(CHANGELOG, 0): -1}))
    aiokafka.positions[TP(CHANGELOG, 0)] = 6  # the end: fetched, then dropped

    async def seek_wait(partitions: dict[TP, int]) -> None:
        for tp, offset in partitions.items():
            aiokafka.seek(tp, offset)

    monkeypatch.setattr(thread, "seek_to_committed", thread._seek_to_committed_or_reset)
    monkeypatch.setattr(thread, "seek_wait", seek_wait)
    await thread.consumer.perform_seek()
    assert aiokafka.positions == {TP(READINGS, 0): 3, TP(CHANGELOG, 0): 0}
