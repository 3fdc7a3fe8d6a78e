"""Cassandra and Hazelcast: generated configuration, command lines and the raw CQL probe's
parsing, checked without starting anything."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluxgate_stack.probes import _cql_first_text
from fluxgate_stack.servers.cassandra import CassandraServer, cassandra_yaml, node_config
from fluxgate_stack.servers.hazelcast import HazelcastServer, hazelcast_xml
from fluxgate_stack.settings import StackSettings

NS = {"hz": "http://www.hazelcast.com/schema/config"}


@pytest.fixture
def settings(tmp_path: Path) -> StackSettings:
    return StackSettings(home=tmp_path)


def installed(server: CassandraServer | HazelcastServer, *jars: str) -> None:
    libs = server.home / "libs"
    libs.mkdir(parents=True)
    for jar in jars:
        (libs / jar).touch()


def test_cassandra_yaml_is_a_single_node_on_loopback(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path, cassandra_port=19042, cassandra_storage_port=17000)
    config: dict[str, Any] = yaml.safe_load(cassandra_yaml(node_config(settings, tmp_path / "d")))
    assert (config["listen_address"], config["rpc_address"]) == ("127.0.0.1", "127.0.0.1")
    assert (config["native_transport_port"], config["storage_port"]) == (19042, 17000)
    [seeds] = config["seed_provider"]
    assert seeds["class_name"] == "org.apache.cassandra.locator.SimpleSeedProvider"
    assert seeds["parameters"] == [{"seeds": "127.0.0.1:17000"}]
    assert config["num_tokens"] == 1 and config["concurrent_compactors"] == 1
    assert config["auto_snapshot"] is False and config["commitlog_sync"] == "batch"
    assert config["authenticator"] == "AllowAllAuthenticator"
    assert config["partitioner"] == "org.apache.cassandra.dht.Murmur3Partitioner"
    assert config["data_file_directories"] == [str(tmp_path / "d" / "data")]
    assert config["hints_directory"] == str(tmp_path / "d" / "hints")


def test_cassandra_command_line(settings: StackSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    server = CassandraServer(settings.model_copy(update={"java": "sh", "cassandra_heap": "768m"}))
    monkeypatch.setattr(CassandraServer, "java", lambda self: "/usr/bin/java")
    installed(server, "cassandra-all-5.0.9.jar", "jamm-0.4.0.jar")
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    command = server.command()
    assert command[0] == "/usr/bin/java" and command[-1] == "org.apache.cassandra.service.CassandraDaemon"
    assert {
        "-Xms768m",
        "-Xmx768m",
        "-Dcassandra-foreground=yes",
        f"-javaagent:{server.home}/libs/jamm-0.4.0.jar",
    } <= set(command)
    assert "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED" in command
    assert "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED" in command
    assert f"-Dcassandra.config=file://{server.run_dir}/cassandra.yaml" in command
    assert "-Dcassandra.skip_wait_for_gossip_to_settle=0" in command
    assert command[command.index("-cp") + 1] == f"{server.home}/libs/*"
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert server.command()[:3] == ["setpriv", "--reuid=fluxgate", "--regid=fluxgate"]


def test_cassandra_needs_its_jars(settings: StackSettings) -> None:
    server = CassandraServer(settings)
    assert not server.is_installed()
    installed(server, "jamm-0.4.0.jar")
    assert server.is_installed()


def test_hazelcast_member_config(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path, hazelcast_port=15701, hazelcast_cluster="c1")
    root = ET.fromstring(hazelcast_xml(settings))
    assert root.findtext("hz:cluster-name", namespaces=NS) == "c1"
    port = root.find("hz:network/hz:port", NS)
    assert port is not None and (port.text, port.get("auto-increment")) == ("15701", "false")
    join = root.find("hz:network/hz:join", NS)
    assert join is not None
    assert join.find("hz:multicast", NS).get("enabled") == "false"  # type: ignore[union-attr]
    assert join.find("hz:auto-detection", NS).get("enabled") == "false"  # type: ignore[union-attr]
    assert join.findtext("hz:tcp-ip/hz:member", namespaces=NS) == "127.0.0.1:15701"
    health = root.find("hz:network/hz:rest-api/hz:endpoint-group[@name='HEALTH_CHECK']", NS)
    assert health is not None and health.get("enabled") == "true"
    assert root.findtext("hz:ringbuffer[@name='default']/hz:capacity", namespaces=NS) == "100000"
    assert root.findtext("hz:queue[@name='bounded-*']/hz:max-size", namespaces=NS) == "100"
    assert root.findtext("hz:queue[@name='default']/hz:max-size", namespaces=NS) == "0"


def test_hazelcast_command_line(settings: StackSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    server = HazelcastServer(settings)
    monkeypatch.setattr(HazelcastServer, "java", lambda self: "/usr/bin/java")
    installed(server, "hazelcast-5.7.0.jar")
    command = server.command()
    assert command[-1] == "com.hazelcast.core.server.HazelcastMemberStarter"
    assert {"-Xms256m", "-Xmx256m", "-Dhazelcast.phone.home.enabled=false"} <= set(command)
    assert f"-Dhazelcast.config={server.run_dir}/hazelcast.xml" in command
    assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in command


def cql_string(text: str) -> bytes:
    return struct.pack("!H", len(text)) + text.encode()


def test_cql_rows_result_parsing() -> None:
    metadata = struct.pack("!iii", 2, 0x0001, 1) + cql_string("system") + cql_string("local")
    column = cql_string("release_version") + struct.pack("!H", 0x000D)
    rows = struct.pack("!ii", 1, 5) + b"5.0.9"
    assert _cql_first_text(metadata + column + rows) == "5.0.9"
    assert _cql_first_text(metadata + column + struct.pack("!i", 0)) is None  # no row
    assert _cql_first_text(struct.pack("!i", 1)) is None  # a Void result
    with pytest.raises(struct.error):
        _cql_first_text(metadata + column)  # cut short: cql_ready turns this into "not ready"


def test_prometheus_evaluates_the_charts_rules_and_scrapes_the_targets_runs_write(tmp_path: Path) -> None:
    import json

    import yaml

    from fluxgate_stack.servers.prometheus import PrometheusServer, remove_targets, targets_dir, write_targets

    settings = StackSettings(home=tmp_path)
    server = PrometheusServer(settings)
    [config] = server.config_files().values()
    loaded = yaml.safe_load(config)
    assert loaded["rule_files"] == [str(tmp_path / "deploy/charts/fluxgate/files/prometheus-rules.yaml")]
    [job] = loaded["scrape_configs"]
    assert job["file_sd_configs"] == [{"files": [str(targets_dir(settings) / "*.json")], "refresh_interval": "5s"}]
    assert f"--web.listen-address=127.0.0.1:{settings.prometheus_port}" in server.command()

    path = write_targets("run-1", {"mqtt-proxy": "127.0.0.1:9101"}, settings)
    assert json.loads(path.read_text()) == [
        {"targets": ["127.0.0.1:9101"], "labels": {"fluxgate_service": "mqtt-proxy"}}
    ]
    remove_targets("run-1", settings)
    assert not path.exists()
