"""tasks.max > 1: what each member of ``fluxgate connect`` gets, and that its service loads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from connect_fixtures import load_env, with_tasks
from typer.testing import CliRunner

from fluxgate_connect.cli import app
from fluxgate_connect.config import load
from fluxgate_connect.connectors import CONNECTORS, Connector
from fluxgate_connect.tasks import Members, members
from fluxgate_connect.translate import Translation, has_field, translate
from fluxgate_mqtt_proxy.topic_routes import compile_routes

COAP = "com.datamountaineer.streamreactor.connect.coap.source.CoapSourceConnector"


def tasks_of(path: Path, environ: dict[str, str] | None = None) -> tuple[Translation, Members]:
    translation = translate(load(path, environ or {}))
    return translation, members(translation, environ or {})


def test_one_task_adds_nothing(tmp_path: Path) -> None:
    _, one = tasks_of(with_tasks("hazelcast-sink.properties", tmp_path, 1))
    assert one == Members({}, [{}])


def test_sink_members_are_static_members_of_the_connectors_group_each_on_its_own_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {"FLUXGATE_HZ_HTTP__PORT": "9300", "FLUXGATE_HZ_KAFKA__GROUP_INSTANCE_ID": "shared"}
    translation, two = tasks_of(with_tasks("hazelcast-sink.properties", tmp_path, 2), environ)
    assert two.common == {}
    assert two.each == [
        {"FLUXGATE_HZ_KAFKA__GROUP_INSTANCE_ID": "connect-hazelcast-sink-0", "FLUXGATE_HZ_HTTP__PORT": "9300"},
        {"FLUXGATE_HZ_KAFKA__GROUP_INSTANCE_ID": "connect-hazelcast-sink-1", "FLUXGATE_HZ_HTTP__PORT": "9301"},
    ]
    settings = [
        load_env(translation.connector.settings, {**translation.env, **two.env(i)}, monkeypatch) for i in (0, 1)
    ]
    assert {s.group_id() for s in settings} == {"connect-hazelcast-sink"}
    assert [(s.kafka.group_instance_id, s.http.port) for s in settings] == [
        ("connect-hazelcast-sink-0", 9300),
        ("connect-hazelcast-sink-1", 9301),
    ]


def test_a_sink_without_a_name_numbers_the_services_own_group_from_the_services_port(tmp_path: Path) -> None:
    config = tmp_path / "es.properties"
    config.write_text(
        "connector.class=io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector\ntasks.max=2\n"
        "connect.elastic.kcql=INSERT INTO i SELECT * FROM t\n"
    )
    _, two = tasks_of(config)
    assert [member["FLUXGATE_ES_KAFKA__GROUP_INSTANCE_ID"] for member in two.each] == [
        "fluxgate-es-persister-0",
        "fluxgate-es-persister-1",
    ]
    assert [member["FLUXGATE_ES_HTTP__PORT"] for member in two.each] == ["9104", "9105"]


def test_mqtt_members_share_the_subscriptions_each_with_its_own_client_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    translation, two = tasks_of(Path(__file__).parents[1] / "fixtures" / "mqtt-source.properties")
    assert two.common == {"FLUXGATE_MQTT_MQTT__SHARE_GROUP": "mqtt-source"}
    assert [member["FLUXGATE_MQTT_MQTT__CLIENT_ID"] for member in two.each] == ["dm_source_id-0", "dm_source_id-1"]
    for index in (0, 1):
        settings = load_env(translation.connector.settings, {**translation.env, **two.env(index)}, monkeypatch)
        routes = compile_routes(settings.routes, settings.mqtt.share_group)
        assert [route.subscription for route in routes] == ["$share/mqtt-source/sensors/+/+"]


def test_mqtt_members_keep_a_share_group_the_environment_sets_and_the_default_client_id(tmp_path: Path) -> None:
    path = with_tasks("mqtt-source-local.properties", tmp_path, 2, connector="a/b")
    config = path.read_text().replace("connect.mqtt.client.id=${MQTT_CLIENT_ID}\n", "")
    path.write_text(config)
    environ = {"MQTT_HOST": "h", "MQTT_PORT": "1883", "READINGS_TOPIC": "r", "MQTT_PREFIX": "p"}
    _, two = tasks_of(path, environ)
    assert two.common == {"FLUXGATE_MQTT_MQTT__SHARE_GROUP": "a-b"}  # '/' cannot be in a $share group
    _, kept = tasks_of(path, {**environ, "FLUXGATE_MQTT_MQTT__SHARE_GROUP": "mine"})
    assert kept.common == {"FLUXGATE_MQTT_MQTT__SHARE_GROUP": "mine"}
    assert [member["FLUXGATE_MQTT_MQTT__CLIENT_ID"] for member in two.each] == [
        "fluxgate-mqtt-proxy-0",
        "fluxgate-mqtt-proxy-1",
    ]


def test_coap_members_observe_every_resource_once_between_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "coap.properties"
    config.write_text(
        f"connector.class={COAP}\ntasks.max=2\nconnect.coap.uri=coap://h:5683\n"
        "connect.coap.kcql=INSERT INTO t SELECT * FROM a, b, c\n"
    )
    translation, two = tasks_of(config, {"FLUXGATE_COAP_HTTP__PORT": "0"})
    assert two.common == {"FLUXGATE_COAP_MEMBERS": "2"}
    assert two.each == [
        {"FLUXGATE_COAP_MEMBER": "0", "FLUXGATE_COAP_HTTP__PORT": "0"},  # 0: each picks a free port
        {"FLUXGATE_COAP_MEMBER": "1", "FLUXGATE_COAP_HTTP__PORT": "0"},
    ]
    observed = [
        [
            r.uri
            for r in load_env(translation.connector.settings, {**translation.env, **two.env(i)}, monkeypatch).observed
        ]
        for i in (0, 1)
    ]
    assert observed == [["coap://h:5683/a", "coap://h:5683/c"], ["coap://h:5683/b"]]


@pytest.mark.parametrize("connector", [c for c in CONNECTORS if c.sink], ids=lambda c: c.service)
def test_what_sink_members_set_are_fields_of_each_persisters_settings(connector: Connector) -> None:
    # The Hazelcast test above loads them; the other persisters share the sink runner's settings.
    assert has_field(connector.settings, "kafka.group_instance_id") and has_field(connector.settings, "http.port")


def test_print_env_shows_what_every_member_has_then_what_each_has_of_its_own(tmp_path: Path) -> None:
    config = with_tasks("hazelcast-sink.properties", tmp_path, 2)
    result = CliRunner().invoke(app, ["connect", str(config), "--print-env"], env={"FLUXGATE_HZ_HTTP__PORT": "9300"})
    assert result.exit_code == 0, result.stderr
    common, first, second = result.stdout.split("# member ")
    assert common.startswith("# every member of 2 (tasks.max):\n") and "FLUXGATE_HZ_SINK__KCQL=" in common
    assert "GROUP_INSTANCE_ID" not in common
    assert first.splitlines()[1:] == [
        "FLUXGATE_HZ_HTTP__PORT=9300",
        "FLUXGATE_HZ_KAFKA__GROUP_INSTANCE_ID=connect-hazelcast-sink-0",
    ]
    assert second.splitlines()[1:] == [
        "FLUXGATE_HZ_HTTP__PORT=9301",
        "FLUXGATE_HZ_KAFKA__GROUP_INSTANCE_ID=connect-hazelcast-sink-1",
    ]
    assert "note: tasks.max=2: 2 members of hazelcast-persister" in result.stderr
