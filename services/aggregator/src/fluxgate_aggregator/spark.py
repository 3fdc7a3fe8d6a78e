"""The SparkSession: connectors from Maven Central matching the installed pyspark."""

from __future__ import annotations

import pyspark
from pyspark.sql import SparkSession

from fluxgate_aggregator.settings import SparkSettings


def default_packages() -> str:
    version = pyspark.__version__
    return ",".join(
        f"org.apache.spark:{artifact}_2.13:{version}" for artifact in ("spark-sql-kafka-0-10", "spark-avro")
    )


def build_session(settings: SparkSettings) -> SparkSession:
    builder = (
        SparkSession.builder.appName(settings.app_name)
        .master(settings.master)
        .config("spark.jars.packages", settings.packages or default_packages())
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
