"""The persister as a process: a statement the server rejects is dead-lettered under NOOP
with the rest written; a bad setting exits 2 naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cassandra.cluster import Session
from fluxgate_testing import consume
from fluxgate_testing.sink.suite import Run, aggregate
from scylla_store import CassandraUnderTest

pytestmark = pytest.mark.integration
PERSISTER = str(Path(sys.executable).with_name("fluxgate-scylla-persister"))


class ClusteredByUnit(CassandraUnderTest):
    """A user-made table clustered by ``unit``: a record without a unit is a null key, which
    the server refuses for that statement alone."""

    def kcql(self, topic: str, target: str) -> str:
        return f"INSERT INTO {target} SELECT * FROM {topic} IGNORE window_end, first_event_time, last_event_time"

    def new_target(self) -> str:
        target = super().new_target()
        self.session.execute(
            f"CREATE TABLE {target} (device_id text, metric text, day date, unit text, window_start timestamp,"
            " count bigint, min double, max double, mean double, stddev double,"
            " PRIMARY KEY ((device_id, metric, day), unit, window_start))"
        )
        return target


def test_a_statement_the_server_rejects_is_dead_lettered_under_noop(
    stack: Any, registry_client: Any, cassandra_address: tuple[str, int], cql: Session
) -> None:
    run = Run(stack, ClusteredByUnit(cassandra_address, cql), registry_client)
    try:
        good = [aggregate(i, 0) for i in range(8)]
        run.produce(good[:4], partition=0)
        run.produce([aggregate(99, 0, unit=None)], partition=0)
        run.produce(good[4:], partition=0)
        process = run.persister(error_policy="NOOP").start()
        run.wait_for(process, 8)
        (dead,) = consume(stack.bootstrap, run.deadletters, expected=1, timeout=30)
        assert dead.header("fluxgate.dlq.offset") == b"4"
        assert dead.header("fluxgate.dlq.error.class")
        assert b"unit" in (dead.header("fluxgate.dlq.reason") or b"")
        assert process.running and process.terminate() == 0
        assert run.committed(0) == 9
        assert run.store.count(run.target) == 8
    finally:
        run.close()


def test_a_bad_row_in_a_partition_batch_is_dead_lettered_alone_and_its_partition_written(
    stack: Any, registry_client: Any, cassandra_address: tuple[str, int], cql: Session
) -> None:
    # One device, one day: the nine rows are one partition, so one UNLOGGED BATCH, which the
    # server refuses for its null unit; written again row by row, only that row fails.
    run = Run(stack, ClusteredByUnit(cassandra_address, cql), registry_client)
    try:
        rows = [aggregate(7, minute, unit=None if minute == 5 else "Cel") for minute in range(9)]
        run.produce(rows, partition=0)
        process = run.persister(error_policy="NOOP").start()
        run.wait_for(process, 8)
        (dead,) = consume(stack.bootstrap, run.deadletters, expected=1, timeout=30)
        assert dead.header("fluxgate.dlq.offset") == b"5"
        assert b"InvalidRequest" in (dead.header("fluxgate.dlq.reason") or b"")
        assert b"unit" in (dead.header("fluxgate.dlq.reason") or b"")
        assert process.running and process.terminate() == 0
        assert run.committed(0) == 9
        assert run.store.count(run.target) == 8
    finally:
        run.close()


def test_a_bad_setting_exits_2_naming_it() -> None:
    env = {"PATH": "/usr/bin:/bin", "FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY": "MOST"}
    done = subprocess.run([PERSISTER], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY" in done.stderr
