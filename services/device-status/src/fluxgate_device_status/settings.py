"""Settings of device-status: ``FLUXGATE_STATUS_*``, nested groups with ``__``."""

from __future__ import annotations

from pydantic import Field, model_validator
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

SERVICE = "device-status"
HTTP_PORT = 9107
# faust's producer writes a changelog update for every reading. Batched for 20 ms, a backlog of
# 120,000 readings cost 516 µs of CPU each (485 to 538), against 577 at 5 ms (the other
# services' default) and 660 unbatched (bench/results/2026-11-28-device-status-producer.md).
# Nothing waits on it: a transition is news about a silence of a minute or more.
KAFKA_LINGER_MS = 20
LIBRDKAFKA_ONLY = (
    "{name}: a librdkafka setting; device-status's Kafka clients are faust's (aiokafka), which would ignore it"
)


class StatusKafkaSettings(KafkaSettings):
    """fluxgate_core's Kafka settings, as faust's clients take them. They are aiokafka's, not
    librdkafka's: linger_ms and compression_type reach faust's producer; the two settings that
    only librdkafka understands are refused when given, rather than silently doing nothing."""

    max_buffered_messages: int = Field(
        100_000,
        ge=1,
        description="not taken by device-status, refused if set: faust's producer (aiokafka) has no such bound",
    )
    extra: dict[str, str] = Field(
        default_factory=dict,
        description="not taken by device-status, refused if set: faust's clients are aiokafka's, "
        "which take no librdkafka properties",
    )

    @model_validator(mode="after")
    def _nothing_only_librdkafka_takes(self) -> StatusKafkaSettings:
        if "max_buffered_messages" in self.model_fields_set:
            raise ValueError(LIBRDKAFKA_ONLY.format(name="max_buffered_messages"))
        if self.extra:
            raise ValueError(LIBRDKAFKA_ONLY.format(name="extra"))
        return self


class StatusHttpSettings(HttpSettings):
    """The one port for the device views, ``/healthz``, ``/readyz`` and ``/metrics`` (faust's web server)."""

    port: int = Field(HTTP_PORT, ge=1, le=65535, description="faust's web port; other instances redirect here")
    advertised_host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="host name other instances use to reach this one (faust's canonical URL)",
    )


class DeviceStatusSettings(Group):
    """Topics, the table and the silence rule."""

    app_id: str = Field(
        "fluxgate-device-status", min_length=1, description="consumer group and prefix of the changelog topics"
    )
    input_topic: str = Field("sensors.readings", min_length=1, description="SensorReading records keyed by device")
    status_topic: str = Field("devices.status", min_length=1, description="DeviceStatus transitions go here")
    partitions: int = Field(
        3, ge=1, description="partitions of input_topic; the table's changelog and the checks topic get as many"
    )
    silence_threshold_s: float = Field(60.0, gt=0, description="a device that sent nothing this long is OFFLINE")
    timer_interval_s: float = Field(5.0, gt=0, description="how often silence is checked")
    session_timeout_s: float = Field(
        10.0,
        ge=6,
        le=1800,
        description="how long a crashed instance keeps its partitions before the group moves them;"
        " at most the broker's group.max.session.timeout.ms (30 minutes unless set lower)",
    )
    heartbeat_interval_s: float = Field(3.0, gt=0, description="consumer heartbeat; under a third of the session")
    commit_interval_s: float = Field(2.8, gt=0, description="how often faust commits the input's offsets")
    data_dir: str = Field(".local/device-status", min_length=1, description="faust's data directory")
    standby_replicas: int = Field(
        0, ge=0, description="other instances that keep a live copy of each table partition, for a quick takeover"
    )
    bulk_restore: bool = Field(
        True,
        description="read the table's changelog in batches before faust's recovery, which then reads only what "
        "came after (about a tenth of the CPU per record); false: faust reads it all, a record at a time",
    )
    bulk_restore_min_records: int = Field(
        10_000,
        ge=0,
        description="the fewest changelog records a rebalance must have to read for the bulk read to be made: "
        "below, faust's recovery alone is as quick (the bulk read's own consumer costs about 0.4 s)",
    )

    @model_validator(mode="after")
    def _tick_below_threshold(self) -> DeviceStatusSettings:
        if self.timer_interval_s > self.silence_threshold_s:
            raise ValueError("timer_interval_s must not exceed silence_threshold_s")
        if self.heartbeat_interval_s * 3 > self.session_timeout_s:
            raise ValueError("heartbeat_interval_s must be at most a third of session_timeout_s")
        return self


class StatusSettings(BaseSettings):
    """device-status settings; nested groups with ``__`` (``FLUXGATE_STATUS_STATUS__SILENCE_THRESHOLD_S``)."""

    model_config = service_config("FLUXGATE_STATUS_")

    kafka: StatusKafkaSettings = group(StatusKafkaSettings, linger_ms=KAFKA_LINGER_MS)
    registry: RegistrySettings = group(RegistrySettings)
    http: StatusHttpSettings = group(StatusHttpSettings)
    log: LogSettings = group(LogSettings)
    status: DeviceStatusSettings = Field(default_factory=DeviceStatusSettings)
