"""A consumer whose prefetch is capped, with librdkafka's full-queue backoff and with ours, same topics, same run.

The persisters cap librdkafka's prefetch at 4 MiB of payload (``SINK__PREFETCH_KBYTES``),
the console at 4 MiB too. librdkafka fetches again for a partition whose queue was full only
after ``fetch.queue.backoff.ms``, 1 s by default, so a consumer that drains its capped queue
in less than that waits for the rest of the second. Legs, for records of each ``--sizes``:

* ``backoff 1000 ms`` (the floor): ``capped_prefetch`` with librdkafka's own backoff put back.
* ``capped_prefetch``: what ``fluxgate_core.consumer.capped_prefetch`` gives (10 ms).

Each size has a fresh topic of 3 partitions holding about ``--megabytes`` of records. A leg
is a ``RecordConsumer`` in a new group reading it all from the beginning, as fast as it can
(no decoder, nothing done with the records): the rate is Kafka to the caller, the ceiling of
any persister's. CPU is the process's (librdkafka's threads included). The ``idle at cap``
column is the CPU the consumer costs while its queue is full and nobody polls (3 s), the
price of waking every 10 ms. Legs take turns, ``--rounds`` times; the median round is quoted.
Results: ``bench-results/prefetch.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

from _common import LegResult, print_table, stack_up, write_report
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from fluxgate_core.consumer import RecordConsumer, capped_prefetch

PREFETCH_KBYTES = 4096
LIBRDKAFKA_BACKOFF_MS = 1000
IDLE_S = 3.0
POLL_S = 0.01
LEGS = {f"backoff {LIBRDKAFKA_BACKOFF_MS} ms": LIBRDKAFKA_BACKOFF_MS, "capped_prefetch": None}


def fill(bootstrap: str, size: int, count: int) -> str:
    """A fresh topic of 3 partitions holding ``count`` records of ``size`` bytes."""
    topic = f"bench-prefetch-{size}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, key=str(i).encode())
                break
            except BufferError:  # the producer's own queue is full: let it send
                producer.poll(0.1)
    producer.flush()
    return topic


def consumer_config(bootstrap: str, backoff_ms: int | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-prefetch-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        **capped_prefetch(PREFETCH_KBYTES),
    }
    if backoff_ms is not None:
        config["fetch.queue.backoff.ms"] = backoff_ms
    return config


def read_all(config: dict[str, Any], topic: str, count: int) -> tuple[float, float]:
    """Seconds and CPU seconds to read ``count`` records, from the first record returned."""
    consumer = RecordConsumer(config, [topic])
    try:
        got, started, cpu = 0, 0.0, 0.0
        while got < count:
            # A short wait: a poll returns when it has 2,000 records or its time is up, so a
            # long one would hold the last, partial batch for it.
            batch = consumer.poll_batch(2000, POLL_S)
            if batch and not started:  # the group's join is not the prefetch's doing
                started, cpu = time.monotonic(), time.process_time()
            got += len(batch)
        return time.monotonic() - started, time.process_time() - cpu
    finally:
        consumer.close()


def idle_cpu(config: dict[str, Any], topic: str) -> float:
    """CPU seconds over ``IDLE_S`` while the consumer's queue is full and nobody polls."""
    consumer = RecordConsumer(config, [topic])
    try:
        while not consumer.poll_batch(1, 1.0):
            pass
        time.sleep(1.0)  # the queue fills to the cap
        cpu = time.process_time()
        time.sleep(IDLE_S)
        return time.process_time() - cpu
    finally:
        consumer.close()


def run_size(bootstrap: str, size: int, megabytes: int, rounds: int) -> list[LegResult]:
    count = megabytes * 1_000_000 // size
    topic = fill(bootstrap, size, count)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in LEGS}
    for _ in range(rounds):
        for name, backoff in LEGS.items():
            runs[name].append(read_all(consumer_config(bootstrap, backoff), topic, count))
    legs = []
    for name, backoff in LEGS.items():
        seconds = statistics.median(took for took, _ in runs[name])
        cpu = statistics.median(used for _, used in runs[name])
        idle = idle_cpu(consumer_config(bootstrap, backoff), topic)
        extra = {
            "records": count,
            "seconds": round(seconds, 2),
            "idle at cap, CPU ms/s": round(idle / IDLE_S * 1000, 1),
        }
        legs.append(LegResult(f"{size} B", name, count / seconds, round(cpu / count * 1e6, 2), extra))
    return legs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 2048, 20_480], help="record sizes, bytes")
    parser.add_argument("--megabytes", type=int, default=100, help="payload per topic")
    parser.add_argument("--rounds", type=int, default=3, help="passes of each leg, taking turns")
    args = parser.parse_args()
    bootstrap = stack_up().bootstrap
    legs = [leg for size in args.sizes for leg in run_size(bootstrap, size, args.megabytes, args.rounds)]
    floor = {leg.group: leg.per_second for leg in legs if leg.name != "capped_prefetch"}
    ratios = {
        f"{leg.group}: capped_prefetch / backoff {LIBRDKAFKA_BACKOFF_MS} ms": leg.per_second / floor[leg.group]
        for leg in legs
        if leg.name == "capped_prefetch"
    }
    rows = [[leg.group, leg.name, round(leg.per_second), leg.cpu_us, *leg.extra.values()] for leg in legs]
    print_table(
        "prefetch capped at 4 MiB", ["size", "leg", "records/s", "CPU µs/record", "records", "s", "idle CPU ms/s"], rows
    )
    settings = {"prefetch KiB": PREFETCH_KBYTES, "megabytes per topic": args.megabytes, "rounds": args.rounds}
    title = "A consumer capped at 4 MiB of prefetch: librdkafka's full-queue backoff against capped_prefetch's"
    for path in write_report("prefetch", title, "record", legs, ratios, settings):
        print(path)


if __name__ == "__main__":
    main()
