"""The SparkSession, with the Kafka and Avro connectors matching the installed pyspark."""

from __future__ import annotations

from pyspark.sql import SparkSession

from fluxgate_aggregator.connectors import resolve_jars
from fluxgate_aggregator.settings import SparkSettings


def connector_conf(settings: SparkSettings) -> tuple[str, str]:
    """``spark.jars.packages`` when asked for, else the Maven-resolved jar files."""
    if settings.packages:
        return "spark.jars.packages", settings.packages
    return "spark.jars", ",".join(str(jar) for jar in resolve_jars(settings.jars_dir))


def build_session(settings: SparkSettings) -> SparkSession:
    builder = (
        SparkSession.builder.appName(settings.app_name)
        .master(settings.master)
        .config(*connector_conf(settings))
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # Small local state stores start faster and are enough for one node.
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stateStore.stateSchemaCheck", "true")
    )
    for key, value in settings.conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
