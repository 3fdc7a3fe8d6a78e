"""The pure parts of the wire format and connector resolution, and the reference aggregation."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from aggregator_reference import expected_aggregates, reading, window_starts

from fluxgate_aggregator import connectors
from fluxgate_aggregator.wire import compact, required_field
from fluxgate_core.schemas import SENSOR_READING, schema_text


def test_required_field_is_the_first_that_cannot_be_null() -> None:
    schema = json.dumps(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "note", "type": ["null", "string"]},
                {"name": "id", "type": "string"},
                {"name": "seq", "type": "long"},
            ],
        }
    )
    assert required_field(schema) == "id"


def test_the_reading_schema_has_a_required_field_to_tell_bad_bodies_by() -> None:
    assert required_field(schema_text(SENSOR_READING)) == "device_id"


def test_a_schema_of_only_nullable_fields_is_refused() -> None:
    schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": ["null", "int"]}]})
    with pytest.raises(ValueError, match="no required field"):
        required_field(schema)


def test_compact_is_canonical_json_whitespace() -> None:
    assert compact('{ "type" : "string" }') == '{"type":"string"}'


@pytest.mark.parametrize(
    ("jar", "artifact"),
    [
        ("kafka-clients-3.9.1.jar", "kafka-clients"),
        ("spark-sql-kafka-0-10_2.13-4.1.1.jar", "spark-sql-kafka-0-10_2.13"),
        ("commons-pool2-2.12.1.jar", "commons-pool2"),
        ("scala-library-2.13.16.jar", "scala-library"),
        ("no-version.jar", "no-version"),
    ],
)
def test_artifact_name_strips_the_version(jar: str, artifact: str) -> None:
    assert connectors._artifact_name(Path(jar)) == artifact


def test_packages_pins_the_installed_spark_version() -> None:
    assert connectors.packages("4.1.1") == (
        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1,org.apache.spark:spark-avro_2.13:4.1.1"
    )


def test_resolved_jars_are_reused_without_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    done = tmp_path / "9.9.9"
    done.mkdir()
    (done / "spark-avro_2.13-9.9.9.jar").touch()
    (done / ".complete").touch()
    monkeypatch.setattr(connectors.shutil, "which", lambda _: pytest.fail("Maven must not run again"))
    assert connectors.resolve_jars(tmp_path, "9.9.9") == [done / "spark-avro_2.13-9.9.9.jar"]


def test_without_maven_the_error_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connectors.shutil, "which", lambda _: None)
    with pytest.raises(connectors.ConnectorError, match=r"set spark\.packages"):
        connectors.resolve_jars(tmp_path, "9.9.9")


@pytest.mark.parametrize(
    ("event_ms", "size", "slide", "starts"),
    [
        (0, 10, 10, [0]),
        (9, 10, 10, [0]),
        (10, 10, 10, [10]),
        (15, 20, 10, [10, 0]),
        (-1, 10, 10, [-10]),
        (25, 20, 5, [25, 20, 15, 10]),
    ],
)
def test_window_starts(event_ms: int, size: int, slide: int, starts: list[int]) -> None:
    assert window_starts(event_ms, size, slide) == starts


def test_reference_aggregation_of_one_window() -> None:
    rows = [reading("d", 1_000, 20.0), reading("d", 3_000, 22.0), reading("d", 2_000, 55.0, metric="humidity")]
    (only,) = expected_aggregates(rows, 10_000, 10_000).values()
    assert only["count"] == 2 and only["mean"] == 21.0 and only["stddev"] == 1.0
    assert (only["first_event_time"], only["last_event_time"]) == (1_000, 3_000)
    assert (only["window_start"], only["window_end"]) == (0, 10_000)


def test_the_connectors_download_fails_on_a_checksum_mismatch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ran: list[list[str]] = []

    def run(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        ran.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(connectors.shutil, "which", lambda _: "/usr/bin/mvn")
    monkeypatch.setattr(connectors.subprocess, "run", run)
    monkeypatch.setattr(connectors, "_drop_bundled", lambda _: None)
    connectors._download(tmp_path / "jars", "4.1.1")
    assert "--strict-checksums" in ran[0]
