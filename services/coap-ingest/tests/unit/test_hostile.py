"""The hostile-input table through coap-ingest's converter, each case under its Content-Format."""

from __future__ import annotations

import io

import fastavro
import pytest
from fluxgate_testing.hostile import CONTENT_FORMATS, DEVICE, METRIC, NOW, Case, cases

from fluxgate_coap_ingest.convert import NotificationConverter
from fluxgate_coap_ingest.resource_settings import ResourceSettings
from fluxgate_core.errors import InvalidReading, PayloadError
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder

NOW_MS = 1_700_000_100_000
SCHEMA = schema_dict(SENSOR_READING)
RESOURCE = ResourceSettings(uri="coap://127.0.0.1/sensors/x", device_id=DEVICE, metric=METRIC)


def readings(case: Case) -> list[tuple[object, ...]]:
    converter = NotificationConverter(RESOURCE, AvroEncoder(SCHEMA, schema_id=1), limits=case.limits)
    parsed = fastavro.parse_schema(SCHEMA)
    out = []
    for record in converter.convert(RESOURCE.uri, case.payload, CONTENT_FORMATS.get(case.fmt), NOW_MS):
        r: dict[str, object] = fastavro.schemaless_reader(io.BytesIO(record.value[5:]), parsed, None)  # type: ignore[assignment]
        when = round(r["event_time"].timestamp() * 1000)  # type: ignore[attr-defined]
        out.append((r["device_id"], r["metric"], r["value"], r["unit"], when))
    return out


@pytest.mark.parametrize("case", cases(), ids=lambda case: case.name)
def test_hostile_payload(case: Case) -> None:
    if case.accepted:
        assert readings(case) == [(*r[:4], NOW_MS if r[4] == NOW else r[4]) for r in case.readings]
        return
    with pytest.raises((PayloadError, InvalidReading)) as error:
        readings(case)
    assert case.reason in str(error.value)
