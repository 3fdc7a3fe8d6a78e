"""faust's Kafka transport and flow control, with four fixes that keep a rebalance from
losing readings or stalling a recovery. Each was seen doing so in the restart and takeover
tests (``tests/integration``).

**Resuming a flow that runs clears nothing.** ``FlowControlEvent.resume()`` empties every
stream's and channel's queue, meant for the events of a generation that a rebalance
stopped. At the end of a recovery faust resumes the input partitions, seeks them to
their committed offsets (a call that waits on the consumer thread) and only then resumes
the flow control, which was already running since the changelogs were read: the
readings fetched during that wait sat in the queues and were thrown away with nothing to
bring them back (offset 2 of a backlog whose offset 1 had just been applied). Here a
resume empties the queues only when the flow was suspended.

**Nothing dropped is acknowledged.** A stream skips the events it takes while the flow is
stopped for a rebalance, or that were fetched in an earlier generation, and then
*acknowledges* them ("otherwise the lag would increase"), so the next commit could move the
group's offset past readings that were never applied, and the rewind after the rebalance
could not bring them back. Here an acknowledgement that comes while the flow is stopped or
from an earlier generation is not recorded: the message is read again after the rewind.
A message that was applied and whose acknowledgement is refused this way is recognised as
a replay by its offset (``device_state.is_replay``) when it comes again.

**A partition without a committed offset is rewound too.** faust drops what it fetched
while a rebalance stopped its flow (a fetch that returns while the flow is stopped, the
rest of a batch when the generation changes, events queued from the old generation) and
relies on going back to the committed offsets afterwards
(``Consumer.perform_seek``, at the end of every recovery and when a fetch returns with the
flow stopped). aiokafka's ``seek_to_committed`` seeks only partitions whose committed
offset is above 0, and leaves a partition without one wherever the dropped fetch left it.
For an instance restarted before its first commit, that was the end of a 3000-record
backlog: the backlog was never processed (about one restart in eight).

Here a source partition without a committed offset goes back where the group starts one,
``consumer_auto_offset_reset``: the beginning of the log for this service. What was read
and already counted is read again and recognised as a replay by its offset
(``device_state.is_replay``). Changelog partitions are not rewound this way: they have no
committed offsets (see next).

**What a recovery had fetched is read again.** The same drop hits the changelogs: a fetch
that was waiting when the rebalance began returns after the recovery has sought its
changelog partitions to the start, while the flow is still stopped, and faust drops the
batch and seeks back to the committed offsets, which changelogs do not have. The records
the recovery was waiting for were gone, and it waited for them for ever, alive and never
ready (a takeover test caught it about one run in twenty on a loaded machine: nothing
applied, the consumer's position at the end of the changelog). So that seek also puts the
changelog partitions under recovery back after the last record the recovery applied.
Applying a record twice, in order, leaves the table as once.

A standby's changelog partitions lose a dropped fetch the same way, recovery or not: the
copy went on from past it and lacked what the fetch held (the first records of a new
standby, in 4 runs of 7 of the standby test). That seek puts them back after the last record
the standby applied too.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

import aiokafka
import faust
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message
from mode.utils.objects import cached_property
from mode.utils.queues import FlowControlEvent

from fluxgate_device_status.changelog_load import ChangelogLoader

# How long the broker may hold a fetch that finds nothing new. faust fixes aiokafka's at 1,500 ms,
# and a broker answers one connection's requests in order: after a bulk load (store.py) faust's
# recovery asked for its start offsets behind such a fetch and waited about 1.2 s for them (a
# 2,000-device restore in bulk: ready in 4.5 s, at 100 ms in 3.6). An idle instance fetches more
# often: 0.3 CPU-s a minute more for the service, 0.7 for Kafka. A busy one never waits it out.
# bench/results/2026-11-30-device-status-bulk-restore.md.
FETCH_MAX_WAIT_MS = 100


class RewindingConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """The aiokafka consumer thread whose seek to the committed offsets misses no partition,
    and whose fetches wait at most ``FETCH_MAX_WAIT_MS`` at the broker."""

    def _create_worker_consumer(self, transport: Any) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # Read by the consumer's start() when it makes its Fetcher; faust passes no setting for it.
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS
        return consumer

    async def seek_to_committed(self) -> Mapping[TP, int]:
        committed: Mapping[TP, int] = await self.call_thread(self._seek_to_committed_or_reset)
        return committed

    async def _seek_to_committed_or_reset(self) -> Mapping[TP, int]:
        consumer = self._ensure_consumer()
        committed: Mapping[TP, int] = await consumer.seek_to_committed()
        if self.app.conf.consumer_auto_offset_reset != "earliest":
            return committed  # "latest": where the dropped fetch left them is as good as anywhere
        assigned = consumer.assignment()  # may have changed while the committed offsets were asked for
        uncommitted = [
            tp
            for tp in without_committed_offset(committed)
            if tp in assigned and not self.consumer._is_changelog_tp(tp)
        ]
        if uncommitted:
            self.log.info("Seek to the beginning: partitions without a committed offset %r", uncommitted)
        for tp in uncommitted:
            # Offset 0, not seek_to_beginning(): that one waits (up to the request timeout) for
            # an offset reset that an ongoing rebalance can hold up, and this runs inside the
            # fetch loop, which then delivered nothing, the changelog included, so recovery
            # stalled. Where 0 is gone, the fetch resets to the earliest (auto_offset_reset).
            consumer.seek(tp, 0)
        return committed


def without_committed_offset(committed: Mapping[TP, int | None]) -> list[TP]:
    """The partitions aiokafka's ``seek_to_committed`` leaves where they are: no committed
    offset (None), or 0, which it does not seek to either."""
    return [tp for tp, offset in committed.items() if not offset or offset <= 0]


class RewindingConsumer(faust_aiokafka.Consumer):
    """faust's aiokafka consumer that records no acknowledgement of a dropped message and
    rewinds every source partition, and the changelogs under recovery (see the module's
    docstring)."""

    async def perform_seek(self) -> None:
        await super().perform_seek()
        recovery = self.app.tables.recovery  # type: ignore[attr-defined]  # not on faust's TableManagerT
        targets = changelog_rewind(recovery, self.assignment())
        if targets:
            self.log.info(
                "Rewind the changelog partitions under recovery or standing by to what they applied: %r", targets
            )
            await self.seek_wait(targets)

    def ack(self, message: Message) -> bool:
        if self.app.flow_control.is_active() and message.generation_id == self.app.consumer_generation_id:
            return super().ack(message)
        # Dropped by the stream (or done while a rebalance is under way): read again after the rewind.
        message.acked = True
        self._unacked_messages.discard(message)  # so no rebalance waits for it
        return False

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return RewindingConsumerThread(self, loop=self.loop, beacon=self.beacon)


def changelog_rewind(recovery: Any, assigned: Set[TP]) -> dict[TP, int]:
    """Where the changelog partitions an ongoing recovery restores, and the standby partitions
    (followed for as long as they are assigned, recovery or not), must be read from again: the
    offset after the last one applied (0 when none). A partition whose start the recovery has
    not looked up yet (no offset) is left to it: it seeks there itself once it has."""
    targets = after_applied(recovery.standby_tps, recovery.standby_offsets, assigned)
    if recovery.in_recovery:
        targets.update(after_applied(recovery.active_tps, recovery.active_offsets, assigned))
    return targets


def after_applied(tps: Set[TP], applied: Mapping[TP, int | None], assigned: Set[TP]) -> dict[TP, int]:
    offsets = {tp: applied.get(tp) for tp in tps if tp in assigned}
    return {tp: max(int(offset), -1) + 1 for tp, offset in offsets.items() if offset is not None}


class RewindingTransport(faust_aiokafka.Transport):
    Consumer = RewindingConsumer


class KeepingFlowControl(FlowControlEvent):
    """Flow control whose ``resume()`` empties the queues only when the flow was suspended."""

    def resume(self) -> None:
        if self.is_active():
            return  # the queues hold this generation's events: keep them
        super().resume()


class StatusApp(faust.App):
    """``faust.App`` consuming through :class:`RewindingTransport` (producing as faust does),
    its streams under :class:`KeepingFlowControl`; its table's store loads the changelog in bulk
    with ``changelog_loader`` (store.py)."""

    changelog_loader: ChangelogLoader | None = None

    def _new_transport(self) -> Any:
        return RewindingTransport(self.conf.broker_consumer, self)

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        return KeepingFlowControl(loop=self.loop)
