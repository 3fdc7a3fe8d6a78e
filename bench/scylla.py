"""Aggregates/s from Kafka into Cassandra/Scylla through ``fluxgate-scylla-persister`` (the
real service, as a process) next to a baseline, in the same run, that writes the same rows
with the same client library in a plain loop (``execute_concurrent_with_args``, no Kafka).

* ``baseline``: N ``TemperatureAggregate`` rows (the values the persister binds) written
  with ``execute_concurrent_with_args`` of the same prepared INSERT, as many in flight as
  the persister's ``MAX_IN_FLIGHT``: timed from the first statement to the last answer.
* ``persister``: the same N aggregates, Avro wire format, produced to a fresh 3-partition
  topic first; then the persister starts and is timed from its first confirmed write until
  its own ``fluxgate_sink_records_written_total`` reaches N (start-up, joining the group and
  the first batch are outside the time; the rate is of the records after it); then a
  ``COUNT(*)`` checks nothing is missing or doubled.

Each leg writes its own fresh table (the default layout), dropped afterwards. An untimed
warm-up (``--warmup`` rows, the baseline's way) comes first, so that neither leg pays for
a Cassandra JVM that has only just started compiling.
Results: ``bench-results/scylla.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from _common import ROOT, cpu_seconds, micros_per, stack_up
from _persisters import aggregates, leg, metric, persister_env, produced, report, start_persister, written
from cassandra.cluster import Session
from cassandra.concurrent import execute_concurrent_with_args
from fluxgate_testing import free_port

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_scylla_persister.table import RowBinder, autocreate_layout, table_name
from fluxgate_sink.kcql import parse
from fluxgate_sink.sink import SinkItem

# The store helpers live with the persister's tests (not in its package, not in its image).
sys.path.insert(0, str(ROOT / "services" / "persisters" / "scylla" / "tests"))
from scylla_store import connect, create_keyspace

KEYSPACE = "fluxgate_bench"
PERSISTER_SRC = "services/persisters/scylla/src"


def kcql(target: str, topic: str) -> str:
    return f"UPSERT INTO {target} SELECT * FROM {topic} AUTOCREATE"  # noqa: S608 - KCQL, not CQL


def baseline(session: Session, records: list[dict[str, Any]], in_flight: int) -> dict[str, Any]:
    target = f"{KEYSPACE}.base_{uuid.uuid4().hex[:6]}"
    (statement,) = parse(kcql(target, "unused"))
    layout = autocreate_layout(statement, table_name(target, KEYSPACE))
    session.execute(layout.create_cql())
    prepared = session.prepare(layout.insert_cql(None))
    binder = RowBinder(layout.name, list(layout.columns), statement)
    params = []
    for r in records:
        when = statement.event_time(r)
        source = ConsumedRecord("unused", 0, 0, None, b"", (), 0, r)
        params.append(binder.values(SinkItem(source, statement, target, "", statement.project(r), when)))
    cpu = os.times()
    try:
        began = time.perf_counter()
        results = execute_concurrent_with_args(session, prepared, params, concurrency=in_flight)
        wall = time.perf_counter() - began
        assert all(ok for ok, _ in results), next(r for ok, r in results if not ok)
        assert session.execute(f"SELECT COUNT(*) FROM {target}", timeout=120).one()[0] == len(records)  # noqa: S608
    finally:
        session.execute(f"DROP TABLE IF EXISTS {target}", timeout=120)
    used = (os.times().user - cpu.user) + (os.times().system - cpu.system)
    return {"wall_s": round(wall, 3), "records_per_s": round(len(records) / wall), "client_cpu_s": round(used, 2)}


def table_exists(session: Session, target: str) -> bool:
    keyspace, table = target.split(".")
    query = "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s"
    return session.execute(query, (keyspace, table)).one() is not None


def source_at(rev: str) -> Path:
    """The persister's ``src`` as of git ``rev`` (``git archive``), for a before/after leg in one run."""
    commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True)
    into = ROOT / "bench-results" / f"scylla-persister-{commit.stdout.strip()}"
    if not into.exists():
        into.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", rev, PERSISTER_SRC], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / PERSISTER_SRC


