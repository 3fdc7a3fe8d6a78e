"""``fluxgate connect`` as a user meets it: refusals and warnings on stderr, exit codes, secrets."""

from __future__ import annotations

from pathlib import Path

from connect_fixtures import FIXTURES
from typer.testing import CliRunner

from fluxgate_connect.cli import app

HZ = "io.lenses.streamreactor.connect.hazelcast.sink.HazelCastSinkConnector"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["connect", *args], env={})
    return result.exit_code, result.stdout, result.stderr


def test_a_refused_config_exits_2_naming_every_key_and_runs_nothing(tmp_path: Path) -> None:
    config = tmp_path / "hz.properties"
    config.write_text(
        f"connector.class={HZ}\nconnect.hazelcast.kcql=INSERT INTO q SELECT * FROM t STOREAS QUEUE\n"
        "topics.regex=t.*\nconnect.hazelcast.error.policy=SOMETIMES\n"
    )
    code, out, err = run(str(config), "--print-env")
    assert code == 2 and out == ""
    assert "topics.regex: not supported: list the topics in the KCQL" in err
    assert "connect.hazelcast.error.policy=SOMETIMES: expected NOOP, THROW or RETRY" in err


def test_unknown_keys_warn_and_covered_keys_are_noted_on_stderr(tmp_path: Path) -> None:
    config = tmp_path / "hz.properties"
    config.write_text(
        f"connector.class={HZ}\nconnect.hazelcast.kcql=INSERT INTO q SELECT * FROM t STOREAS QUEUE\n"
        "connect.hazelcast.mystery=1\nconnect.progress.enabled=true\n"
    )
    code, out, err = run(str(config), "--print-env")
    assert code == 0
    assert "warning: connect.hazelcast.mystery: not a key of the Hazelcast sink that Fluxgate knows" in err
    assert "note: connect.progress.enabled: nothing to set" in err
    assert "FLUXGATE_HZ_SINK__KCQL='INSERT INTO q SELECT * FROM t STOREAS QUEUE'" in out


def test_secrets_are_printed_only_when_asked() -> None:
    _, hidden, _ = run(str(FIXTURES / "mqtt-source.properties"), "--print-env")
    _, shown, _ = run(str(FIXTURES / "mqtt-source.properties"), "--print-env", "--show-secrets")
    assert "s3cret" not in hidden and "# FLUXGATE_MQTT_MQTT__PASSWORD=<secret: --show-secrets prints it>" in hidden
    assert "FLUXGATE_MQTT_MQTT__PASSWORD=s3cret" in shown


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    code, _, err = run(str(tmp_path / "nope.properties"))
    assert code == 2 and "nope.properties: No such file or directory" in err
