"""The compiled writer remembers a long field's last encoding: one encoder, many records."""

import io
from typing import Any

import fastavro
from fluxgate_testing.avro_spec import spec_long
from hypothesis import given
from hypothesis import strategies as st

from fluxgate_core.avro_fast import zigzag
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder

# Few distinct values, so consecutive records repeat them (the remembered case) and change them.
_TIMES = st.sampled_from([0, 1, -1, 63, 64, 1_700_000_000_000, 2**63 - 1, -(2**63)])
_READINGS = st.fixed_dictionaries(
    {
        "device_id": st.sampled_from(["d1", "d2"]),
        "metric": st.just("temperature"),
        "value": st.floats(allow_nan=False),
        "unit": st.none() | st.just("Cel"),
        "event_time": _TIMES,
        "ingest_time": _TIMES,
        "source_protocol": st.just("MQTT"),
        "source": st.just("sensors/d1/temperature"),
        "sequence": st.none() | _TIMES,
        "attributes": st.just({}),
    }
)


@given(st.lists(_READINGS, min_size=2, max_size=20))
def test_one_encoder_matches_fastavro_for_every_record_of_a_sequence(readings: list[dict[str, Any]]) -> None:
    encoder = AvroEncoder(schema_dict(SENSOR_READING), schema_id=7)
    parsed = fastavro.parse_schema(schema_dict(SENSOR_READING))
    for reading in readings:
        reference = io.BytesIO()
        fastavro.schemaless_writer(reference, parsed, reading)
        assert encoder.encode(reading) == b"\x00\x00\x00\x00\x07" + reference.getvalue()


@given(_READINGS)
def test_a_remembered_long_is_not_reused_for_a_value_that_only_equals_it(base: dict[str, Any]) -> None:
    encoder = AvroEncoder(schema_dict(SENSOR_READING), schema_id=7)
    reading = {**base, "ingest_time": 1}
    first = encoder.encode(reading)
    # True == 1 and 1.0 == 1, but neither is a long: fastavro decides what they become.
    for other in (True, 1.0):
        reference = io.BytesIO()
        candidate = {**reading, "ingest_time": other}
        fastavro.schemaless_writer(reference, fastavro.parse_schema(schema_dict(SENSOR_READING)), candidate)
        assert encoder.encode(candidate) == b"\x00\x00\x00\x00\x07" + reference.getvalue()
    assert encoder.encode(reading) == first


# Runs of neighbouring values (the remembered high part reused) and jumps between sizes.
_NEAR = st.integers(-(2**63), 2**63 - 1).flatmap(lambda base: st.lists(st.integers(-(2**22), 2**22).map(
    lambda delta: min(max(base + delta, -(2**63)), 2**63 - 1)), min_size=1, max_size=10))  # fmt: skip


@given(st.lists(_NEAR | st.lists(st.integers(-(2**22), 2**22), max_size=5), min_size=1, max_size=5))
def test_zigzag_remembering_the_high_part_matches_the_plain_encoding(runs: list[list[int]]) -> None:
    for value in (value for run in runs for value in run):
        assert zigzag(value) == spec_long(value)
