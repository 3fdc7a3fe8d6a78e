"""Aggregates/s from Kafka into Elasticsearch through ``fluxgate-es-persister`` (the real
service, as a process) next to a baseline, in the same run, that writes the same documents
with the same client's plain bulk helper (``elasticsearch.helpers.async_bulk``, no Kafka).

* ``baseline``: N ``TemperatureAggregate`` documents (the ids and daily indices the persister
  would give them) written with ``async_bulk`` in chunks of the persister's batch size, then
  a refresh: timed from the first request to the last document searchable.
* ``persister``: the same N aggregates, Avro wire format, produced to a fresh 3-partition
  topic first; then the persister starts and is timed from ready until a count through the
  alias reaches N (start-up and the first poll are outside the time).

Each leg writes its own fresh target (template, daily indices, alias), deleted afterwards.
Results: ``bench-results/elasticsearch.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from _common import ROOT, cpu_seconds, micros_per, stack_up
from _persisters import aggregates, leg, metric, persister_env, produced, report, start_persister, written

# This script's own name is the client's: with bench/ first on sys.path (as ``python
# bench/elasticsearch.py`` puts it), ``import elasticsearch`` would import this file again.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from elasticsearch import AsyncElasticsearch, Elasticsearch  # noqa: E402
from elasticsearch.helpers import async_bulk  # noqa: E402
from fluxgate_testing import free_port  # noqa: E402

from fluxgate_es_persister.mapping import IndexFamily, index_template  # noqa: E402
from fluxgate_sink.kcql import parse  # noqa: E402


def kcql(target: str, topic: str) -> str:
    return (  # KCQL, not SQL: nothing is queried with it
        f"INSERT INTO {target} SELECT * FROM {topic}"  # noqa: S608
        " PK device_id, metric, window_start WITHINDEXSUFFIX=-{YYYY.MM.dd}"
    )


def cleanup(es_url: str, target: str) -> None:
    with Elasticsearch(es_url, request_timeout=60) as es:
        es.indices.delete(index=f"{target}-*", ignore_unavailable=True, expand_wildcards="all")
        es.options(ignore_status=404).indices.delete_index_template(name=target)


def baseline(es_url: str, records: list[dict[str, Any]], batch: int) -> dict[str, Any]:
    target = f"bench-base-{uuid.uuid4().hex[:6]}"
    (statement,) = parse(kcql(target, "unused"))
    actions = [
        {
            "_index": statement.target_for(statement.event_time(r)),
            "_id": statement.document_id(r),
            "_source": statement.project(r),
        }
        for r in records
    ]

    async def run() -> float:
        async with AsyncElasticsearch(es_url, request_timeout=60) as es:
            body = index_template(IndexFamily(target, "-{YYYY.MM.dd}"), shards=1, replicas=0)
            await es.indices.put_index_template(name=target, **body)
            began = time.perf_counter()
            written, errors = await async_bulk(es, actions, chunk_size=batch, raise_on_error=True)
            await es.indices.refresh(index=target)
            wall = time.perf_counter() - began
            assert written == len(actions) and not errors, errors
            assert (await es.count(index=target))["count"] == len(actions)
            return wall

    cpu = os.times()
    try:
        wall = asyncio.run(run())
    finally:
        cleanup(es_url, target)
    used = (os.times().user - cpu.user) + (os.times().system - cpu.system)
    return {"wall_s": round(wall, 3), "records_per_s": round(len(records) / wall), "client_cpu_s": round(used, 2)}


def persister(stack: Any, records: list[dict[str, Any]], batch: int, log: Path) -> dict[str, Any]:
    target = f"bench-es-{uuid.uuid4().hex[:6]}"
    topic = produced(stack, records)
    port = free_port()
    store = {
        "FLUXGATE_ES_ELASTICSEARCH__HOSTS": f'["{stack.elasticsearch_url}"]',
        "FLUXGATE_ES_ELASTICSEARCH__BULK_MAX_ACTIONS": str(batch),
    }
    env = persister_env(
        "FLUXGATE_ES_", stack, port=port, kcql=kcql(target, topic), batch=batch, group=f"bench-{target}",
        topic=topic, store=store,
    )  # fmt: skip
    process = start_persister("fluxgate_es_persister", env, log)
    es = Elasticsearch(stack.elasticsearch_url, request_timeout=60)
    try:
        began, cpu_before = time.perf_counter(), 0.0
        while not es.indices.exists_index_template(name=target):  # setup done: the clock starts
            assert process.poll() is None, f"the persister exited; see {log}"
            time.sleep(0.01)
        began, cpu_before = time.perf_counter(), cpu_seconds(process.pid)
        # The persister's own count of confirmed writes, not a refresh + count through the
        # alias: refreshing every few ms would make Elasticsearch write tiny segments and
        # slow this leg down for the baseline's sake (which refreshes once, at the end).
        while written(port) < len(records):
            assert process.poll() is None, f"the persister exited; see {log}"
            assert time.perf_counter() - began < 600, f"{written(port)} of {len(records)} after 600 s; see {log}"
            time.sleep(0.1)  # each look renders every metric in the persister: not too often
        es.indices.refresh(index=target)
        wall = time.perf_counter() - began
        cpu = cpu_seconds(process.pid) - cpu_before
        assert int(es.count(index=target)["count"]) == len(records), "documents missing or doubled"
        writes = metric(port, "fluxgate_sink_write_seconds_count")
        write_ms = 1000 * metric(port, "fluxgate_sink_write_seconds_sum") / max(writes, 1)
    finally:
        process.terminate()
        process.wait(60)
        es.close()
        cleanup(stack.elasticsearch_url, target)
    assert process.returncode == 0, f"exit {process.returncode}; see {log}"
    return {
        "wall_s": round(wall, 3),
        "records_per_s": round(len(records) / wall),
        "persister_cpu_s": round(cpu, 2),
        "persister_us_cpu_per_record": micros_per(cpu, len(records)),
        "writes": int(writes),
        "mean_write_ms": round(write_ms, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000, help="aggregates per leg")
    parser.add_argument("--devices", type=int, default=1000, help="devices (documents per window minute)")
    parser.add_argument("--batch", type=int, default=1000, help="bulk size of both legs (the persister's batch_size)")
    args = parser.parse_args()

    from fluxgate_stack import ensure_up

    stack_up()
    stack = ensure_up(["kafka", "registry", "elasticsearch"])
    records = aggregates(args.records, args.devices)
    log = ROOT / "bench-results" / "elasticsearch-persister.log"
    log.parent.mkdir(exist_ok=True)
    base = baseline(stack.elasticsearch_url, records, args.batch)
    through = persister(stack, records, args.batch, log)
    report(
        "elasticsearch",
        f"Elasticsearch: {args.records:,} aggregates, bulk size {args.batch}",
        [
            leg("baseline (async_bulk, no Kafka)", base, args.records, "client_cpu_s"),
            leg("persister (Kafka -> ES process)", through, args.records, "persister_cpu_s"),
        ],
        {"throughput_persister_over_baseline": through["records_per_s"] / base["records_per_s"]},
        vars(args),
    )


if __name__ == "__main__":
    main()