def persister(
    stack: Any,
    session: Session,
    address: tuple[str, int],
    records: list[dict[str, Any]],
    args: Any,
    log: Path,
    source: Path | None = None,
) -> dict[str, Any]:
    """The persister as a process; ``source`` (a ``src`` folder) runs that code instead of the installed."""
    target = f"{KEYSPACE}.bench_{uuid.uuid4().hex[:6]}"
    topic = produced(stack, records)
    port = free_port()
    store = {
        "FLUXGATE_SCYLLA_SCYLLA__CONTACT_POINTS": f'["{address[0]}"]',
        "FLUXGATE_SCYLLA_SCYLLA__PORT": str(address[1]),
        "FLUXGATE_SCYLLA_SCYLLA__MAX_IN_FLIGHT": str(args.in_flight),
    }
    env = persister_env(
        "FLUXGATE_SCYLLA_", stack, port=port, kcql=kcql(target, topic), batch=args.batch, group=f"bench-{target}",
        topic=topic, store=store,
    )  # fmt: skip
    if source is not None:  # first on the path: the installed (editable) package comes after it
        env["PYTHONPATH"] = os.pathsep.join([str(source), *filter(None, [env.get("PYTHONPATH")])])
    process = start_persister("fluxgate_scylla_persister", env, log)
    try:
        while not table_exists(session, target) or metric(port, "fluxgate_sink_store_up", missing=-1.0) < 0:
            assert process.poll() is None, f"the persister exited; see {log}"
            time.sleep(0.01)
        # The clock starts at the first confirmed write: start-up, joining the group (the
        # broker delays a new group's first rebalance by 3 s) and the first poll are outside
        # it, and the rate is of the records written after that instant.
        while (first := written(port)) == 0:
            assert process.poll() is None, f"the persister exited; see {log}"
            time.sleep(0.005)
        began, cpu_before = time.perf_counter(), cpu_seconds(process.pid)
        # The persister's own count of confirmed writes, not a COUNT(*) in a tight loop,
        # which would cost the store a full scan every time.
        while written(port) < len(records):
            assert process.poll() is None, f"the persister exited; see {log}"
            assert time.perf_counter() - began < 600, f"{written(port)} of {len(records)} after 600 s; see {log}"
            time.sleep(0.2)  # each look renders every metric in the persister (4 % of its CPU at 50 ms)
        wall = time.perf_counter() - began
        cpu = cpu_seconds(process.pid) - cpu_before
        writes = metric(port, "fluxgate_sink_write_seconds_count")
        requests = metric(port, "fluxgate_scylla_requests_total", missing=-1.0)  # -1: code without batches
        write_ms = 1000 * metric(port, "fluxgate_sink_write_seconds_sum") / max(writes, 1)
        counted = session.execute(f"SELECT COUNT(*) FROM {target}", timeout=120).one()[0]  # noqa: S608
        assert counted == len(records), f"{counted} rows, not {len(records)}: missing or doubled"
    finally:
        process.terminate()
        process.wait(60)
        session.execute(f"DROP TABLE IF EXISTS {target}", timeout=120)
    assert process.returncode == 0, f"exit {process.returncode}; see {log}"
    timed = len(records) - int(first)
    return {
        "wall_s": round(wall, 3),
        "records_per_s": round(timed / wall),
        "records_timed": timed,
        "persister_cpu_s": round(cpu, 2),
        "persister_us_cpu_per_record": micros_per(cpu, timed),
        "writes": int(writes),
        "mean_write_ms": round(write_ms, 1),
        "rows_per_request": round(len(records) / requests, 2) if requests > 0 else 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000, help="aggregates per leg")
    parser.add_argument("--devices", type=int, default=1000, help="devices (rows per window minute)")
    parser.add_argument("--batch", type=int, default=1000, help="the persister's batch_size")
    parser.add_argument("--in-flight", type=int, default=256, help="statements in flight, both legs")
    parser.add_argument("--warmup", type=int, default=20_000, help="rows written first, untimed (0: none)")
    parser.add_argument(
        "--before", metavar="REV", help="also run the persister as of git REV, alternating with the current one"
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the persister legs, taking turns")
    args = parser.parse_args()

    from fluxgate_stack import ensure_up

    stack_up()
    stack = ensure_up(["kafka", "registry", "cassandra"])
    address = stack.cassandra_host, stack.cassandra_port
    cluster, session = connect(address)
    create_keyspace(session, KEYSPACE)
    records = aggregates(args.records, args.devices)
    log = ROOT / "bench-results" / "scylla-persister.log"
    log.parent.mkdir(exist_ok=True)
    sources: dict[str, Path | None] = {"persister": None}
    if args.before:
        sources = {f"persister @{args.before}": source_at(args.before), **sources}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sources}
    try:
        if args.warmup:  # a JVM that just started (or a cold table cache) would handicap the first leg
            baseline(session, records[: args.warmup], args.in_flight)
        base = baseline(session, records, args.in_flight)
        for _ in range(args.rounds):
            for name, source in sources.items():
                runs[name].append(persister(stack, session, address, records, args, log, source))
                print(f"{name}: {runs[name][-1]}", flush=True)
    finally:
        cluster.shutdown()
    legs = [leg("baseline (execute_concurrent, no Kafka)", base, args.records, "client_cpu_s")]
    legs += [leg(f"{name} (Kafka -> Cassandra process)", median_run(found), args.records, "persister_cpu_s")
             for name, found in runs.items()]  # fmt: skip
    through = median_run(runs["persister"])
    ratios = {"throughput_persister_over_baseline": through["records_per_s"] / base["records_per_s"]}
    if args.before:
        before = median_run(runs[f"persister @{args.before}"])
        ratios["throughput_persister_over_before"] = through["records_per_s"] / before["records_per_s"]
        ratios["cpu_per_record_persister_over_before"] = (
            through["persister_us_cpu_per_record"] / before["persister_us_cpu_per_record"]
        )
    report(
        "scylla",
        f"Cassandra: {args.records:,} aggregates of {args.devices:,} devices, {args.in_flight} in flight, "
        f"batch size {args.batch}, {args.rounds} round(s)",
        legs,
        ratios,
        vars(args),
    )


def median_run(found: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median throughput among a leg's rounds (its own CPU and counts with it)."""
    rate = statistics.median_low([run["records_per_s"] for run in found])
    return next(run for run in found if run["records_per_s"] == rate)


if __name__ == "__main__":
    main()
