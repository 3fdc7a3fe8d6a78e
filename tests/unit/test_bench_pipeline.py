"""The end-to-end benchmark's own arithmetic: which windows a step's latency counts, and
the CPU of a process group (the figures its report stands on)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# Appended, not first: bench/ has an elasticsearch.py, which must never shadow the library for
# the tests that share this worker's interpreter (test_schema_evolution failed to import once).
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from pipeline import FirstSeen, Step, group_cpu_seconds, latencies, percentile


def seen_with(windows: dict[tuple[str, int], float]) -> FirstSeen:
    seen = FirstSeen.__new__(FirstSeen)  # only its record of first sightings is read
    seen.seen = {"elasticsearch": dict(windows), "scylla": {}, "hazelcast": {}}
    return seen


def test_latency_counts_only_the_steps_windows_that_closed_while_it_sent() -> None:
    step = Step(100.0, "b-s1-", start=1000.0, end=1060.0)
    windows = {
        ("b-s1-d0", 1_000_000): 1016.5,  # closes at 1015 s (10 s window + 5 s watermark): 1.5 s
        ("b-s1-d1", 1_010_000): 1027.0,  # closes at 1025 s: 2 s
        ("b-s1-d0", 990_000): 1006.0,  # began before the step: its readings are partly another step's
        ("b-s1-d0", 1_050_000): 1070.0,  # closes at 1065 s, after the devices stopped: the watermark waits
        ("b-s0-d0", 1_010_000): 1026.0,  # another step's device
    }
    figures = latencies(step, seen_with(windows), window_ms=10_000, watermark_ms=5_000)
    assert figures == {"elasticsearch": {"p50": 2.0, "p99": 2.0, "windows": 2}}


def test_percentiles_of_an_ordered_list() -> None:
    ordered = [float(n) for n in range(1, 101)]
    assert (percentile(ordered, 50), percentile(ordered, 99), percentile([3.0], 99)) == (51.0, 100.0, 3.0)


BUSY = """
import os, sys, time
if os.fork() == 0:  # a child in the group: its CPU counts too
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    time.sleep(30)
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
time.sleep(0.3)  # the child done too
print("done", flush=True)
time.sleep(30)
"""


def test_cpu_of_a_process_group_counts_every_process_in_it() -> None:
    # Its own session: the group holds only the busy processes, not pytest's other workers.
    busy = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert busy.stdout is not None and busy.stdout.readline() == "done\n"
        used = group_cpu_seconds(busy.pid)
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()
    # 0.3 s + 0.2 s of busy loops and the interpreter starting, less /proc's clock ticks (10 ms each)
    assert 0.45 <= used < 1.5


def test_the_legs_measured_alone_are_found_by_their_names_in_the_other_benchmarks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    import pipeline

    monkeypatch.setattr(pipeline, "RESULTS", tmp_path)
    legs = [{"group": "QoS 0", "leg": "mqtt-proxy", "per_second": 9000, "cpu_us": 30.0},
            {"group": "QoS 1", "leg": "mqtt-proxy", "per_second": 7000, "cpu_us": 40.0},
            {"group": "QoS 1", "leg": "gmqtt floor", "per_second": 20000, "cpu_us": 19.9}]  # fmt: skip
    (tmp_path / "mqtt_proxy.json").write_text(json.dumps({"legs": legs}))
    hazelcast = [{"group": "", "leg": "persister x1 (Kafka -> HZ)", "per_second": 16000, "cpu_us": 34.0}]
    (tmp_path / "hazelcast.json").write_text(json.dumps({"legs": hazelcast}))
    found = pipeline.alone()
    assert {name: (leg["per_second"], leg["cpu_us"]) for name, leg in found.items()} == {
        "mqtt-proxy": (7000, 40.0),  # the pipeline's QoS
        "hazelcast-persister": (16000, 34.0),
    }
