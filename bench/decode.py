"""Avro decoding per record: ``AvroDecoder`` (the compiled reader) next to fastavro, same records, same run.

No server: decoding is CPU alone. Both legs decode the same wire-format records, produced
by the services' own ``AvroEncoder``:

* ``fastavro`` (the floor it replaces): what ``AvroDecoder.decode`` did before, the wire
  header read, then ``fastavro.schemaless_reader`` over a ``BytesIO`` of the body.
* ``compiled``: ``AvroDecoder.decode`` as every service now calls it.
* ``compiled, cold times``: the same, with every timestamp in an 8 s block of its own
  (one record per 100 s) and the remembered blocks forgotten before each pass, so the
  reader's timestamp blocks never hit: its worst case.

``TemperatureAggregate``s come as the aggregator writes them (``--devices`` per window
minute, first and last event times anywhere in the minute); ``SensorReading``s as the
gateways write them (``--rate`` readings per second over ``--devices`` devices, half MQTT
with a topic and a user property, half CoAP with a sequence number). The legs take turns,
``--rounds`` times over ``--records`` records each; CPU is the process's (``process_time``),
the median round quoted. Results: ``bench-results/decode.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import fastavro
from _common import ROOT, LegResult, print_table, write_report

from fluxgate_core.avro_time import forget_blocks
from fluxgate_core.schemas import SENSOR_READING, TEMPERATURE_AGGREGATE, schema_dict
from fluxgate_core.serde import AvroDecoder, AvroEncoder, wire_schema_id

SCHEMA_ID = 1
START_MS = 1_764_000_000_000  # minute-aligned
GOAL_US = 3.0


def aggregates(count: int, devices: int, spacing_ms: int = 60_000) -> list[dict[str, Any]]:
    """Aggregates of ``devices`` devices per window, windows ``spacing_ms`` apart."""
    out = []
    for i in range(count):
        start = START_MS + (i // devices) * spacing_ms
        out.append(
            {
                "device_id": f"device-{i % devices:04d}",
                "metric": "temperature",
                "window_start": start,
                "window_end": start + 60_000,
                "count": 60 + i % 7,
                "min": 15.0 + (i % 200) / 10,
                "max": 25.0 + (i % 200) / 10,
                "mean": 20.0 + (i % 200) / 7,
                "stddev": 1.5 + (i % 13) / 10,
                "first_event_time": start + (i * 7919) % 1000,
                "last_event_time": start + 59_000 + (i * 104_729) % 1000,
                "unit": "Cel",
            }
        )
    return out


def readings(count: int, devices: int, rate: float, spacing_ms: float | None = None) -> list[dict[str, Any]]:
    """Readings as both gateways write them, ``rate`` per second (or ``spacing_ms`` apart)."""
    step = spacing_ms if spacing_ms is not None else 1000 / rate
    out = []
    for i in range(count):
        device, event = f"device-{i % devices:04d}", START_MS + int(i * step)
        mqtt = i % 2 == 0
        out.append(
            {
                "device_id": device,
                "metric": "temperature",
                "value": 15 + (i % 200) / 10,
                "unit": "Cel" if mqtt else None,
                "event_time": event,
                "ingest_time": event + 3 + i % 5,
                "source_protocol": "MQTT" if mqtt else "COAP",
                "source": f"sensors/{device}/temperature" if mqtt else f"coap://10.0.0.{i % 250}:5683/temperature",
                "sequence": None if mqtt else i // devices,
                "attributes": {"site": "lab-1"} if mqtt else {},
            }
        )
    return out


class _Registry:
    """The one call ``AvroDecoder`` makes of the registry client (once per schema id)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema_str = json.dumps(schema)

    def get_schema(self, schema_id: int) -> _Registry:
        return self


def fastavro_decoder(schema: dict[str, Any]) -> Callable[[bytes], Any]:
    """``AvroDecoder.decode`` as it was: the header, then fastavro's reader over a BytesIO."""
    writers = {SCHEMA_ID: fastavro.parse_schema(schema)}

    def decode(data: bytes) -> Any:
        record = fastavro.schemaless_reader(io.BytesIO(data[5:]), writers[wire_schema_id(data)], None)
        if not isinstance(record, dict):
            raise TypeError("not a record")
        return record

    return decode


