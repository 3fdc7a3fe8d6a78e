"""What the persister benchmarks share: the aggregates they write, the topic that holds them, the
persister process under test and its own counts."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import ROOT, LegResult, micros_per, print_table, write_report
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from fluxgate_testing import unique_topic
from fluxgate_testing.aggregates import temperature_aggregate

from fluxgate_core.schemas import TEMPERATURE_AGGREGATE, schema_dict, schema_text
from fluxgate_core.serde import AvroEncoder

START = datetime(2024, 5, 1, 22, 0, tzinfo=UTC)  # windows over two days: two daily indices, two partitions


def aggregates(count: int, devices: int) -> list[dict[str, Any]]:
    """``count`` TemperatureAggregates, ``devices`` per window minute."""
    out = []
    for i in range(count):
        start = START + timedelta(minutes=i // devices)
        spread = (i % 200) / 10
        out.append(
            temperature_aggregate(
                f"d{i % devices}", start, count=60, min=15.0 + spread, max=25.0 + spread, mean=20.0 + spread,
                stddev=1.5, last_event_time=start + timedelta(seconds=59),
            )
        )  # fmt: skip
    return out


def produced(stack: Any, records: list[dict[str, Any]], partitions: int = 3) -> str:
    """A fresh topic holding ``records`` as Avro TemperatureAggregates, keyed by device; every
    leg reads it from the start."""
    topic = unique_topic("bench.aggregates", stack.bootstrap, partitions=partitions)
    registry = SchemaRegistryClient({"url": stack.registry_url})
    encoder = AvroEncoder.registered(
        registry, topic, schema_text(TEMPERATURE_AGGREGATE), schema_dict(TEMPERATURE_AGGREGATE)
    )
    producer = Producer({"bootstrap.servers": stack.bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for record in records:
        producer.produce(topic, key=record["device_id"].encode(), value=encoder.encode(record))
        producer.poll(0)
    assert producer.flush(60) == 0
    return topic


def persister_env(
    prefix: str, stack: Any, *, port: int, kcql: str, batch: int, group: str, topic: str, store: Mapping[str, str]
) -> dict[str, str]:
    """The environment of a persister whose settings take ``prefix`` (``FLUXGATE_ES_``): this
    process's without that prefix's variables, the stack's Kafka and registry, its HTTP port,
    the sink's KCQL, batch, group and dead-letter topic (``<topic>.dlq``), then the ``store``'s
    own; last, each ``BENCH_<service>_*`` variable of this process as its ``FLUXGATE_`` twin."""
    bench_prefix = prefix.replace("FLUXGATE_", "BENCH_", 1)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(prefix)},
        f"{prefix}KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
        f"{prefix}REGISTRY__URL": stack.registry_url,
        f"{prefix}HTTP__HOST": "127.0.0.1",
        f"{prefix}HTTP__PORT": str(port),
        f"{prefix}SINK__KCQL": kcql,
        f"{prefix}SINK__BATCH_SIZE": str(batch),
        f"{prefix}SINK__GROUP_ID": group,
        f"{prefix}SINK__DEADLETTER_TOPIC": f"{topic}.dlq",
        **store,
        **{k.replace("BENCH_", "FLUXGATE_"): v for k, v in os.environ.items() if k.startswith(bench_prefix)},
    }


def start_persister(module: str, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``python -m <module>`` with ``env``, its output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", module], env=env, stdout=out, stderr=subprocess.STDOUT)


def metric(port: int, name: str, missing: float = 0.0) -> float:
    """The sum of metric ``name``'s samples in the persister on ``port``; ``missing`` before it
    answers or shows the metric. Read every 100-200 ms at most: each read renders every metric."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            text = reply.read().decode()
    except OSError:
        return missing
    samples = [line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#")]
    found = [float(value) for key, value in samples if key.split("{")[0] == name]
    return sum(found) if found else missing


def written(port: int) -> float:
    """Records the persister's store confirmed so far."""
    return metric(port, "fluxgate_sink_records_written_total")


def leg(name: str, result: dict[str, Any], count: int, cpu_key: str) -> LegResult:
    """One leg's result dict (``records_per_s``, ``wall_s`` and the CPU seconds under ``cpu_key``) for the report."""
    extra = {key: value for key, value in result.items() if isinstance(value, int | float) and key != "records_per_s"}
    return LegResult("", name, result["records_per_s"], micros_per(result[cpu_key], count), extra)


def report(name: str, title: str, legs: list[LegResult], ratios: dict[str, float], settings: dict[str, Any]) -> None:
    """The table on stdout, and ``bench-results/<name>.{json,md,png}``."""
    print_table(
        title,
        ["leg", "records/s", "CPU µs/record"],
        [[item.name, item.per_second, item.cpu_us] for item in legs],
    )
    for key, value in ratios.items():
        print(f"{key}: {value:.3f}")
    paths = write_report(name, title, "record", legs, ratios, settings)
    print("results: " + ", ".join(str(path.relative_to(ROOT)) for path in paths))
