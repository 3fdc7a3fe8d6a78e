"""docker-compose.yml and the services' Dockerfiles are checked statically (no Docker
engine here): they must stay equivalent to the local stack and to the services' own
settings."""

from __future__ import annotations

import json
import shlex
import subprocess
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from charts import LOCAL_BIN, go_binary
from fluxgate_testing import specs
from fluxgate_testing.env import drop_env
from fluxgate_testing.specs import arguments, assert_settings_fields, console_scripts, load_with_env
from pydantic_settings import BaseSettings

from fluxgate_core.limits import LimitSettings
from fluxgate_stack.servers.elasticsearch import node_settings
from fluxgate_stack.servers.hazelcast import HEALTH_PATH as HAZELCAST_HEALTH_PATH
from fluxgate_stack.servers.hazelcast import hazelcast_xml
from fluxgate_stack.settings import StackSettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
SHARED_ENV = set(COMPOSE["x-service-env"])  # merged into every service's environment
BUILT = {name: spec for name, spec in SERVICES.items() if "build" in spec}
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Declared in compose before their Dockerfile is written: the checks that need the Dockerfile
# skip (with the reason in the summary) only while it is missing, and run once it exists;
# every other check runs. Remove a name once its Dockerfile is committed.


def service_dir(name: str) -> Path:
    return (ROOT / str(BUILT[name]["build"]["dockerfile"])).parent


def prefix_of(service: dict[str, Any]) -> str:
    """``FLUXGATE_<X>_``: every variable of a service but the shared ones has the same one."""
    own = [key for key in service.get("environment", {}) if key not in SHARED_ENV]
    prefixes = {"_".join(key.split("_")[:2]) + "_" for key in own}
    assert len(prefixes) == 1 and all(key.startswith("FLUXGATE_") for key in own), f"one prefix, got {prefixes}"
    return prefixes.pop()


def settings_class(name: str) -> type[BaseSettings]:
    return specs.settings_class(service_dir(name), prefix_of(BUILT[name]))


def dockerfile_of(name: str) -> Path:
    dockerfile = ROOT / str(BUILT[name]["build"]["dockerfile"])
    return dockerfile


def dockerfile_env(dockerfile: Path) -> dict[str, str]:
    return dict(item.split("=", 1) for args in arguments(dockerfile, "ENV") for item in shlex.split(args))


def image_tag(service: str) -> str:
    return str(SERVICES[service]["image"]).rsplit(":", 1)[1]


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> StackSettings:
    """The local stack's defaults, which compose mirrors: not this shell's ``FLUXGATE_STACK_*``
    (a worktree's own ports and cluster name)."""
    drop_env(monkeypatch, "FLUXGATE_STACK_")
    return StackSettings()


@pytest.fixture(scope="module")
def compose_check() -> Path:
    """tests/static/compose-check, built (Go's build cache makes a rebuild take a second)."""
    binary = LOCAL_BIN / "compose-check"
    go = go_binary("build tests/static/compose-check")
    subprocess.run(
        [go, "build", "-o", str(binary), "."], cwd=ROOT / "tests/static/compose-check", check=True, timeout=600
    )
    return binary


