"""A batch decodes each record's body once, with the one writer schema its id names
(:func:`~fluxgate_aggregator.wire.with_reading`): routing filters on the decoded reading
(its metric), and Catalyst copies a projected expression into a filter pushed below it, which
had the same body decoded up to six times a record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from routing_harness import CONTRACTS, RAW, READING_V2_ID, registry, wire
from routing_model import Broken, Reading

from fluxgate_aggregator.ledger import Ledger
from fluxgate_aggregator.micro_batch import routed
from fluxgate_aggregator.settings import AggregatorSettings
from fluxgate_aggregator.wire import framed, with_reading

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def test_each_body_is_decoded_once_by_the_writer_its_id_names(spark: Any, tmp_path: Path) -> None:
    writers = registry()  # v1 and v2: two writers, so two from_avro calls in all
    values = [
        wire(Reading("d1", BASE_MS, 20.0, 1)),
        wire(Reading("d2", BASE_MS, 21.0, 2), frozenset({"d2"})),  # written with v2
        wire(Reading("d3", BASE_MS, 22.0, 3, metric="humidity")),  # another metric: not routed
        b"\x00" + (99).to_bytes(4, "big") + wire(Reading("d4", BASE_MS, 23.0, 4))[5:],  # an id no writer has
        b"\x00" + READING_V2_ID.to_bytes(4, "big") + b"\x02",  # v2's id, a body that does not decode
        b"\x01" + wire(Reading("d5", BASE_MS, 24.0, 5))[1:],  # not the wire format
        wire(Broken(b"x\x00")),
    ]
    frames = framed(spark.createDataFrame([(b"k", v, "t", 0, i) for i, v in enumerate(values)], RAW))
    ledger = Ledger(spark, str(tmp_path / "ledger"), 30_000)
    marks = spark.createDataFrame([], "device_id string, mark_ms long")
    records = routed(
        with_reading(frames, writers, CONTRACTS.reader), AggregatorSettings(), sorted(writers), ledger, marks
    )

    plan = records._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("from_avro(") == len(writers), plan
    rows = records.collect()
    assert sorted(r["device_id"] for r in rows if not r["dead"]) == ["d1", "d2"]
    assert sum(r["dead"] for r in rows) == 4
    assert sorted(r["unknown_id"] for r in rows if r["unknown_id"] is not None) == [99]
