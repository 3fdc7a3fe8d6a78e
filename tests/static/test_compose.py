"""docker-compose.yml is checked statically (no Docker engine here): it must stay
equivalent to the local stack and to the services' own settings."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic_settings import BaseSettings

from fluxgate_core.settings import load_settings
from fluxgate_stack.settings import StackSettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
SETTINGS_MODULES = {
    "FLUXGATE_MQTT_": "fluxgate_mqtt_proxy.settings",
    "FLUXGATE_COAP_": "fluxgate_coap_ingest.settings",
    "FLUXGATE_AGG_": "fluxgate_aggregator.settings",
}
BUILT = {name: spec for name, spec in SERVICES.items() if "build" in spec}


def settings_class(prefix: str) -> type[BaseSettings]:
    module = importlib.import_module(SETTINGS_MODULES[prefix])
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if issubclass(cls, BaseSettings) and cls.model_config.get("env_prefix") == prefix:
            return cls
    raise AssertionError(f"no Settings class with env_prefix {prefix} in {module.__name__}")


def prefix_of(service: dict[str, Any]) -> str:
    prefixes = {p for p in SETTINGS_MODULES for key in service.get("environment", {}) if key.startswith(p)}
    assert len(prefixes) == 1, f"one settings prefix per service, got {prefixes}"
    return prefixes.pop()


def field_exists(model: type[BaseModel], path: list[str]) -> bool:
    field = model.model_fields.get(path[0].lower())
    if field is None:
        return False
    if len(path) == 1:
        return True
    nested = field.annotation
    return isinstance(nested, type) and issubclass(nested, BaseModel) and field_exists(nested, path[1:])


def image_tag(service: str) -> str:
    return str(SERVICES[service]["image"]).rsplit(":", 1)[1]


def test_every_image_is_pinned() -> None:
    for name, spec in SERVICES.items():
        if "image" in spec:
            assert ":" in spec["image"] and not spec["image"].endswith(":latest"), name


def test_servers_match_the_local_stack_versions() -> None:
    stack = StackSettings()
    assert image_tag("kafka") == stack.kafka_version
    assert image_tag("kafka-topics") == stack.kafka_version
    assert image_tag("registry") == stack.registry_version


def test_topics_match_the_local_stack() -> None:
    command = " ".join(SERVICES["kafka-topics"]["command"])
    listed = command.split("for t in ", 1)[1].split(";", 1)[0].split()
    partitions = {int(command.split("--partitions ", 1)[1].split()[0])}
    assert dict.fromkeys(listed, partitions.pop()) == StackSettings().topic_partitions


def test_registry_compatibility_matches_the_local_stack() -> None:
    assert f'"compatibility":"{StackSettings().registry_compatibility}"' in SERVICES["registry-config"]["command"]


@pytest.mark.parametrize("name", sorted(BUILT))
def test_service_images_build_from_their_own_dockerfile(name: str) -> None:
    build = BUILT[name]["build"]
    assert build["context"] == "."
    dockerfile = ROOT / build["dockerfile"]
    assert dockerfile.is_file(), dockerfile
    text = dockerfile.read_text()
    assert "HEALTHCHECK" in text and "FLUXGATE_SCHEMAS_DIR" in text and "USER" in text


@pytest.mark.parametrize("name", sorted(BUILT))
def test_service_env_names_are_settings_fields_and_values_validate(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = BUILT[name]["environment"]
    prefix = prefix_of(BUILT[name])
    cls = settings_class(prefix)
    for key, value in env.items():
        if key.startswith(prefix):
            path = key[len(prefix) :].split("__")
            assert field_exists(cls, path), f"{name}: {key} is not a field of {cls.__name__}"
            monkeypatch.setenv(key, str(value))
    settings: Any = load_settings(cls)
    port = settings.http.port
    assert f"{port}:{port}" in BUILT[name]["ports"]
    assert str(port) in " ".join(BUILT[name]["healthcheck"]["test"])


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
