"""Aggregates/s from Kafka into a Hazelcast ringbuffer through ``fluxgate-hazelcast-persister``
(the real service, as a process) next to a baseline, in the same run, that writes the same
values with the same client library in a plain loop (``Ringbuffer.add_all`` of 1000, no Kafka).

* ``baseline``: N ``TemperatureAggregate`` values (the JSON the persister would write) encoded and added
  with the asyncio client's ``add_all`` in chunks of the batch size; timed from the first call
  to the last answer.
* ``floor``: the same N aggregates, Avro wire format, produced to a fresh topic (4 partitions)
  first; read from it and decoded by ``fluxgate_core``'s consumer in this process, nothing
  else. No persister can beat it: it is what each one does before its store sees a record.
* ``direct``: the same read and decode, then each batch encoded and added as the persister
  does it (its own ``json_documents`` and ``add_all_json_request``), in a plain loop
  with nothing of the runtime (no routing, no batches per partition, no offset record,
  no commits, no error policy): the least a JSON-writing persister in Python can cost.
  Above the floor, it is the store's share; the persister above it, the runtime's.
* ``persister x1``, ``x2``: one, then two persister processes in one consumer group read the
  same topic; timed from all ready until the group has committed all N (no polling of the
  store; the written counters may count a record twice across a rebalance, see
  ``persister``); the ringbuffer's size is checked once at the end.

The member: ``--member``/``--cluster`` (default: the local stack's, else 127.0.0.1:5701/dev).
Each leg writes its own fresh ringbuffer, destroyed afterwards. Results: ``bench-results/hazelcast.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from _common import ROOT, cpu_seconds, micros_per, stack_up
from _persisters import aggregates, leg, metric, persister_env, produced, report, start_persister

# This script's own name is the client's: with bench/ first on sys.path, ``import hazelcast`` would import it.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from fluxgate_testing import free_port  # noqa: E402
from hazelcast.asyncio import HazelcastClient  # noqa: E402
from hazelcast.core import HazelcastJsonValue  # noqa: E402
from hazelcast.protocol.codec import ringbuffer_add_all_codec  # noqa: E402
from hazelcast.proxy.ringbuffer import OVERFLOW_POLICY_OVERWRITE  # noqa: E402

from fluxgate_core.collector import tune_collector  # noqa: E402
from fluxgate_core.consumer import RecordConsumer  # noqa: E402
from fluxgate_core.serde import AvroDecoder  # noqa: E402
from fluxgate_hazelcast_persister.values import add_all_json_request, json_documents, to_json  # noqa: E402
from fluxgate_sink.kcql import parse  # noqa: E402


def kcql(target: str, topic: str) -> str:
    return f"INSERT INTO {target} SELECT * FROM {topic} STOREAS RING_BUFFER WITHFORMAT JSON"  # noqa: S608


async def _client(member: str, cluster: str) -> Any:
    return await HazelcastClient.create_and_start(cluster_members=[member], cluster_name=cluster)


def baseline(member: str, cluster: str, records: list[dict[str, Any]], batch: int) -> dict[str, Any]:
    target = f"bench-base-{uuid.uuid4().hex[:6]}"
    (statement,) = parse(kcql(target, "unused"))

    async def run() -> float:
        client = await _client(member, cluster)
        try:
            ringbuffer = await client.get_ringbuffer(target)
            began = time.perf_counter()
            for start in range(0, len(records), batch):  # the same JSON the sink makes, in the loop
                chunk = records[start : start + batch]
                await ringbuffer.add_all([HazelcastJsonValue(to_json(statement.project(r))) for r in chunk])
            wall = time.perf_counter() - began
            assert await ringbuffer.size() == min(len(records), await ringbuffer.capacity())
            await ringbuffer.destroy()
            return wall
        finally:
            await client.shutdown()

    cpu = os.times()
    wall = asyncio.run(run())
    used = (os.times().user - cpu.user) + (os.times().system - cpu.system)
    return {"wall_s": round(wall, 3), "records_per_s": round(len(records) / wall), "client_cpu_s": round(used, 2)}


def _reader(stack: Any, topic: str) -> RecordConsumer:
    config = {"bootstrap.servers": stack.bootstrap, "group.id": f"bench-floor-{uuid.uuid4().hex[:6]}"}
    config |= {"auto.offset.reset": "earliest", "enable.auto.commit": False}
    return RecordConsumer(config, [topic], AvroDecoder(SchemaRegistryClient({"url": stack.registry_url})))


def direct(stack: Any, member: str, cluster: str, topic: str, count: int, batch: int) -> dict[str, Any]:
    """The floor, plus each batch encoded and added the way the persister's sink does it, in a
    plain loop: no runtime around it (see the module)."""
    target = f"bench-direct-{uuid.uuid4().hex[:6]}"

    async def run() -> tuple[float, float]:
        client = await _client(member, cluster)
        consumer = _reader(stack, topic)
        try:
            ringbuffer = await client.get_ringbuffer(target)
            seen, began, cpu = 0, 0.0, os.times()
            while seen < count:
                records = consumer.poll_batch(batch, 1.0)
                if records and not seen:
                    began, cpu = time.perf_counter(), os.times()
                documents = json_documents([record.record or {} for record in records])
                if documents:
                    request = add_all_json_request(target, documents, OVERFLOW_POLICY_OVERWRITE)
                    await ringbuffer._invoke(request, ringbuffer_add_all_codec.decode_response)
                seen += len(records)
            wall = time.perf_counter() - began
            used = (os.times().user - cpu.user) + (os.times().system - cpu.system)
            assert await ringbuffer.size() == min(count, await ringbuffer.capacity())
            await ringbuffer.destroy()
            return wall, used
        finally:
            consumer.close()
            await client.shutdown()

    wall, used = asyncio.run(run())
    return {"wall_s": round(wall, 3), "records_per_s": round(count / wall), "direct_cpu_s": round(used, 3)}


def floor(stack: Any, topic: str, count: int) -> dict[str, Any]:
    """What every persister does before its store sees a record: read it from Kafka and decode
    it (``fluxgate_core``'s consumer and Avro decoder, in this process, nothing else)."""
    consumer = _reader(stack, topic)
    try:
        seen, began, cpu = 0, 0.0, os.times()
        while seen < count:
            batch = consumer.poll_batch(2000, 1.0)
            if batch and not seen:  # from the first record: joining the group is not reading
                began, cpu = time.perf_counter(), os.times()
            assert all(record.record is not None for record in batch)
            seen += len(batch)
        wall = time.perf_counter() - began
    finally:
        consumer.close()
    used = (os.times().user - cpu.user) + (os.times().system - cpu.system)
    return {
        "wall_s": round(wall, 3),
        "records_per_s": round(count / wall),
        "us_cpu_per_record": micros_per(used, count),
    }


def persister(
    stack: Any, member: str, cluster: str, topic: str, count: int, batch: int, instances: int, log: Path
) -> dict[str, Any]:
    """``instances`` persister processes in one consumer group, timed from all ready until the
    group has committed all ``count`` records."""
    target = f"bench-hz-{uuid.uuid4().hex[:6]}"
    group = f"bench-{target}"
    processes = [
        _start(stack, member, cluster, topic, target, group, batch, port, log)
        for port in [free_port() for _ in range(instances)]
    ]
    ports = [port for _, port in processes]
    try:
        while not all(_answers(port) for port in ports):  # set up and consuming: the clock starts
            assert all(p.poll() is None for p, _ in processes), f"a persister exited; see {log}"
            time.sleep(0.01)
        began, cpu_before = time.perf_counter(), sum(cpu_seconds(p.pid) for p, _ in processes)
        # Done when the group has committed every record: the written counters alone may count a
        # record twice (after a rebalance the new owner finds it in the offset record, skips it,
        # and counts it written), which stopped the two-process leg ~1000 records early.
        while (done := committed(stack.bootstrap, group, topic)) < count:
            assert all(p.poll() is None for p, _ in processes), f"a persister exited; see {log}"
            assert time.perf_counter() - began < 600, f"{done} of {count} after 600 s; see {log}"
            time.sleep(0.1)  # each look renders every metric in the persister: not too often
        wall = time.perf_counter() - began
        cpu = sum(cpu_seconds(p.pid) for p, _ in processes) - cpu_before
        writes = sum(metric(port, "fluxgate_sink_write_seconds_count") for port in ports)
        write_ms = 1000 * sum(metric(port, "fluxgate_sink_write_seconds_sum") for port in ports) / max(writes, 1)
    finally:
        for process, _ in processes:
            process.terminate()
        for process, _ in processes:
            process.wait(60)
    asyncio.run(_check_and_drop(member, cluster, target, count))
    assert all(p.returncode == 0 for p, _ in processes), f"exit {[p.returncode for p, _ in processes]}; see {log}"
    return {
        "instances": instances,
        "wall_s": round(wall, 3),
        "records_per_s": round(count / wall),
        "persister_cpu_s": round(cpu, 2),
        "persister_us_cpu_per_record": micros_per(cpu, count),
        "writes": int(writes),
        "mean_write_ms": round(write_ms, 1),
    }


def committed(bootstrap: str, group: str, topic: str) -> int:
    """Records of ``topic`` the group has committed (its offsets summed over the partitions)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        offsets = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        return sum(max(tp.offset, 0) for tp in offsets)
    finally:
        consumer.close()


def _start(
    stack: Any, member: str, cluster: str, topic: str, target: str, group: str, batch: int, port: int, log: Path
) -> tuple[subprocess.Popen[bytes], int]:
    store = {"FLUXGATE_HZ_HAZELCAST__MEMBERS": json.dumps([member]), "FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME": cluster}
    env = persister_env(
        "FLUXGATE_HZ_", stack, port=port, kcql=kcql(target, topic), batch=batch, group=group, topic=topic, store=store
    )
    return start_persister("fluxgate_hazelcast_persister", env, log), port


async def _check_and_drop(member: str, cluster: str, target: str, count: int) -> None:
    client = await _client(member, cluster)
    try:
        ringbuffer = await client.get_ringbuffer(target)
        size, capacity = int(await ringbuffer.size()), int(await ringbuffer.capacity())
        await ringbuffer.destroy()
        assert size == min(count, capacity), f"ringbuffer holds {size} (capacity {capacity})"
    finally:
        await client.shutdown()


def _answers(port: int) -> bool:
    """/readyz answers 200: the sink is set up and consuming."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000, help="aggregates per leg")
    parser.add_argument("--devices", type=int, default=1000, help="devices (values per window minute)")
    parser.add_argument(
        "--batch", type=int, default=1000, help="add_all size of both legs (the persister's batch_size)"
    )
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic (two instances split them)")
    parser.add_argument("--member", default=None, help="host:port of a member (default: the local stack's)")
    parser.add_argument("--cluster", default=None, help="cluster name (default: the local stack's; with --member, dev)")
    args = parser.parse_args()

    from fluxgate_stack import ensure_up

    stack_up()
    stack = ensure_up(["kafka", "registry"])
    if args.member is None:
        local = ensure_up(["hazelcast"])
        member, cluster = local.hazelcast_address, args.cluster or local.hazelcast_cluster
    else:
        member, cluster = args.member, args.cluster or "dev"
    records = aggregates(args.records, args.devices)
    log = ROOT / "bench-results" / "hazelcast-persister.log"
    log.parent.mkdir(exist_ok=True)
    base = baseline(member, cluster, records, args.batch)
    topic = produced(stack, records, args.partitions)
    # As every service does once it is built (fluxgate_core.lifecycle): without it, this
    # process's collector also walks the legs' source data again and again, which the
    # services never hold, and the floor would count that as reading.
    tune_collector()
    least = floor(stack, topic, len(records))
    straight = direct(stack, member, cluster, topic, len(records), args.batch)
    legs = [persister(stack, member, cluster, topic, len(records), args.batch, n, log) for n in (1, 2)]
    least["floor_cpu_s"] = least["us_cpu_per_record"] * len(records) / 1e6
    rate = {
        name: result["records_per_s"]
        for name, result in (("base", base), ("floor", least), ("x1", legs[0]), ("x2", legs[1]))
    }
    cpu = {
        "floor": least["floor_cpu_s"],
        "direct": straight["direct_cpu_s"],
        "x1": legs[0]["persister_cpu_s"],
    }
    report(
        "hazelcast",
        f"Hazelcast ringbuffer: {args.records:,} aggregates, add_all of {args.batch}, {args.partitions} partitions",
        [
            leg("baseline (add_all loop, no Kafka)", base, len(records), "client_cpu_s"),
            leg("floor (Kafka read + Avro decode only)", least, len(records), "floor_cpu_s"),
            leg("direct (floor + encode + add_all, no runtime)", straight, len(records), "direct_cpu_s"),
            leg("persister x1 (Kafka -> HZ)", legs[0], len(records), "persister_cpu_s"),
            leg("persister x2 (Kafka -> HZ)", legs[1], len(records), "persister_cpu_s"),
        ],
        {
            "throughput_persister_over_baseline": rate["x1"] / rate["base"],
            "throughput_floor_over_baseline": rate["floor"] / rate["base"],
            "throughput_persister_over_floor": rate["x1"] / rate["floor"],
            "throughput_x2_over_x1": rate["x2"] / rate["x1"],
            "cpu_direct_over_floor": cpu["direct"] / cpu["floor"],
            "cpu_persister_over_floor": cpu["x1"] / cpu["floor"],
            "cpu_persister_over_direct": cpu["x1"] / cpu["direct"],
        },
        vars(args),
    )


if __name__ == "__main__":
    main()
