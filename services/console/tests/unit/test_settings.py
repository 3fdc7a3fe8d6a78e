"""The console's settings: the local defaults, and auth that must be configured or turned off explicitly."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluxgate_console.app import main
from fluxgate_console.settings import ConsoleSettings
from fluxgate_core.errors import ConfigError
from fluxgate_core.settings import load_settings


def test_defaults_watch_the_local_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(ConsoleSettings)
    assert [s.name for s in settings.services][:3] == ["mqtt-proxy", "coap-ingest", "aggregator"]
    assert (settings.web.port, settings.http.port) == (9108, 9109)
    assert settings.deadletters.topics == ["sensors.deadletter", "persisters.deadletter"]


def test_auth_is_never_off_by_default() -> None:
    with pytest.raises(ConfigError, match="FLUXGATE_CONSOLE_PAGE_AUTH__"):
        load_settings(ConsoleSettings).checked()


def test_auth_off_only_when_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_CONSOLE_PAGE_AUTH__MODE", "none")
    with pytest.raises(ConfigError, match="FLUXGATE_CONSOLE_REPLAY_AUTH__"):
        load_settings(ConsoleSettings).checked()  # the page's choice is not replay's
    monkeypatch.setenv("FLUXGATE_CONSOLE_REPLAY_AUTH__MODE", "bearer")
    monkeypatch.setenv("FLUXGATE_CONSOLE_REPLAY_AUTH__TOKEN", "t")
    assert load_settings(ConsoleSettings).checked().replay_auth.token is not None


def test_services_from_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "FLUXGATE_CONSOLE_SERVICES",
        '[{"name": "a", "urls": ["http://h:1"], "role": "gateway"}, {"name": "a", "urls": ["http://h:2"], '
        '"role": "gateway"}]',
    )
    with pytest.raises(ConfigError, match="names repeat"):
        load_settings(ConsoleSettings, page_auth={"mode": "none"}, replay_auth={"mode": "none"}).checked()


def test_store_settings_name_the_field_on_bad_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_CONSOLE_HAZELCAST__KCQL", "INSERT INTO x SELECT * FROM t STOREAS LIST")
    with pytest.raises(ConfigError, match=r"FLUXGATE_CONSOLE_HAZELCAST__KCQL[\s\S]*STOREAS LIST"):
        load_settings(ConsoleSettings)
    monkeypatch.delenv("FLUXGATE_CONSOLE_HAZELCAST__KCQL")
    monkeypatch.setenv("FLUXGATE_CONSOLE_SCYLLA__TABLE", "no_keyspace")
    with pytest.raises(ConfigError, match="FLUXGATE_CONSOLE_SCYLLA__TABLE"):
        load_settings(ConsoleSettings)
    monkeypatch.delenv("FLUXGATE_CONSOLE_SCYLLA__TABLE")
    monkeypatch.setenv("FLUXGATE_CONSOLE_SCYLLA__USERNAME", "ops")
    with pytest.raises(ConfigError, match=r"FLUXGATE_CONSOLE_SCYLLA.*go together"):
        load_settings(ConsoleSettings)


def test_stores_default_to_the_persisters_targets() -> None:
    settings = load_settings(ConsoleSettings)
    assert settings.scylla.table == "fluxgate.temperature_aggregates"
    assert (settings.hazelcast.members, settings.hazelcast.cluster_name) == (["127.0.0.1:5701"], "fluxgate")
    assert "INTO temperature_aggregates" in settings.hazelcast.kcql


def test_dead_letter_counting_defaults() -> None:
    letters = load_settings(ConsoleSettings).deadletters
    assert (letters.timeline_minutes, letters.kept_reasons, letters.kept_services) == (60, 8, 8)


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("TIMELINE_MINUTES", "4", "greater than or equal to 5"),
        ("TIMELINE_MINUTES", "181", "less than or equal to 180"),
        ("KEPT_REASONS", "0", "greater than or equal to 1"),
        ("KEPT_SERVICES", "many", "valid integer"),
    ],
)
def test_a_bad_counting_setting_stops_the_console_at_start_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, value: str, why: str
) -> None:
    monkeypatch.setenv(f"FLUXGATE_CONSOLE_DEADLETTERS__{name}", value)
    with pytest.raises(SystemExit) as stopped:
        main()
    said = capsys.readouterr().err
    assert stopped.value.code == 2
    assert f"[env FLUXGATE_CONSOLE_DEADLETTERS__{name}]: Input should be" in said and why in said


def test_replay_targets_default_to_where_the_pipelines_dead_letters_come_from() -> None:
    targets = load_settings(ConsoleSettings).replay.targets
    assert targets == {"sensors.deadletter": ["sensors.readings"], "persisters.deadletter": ["temperatures.aggregated"]}


@pytest.mark.parametrize(
    ("targets", "problem"),
    [
        ('{"sensors.dlq": ["sensors.readings"]}', "not dead-letter topics read"),
        ('{"sensors.deadletter": ["persisters.deadletter"]}', "cannot be replay targets"),
        ('{"sensors.deadletter": ["console.replays"]}', "cannot be replay targets"),
    ],
)
def test_replay_targets_that_cannot_be_meant_stop_the_start(
    monkeypatch: pytest.MonkeyPatch, targets: str, problem: str
) -> None:
    monkeypatch.setenv("FLUXGATE_CONSOLE_REPLAY__TARGETS", targets)
    with pytest.raises(ConfigError, match=f"FLUXGATE_CONSOLE_REPLAY__TARGETS.*{problem}"):
        load_settings(ConsoleSettings, page_auth={"mode": "none"}, replay_auth={"mode": "none"}).checked()
    monkeypatch.setenv("FLUXGATE_CONSOLE_REPLAY__TARGETS", '{"sensors.deadletter": ["not a topic!"]}')
    with pytest.raises(ConfigError, match="FLUXGATE_CONSOLE_REPLAY__TARGETS"):
        load_settings(ConsoleSettings)


def test_the_page_is_on_loopback_unless_said_and_tls_needs_both_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = load_settings(ConsoleSettings)
    assert (settings.web.host, settings.web.tls_certfile, settings.web.trusted_origins) == ("127.0.0.1", None, [])
    assert settings.web.allowed_hosts == ["127.0.0.1", "localhost", "[::1]"]
    cert = tmp_path / "console.crt"
    cert.write_text("a PEM certificate")
    monkeypatch.setenv("FLUXGATE_CONSOLE_WEB__TLS_CERTFILE", str(cert))
    with pytest.raises(ConfigError, match=r"FLUXGATE_CONSOLE_WEB[\s\S]*tls_certfile and tls_keyfile go together"):
        load_settings(ConsoleSettings)
    monkeypatch.setenv("FLUXGATE_CONSOLE_WEB__TLS_KEYFILE", str(tmp_path / "missing.key"))
    with pytest.raises(ConfigError, match="FLUXGATE_CONSOLE_WEB__TLS_KEYFILE"):
        load_settings(ConsoleSettings)
    monkeypatch.delenv("FLUXGATE_CONSOLE_WEB__TLS_CERTFILE")
    monkeypatch.delenv("FLUXGATE_CONSOLE_WEB__TLS_KEYFILE")
    monkeypatch.setenv("FLUXGATE_CONSOLE_WEB__TRUSTED_ORIGINS", '["https://console.example/path"]')
    with pytest.raises(ConfigError, match="FLUXGATE_CONSOLE_WEB__TRUSTED_ORIGINS"):
        load_settings(ConsoleSettings)