@pytest.mark.downloads
def test_compose_file_loads_as_docker_compose_would(compose_check: Path) -> None:
    result = subprocess.run(
        [str(compose_check), str(ROOT / "docker-compose.yml")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    # what a plain `docker compose up` runs: a service under a profile (Kibana's) only with it
    assert result.stdout.split() == sorted(name for name, spec in SERVICES.items() if not spec.get("profiles"))


@pytest.mark.downloads
def test_compose_check_rejects_an_invalid_file_naming_the_field(compose_check: Path, tmp_path: Path) -> None:
    broken = (ROOT / "docker-compose.yml").read_text().replace("service_healthy}", "service_heathy}", 1)
    (tmp_path / "docker-compose.yml").write_text(broken)
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")
    result = subprocess.run(
        [str(compose_check), str(tmp_path / "docker-compose.yml")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert "depends_on" in result.stderr and "condition" in result.stderr, result.stderr


def test_every_image_is_pinned() -> None:
    for name, spec in SERVICES.items():
        if "image" in spec:
            assert ":" in spec["image"] and not spec["image"].endswith(":latest"), name


def test_servers_match_the_local_stack_versions(stack: StackSettings) -> None:
    assert image_tag("kafka") == stack.kafka_version
    assert image_tag("kafka-topics") == stack.kafka_version
    assert image_tag("registry") == stack.registry_version
    assert image_tag("elasticsearch") == stack.es_version
    assert image_tag("kibana") == stack.es_version  # Kibana refuses an Elasticsearch of another version
    assert image_tag("hazelcast") == stack.hazelcast_version


def test_scylla_stands_where_the_local_cassandra_does(stack: StackSettings) -> None:
    spec = SERVICES["scylla"]
    assert spec["image"].startswith("scylladb/scylla:")
    assert f"{stack.cassandra_port}:9042" in spec["ports"]
    args = " ".join(spec["command"])
    for flag in ("--smp 1", "--memory 750M", "--overprovisioned 1", "--developer-mode 1"):
        assert flag in args, flag
    assert "SELECT release_version FROM system.local" in " ".join(spec["healthcheck"]["test"])
    named = {volume.split(":")[0]: volume.split(":")[1] for volume in spec["volumes"]}
    assert named.get("scylla-data") == "/var/lib/scylla"


def hazelcast_data_structures(xml: str) -> dict[str, str]:
    """Everything in a member's configuration but its network, element by element."""
    root = ET.fromstring(xml)
    return {
        f"{child.tag}[{child.get('name', '')}]": ET.tostring(child, encoding="unicode").strip()
        for child in root
        if not child.tag.endswith("}network")
    }


def test_hazelcast_matches_the_local_stack(stack: StackSettings) -> None:
    spec = SERVICES["hazelcast"]
    mounted = {config["source"]: config["target"] for config in spec["configs"]}
    target = mounted["hazelcast-xml"]
    java_opts = spec["environment"]["JAVA_OPTS"].split()
    assert f"-Dhazelcast.config={target}" in java_opts
    assert {f"-Xms{stack.hazelcast_heap}", f"-Xmx{stack.hazelcast_heap}"} <= set(java_opts)
    assert spec["environment"]["HZ_CLUSTERNAME"] == stack.hazelcast_cluster
    compose_xml = COMPOSE["configs"]["hazelcast-xml"]["content"]
    local = hazelcast_data_structures(hazelcast_xml(stack))
    # The local member also refuses to bind beyond loopback; the container binds its own address.
    local = {key: value for key, value in local.items() if not key.endswith("}properties[]")}
    assert {key: value for key, value in hazelcast_data_structures(compose_xml).items() if key in local} == local
    ns = "{http://www.hazelcast.com/schema/config}"
    rest_groups = [
        {group.get("name"): group.get("enabled") for group in ET.fromstring(xml).iter(f"{ns}endpoint-group")}
        for xml in (compose_xml, hazelcast_xml(stack))
    ]
    assert rest_groups[0] == rest_groups[1]  # the same REST endpoint groups, open and closed
    port = ET.fromstring(compose_xml).find(f"{ns}network/{ns}port")
    assert port is not None and (port.text, port.get("auto-increment")) == ("5701", "false")
    assert f"{stack.hazelcast_port}:5701" in spec["ports"]
    assert HAZELCAST_HEALTH_PATH in " ".join(spec["healthcheck"]["test"])
    # Clients present the cluster name; Hazelcast's own default ("dev") would be refused.
    persister = SERVICES["hazelcast-persister"]["environment"]
    assert persister["FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME"] == stack.hazelcast_cluster


def test_elasticsearch_matches_the_local_stack(stack: StackSettings, tmp_path: Path) -> None:
    spec = SERVICES["elasticsearch"]
    local = node_settings(stack, tmp_path, tmp_path)
    # Where it listens and stores differs by nature (container vs loopback); the rest must not.
    where = {"cluster.name", "node.name", "network.host", "http.port", "transport.port", "path.data", "path.logs"}
    for key in sorted(local.keys() - where):
        assert str(spec["environment"].get(key)) == local[key], key
    assert set(spec["environment"]["ES_JAVA_OPTS"].split()) == {f"-Xms{stack.es_heap}", f"-Xmx{stack.es_heap}"}
    assert f"{stack.es_port}:9200" in spec["ports"]
    health = " ".join(spec["healthcheck"]["test"])
    assert "/_cluster/health?wait_for_status=yellow" in health
    named = {volume.split(":")[0]: volume.split(":")[1] for volume in spec["volumes"]}
    assert named.get("es-data") == "/usr/share/elasticsearch/data"  # the index survives `docker compose down`


def test_kibana_reaches_elasticsearch_once_it_is_healthy() -> None:
    spec = SERVICES["kibana"]
    assert json.loads(spec["environment"]["ELASTICSEARCH_HOSTS"]) == ["http://elasticsearch:9200"]
    assert spec["depends_on"]["elasticsearch"] == {"condition": "service_healthy"}


def test_topics_match_the_local_stack(stack: StackSettings) -> None:
    command = " ".join(SERVICES["kafka-topics"]["command"])
    listed = command.split("for t in ", 1)[1].split(";", 1)[0].split()
    partitions = {int(command.split("--partitions ", 1)[1].split()[0])}
    assert dict.fromkeys(listed, partitions.pop()) == stack.topic_partitions


def test_registry_keeps_schemas_in_the_journal_topic_like_the_local_stack(stack: StackSettings) -> None:
    env = SERVICES["registry"]["environment"]
    assert env["APICURIO_STORAGE_KIND"] == "kafkasql"
    assert env["APICURIO_KAFKASQL_TOPIC"] == stack.registry_journal_topic
    created = " ".join(SERVICES["kafka-topics"]["command"])
    assert f"--topic {stack.registry_journal_topic} --partitions 1" in created
    assert "retention.ms=-1" in created  # the journal is the registry: nothing may expire
    assert SERVICES["registry"]["depends_on"]["kafka-topics"]["condition"] == "service_completed_successfully"


def test_registry_compatibility_matches_the_local_stack(stack: StackSettings) -> None:
    body = " ".join(SERVICES["registry-config"]["command"])
    assert f'"compatibility":"{stack.registry_compatibility}"' in body


def test_every_service_runs_in_compose() -> None:
    """Every package under services/ with a console script is a compose service built from its folder."""
    projects = (pyproject.parent for pyproject in (ROOT / "services").rglob("pyproject.toml"))
    runnable = {folder for folder in projects if console_scripts(folder)}
    assert runnable, "no services found"
    assert runnable == {service_dir(name) for name in BUILT}
    prefixes = [prefix_of(spec) for spec in BUILT.values()]
    assert len(prefixes) == len(set(prefixes)), f"two services share a settings prefix: {prefixes}"


@pytest.mark.parametrize("name", sorted(BUILT))
def test_service_images_build_from_their_own_dockerfile(name: str) -> None:
    assert BUILT[name]["build"]["context"] == "."
    dockerfile = dockerfile_of(name)
    assert dockerfile.is_file(), dockerfile
    text = dockerfile.read_text()
    assert "HEALTHCHECK" in text and "FLUXGATE_SCHEMAS_DIR" in text and "USER" in text


@pytest.mark.parametrize("name", sorted(BUILT))
def test_dockerfile_copies_only_what_exists_and_runs_the_console_script(name: str) -> None:
    dockerfile = dockerfile_of(name)
    for args in arguments(dockerfile, "COPY"):
        assert not args.startswith("--from"), "single-stage images"
        *sources, _ = shlex.split(args)
        for source in sources:
            assert (ROOT / source).exists(), f"{dockerfile}: COPY {source} (paths are relative to the repo root)"
    [entrypoint] = arguments(dockerfile, "ENTRYPOINT")
    scripts = tomllib.loads((dockerfile.parent / "pyproject.toml").read_text())["project"]["scripts"]
    assert json.loads(entrypoint)[0] in scripts, f"{dockerfile}: ENTRYPOINT is not a console script of the service"
    [user] = arguments(dockerfile, "USER")
    assert user not in {"root", "0"}


@pytest.mark.parametrize("name", sorted(BUILT))
def test_dockerfile_env_names_are_settings_fields_and_its_port_is_the_settings_port(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dockerfile = dockerfile_of(name)
    env = dockerfile_env(dockerfile)
    cls = settings_class(name)
    assert_settings_fields(cls, env, str(dockerfile))
    port = load_with_env(cls, env, monkeypatch).http.port
    assert arguments(dockerfile, "EXPOSE") == [str(port)]
    [healthcheck] = arguments(dockerfile, "HEALTHCHECK")
    # the port the container is told, falling back to the image's own (a fixed port was wrong
    # for a container told another one: found when the images first ran with other ports)
    variable = f"{cls.model_config['env_prefix']}HTTP__PORT"
    assert f"127.0.0.1:%s/healthz' % os.environ.get('{variable}', '{port}')" in healthcheck
    assert published(name, port)


@pytest.mark.parametrize("name", sorted(BUILT))
def test_service_env_names_are_settings_fields_and_values_validate(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = BUILT[name]["environment"]
    cls = settings_class(name)
    assert_settings_fields(cls, env, name)
    settings: Any = load_with_env(cls, env, monkeypatch)
    port = settings.http.port
    assert published(name, port)
    assert str(port) in " ".join(BUILT[name]["healthcheck"]["test"])


def test_gateways_show_every_limit_with_its_default() -> None:
    """Every gateway with a ``limits`` group sets each of its fields in compose, to the
    settings' default: an operator sees every knob, and compose cannot drift from the code."""
    gateways = {name: settings_class(name) for name in sorted(BUILT)}
    gateways = {name: cls for name, cls in gateways.items() if "limits" in cls.model_fields}
    assert set(gateways) == {"mqtt-proxy", "coap-ingest"}
    for name, cls in gateways.items():
        prefix, env = str(cls.model_config["env_prefix"]), BUILT[name]["environment"]
        limits = LimitSettings()
        for field in LimitSettings.model_fields:
            key = f"{prefix}LIMITS__{field.upper()}"
            assert key in env, f"{name}: {key} is missing"
            assert int(env[key]) == getattr(limits, field), f"{name}: {key}={env[key]} is not the default"


@pytest.mark.parametrize("name", sorted(BUILT))
def test_services_reach_the_other_containers_not_their_own_loopback(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    settings: Any = load_with_env(settings_class(name), BUILT[name]["environment"], monkeypatch)
    endpoints = {"kafka": settings.kafka.bootstrap_servers, "registry": settings.registry.url}
    if "mqtt" in type(settings).model_fields:
        endpoints["mosquitto"] = settings.mqtt.host
    if "elasticsearch" in type(settings).model_fields:
        endpoints["elasticsearch"] = " ".join(settings.elasticsearch.hosts)
    if "scylla" in type(settings).model_fields:
        endpoints["scylla"] = " ".join(settings.scylla.contact_points)
    if "hazelcast" in type(settings).model_fields:
        endpoints["hazelcast"] = " ".join(settings.hazelcast.members)
    for server, endpoint in endpoints.items():
        assert not any(host in endpoint for host in LOOPBACK), f"{name}: {server} at {endpoint} is the container itself"
        assert server in endpoint, f"{name}: {endpoint} is not the {server} service"
        assert server in dependencies_of(name), f"{name} starts before {server} is healthy"


def published(name: str, port: int) -> bool:
    """``port`` is published as itself, on every host address or on one (the console: loopback only)."""
    return any(str(mapping).split(":", 1)[-1] == f"{port}:{port}" or mapping == f"{port}:{port}"
               for mapping in BUILT[name]["ports"])  # fmt: skip


def dependencies_of(name: str) -> set[str]:
    """Every service ``name`` waits for, directly or through another one."""
    direct = set(SERVICES[name].get("depends_on", {}))
    return direct.union(*(dependencies_of(dependency) for dependency in direct))


def test_named_volumes_are_declared() -> None:
    declared = set(COMPOSE.get("volumes") or {})
    for name, spec in SERVICES.items():
        for volume in spec.get("volumes", []):
            source = volume.split(":", 1)[0]
            if not source.startswith((".", "/")):
                assert source in declared, f"{name}: volume {source} is not declared"


def test_aggregator_checkpoints_live_on_a_named_volume(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SERVICES["aggregator"]
    settings: Any = load_with_env(settings_class("aggregator"), spec["environment"], monkeypatch)
    checkpoint = PurePosixPath(settings.checkpoint_dir)
    mounts = {PurePosixPath(v.split(":")[1]): v.split(":")[0] for v in spec.get("volumes", [])}
    named = [target for target, source in mounts.items() if source in (COMPOSE.get("volumes") or {})]
    assert any(checkpoint == target or target in checkpoint.parents for target in named), checkpoint
    assert str(checkpoint) in arguments(dockerfile_of("aggregator"), "VOLUME")[0]


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_dependencies_wait_for_health_and_long_runners_have_healthchecks(name: str) -> None:
    spec = SERVICES[name]
    for dependency, condition in spec.get("depends_on", {}).items():
        assert dependency in SERVICES
        assert condition["condition"] in {"service_healthy", "service_completed_successfully"}
        if condition["condition"] == "service_healthy":
            assert "healthcheck" in SERVICES[dependency], dependency
    if spec.get("restart") != "no":
        assert "healthcheck" in spec, name


def test_kafka_is_reachable_from_the_containers_and_from_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    env = SERVICES["kafka"]["environment"]
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    for name, address in advertised.items():
        assert name in protocols, name
        assert listeners[name] == ":" + address.rsplit(":", 1)[1], f"{name} advertises a port it does not listen on"
    published = {mapping.split(":")[0] for mapping in SERVICES["kafka"]["ports"]}
    host_facing = [address for address in advertised.values() if address.split(":")[0] in LOOPBACK]
    assert host_facing and all(address.rsplit(":", 1)[1] in published for address in host_facing)
    for name, spec in BUILT.items():
        settings: Any = load_with_env(settings_class(name), spec["environment"], monkeypatch)
        assert settings.kafka.bootstrap_servers in advertised.values(), f"{name}: not an advertised listener"
