"""What device-status's transport (``transport.py``) borrows from faust-streaming's and mode's
private code (pinned `faust-streaming>=0.15.3,<0.16` in pyproject.toml), checked against the
installed release: a new faust or mode that renames or changes any of it fails here, naming
what changed and where device-status relies on it.

* ``RewindingConsumerThread`` overrides ``seek_to_committed`` and calls
  ``_seek_to_committed_or_reset``'s pieces: ``call_thread``, ``_ensure_consumer``,
  ``consumer._is_changelog_tp``; it overrides ``_create_worker_consumer`` to set aiokafka's
  ``_fetch_max_wait_ms`` (test_credentials.py checks aiokafka still reads it at start);
* ``RewindingConsumer`` overrides ``perform_seek``, ``ack`` and ``_new_consumer_thread`` and
  reads ``app.tables.recovery``'s ``in_recovery``, ``active_tps``, ``active_offsets``,
  ``standby_tps``, ``standby_offsets`` and
  ``app.consumer_generation_id``;
* ``StatusApp`` overrides ``_new_transport`` and the ``flow_control`` cached property;
  ``KeepingFlowControl`` overrides mode's ``FlowControlEvent.resume``/``is_active``;
* ``store.RetainingStore`` extends faust's memory store: its ``data`` and ``_key_partition``,
  ``apply_changelog_batch`` and ``on_recovery_completed``, and relies on the table telling
  it each acknowledged changelog write (``set_persisted_offset``);
* ``DeviceTracker._learn_the_changelog`` asks faust's aiokafka producer (``_ensure_producer``)
  for the changelog's partitions, which faust's router reads (``key_partition``).
"""

from __future__ import annotations

import inspect
from typing import Any

import faust
from faust.stores import memory
from faust.tables.base import Collection
from faust.tables.recovery import Recovery
from faust.transport.drivers import aiokafka as faust_aiokafka
from mode.utils.queues import FlowControlEvent

WHERE = "services/device-status/src/fluxgate_device_status/transport.py"


def has(owner: Any, name: str) -> None:
    assert hasattr(owner, name), f"faust {faust.__version__}: {owner.__name__}.{name} is gone; {WHERE} relies on it"


def test_the_consumer_internals_the_transport_overrides_are_there() -> None:
    for name in ("seek_to_committed", "call_thread", "_ensure_consumer", "_create_worker_consumer"):
        has(faust_aiokafka.AIOKafkaConsumerThread, name)
    for name in ("perform_seek", "ack", "_new_consumer_thread", "_is_changelog_tp", "seek_wait", "assignment"):
        has(faust_aiokafka.Consumer, name)
    has(faust_aiokafka.Transport, "Consumer")
    has(faust.App, "_new_transport")
    has(faust.App, "consumer_generation_id")
    for name in ("resume", "is_active", "suspend"):
        has(FlowControlEvent, name)
    init = inspect.getsource(faust_aiokafka.Consumer._new_consumer_thread)
    assert "AIOKafkaConsumerThread(" in init, f"{WHERE}: _new_consumer_thread builds the thread we replace"


def test_the_recovery_state_the_rewind_reads_is_there() -> None:
    source = inspect.getsource(Recovery)
    for name in (
        "self.in_recovery",
        "self.active_tps",
        "self.active_offsets",
        "self.standby_tps",
        "self.standby_offsets",
    ):
        assert name in source, f"faust {faust.__version__}: Recovery lost {name}; changelog_rewind in {WHERE} reads it"


def test_the_app_builds_its_transport_and_flow_control_where_we_override_them() -> None:
    source = inspect.getsource(faust.App)
    assert "self._new_transport()" in source, f"{WHERE}: StatusApp._new_transport is no longer called"
    assert "def flow_control" in source, f"{WHERE}: StatusApp.flow_control overrides faust.App.flow_control"


def test_the_memory_store_the_table_s_store_extends_is_as_it_relies_on() -> None:
    where = "services/device-status/src/fluxgate_device_status/store.py"
    init = inspect.getsource(memory.Store.__post_init__)
    for name in ("self.data", "self._key_partition"):
        assert name in init, f"faust {faust.__version__}: the memory store lost {name}; {where} keeps it"
    for name in ("apply_changelog_batch", "on_recovery_completed", "persisted_offset", "set_persisted_offset"):
        has(memory.Store, name)
    sent = inspect.getsource(Collection._on_changelog_sent)
    assert "set_persisted_offset(" in sent, f"{where}: the table no longer tells its store what Kafka acknowledged"


def test_the_producer_the_tracker_asks_for_the_changelog_s_partitions_is_there() -> None:
    where = "services/device-status/src/fluxgate_device_status/tracker.py"
    for name in ("_ensure_producer", "key_partition"):
        assert hasattr(faust_aiokafka.Producer, name), f"faust {faust.__version__}: Producer.{name} is gone; {where}"
    source = inspect.getsource(faust_aiokafka.Producer.key_partition)
    assert "producer._partition(" in source, f"{where}: faust's router no longer partitions by the producer's metadata"
