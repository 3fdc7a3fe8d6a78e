"""Everything the aggregator reads from its environment (prefix ``FLUXGATE_AGG_``).

The same settings drive ``local[*]`` (``make run``, tests) and a cluster: only
``master`` (or spark-submit's ``--master``) changes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings

from fluxgate_core.settings import (
    SECRET_PROPERTY,
    Group,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    group,
    service_config,
)

SERVICE = "aggregator"
ENV_PREFIX = "FLUXGATE_AGG_"
_DURATION = re.compile(r"^\s*(\d+)\s*(millisecond|second|minute|hour|day)s?\s*$")
_MS = {"millisecond": 1, "second": 1_000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


def duration_ms(text: str) -> int:
    """``"30 seconds"`` -> 30000; the subset of Spark interval strings we accept."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"expected '<n> millisecond(s)|second(s)|minute(s)|hour(s)|day(s)', got {text!r}")
    return int(match.group(1)) * _MS[match.group(2)]


class WindowSettings(Group):
    """Tumbling by default; hopping when ``slide`` is set."""

    size: str = Field("1 minute", description="window length, e.g. '1 minute'")
    slide: str | None = Field(None, description="hop between window starts; unset = tumbling")
    watermark: str = Field("30 seconds", description="how late a reading may be and still count")
    dedup_horizon: str = Field(
        "2 minutes",
        description="how far behind the watermark a copy of a reading already counted or written late is still"
        " recognised and dropped (a gateway's redelivery after an outage); a later copy is written late",
    )

    @field_validator("size", "watermark", "slide", "dedup_horizon")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        if value is not None and duration_ms(value) <= 0:
            raise ValueError("must be positive")
        return value

    @model_validator(mode="after")
    def _slide_fits(self) -> WindowSettings:
        if self.slide is not None and duration_ms(self.slide) > duration_ms(self.size):
            raise ValueError("slide must not exceed size")
        return self

    @property
    def size_ms(self) -> int:
        return duration_ms(self.size)

    @property
    def dedup_horizon_ms(self) -> int:
        return duration_ms(self.dedup_horizon)

    @property
    def slide_ms(self) -> int:
        return duration_ms(self.slide) if self.slide else self.size_ms


# Java client properties the job derives from a setting (``kafka_access.spark_kafka_options``,
# ``spark_sink_options``).
JAVA_FROM_SETTINGS = {
    "bootstrap.servers": "bootstrap_servers",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "linger.ms": "linger_ms",
    "compression.type": "compression_type",
}
JAVA_TRUSTSTORE = ("ssl.truststore.location", "ssl.truststore.type")


class AggregatorKafkaSettings(KafkaSettings):
    """fluxgate_core's Kafka settings, plus the plain properties of Spark's Java Kafka client.

    ``extra`` goes to the job's librdkafka clients (the progress group's committer, the
    watermark reader), which refuse the Java client's names; ``java_extra`` goes to Spark's
    source and sinks only. The credentials and the CA reach both from their own settings;
    ``linger_ms`` and ``compression_type`` reach Spark's sink, the job's one producer."""

    java_extra: dict[str, str] = Field(
        default_factory=dict,
        description="extra properties of Spark's Java Kafka client (the source and the sinks), e.g. "
        "ssl.endpoint.identification.algorithm; never a secret: the credentials come from sasl_password(_file), "
        "the CA from ssl_ca_location. extra goes to the job's librdkafka clients only",
    )

    max_buffered_messages: int = Field(
        100_000,
        ge=1,
        description="not taken by the aggregator, refused if set: its only producer is Spark's Java client, "
        "whose bound is in bytes (java_extra buffer.memory)",
    )

    @field_validator("java_extra")
    @classmethod
    def _no_secret_in_java_extra(cls, extra: dict[str, str]) -> dict[str, str]:
        """Plain like ``extra``: a secret here would show in the rendered config and Spark's plans."""
        secret = sorted(key for key in extra if SECRET_PROPERTY.search(key) or key == "ssl.keystore.key")
        if secret:
            raise ValueError(f"{', '.join(secret)}: a secret does not go in java_extra; use sasl_password(_file)")
        return extra

    @model_validator(mode="after")
    def _java_extra_sets_no_setting(self) -> AggregatorKafkaSettings:
        """A property both a setting and ``java_extra`` give would make the Java client and the
        librdkafka clients disagree; the setting is the one place."""
        owned = dict(JAVA_FROM_SETTINGS)
        if self.ssl_ca_location:
            owned.update(dict.fromkeys(JAVA_TRUSTSTORE, "ssl_ca_location"))
        clashes = sorted(key for key in self.java_extra if key in owned)
        if clashes:
            named = ", ".join(f"{key} (set {ENV_PREFIX}KAFKA__{owned[key].upper()})" for key in clashes)
            raise ValueError(f"java_extra: {named}: given by a setting, not by java_extra")
        return self

    @model_validator(mode="after")
    def _no_librdkafka_producer_bound(self) -> AggregatorKafkaSettings:
        """Given, it would bound nothing: say where the job's one producer takes its bound."""
        if "max_buffered_messages" in self.model_fields_set:
            raise ValueError(
                "max_buffered_messages: a librdkafka producer's bound, and the job has none; Spark's "
                f'Kafka sink bounds its buffer in bytes: {ENV_PREFIX}KAFKA__JAVA_EXTRA=\'{{"buffer.memory": "..."}}\''
            )
        return self


