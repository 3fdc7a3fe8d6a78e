"""The SparkSession, with the Kafka and Avro connectors matching the installed pyspark."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

import structlog
from pyspark.sql import SparkSession

from fluxgate_aggregator.connectors import resolve_jars
from fluxgate_aggregator.driver_heap import DriverHeap, container_memory_limit, driver_heap
from fluxgate_aggregator.settings import SparkSettings

# The password in a JAAS value (kafka_access.jaas_config), quoted, escapes included; an unclosed
# quote (a plan string cut short) to its line's end. Written as runs of plain characters between
# escapes: Java's engine recurses once per repetition of a group, and ``(?:[^"\\\n]|\\.)*``
# overflowed its stack on a password of about 5,000 characters.
REDACT_JAAS = r'password="[^"\\\n]*(?:\\.[^"\\\n]*)*"?'
STRING_REDACTION = "spark.sql.redaction.string.regex"
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
DRIVER_MEMORY = "spark.driver.memory"
log = structlog.get_logger(__name__)


# Spark properties the job sets unless spark.conf names them.
DEFAULT_CONF = {
    # Spark redacts the Kafka options' JAAS value (it holds "password=") in plans, the UI and the
    # event log, but not where explain() prints the streaming source's DataSource: this does.
    STRING_REDACTION: REDACT_JAAS,
    # The compiled classes Spark keeps for the code it generates (default 100). One micro-batch
    # of the job generates about 135, so with 100 each batch evicted what the next one needed
    # and compiled all of them again, and the JVM's JIT compiled the new classes again: most of
    # the job's CPU (bench/results/2026-11-27-aggregator-generated-code.md).
    "spark.sql.codegen.cache.maxEntries": "1000",
    # The throughput collector, not the JVM's default G1: in local mode every task runs in the
    # driver's JVM, and with G1 (its concurrent marking most of all) the job spent a quarter
    # more CPU per reading on 2 cores, 86 against 68 µs, at the same peak memory
    # (bench/results/2026-11-28-aggregator-parallel-gc.md). It takes effect where the job
    # starts Spark's JVM itself, not under spark-submit, whose JVM is already running.
    DRIVER_JAVA_OPTIONS: "-XX:+UseParallelGC",
    # The size of a page of sort and hash memory (Spark picks 8 MiB for a 1 GiB heap on 2
    # cores). Since Spark 4.1 a sort keeps its sorter in a thread-local of its plan node, and
    # the sorter's iterator still points at its last page after the page is freed: each task
    # thread pins a page per sort whose plan is alive, until the thread's map drops the entry.
    # At a million devices they were 178 MB of the live heap, 13 MB with 1 MiB pages
    # (bench/results/2026-12-01-fleet-million-heap.md).
    "spark.buffer.pageSize": "1m",
    # What the status store keeps of finished work (defaults 1,000 each). Nothing reads it in
    # a headless job, and each SQL execution kept its plan's text and metrics, tens of KB for
    # plans that name every ledger entry: about 100 MB of a long-running driver's heap.
    "spark.sql.ui.retainedExecutions": "50",
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    # Cached frames (each batch's records, the ledger's entries, the device table) held as
    # plain columns, not dictionary- and run-length-encoded: encoding cost about 0.8 CPU-s per
    # million rows cached and read once, the job caches each reading twice and reads the
    # ledger's entries in every batch, and the job's CPU per reading fell about a tenth. The
    # cache is 1.4 to 1.6 times larger: some 35 MB more per million rows it holds
    # (bench/results/2026-12-01-aggregator-cache-and-call-sites.md).
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # PySpark records the Python call site of every DataFrame and Column call in the JVM, for
    # error messages: five or more gateway round trips and a walk of the Python stack each,
    # some 270 calls a batch. Off, the driver's CPU per batch fell from 0.31 to 0.13 s.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


def connector_conf(settings: SparkSettings) -> tuple[str, str]:
    """``spark.jars.packages`` when asked for, else the Maven-resolved jar files."""
    if settings.packages:
        return "spark.jars.packages", settings.packages
    return "spark.jars", ",".join(str(jar) for jar in resolve_jars(settings.jars_dir))


def submitted() -> bool:
    """True in a driver started by spark-submit (it hands pyspark its gateway's port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def heap_of(settings: SparkSettings) -> DriverHeap:
    """The driver's heap: ``spark.conf`` names it (its values win over the job's own), else
    ``driver_memory``, else what the container's memory limit leaves."""
    if DRIVER_MEMORY in settings.conf:
        return DriverHeap(settings.conf[DRIVER_MEMORY], "spark.conf")
    return driver_heap(settings.driver_memory, container_memory_limit())


def worker_python(master: str, environ: Mapping[str, str]) -> str | None:
    """The interpreter of a local master's Python workers, unless ``PYSPARK_PYTHON`` names one:
    the driver's own. PySpark's default is whatever ``python3`` the PATH finds, which need not
    be the venv's version, and PySpark refuses a worker of another version. The job needs
    workers: the ledger's recall of devices from the cold store makes their rows from the
    driver's (``createDataFrame``). A cluster's executors run on other machines, where the
    driver's path means nothing: theirs stays."""
    if not master.startswith("local") or environ.get("PYSPARK_PYTHON"):
        return None
    return sys.executable


def build_session(settings: SparkSettings) -> SparkSession:
    builder = SparkSession.builder.appName(settings.app_name)
    # Under spark-submit the JVM is up already and the submit line's --master and
    # --packages (or --jars) apply; a plain ``fluxgate-aggregator run`` takes both from
    # the settings.
    if not submitted():
        builder = builder.master(settings.master).config(*connector_conf(settings))
        heap = heap_of(settings)
        if heap.memory:
            builder = builder.config(DRIVER_MEMORY, heap.memory)
        log.info("spark.driver_heap", memory=heap.memory or "1g", source=heap.source)
        python = worker_python(settings.master, os.environ)
        if python is not None:  # read by the SparkContext from here only (spark.pyspark.python is spark-submit's)
            os.environ["PYSPARK_PYTHON"] = python
    builder = (
        builder.config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # Nothing reads the web UI of a headless job; it would cost a port and memory.
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stateStore.stateSchemaCheck", "true")
    )
    for key, value in (DEFAULT_CONF | settings.conf).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    _quiet(session, QUIET_LOGGERS)
    return session


# Loggers whose warnings are expected and say nothing actionable:
# * AvroSerializer warns on every batch that aggregate columns are nullable in Catalyst
#   while the TemperatureAggregate fields are not; they are never null (count >= 1).
QUIET_LOGGERS = ("org.apache.spark.sql.avro.AvroSerializer",)


def _quiet(session: SparkSession, loggers: tuple[str, ...]) -> None:
    jvm = session.sparkContext._jvm  # log4j is only reachable through the gateway
    assert jvm is not None
    for name in loggers:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.ERROR)
