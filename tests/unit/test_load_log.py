"""tools/load_log.py: one line of CPU counters and available memory per sample."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from load_log import by_kind, kind_of, process_ticks, sample
from test_times import read_load

ROOT = Path(__file__).resolve().parents[2]
STAT = """cpu  100 5 50 800 20 3 2 0 7 0
cpu0 50 2 25 400 10 1 1 0 0 0
intr 12345
"""
MEMINFO = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   18000000 kB\n"


def test_busy_is_everything_but_idle_and_iowait_and_guest_is_not_counted_twice() -> None:
    # user 100, nice 5, system 50, idle 800, iowait 20, irq 3, softirq 2, steal 0; guest 7 is in user
    assert sample(STAT, MEMINFO, 1795924800.4) == "1795924800 160 980 24000000 18000000"


def test_it_samples_the_machine_until_sigterm_and_the_lines_read_back(tmp_path: Path) -> None:
    log = tmp_path / "load.log"
    logger = subprocess.Popen([sys.executable, str(ROOT / "tools" / "load_log.py"), str(log), "--every", "0.05"])
    deadline = time.monotonic() + 30
    while len(read_load(log) if log.exists() else []) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(logger.pid, signal.SIGTERM)
    assert logger.wait(timeout=10) == 0
    samples = read_load(log)
    assert len(samples) >= 3
    assert all(later.total >= earlier.total for earlier, later in itertools.pairwise(samples))
    assert all(0 < s.memory_available_kib <= s.memory_total_kib for s in samples)


def test_a_process_is_named_by_what_it_runs() -> None:
    assert kind_of([]) == "kernel"
    assert kind_of(["/usr/bin/java", "-Xmx1g", "-cp", "/x/libs/*", "kafka.Kafka", "server.properties"]) == "kafka"
    assert kind_of(["java", "-cp", "/x", "org.apache.spark.deploy.SparkSubmit", "pyspark-shell"]) == "spark"
    # The secured registry's flags name its Keycloak: it is still the registry.
    assert kind_of(["java", "-Dapicurio.auth.url=https://127.0.0.1/realms/keycloak", "-jar", "q.jar"]) == "registry"
    assert kind_of(["java", "-jar", "/x/keycloak-26/lib/quarkus-run.jar"]) == "keycloak"
    assert kind_of(["java", "-jar", "other.jar"]) == "java"
    assert (
        kind_of(["/w/.venv/bin/python", "-u", "-c", "import sys;exec(eval(sys.stdin.readline()))"]) == "pytest-worker"
    )
    assert kind_of(["/w/.venv/bin/python", "-m", "pyspark.daemon"]) == "pyspark.daemon"
    assert kind_of(["/w/.venv/bin/python3", "/w/.venv/bin/fluxgate-mqtt-proxy", "--x"]) == "fluxgate-mqtt-proxy"
    assert kind_of(["/w/.venv/bin/python"]) == "python"
    assert kind_of(["/usr/bin/podman", "run", "--rm", "image"]) == "podman"


def test_a_kind_counts_what_its_processes_used_between_two_scans() -> None:
    before = {(1, 10): ("kafka", 500), (2, 20): ("pytest-worker", 40), (3, 30): ("pytest-worker", 5)}
    after = {
        (1, 10): ("kafka", 530),  # 30 more
        (2, 20): ("pytest-worker", 50),  # 10 more; pid 3 exited
        (4, 40): ("pytest-worker", 7),  # new: all of it
        (5, 50): ("spark", 0),  # new and idle: not listed
        (1, 99): ("fluxgate-console", 3),  # pid 1 reused? no: another start time, another process
    }
    assert by_kind(before, after) == {"kafka": 30, "pytest-worker": 17, "fluxgate-console": 3}


def test_the_scan_reads_this_process_and_its_cpu() -> None:
    mine = [entry for (pid, _), entry in process_ticks().items() if pid == os.getpid()]
    assert len(mine) == 1
    assert mine[0][1] >= 0
