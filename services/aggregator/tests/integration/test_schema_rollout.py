"""A gateway rolled out with a new, compatible SensorReading (issue 36 §2): the batch that
first meets its schema id asks the registry then, so none of its readings is dead-lettered,
mixed with readings of the old version or not, and while the registry is unreachable the
batch fails and is replayed instead of dead-lettering them. An id the registry does not
know under the input subject still goes to the dead-letter topic with the reason."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from aggregator_reference import assert_aggregate_equal, by_window, expected_aggregates, reading
from fluxgate_testing import consume

from fluxgate_aggregator.settings import WindowSettings
from fluxgate_core.deadletter import REASON
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder, register, value_subject

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
S = 1_000
# Never within a test: the supervisor's periodic look at the registry must not be what saves them.
NO_REFRESH = 3600.0


class FlakyRegistry:
    """The registry client, its schema listing refused while ``down`` is set (a registry
    restarting or out of reach), as the connection error the client would raise."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.down = threading.Event()
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def get_versions(self, subject: str) -> Any:
        if self.down.is_set():
            self.refused += 1
            raise ConnectionError("registry unreachable (test)")
        return self._client.get_versions(subject)


def register_v2(registry: Any, topic: str) -> AvroEncoder:
    """SensorReading v2: v1 plus an optional ``firmware`` (BACKWARD compatible), registered now."""
    newer = schema_dict(SENSOR_READING)
    newer["fields"] = [*newer["fields"], {"name": "firmware", "type": ["null", "string"], "default": None}]
    return AvroEncoder(newer, register(registry, value_subject(topic), json.dumps(newer), "BACKWARD"))


def mixed_rollout(devices: Any, v2: AvroEncoder) -> list[dict[str, Any]]:
    """20 readings of d1 written with v2 right after its registration, interleaved with d2's
    still written with v1, then a v1 closer: every window of [0, 30) s closes. The readings
    as the reader schema sees them (v2's extra field dropped)."""
    upgraded = [reading("d1", BASE_MS + 2 * S + t * 1_300, 20.0 + t * 0.5) for t in range(20)]
    old = [reading("d2", BASE_MS + 2 * S + t * 2_600, 30.0 - t) for t in range(10)]
    for index, record in enumerate(upgraded):
        devices.send_raw([v2.encode({**record, "firmware": "2.1"})], key=b"d1")
        if index % 2:
            devices.send([old[index // 2]])
    devices.send([reading("d9", BASE_MS + 40 * S, 0.0)])
    return [*upgraded, *old]


def started_on_v1(devices: Any, settings_for: Any, run_job: Any, registry: Any = None) -> tuple[Any, list[Any]]:
    """A job whose first batch was decoded with v1 only, as when it started before the rollout."""
    first = [reading("d1", BASE_MS + 1 * S, 19.0), reading("d2", BASE_MS + 1 * S, 31.0)]
    devices.send(first)
    settings = settings_for(WindowSettings(size="10 seconds", watermark="5 seconds"), schema_refresh_seconds=NO_REFRESH)
    job = run_job(settings, registry)
    job.wait_for_watermark(BASE_MS - 4 * S)
    return job, first


def assert_windows_exact(read_aggregates: Any, topic: str, readings: list[dict[str, Any]]) -> None:
    want = expected_aggregates(readings, 10 * S, 10 * S)
    got = by_window(read_aggregates(topic, expected=len(want)))
    assert set(got) == set(want), f"missing {set(want) - set(got)}, unexpected {set(got) - set(want)}"
    for key, records in got.items():
        assert len(records) == 1, f"window {key} emitted {len(records)} times"
        assert_aggregate_equal(records[0], want[key])


def test_a_compatible_writer_schema_registered_mid_run_loses_no_reading(
    stack: Any,
    registry_client: Any,
    topics: Any,
    devices: Any,
    settings_for: Any,
    run_job: Any,
    read_aggregates: Any,
) -> None:
    job, first = started_on_v1(devices, settings_for, run_job)
    v2 = register_v2(registry_client, topics.input)
    rollout = mixed_rollout(devices, v2)
    # An id the registry does not hold under the input subject is still a dead letter.
    body = devices.encoder.encode(reading("d3", BASE_MS + 3 * S, 5.0))[5:]
    devices.send_raw([b"\x00\x7f\xff\xff\xff" + body])
    devices.send([reading("d9", BASE_MS + 41 * S, 0.0)])

    assert_windows_exact(read_aggregates, topics.output, [*first, *rollout])
    dead = consume(stack.bootstrap, topics.deadletter, expected=1)
    reasons = [c.header(REASON).decode() for c in dead]
    assert reasons == [f"unknown schema id 2147483647: not registered under {value_subject(topics.input)}"]
    job.assert_running()
    assert job.state.dead_letters == 1
    assert job.supervisor.restarts == 0, "a new schema needs no restart of the query"


def test_an_unreachable_registry_fails_the_batch_and_its_replay_loses_no_reading(
    registry_client: Any, topics: Any, devices: Any, settings_for: Any, run_job: Any, read_aggregates: Any
) -> None:
    flaky = FlakyRegistry(registry_client)
    job, first = started_on_v1(devices, settings_for, run_job, flaky)
    flaky.down.set()
    v2 = register_v2(registry_client, topics.input)
    rollout = mixed_rollout(devices, v2)

    deadline = time.monotonic() + 90
    while job.supervisor.restarts == 0:
        assert time.monotonic() < deadline, f"the batch went on without the registry ({flaky.refused} refusals)"
        assert job.state.dead_letters == 0, "good readings dead-lettered while the registry was away"
        time.sleep(0.2)
    assert flaky.refused > 1, "asked the registry again before failing the batch"
    flaky.down.clear()

    assert_windows_exact(read_aggregates, topics.output, [*first, *rollout])
    job.assert_running()
    assert job.state.dead_letters == 0
