"""Settings: Spark interval strings, window shapes, and errors that name the variable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fluxgate_aggregator.settings import AggregatorSettings, WindowSettings, duration_ms
from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings

AGGREGATOR = Path(sys.executable).with_name("fluxgate-aggregator")


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("250 milliseconds", 250),
        ("1 second", 1_000),
        ("30 seconds", 30_000),
        (" 1 minute ", 60_000),
        ("2 hours", 7_200_000),
        ("1 day", 86_400_000),
    ],
)
def test_duration_ms_reads_spark_intervals(text: str, millis: int) -> None:
    assert duration_ms(text) == millis


@pytest.mark.parametrize("text", ["", "1m", "1.5 seconds", "-1 second", "one minute", "10 weeks"])
def test_duration_ms_rejects_what_spark_would_not_read_the_same_way(text: str) -> None:
    with pytest.raises(ValueError, match="expected '<n> millisecond"):
        duration_ms(text)


def test_tumbling_by_default_hopping_with_a_slide() -> None:
    tumbling = WindowSettings()
    assert (tumbling.size_ms, tumbling.slide_ms, duration_ms(tumbling.watermark)) == (60_000, 60_000, 30_000)
    hopping = WindowSettings(size="20 seconds", slide="5 seconds")
    assert (hopping.size_ms, hopping.slide_ms) == (20_000, 5_000)


def test_defaults_follow_the_topic_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(AggregatorSettings)
    assert settings.input_topic == "sensors.readings"
    assert settings.output_topic == "temperatures.aggregated"
    assert settings.deadletter_topic == "sensors.deadletter"
    assert settings.late_topic == "temperatures.late"
    assert settings.metric == "temperature"
    assert settings.spark.master == "local[*]"


def test_nested_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_AGG_WINDOW__SIZE", "5 minutes")
    monkeypatch.setenv("FLUXGATE_AGG_WINDOW__SLIDE", "1 minute")
    monkeypatch.setenv("FLUXGATE_AGG_SPARK__MASTER", "spark://spark-master:7077")
    monkeypatch.setenv("FLUXGATE_AGG_SPARK__CONF", '{"spark.executor.memory": "2g"}')
    monkeypatch.setenv("FLUXGATE_AGG_LATE_TOPIC", "")
    settings = load_settings(AggregatorSettings)
    assert (settings.window.size_ms, settings.window.slide_ms) == (300_000, 60_000)
    assert settings.spark.master == "spark://spark-master:7077"
    assert settings.spark.conf == {"spark.executor.memory": "2g"}
    assert settings.late_topic is None, "empty late topic: count late readings only"


@pytest.mark.parametrize(
    ("env", "value", "named"),
    [
        ("FLUXGATE_AGG_WINDOW__SIZE", "a minute", "FLUXGATE_AGG_WINDOW__SIZE"),
        ("FLUXGATE_AGG_WINDOW__WATERMARK", "0 seconds", "FLUXGATE_AGG_WINDOW__WATERMARK"),
        ("FLUXGATE_AGG_WINDOW__SLIDE", "2 minutes", "FLUXGATE_AGG_WINDOW"),
        ("FLUXGATE_AGG_SPARK__SHUFFLE_PARTITIONS", "0", "FLUXGATE_AGG_SPARK__SHUFFLE_PARTITIONS"),
        ("FLUXGATE_AGG_INPUT_TOPIC", "", "FLUXGATE_AGG_INPUT_TOPIC"),
        ("FLUXGATE_AGG_SPARK__CONF", "{not json", "FLUXGATE_AGG_SPARK__CONF"),
        ("FLUXGATE_AGG_SPARK__DRIVER_MEMORY", "12", "FLUXGATE_AGG_SPARK__DRIVER_MEMORY"),  # no unit: Spark reads MiB
        ("FLUXGATE_AGG_SPARK__DRIVER_MEMORY", "12 GiB", "FLUXGATE_AGG_SPARK__DRIVER_MEMORY"),
    ],
)
def test_a_bad_value_is_reported_with_its_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, named: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as error:
        load_settings(AggregatorSettings)
    assert named in str(error.value)


def test_the_cli_exits_2_naming_the_field_before_starting_spark() -> None:
    result = subprocess.run(
        [str(AGGREGATOR), "run"],
        env={"FLUXGATE_AGG_WINDOW__SIZE": "soon", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "FLUXGATE_AGG_WINDOW__SIZE" in result.stderr
    assert "soon" in result.stderr


def test_setting_only_the_http_host_keeps_the_service_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_AGG_HTTP__HOST", "0.0.0.0")
    settings = load_settings(AggregatorSettings)
    assert (settings.http.host, settings.http.port) == ("0.0.0.0", 9103)


class _Reader:
    """Spark's DataStreamReader as far as read_framed uses it: the options it was given."""

    def __init__(self) -> None:
        self.set: dict[str, str] = {}
        self.options_given: dict[str, str] = {}

    def format(self, _: str) -> _Reader:
        return self

    def option(self, key: str, value: str) -> _Reader:
        self.set[key] = value
        return self

    def options(self, **given: str) -> _Reader:
        self.options_given = given
        return self

    def load(self) -> _Reader:
        raise _Loaded


class _Loaded(Exception):
    pass


def _options_read_with(settings: AggregatorSettings) -> dict[str, str]:
    from types import SimpleNamespace

    from fluxgate_aggregator import job

    reader = _Reader()
    reader_any: object = reader
    with pytest.raises(_Loaded):
        job.read_framed(SimpleNamespace(readStream=reader_any), settings)  # type: ignore[arg-type]
    return reader.set


def test_a_backlog_is_read_in_bounded_batches_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing set, a batch reads at most 200,000 records: a stopped job's backlog (or a
    first start from the earliest offsets) is not read in one batch that must fit in memory."""
    assert _options_read_with(AggregatorSettings())["maxOffsetsPerTrigger"] == "200000"
    monkeypatch.setenv("FLUXGATE_AGG_SPARK__MAX_OFFSETS_PER_TRIGGER", "5000")
    assert _options_read_with(load_settings(AggregatorSettings))["maxOffsetsPerTrigger"] == "5000"


def test_the_spark_properties_the_job_sets_itself_are_named_where_users_set_theirs() -> None:
    """``spark.conf`` wins over the job's own properties; its description (the settings
    reference, the chart's schema) names each of them, so a user knows what an entry replaces."""
    from fluxgate_aggregator.settings import SparkSettings
    from fluxgate_aggregator.spark import DEFAULT_CONF

    description = SparkSettings.model_fields["conf"].description or ""
    assert [key for key in DEFAULT_CONF if key not in description] == []
