"""Everything the aggregator reads from its environment (prefix ``FLUXGATE_AGG_``).

The same settings drive ``local[*]`` (``make run``, tests) and a cluster: only
``master`` (or spark-submit's ``--master``) changes.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings

from fluxgate_core.settings import (
    Group,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    RegistrySettings,
    group,
    service_config,
)

SERVICE = "aggregator"
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


class SparkSettings(Group):
    master: str = Field("local[*]", description="Spark master; spark-submit's --master wins when given")
    app_name: str = "fluxgate-aggregator"
    shuffle_partitions: int = Field(
        4, ge=1, description="spark.sql.shuffle.partitions (window aggregation parallelism)"
    )
    trigger_interval: str = Field("5 seconds", description="micro-batch interval")
    max_offsets_per_trigger: int | None = Field(None, ge=1, description="cap on records per micro-batch")
    packages: str | None = Field(
        None, description="spark.jars.packages (Ivy); unset = the connectors resolved by Maven into jars_dir"
    )
    jars_dir: Path = Field(
        Path.home() / ".cache" / "fluxgate" / "spark-jars", description="where Maven copies the connector jars"
    )
    conf: dict[str, str] = Field(default_factory=dict, description="extra Spark properties")


class AggregatorSettings(BaseSettings):
    """aggregator's settings; nested groups with ``__`` (``FLUXGATE_AGG_WINDOW__SIZE``)."""

    model_config = service_config("FLUXGATE_AGG_")

    kafka: KafkaSettings = group(KafkaSettings)
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

    @field_validator("late_topic", "progress_group")
    @classmethod
    def _empty_is_none(cls, value: str | None) -> str | None:
        return value or None
