"""Generated configuration: what each server is told, checked without starting anything."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import httpx
import pytest

from fluxgate_stack.errors import StackError, UnknownServer
from fluxgate_stack.fetch import maven_pom
from fluxgate_stack.servers import build, default_names
from fluxgate_stack.servers.elasticsearch import ElasticsearchServer, elasticsearch_yml, node_settings
from fluxgate_stack.servers.kafka import random_cluster_id, server_properties
from fluxgate_stack.servers.mosquitto import mosquitto_conf
from fluxgate_stack.servers.registry import RegistryServer
from fluxgate_stack.settings import StackSettings, find_repo_root, parse_topics
from fluxgate_stack.stack import Endpoints


@pytest.fixture(autouse=True)
def _stack_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests check the defaults: a developer's own ports (a worktree's FLUXGATE_STACK_*) stay out."""
    for name in [name for name in os.environ if name.startswith("FLUXGATE_STACK_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def settings(tmp_path: Path) -> StackSettings:
    return StackSettings(home=tmp_path)


def as_dict(properties: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in properties.splitlines() if line and not line.startswith("#"))


def test_kafka_single_kraft_node_on_loopback(settings: StackSettings, tmp_path: Path) -> None:
    props = as_dict(server_properties(settings, tmp_path / "data"))
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["listeners"] == ("PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094")
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL"
    assert (props["controller.listener.names"], props["inter.broker.listener.name"]) == ("CONTROLLER", "PLAINTEXT")
    assert props["log.dirs"] == str(tmp_path / "data")
    assert props["auto.create.topics.enable"] == "false"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["transaction.state.log.min.isr"] == "1"
    assert int(props["log.cleaner.dedupe.buffer.size"]) <= 32 * 2**20  # fits a 256 MiB test broker
    replication = {key: value for key, value in props.items() if key.endswith("replication.factor")}
    assert len(replication) >= 3 and set(replication.values()) == {"1"}


def test_kafka_ports_follow_settings(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path, kafka_port=19092, kafka_controller_port=19093, kafka_secure_port=19094)
    props = as_dict(server_properties(settings, tmp_path))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093,SASL_SSL://127.0.0.1:19094"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092,SASL_SSL://127.0.0.1:19094"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"


def test_cluster_id_is_a_kafka_uuid() -> None:
    for _ in range(200):
        cluster_id = random_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def test_mosquitto_conf(settings: StackSettings) -> None:
    lines = mosquitto_conf(settings, "/data/mosquitto", "/run/mosquitto.log").splitlines()
    assert "listener 1883 127.0.0.1" in lines
    assert "allow_anonymous true" in lines
    assert "persistence true" in lines
    assert "persistence_location /data/mosquitto/" in lines  # mosquitto wants the trailing slash
    assert "max_queued_messages 100000" in lines
    assert "log_dest file /run/mosquitto.log" in lines
    assert any(line.startswith("user ") for line in lines)


def test_registry_binds_loopback_with_confluent_ids(settings: StackSettings) -> None:
    props = RegistryServer(settings)._properties()
    assert "-Dquarkus.http.host=127.0.0.1" in props
    assert "-Dquarkus.http.port=8081" in props
    assert "-Dapicurio.ccompat.legacy-id-mode.enabled=false" in props


def test_registry_finds_runner_jar_of_either_layout(settings: StackSettings) -> None:
    server = RegistryServer(settings)
    assert not server.is_installed()
    server.home.mkdir(parents=True)
    (server.home / "apicurio-registry-app-3.0.9-runner.jar").touch()
    assert server.is_installed()
    assert server.command()[-1].endswith("-runner.jar")


def test_endpoints_and_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLUXGATE_STACK_KAFKA_PORT", "29092")
    monkeypatch.setenv("FLUXGATE_STACK_HOME", str(tmp_path))
    settings = StackSettings()
    assert settings.local_dir == tmp_path / ".local"
    assert Endpoints.from_settings(settings) == Endpoints(
        bootstrap="127.0.0.1:29092",
        registry_url="http://127.0.0.1:8081/apis/ccompat/v7",
        mqtt_host="127.0.0.1",
        mqtt_port=1883,
        coap_url="coap://127.0.0.1:15683",
        elasticsearch_url="http://127.0.0.1:9200",
        cassandra_host="127.0.0.1",
        cassandra_port=9042,
        hazelcast_address="127.0.0.1:5701",
        hazelcast_cluster="fluxgate",
        secure_bootstrap="127.0.0.1:9094",
        ca_path=str(tmp_path / ".local" / "pki" / "ca.crt"),
        secure_elasticsearch_url="https://127.0.0.1:9201",
        secure_cassandra_port=9043,
        secure_registry_url="https://127.0.0.1:8444/apis/ccompat/v7",
        prometheus_url="http://127.0.0.1:9090",
    )
    assert Endpoints.from_settings(settings).cassandra_contact_point == "127.0.0.1:9042"
    assert Endpoints.from_settings(settings).ca_file == tmp_path / ".local" / "pki" / "ca.crt"
    env = {key: value for server in build(None, settings, all_if_empty=True) for key, value in server.env().items()}
    assert env["FLUXGATE_KAFKA_BOOTSTRAP"] == "127.0.0.1:29092"
    assert env["FLUXGATE_KAFKA_SECURE_BOOTSTRAP"] == "127.0.0.1:9094"
    assert env["FLUXGATE_KAFKA_CA_FILE"] == str(tmp_path / ".local" / "pki" / "ca.crt")
    assert env["FLUXGATE_REGISTRY_URL"] == "http://127.0.0.1:8081/apis/ccompat/v7"
    assert env["FLUXGATE_MQTT_PORT"] == "1883"
    assert env["FLUXGATE_ELASTICSEARCH_URL"] == "http://127.0.0.1:9200"
    assert (env["FLUXGATE_CASSANDRA_HOST"], env["FLUXGATE_CASSANDRA_PORT"]) == ("127.0.0.1", "9042")
    assert (env["FLUXGATE_HAZELCAST_ADDRESS"], env["FLUXGATE_HAZELCAST_CLUSTER"]) == ("127.0.0.1:5701", "fluxgate")


def test_parse_topics() -> None:
    assert parse_topics("a:6, b ,c:1,") == {"a": 6, "b": 3, "c": 1}
    with pytest.raises(ValueError, match="bad topic"):
        parse_topics("a:0")


def test_default_topics(settings: StackSettings) -> None:
    assert settings.topic_partitions == {
        "sensors.readings": 3,
        "sensors.deadletter": 3,
        "temperatures.aggregated": 3,
        "temperatures.late": 3,
        "devices.status": 3,
    }


def test_server_selection(settings: StackSettings) -> None:
    assert default_names() == [
        "kafka",
        "registry",
        "mosquitto",
        "elasticsearch",
        "cassandra",
        "hazelcast",
        "prometheus",
    ]
    assert [s.name for s in build(["mosquitto", "kafka"], settings)] == ["kafka", "mosquitto"]  # start order
    assert [s.name for s in build(None, settings, all_if_empty=True)][-2:] == ["coap-server", "prometheus"]
    with pytest.raises(UnknownServer, match="nope"):
        build(["nope"], settings)


def test_maven_pom_lists_coordinates() -> None:
    pom = maven_pom(["org.apache.kafka:kafka_2.13:4.4.0"])
    assert "<groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>4.4.0</version>" in pom


def test_repo_root_is_found_by_walking_up(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    assert find_repo_root(nested) == tmp_path
    with pytest.raises(StackError):
        find_repo_root(Path("/proc/self"))


def test_missing_java_and_maven_are_installed_from_debian_even_when_the_jars_are_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fluxgate_stack import fetch
    from fluxgate_stack.stack import Stack

    asked: list[dict[str, str]] = []
    monkeypatch.setattr(fetch, "ensure_debian_packages", asked.append)
    monkeypatch.setattr(RegistryServer, "is_installed", lambda self: True)
    settings = StackSettings(home=tmp_path, java=str(tmp_path / "no-java"), mvn=str(tmp_path / "no-mvn"))
    Stack(settings).install(["registry"])
    assert asked == [{str(tmp_path / "no-java"): "openjdk-17-jre-headless", str(tmp_path / "no-mvn"): "maven"}]


def test_present_toolchain_installs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fluxgate_stack import fetch
    from fluxgate_stack.stack import Stack

    asked: list[dict[str, str]] = []
    monkeypatch.setattr(fetch, "ensure_debian_packages", asked.append)
    monkeypatch.setattr(RegistryServer, "is_installed", lambda self: True)
    Stack(StackSettings(home=tmp_path, java="sh", mvn="sh")).install(["registry"])
    assert asked == []


def test_elasticsearch_single_node_on_loopback(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path, es_port=19200, es_transport_port=19300)
    node = node_settings(settings, tmp_path / "data", tmp_path / "logs")
    assert node["discovery.type"] == "single-node"
    assert node["network.host"] == "127.0.0.1"
    assert (node["http.port"], node["transport.port"]) == ("19200", "19300")
    assert node["xpack.security.enabled"] == "false"
    assert node["cluster.routing.allocation.disk.threshold_enabled"] == "false"
    assert node["path.data"] == str(tmp_path / "data")
    assert 'xpack.security.enabled: "false"' in elasticsearch_yml(node).splitlines()


def test_elasticsearch_config_files_heap_jit_and_extra_settings(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path, es_heap="384m", es_java_home=tmp_path / "jdk")
    server = ElasticsearchServer(settings, extra_settings={"thread_pool.write.size": "1"}, base_dir=tmp_path / "n")
    files = {path.name: text for path, text in server.config_files().items()}
    assert set(files) == {"elasticsearch.yml", "jvm.options", "log4j2.properties"}
    assert files["elasticsearch.yml"].splitlines()[-1] == 'thread_pool.write.size: "1"'
    assert f'path.data: "{tmp_path / "n" / "data"}"' in files["elasticsearch.yml"]
    options = files["jvm.options"].splitlines()
    assert {"-Xms384m", "-Xmx384m", "-XX:TieredStopAtLevel=1"} <= set(options)
    assert server.process_env()["ES_JAVA_HOME"] == str(tmp_path / "jdk")
    assert server.process_env()["ES_PATH_CONF"] == str(tmp_path / "n" / "run" / "config")
    no_quick_start = ElasticsearchServer(StackSettings(home=tmp_path, jvm_quick_start=False, es_java_home=tmp_path))
    assert "-XX:TieredStopAtLevel=1" not in no_quick_start.config_files()[no_quick_start.config_dir / "jvm.options"]


def test_elasticsearch_runs_unprivileged_when_root(settings: StackSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    server = ElasticsearchServer(settings)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert server.command()[:3] == ["setpriv", "--reuid=fluxgate", "--regid=fluxgate"]
    assert server.command()[-1] == str(server.home / "bin" / "elasticsearch")
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert server.command() == [str(server.home / "bin" / "elasticsearch")]


def test_zip_unpacking_keeps_the_executable_bit(tmp_path: Path) -> None:
    import stat
    import zipfile

    from fluxgate_stack.fetch import unpack_zip

    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        launcher = zipfile.ZipInfo("es-1/bin/elasticsearch")
        launcher.external_attr = (stat.S_IFREG | 0o755) << 16
        zipped.writestr(launcher, "#!/bin/sh\n")
        zipped.writestr("es-1/config/jvm.options", "-Xmx1g\n")
    unpack_zip(archive, tmp_path / "out", strip_top_folder=True)
    assert (tmp_path / "out" / "bin" / "elasticsearch").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out" / "config" / "jvm.options").read_text() == "-Xmx1g\n"


def test_registry_compatibility_asks_again_while_the_journal_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    """Restarted over its journal, Apicurio answers 409 "already exists" until the replay has the rule."""
    from fluxgate_stack.servers import registry

    answers = [409, 409, 200]
    calls: list[str] = []

    def put(url: str, **_: object) -> httpx.Response:
        calls.append(url)
        return httpx.Response(answers.pop(0), text='{"message":"A rule named \'COMPATIBILITY\' already exists."}')

    monkeypatch.setattr(registry.httpx, "put", put)
    monkeypatch.setattr(registry.time, "sleep", lambda _: None)
    registry.set_compatibility("http://registry", "BACKWARD")
    assert calls == ["http://registry/config"] * 3


def test_registry_compatibility_refusal_names_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from fluxgate_stack.servers import registry

    monkeypatch.setattr(registry.httpx, "put", lambda *_, **__: httpx.Response(409, text="already exists"))
    with pytest.raises(StackError, match="PUT /config BACKWARD answered 409: already exists"):
        registry.set_compatibility("http://registry", "BACKWARD", patience=0)
    monkeypatch.setattr(registry.httpx, "put", lambda *_, **__: httpx.Response(422, text="bad level"))
    with pytest.raises(StackError, match="answered 422: bad level"):
        registry.set_compatibility("http://registry", "BACKWARD")
