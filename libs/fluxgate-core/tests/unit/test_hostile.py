"""The hostile-input table through parsing and validation, and any bytes through every parser."""

from __future__ import annotations

import contextlib
import json
import typing

import cbor2
import pytest
from fluxgate_testing.hostile import DEVICE, METRIC, NOW, Case, cases
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxgate_core.errors import InvalidReading, PayloadError
from fluxgate_core.payloads import PayloadFormat, parse_payload
from fluxgate_core.readings import Origin, build_reading

NOW_MS = 1_700_000_100_000
FORMATS = typing.get_args(PayloadFormat)


def outcome(case: Case) -> list[tuple[object, ...]]:
    origin = Origin("MQTT", "sensors/dev-h/temperature", NOW_MS, device_id=DEVICE, metric=METRIC)
    readings = [build_reading(m, origin) for m in parse_payload(case.payload, case.fmt, limits=case.limits)]
    return [(r["device_id"], r["metric"], r["value"], r["unit"], r["event_time"]) for r in readings]


def expected(case: Case) -> list[tuple[object, ...]]:
    return [(*reading[:4], NOW_MS if reading[4] == NOW else reading[4]) for reading in case.readings]


def test_the_table_is_big_and_names_are_unique() -> None:
    names = [case.name for case in cases()]
    assert len(names) >= 200
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("case", cases(), ids=lambda case: case.name)
def test_hostile_input(case: Case) -> None:
    if case.accepted:
        assert outcome(case) == expected(case)
        return
    if case.refused_as_records:  # parsing takes it; each gateway's converter refuses its records
        assert len(outcome(case)) == case.limits.max_readings
        return
    with pytest.raises((PayloadError, InvalidReading)) as error:
        outcome(case)
    assert case.reason in str(error.value)


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=512), fmt=st.sampled_from(FORMATS))
def test_any_bytes_give_readings_or_a_payload_error(payload: bytes, fmt: PayloadFormat) -> None:
    with contextlib.suppress(PayloadError):  # anything else fails the test
        parse_payload(payload, fmt)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(document=JSON_VALUES, fmt=st.sampled_from(FORMATS))
def test_any_json_document_gives_readings_or_a_payload_error(document: object, fmt: PayloadFormat) -> None:
    with contextlib.suppress(PayloadError):  # anything else fails the test
        parse_payload(json.dumps(document).encode(), fmt)


SENML_KEYS = st.sampled_from(["bn", "bt", "bu", "bv", "n", "u", "v", "vs", "vb", "t", "s", "ut", -2, -3, 0, 2, 6])


@settings(max_examples=300, deadline=None)
@given(pack=st.lists(st.dictionaries(SENML_KEYS, JSON_VALUES, max_size=5), max_size=5))
def test_any_senml_cbor_pack_gives_readings_or_a_payload_error(pack: list[dict[object, object]]) -> None:
    with contextlib.suppress(PayloadError):  # anything else fails the test
        parse_payload(cbor2.dumps(pack), "senml-cbor")
