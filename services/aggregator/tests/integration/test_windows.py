"""The job in the shared SparkSession against real Kafka and the registry: exact windows,
duplicates counted once, late readings, dead letters, hopping windows (from a checkpoint a kill left half-written),
a new writer schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aggregator_reference import assert_aggregate_equal, by_window, expected_aggregates, reading
from fluxgate_testing import consume

from fluxgate_aggregator.job import AGGREGATES_CHECKPOINT
from fluxgate_aggregator.settings import WindowSettings
from fluxgate_core.deadletter import REASON, SERVICE
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder, register, value_subject

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: window boundaries fall on whole seconds
S = 1_000


def test_tumbling_windows_exact_with_out_of_order_late_and_malformed(
    stack: Any, topics: Any, devices: Any, settings_for: Any, run_job: Any, read_aggregates: Any
) -> None:
    on_time = [
        reading("d1", BASE_MS + 1 * S, 20.0),
        reading("d1", BASE_MS + 3 * S + 250, 21.5),
        reading("d2", BASE_MS + 2 * S, 30.0),
        reading("d1", BASE_MS + 12 * S, 22.0),
        reading("d1", BASE_MS + 7 * S, 19.25),  # out of order, within the watermark
        reading("d1", BASE_MS + 9 * S + 999, 18.5),  # the window's last millisecond
        reading("d1", BASE_MS + 4 * S, 55.0, metric="humidity", unit="%RH"),  # another metric: ignored
        reading("d2", BASE_MS + 26 * S, 31.75),  # watermark -> 21 s: windows [0,10) and [10,20) close
    ]
    # At-least-once delivery: copies of a reading count once; a different value at the same
    # millisecond, or another sequence number, is another reading.
    numbered = {**reading("d1", BASE_MS + 5 * S, 17.0), "sequence": 1}
    on_time += [
        reading("d1", BASE_MS + 1 * S, 20.0),  # a device resend
        reading("d1", BASE_MS + 3 * S + 250, 21.75),  # same millisecond, another value
        numbered,
        {**numbered, "sequence": 2},
        numbered,  # a redelivery (QoS 1, a gateway restarted before acknowledging)
    ]
    devices.send(on_time)
    job = run_job(settings_for(WindowSettings(size="10 seconds", watermark="5 seconds")))
    first = read_aggregates(topics.output, expected=3)
    assert len(first) == 3, [c.record for c in first]
    job.wait_for_watermark(BASE_MS + 21 * S)

    late = devices.send([reading("d1", BASE_MS + 5 * S, 99.0)])  # its window closed at 10 s < 21 s
    devices.send([reading("d1", BASE_MS + 5 * S, 99.0)])  # ... and resent: late once, not twice
    header = b"\x00" + devices.encoder.schema_id.to_bytes(4, "big")
    devices.send_raw([b"plain text", header + b"\xff\xff\xff", b"\x00\x7f\xff\xff\xff" + late[0][5:]])
    closer = [reading("d2", BASE_MS + 40 * S, 32.0)]  # watermark -> 35 s: [20,30) closes
    devices.send(closer)

    got = by_window(read_aggregates(topics.output, expected=4))
    want = expected_aggregates(on_time, 10 * S, 10 * S)
    assert want[("d1", BASE_MS)]["count"] == 7, "9 records of d1 in [0,10) s, 2 of them copies"
    assert set(got) == set(want) - {("d2", BASE_MS + 40 * S)}
    for key, records in got.items():
        assert len(records) == 1, f"window {key} emitted {len(records)} times"
        assert_aggregate_equal(records[0], want[key])

    late_out = consume(stack.bootstrap, topics.late, expected=1)
    assert [c.value for c in late_out] == late, "the late reading, byte for byte, on the late topic"
    dead = consume(stack.bootstrap, topics.deadletter, expected=3)
    reasons = sorted(c.header(REASON).decode() for c in dead)
    assert [c.header(SERVICE) for c in dead] == [b"aggregator"] * 3, (reasons, [c.value for c in dead])
    assert reasons[0].startswith("Avro body does not decode with schema id"), reasons
    assert reasons[1].startswith("not Confluent wire format"), reasons
    assert reasons[2].startswith("unknown schema id 2147483647"), reasons
    assert sorted(c.value for c in dead) == sorted(
        [b"plain text", header + b"\xff\xff\xff", b"\x00\x7f\xff\xff\xff" + late[0][5:]]
    )
    job.assert_running()
    assert job.supervisor.restarts == 0, "malformed and late records never fail a query"
    assert job.state.late_rows == 1 and job.state.dead_letters == 3


def abandon_first_batch(checkpoints: Path) -> None:
    """What a job killed while writing its first offset log entry leaves behind."""
    offsets = checkpoints / AGGREGATES_CHECKPOINT / "offsets"
    offsets.mkdir(parents=True)
    (offsets / ".0.2b6115e8-153b-4908-b9cc-8d3353f7d622.tmp").touch()
    (offsets / "..0.2b6115e8-153b-4908-b9cc-8d3353f7d622.tmp.crc").touch()


def test_hopping_windows_of_a_non_default_size(
    stack: Any, topics: Any, devices: Any, settings_for: Any, run_job: Any, read_aggregates: Any
) -> None:
    sent = [reading("d1", BASE_MS + t * S, v) for t, v in ((1, 10.0), (11, 12.0), (15, 13.5), (25, 16.0))]
    sent += [reading("d2", BASE_MS + 14 * S, 40.0)]
    closer = reading("d9", BASE_MS + 100 * S, 0.0)  # watermark -> 95 s: every window above closes
    devices.send([*sent, closer])
    settings = settings_for(WindowSettings(size="20 seconds", slide="10 seconds", watermark="5 seconds"))
    abandon_first_batch(Path(settings.checkpoint_dir))
    run_job(settings)

    want = expected_aggregates(sent, 20 * S, 10 * S)
    assert {start - BASE_MS for (device, start) in want if device == "d1"} == {-10 * S, 0, 10 * S, 20 * S}
    got = by_window(read_aggregates(topics.output, expected=len(want)))
    assert set(got) == set(want)
    assert {key: len(records) for key, records in got.items()} == dict.fromkeys(want, 1)
    for key, records in got.items():
        assert_aggregate_equal(records[0], want[key])
    assert [want[("d1", BASE_MS + s * S)]["count"] for s in (-10, 0, 10, 20)] == [1, 3, 3, 1]


def test_a_new_writer_schema_version_is_followed(
    registry_client: Any, topics: Any, devices: Any, settings_for: Any, run_job: Any, read_aggregates: Any
) -> None:
    """A gateway upgraded to a newer SensorReading (an added optional field) registers a
    new version; the supervisor's periodic look learns it, and the job, not restarted,
    aggregates the new records too (the batch that meets an id not learned yet asks the
    registry itself: test_schema_rollout.py)."""
    old = [reading("d1", BASE_MS + 1 * S, 20.0)]
    devices.send(old)
    job = run_job(settings_for(WindowSettings(size="10 seconds", watermark="5 seconds")))

    newer = schema_dict(SENSOR_READING)
    newer["fields"] = [*newer["fields"], {"name": "firmware", "type": ["null", "string"], "default": None}]
    new_id = register(registry_client, value_subject(topics.input), json.dumps(newer), "BACKWARD")
    assert new_id not in job.state.writers.schemas
    job.supervisor.follow_writers()  # what it does every schema_refresh_seconds
    assert new_id in job.state.writers.schemas

    upgraded = AvroEncoder(newer, new_id)
    fresh = [{**reading("d1", BASE_MS + 4 * S, 24.0), "firmware": "2.1"}, reading("d1", BASE_MS + 30 * S, 0.0)]
    devices.send_raw([upgraded.encode(record) for record in fresh], key=b"d1")

    (window,) = by_window(read_aggregates(topics.output, expected=1)).values()
    want = expected_aggregates([*old, reading("d1", BASE_MS + 4 * S, 24.0)], 10 * S, 10 * S)
    assert_aggregate_equal(window[0], want[("d1", BASE_MS)])
    job.assert_running()
    assert job.state.dead_letters == 0
    assert job.supervisor.restarts == 0, "a new writer schema restarts nothing"


def test_a_backlog_at_start_ends_each_reading_counted_or_late_never_both(
    stack: Any, topics: Any, devices: Any, settings_for: Any, run_job: Any, read_aggregates: Any
) -> None:
    """Issue 9's start-up race: readings waiting in Kafka when the job starts, read in many
    micro-batches while the watermark climbs through them. Whatever each reading's fate, it
    is one: counted in exactly the windows it belongs to, or on the late topic (once)."""
    in_order = [
        reading(device, BASE_MS + t * S + 100 * n, 15.0 + n + (t % 7) * 0.25)
        for t in range(40)
        for n, device in enumerate(("d1", "d2", "d3"))
    ]
    # Stragglers 6 s behind the stream (the watermark is 5 s): late or not depending on
    # which batch reads them, which is exactly what counting and the late topic must agree on.
    stragglers = [reading("d1", BASE_MS + (t - 6) * S + 500, 50.0 + t) for t in range(8, 40, 4)]
    backlog = [*in_order[:60], *stragglers[:4], in_order[58], *in_order[60:], *stragglers[4:]]
    really_late = [reading("d2", BASE_MS + 3 * S + 7, 70.0), reading("d3", BASE_MS + 12 * S + 7, 71.0)]
    closer = reading("d9", BASE_MS + 200 * S, 0.0)  # watermark -> 195 s: every window above closes
    sent = [*backlog, *really_late, in_order[-1], closer]  # in_order[-1] again: a resend, within the watermark
    values = devices.send(sent)
    settings = settings_for(WindowSettings(size="10 seconds", watermark="5 seconds"))
    job = run_job(
        settings.model_copy(update={"spark": settings.spark.model_copy(update={"max_offsets_per_trigger": 30})})
    )
    for query in job.state.queries:
        query.processAllAvailable()

    late_values = [c.value for c in consume(stack.bootstrap, topics.late, expected=job.state.late_rows)]
    assert len(set(late_values)) == len(late_values), "each late reading written once"
    by_value = dict(zip(values, sent, strict=True))
    late = [by_value[value] for value in late_values]
    assert all(record in late for record in really_late), late
    counted = [record for record in sent if record not in late and record is not closer]
    want = expected_aggregates(counted, 10 * S, 10 * S)
    got = by_window(read_aggregates(topics.output, expected=len(want)))
    assert set(got) == set(want), f"missing {set(want) - set(got)}, unexpected {set(got) - set(want)}"
    for key, records in got.items():
        assert len(records) == 1, f"window {key} emitted {len(records)} times"
        assert_aggregate_equal(records[0], want[key])
    job.assert_running()