def cpu_per_record(decode: Callable[[bytes], Any], encoded: list[bytes], cold: bool) -> tuple[float, float]:
    """CPU µs per record and records per wall second of one pass."""
    if cold:
        forget_blocks()  # or the blocks of the previous round would all hit
    cpu, wall = time.process_time(), time.perf_counter()
    for data in encoded:
        decode(data)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / len(encoded) * 1e6, len(encoded) / wall


def run_group(
    name: str, schema_name: str, warm: list[dict[str, Any]], cold: list[dict[str, Any]], rounds: int
) -> list[LegResult]:
    schema = schema_dict(schema_name)
    encoder = AvroEncoder(schema, SCHEMA_ID)
    warm_bytes, cold_bytes = [encoder.encode(r) for r in warm], [encoder.encode(r) for r in cold]
    floor = fastavro_decoder(schema)
    ours = AvroDecoder(_Registry(schema)).decode  # type: ignore[arg-type]
    for data in warm_bytes[:1000] + cold_bytes[:1000]:
        assert ours(data) == floor(data), "the compiled reader must decode what fastavro decodes"
    legs: dict[str, tuple[Callable[[bytes], Any], list[bytes]]] = {
        "fastavro": (floor, warm_bytes),
        "compiled": (ours, warm_bytes),
        "compiled, cold times": (ours, cold_bytes),
    }
    samples: dict[str, list[tuple[float, float]]] = {leg: [] for leg in legs}
    for _ in range(rounds):  # the legs take turns, so a drift of the machine's speed hits all alike
        for leg, (decode, encoded) in legs.items():
            samples[leg].append(cpu_per_record(decode, encoded, cold="cold" in leg))
    return [
        LegResult(
            name,
            leg,
            statistics.median(rate for _, rate in runs),
            round(statistics.median(us for us, _ in runs), 3),
            {"min_us": round(min(us for us, _ in runs), 3), "max_us": round(max(us for us, _ in runs), 3)},
        )
        for leg, runs in samples.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50_000, help="records per leg and round")
    parser.add_argument("--rounds", type=int, default=7, help="passes of each leg, taking turns")
    parser.add_argument("--devices", type=int, default=1000, help="devices (aggregates per window minute)")
    parser.add_argument("--rate", type=float, default=5000, help="readings per second of the reading stream")
    args = parser.parse_args()
    n = args.records
    legs = run_group(
        "TemperatureAggregate",
        TEMPERATURE_AGGREGATE,
        aggregates(n, args.devices),
        aggregates(n, 1, spacing_ms=100_000),
        args.rounds,
    )
    legs += run_group(
        "SensorReading",
        SENSOR_READING,
        readings(n, args.devices, args.rate),
        readings(n, args.devices, args.rate, spacing_ms=100_000),
        args.rounds,
    )
    by = {(leg.group, leg.name): leg.cpu_us for leg in legs}
    ratios: dict[str, float] = {}
    for group in ("TemperatureAggregate", "SensorReading"):
        ratios[f"{group}_compiled_over_fastavro"] = by[(group, "compiled")] / by[(group, "fastavro")]
        ratios[f"{group}_cold_over_fastavro"] = by[(group, "compiled, cold times")] / by[(group, "fastavro")]
        ratios[f"{group}_compiled_us_over_goal_{GOAL_US:g}us"] = by[(group, "compiled")] / GOAL_US
    title = "Avro decode: compiled reader vs fastavro"
    print_table(
        title,
        ["record", "leg", "records/s", "CPU µs/record", "min", "max"],
        [[leg.group, leg.name, leg.per_second, leg.cpu_us, leg.extra["min_us"], leg.extra["max_us"]] for leg in legs],
    )
    for key, value in ratios.items():
        print(f"{key}: {value:.3f}")
    settings = {"records": n, "rounds": args.rounds, "devices": args.devices, "rate": args.rate}
    paths = write_report("decode", title, "record", legs, ratios, settings)
    print("results: " + ", ".join(str(path.relative_to(ROOT)) for path in paths))


if __name__ == "__main__":
    main()