class SparkSettings(Group):
    master: str = Field("local[*]", description="Spark master; spark-submit's --master wins when given")
    app_name: str = "fluxgate-aggregator"
    shuffle_partitions: int = Field(
        4, ge=1, description="spark.sql.shuffle.partitions (window aggregation parallelism)"
    )
    trigger_interval: str = Field("5 seconds", description="micro-batch interval")
    max_offsets_per_trigger: int = Field(
        200_000,
        ge=1,
        description="cap on records per micro-batch: a backlog (after a stop, at the first start) is read in batches"
        " of this size, never all at once",
    )
    driver_memory: str | None = Field(
        None,
        pattern=r"^[0-9]+[kKmMgGtT][bB]?$",
        description="the driver JVM's heap (spark.driver.memory, e.g. 12g) where the job starts Spark itself; in"
        " local mode every task runs in it. Unset = the container's memory limit less 1.5 GiB or a fifth of it,"
        " whichever is more, or Spark's 1g where there is no limit; under spark-submit, its own --driver-memory",
    )
    packages: str | None = Field(
        None, description="spark.jars.packages (Ivy); unset = the connectors resolved by Maven into jars_dir"
    )
    jars_dir: Path = Field(
        Path.home() / ".cache" / "fluxgate" / "spark-jars", description="where Maven copies the connector jars"
    )
    conf: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "extra Spark properties; they win over the job's own: spark.sql.codegen.cache.maxEntries=1000"
            " (a micro-batch generates ~135 classes), spark.sql.redaction.string.regex (hides JAAS passwords)"
            " and spark.driver.extraJavaOptions=-XX:+UseParallelGC (G1 costs a quarter more CPU; a value"
            " given here replaces it, so keep the flag in yours), spark.buffer.pageSize=1m (a task thread keeps"
            " its last sort's page), spark.sql.ui.retainedExecutions=50, spark.ui.retainedJobs=100 and"
            " spark.ui.retainedStages=100 (the status store of a headless job),"
            " spark.sql.inMemoryColumnarStorage.compressed=false (encoding the cached batches cost more CPU than"
            " the memory it saved) and spark.python.sql.dataFrameDebugging.enabled=false (a gateway round trip"
            " per DataFrame call)"
        ),
    )


class AggregatorSettings(BaseSettings):
    """aggregator's settings; nested groups with ``__`` (``FLUXGATE_AGG_WINDOW__SIZE``)."""

    model_config = service_config(ENV_PREFIX)

    kafka: AggregatorKafkaSettings = group(AggregatorKafkaSettings)
    registry: RegistrySettings = group(RegistrySettings)
    http: HttpSettings = group(HttpSettings, port=9103)
    log: LogSettings = group(LogSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    window: WindowSettings = Field(default_factory=WindowSettings)
    metric: str = Field("temperature", min_length=1, description="the metric aggregated")
    input_topic: str = Field("sensors.readings", min_length=1)
    output_topic: str = Field("temperatures.aggregated", min_length=1)
    deadletter_topic: str = Field("sensors.deadletter", min_length=1)
    late_topic: str | None = Field("temperatures.late", description="where late readings go; empty = only count")
    starting_offsets: str = Field("earliest", description="where a new checkpoint starts: earliest or latest")
    max_query_restarts: int = Field(
        5, ge=0, description="failed queries are resumed from their checkpoint this many times before the job exits 1"
    )
    schema_refresh_seconds: float = Field(
        30.0,
        gt=0,
        description="how often the registry is asked for new writer schemas of the input subject ahead of their"
        " first record (a batch that meets an unknown schema id asks it then)",
    )
    data_loss_alert_seconds: float = Field(
        3600.0,
        gt=0,
        description="how long input offsets lost before they were read (retention, DeleteRecords) keep the job"
        " degraded with the reason; a restart acknowledges them",
    )
    checkpoint_dir: str = Field(".local/checkpoints/aggregator", min_length=1, description="durable on a cluster")
    progress_group: str | None = Field(
        "fluxgate-aggregator",
        description="consumer group each finished batch's input offsets are committed to, for lag monitoring "
        "(the job resumes from its checkpoint, not from the group); empty = none",
    )

    @field_validator("kafka", mode="before")
    @classmethod
    def _aggregator_kafka(cls, value: Any) -> Any:
        """fluxgate_core's ``KafkaSettings`` (as the benchmark and the tests build it) is taken as
        this service's, with no Java properties."""
        if isinstance(value, KafkaSettings) and not isinstance(value, AggregatorKafkaSettings):
            return {name: getattr(value, name) for name in value.model_fields_set}
        return value

    @field_validator("late_topic", "progress_group")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        return value or None
