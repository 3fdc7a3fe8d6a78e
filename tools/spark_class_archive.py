"""A class-data archive of the Spark driver's classes, for the test suite's local Spark JVMs.

Every aggregator test starts a Spark driver JVM (a session fixture per worker, a
``fluxgate-aggregator run`` per process test, the end-to-end pipelines), and each start
loaded and verified Spark's classes and JIT-compiled them again: about 33 CPU-s and 20 s
before a first tiny query. With the classes mapped from this archive and the JIT's quick
tier only, the same start costs about 14 CPU-s and 11 s
(bench/results/2026-11-30-suite-spark-starts.md). ``make test`` writes the archive once per
venv and hands its options to every local driver through SPARK_SUBMIT_OPTS, which Spark's
launcher adds to the driver's JVM and to no other. Only tests take this route: the quick tier
costs a long-running job throughput, and a job's JVM options stay the aggregator's settings.

    python tools/spark_class_archive.py .local/spark/driver.jsa   # writes it
    python tools/spark_class_archive.py .local/spark/driver.jsa --options   # the JVM options

An archive that no longer matches the JVM's class path (pyspark reinstalled) is not used, and
the JVM says nothing of it (``-Xlog:cds*=off``: its warning would land among a service's
JSON log lines on stdout); the Makefile writes it again whenever the venv or the JDK changes,
and checks each one it writes with ``-Xshare:on``, which refuses an archive it cannot map.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

# The test drivers' JIT: the quick tier only. Their JVMs live seconds to minutes on a few
# thousand readings, where the optimising tier's compiles cost more CPU than they save.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
# A stale archive's warning, and each class a dump cannot archive (signed jars, generated
# classes), would otherwise be a line on the driver's stdout.
QUIET = "-Xlog:cds*=off"


def driver_options(archive: Path) -> str:
    """The JVM options for a driver that maps ``archive``: SPARK_SUBMIT_OPTS's value."""
    return f"{QUICK_JIT} -XX:SharedArchiveFile={archive.resolve()} {QUIET}"


@contextlib.contextmanager
def optimising_compiler() -> Iterator[None]:
    """A local driver started within it keeps ``SPARK_SUBMIT_OPTS`` but for the quick tier: for
    a session that runs micro-batches for minutes (the Spark lane's), where compiling Catalyst's
    own code with the optimising tier pays. pyspark keeps a process's one JVM after its session
    stops, so the first session a test process starts decides it for the sessions after it."""
    before = os.environ.get("SPARK_SUBMIT_OPTS")
    if before is None:
        yield
        return
    # Read by pyspark's launcher when the session's JVM starts.
    kept = " ".join(option for option in before.split() if option != QUICK_JIT)
    with mock.patch.dict(os.environ, {"SPARK_SUBMIT_OPTS": kept}):
        yield


def write(archive: Path) -> None:
    """Run a driver through the work the tests do most, and archive the classes it loaded.

    The JVM writes the archive as it exits; it is written beside its final name and renamed
    once checked, so a run cut short leaves no half-written archive for the next JVM to map.
    """
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    # Read by pyspark's launcher when the session below starts its JVM.
    os.environ["SPARK_SUBMIT_OPTS"] = f"{QUICK_JIT} -XX:ArchiveClassesAtExit={partial.resolve()} {QUIET}"
    class_path = exercise()
    if not partial.exists():
        raise SystemExit(f"spark_class_archive: the driver exited without writing {partial}")
    check(partial, class_path)
    partial.replace(archive)


def exercise() -> str:
    """A streaming windowed aggregation with a watermark and a foreachBatch, as the job runs;
    the driver's class path, once its JVM has exited."""
    from pyspark.sql import functions

    from fluxgate_aggregator.settings import SparkSettings
    from fluxgate_aggregator.spark import build_session

    session = build_session(SparkSettings(master="local[2]", shuffle_partitions=2))
    windows = (
        session.readStream.format("rate")
        .option("rowsPerSecond", 200)
        .load()
        .withWatermark("timestamp", "1 second")
        .groupBy(functions.window("timestamp", "1 second"), (functions.col("value") % 7).alias("device"))
        .agg(functions.count("*"), functions.avg("value"), functions.max("value"))
    )
    # A trigger with time to spare: the query is stopped between batches, not in one.
    writer = windows.writeStream.trigger(processingTime="3 seconds")
    query = writer.foreachBatch(lambda batch, _: batch.count()).start()
    while (query.lastProgress or {}).get("batchId", -1) < 2:
        time.sleep(0.2)
    query.stop()
    context = session.sparkContext
    jvm = context._jvm  # the class path the archive is checked against: only the JVM knows it
    assert jvm is not None
    class_path = str(jvm.java.lang.System.getProperty("java.class.path"))
    gateway = context._gateway
    session.stop()
    # The JVM exits when its stdin closes, and writes the archive on its way out.
    gateway.proc.stdin.close()  # type: ignore[attr-defined]
    gateway.proc.wait(timeout=300)  # type: ignore[attr-defined]
    return class_path


def check(archive: Path, class_path: str) -> None:
    """Fail unless a JVM on the driver's class path maps the archive (``-Xshare:on``)."""
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if "JAVA_HOME" in os.environ else Path("java")
    command = [str(java), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", class_path, "-version"]
    answer = subprocess.run(command, capture_output=True, text=True, check=False)
    if answer.returncode != 0:
        raise SystemExit(f"spark_class_archive: a JVM cannot map {archive}:\n{answer.stdout}{answer.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--options", action="store_true", help="print the driver's JVM options and exit")
    args = parser.parse_args()
    if args.options:
        print(driver_options(args.archive))
    else:
        write(args.archive)


if __name__ == "__main__":
    main()
