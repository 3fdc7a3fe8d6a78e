"""What the deploy files (compose, Dockerfiles, Helm charts) are checked against: each
service's Settings class, console scripts and Dockerfile instructions."""

from __future__ import annotations

import importlib
import inspect
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr
from pydantic_settings import BaseSettings

from fluxgate_core.settings import load_settings
from fluxgate_testing.env import drop_env

ROOT = Path(__file__).resolve().parents[4]


def console_scripts(folder: Path) -> dict[str, str]:
    pyproject = folder / "pyproject.toml"
    assert pyproject.is_file(), f"{pyproject} is missing"
    return dict(tomllib.loads(pyproject.read_text())["project"].get("scripts", {}))


def service_folders() -> list[Path]:
    """Every package under services/ with a console script."""
    projects = (pyproject.parent for pyproject in (ROOT / "services").rglob("pyproject.toml"))
    return sorted(folder for folder in projects if console_scripts(folder))


def folder_of_script(script: str) -> Path:
    """The service folder whose package declares the console script ``script``."""
    [folder] = [folder for folder in service_folders() if script in console_scripts(folder)]
    return folder


def settings_class(folder: Path, prefix: str) -> type[BaseSettings]:
    """The Settings class with ``env_prefix`` ``prefix`` in the settings module of the
    package whose console scripts ``folder`` declares."""
    packages = {target.split(":")[0].split(".")[0] for target in console_scripts(folder).values()}
    assert len(packages) == 1, f"{folder}: console scripts in several packages {packages}"
    module = importlib.import_module(f"{packages.pop()}.settings")
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if issubclass(cls, BaseSettings) and cls.model_config.get("env_prefix") == prefix:
            return cls
    raise AssertionError(f"no Settings class with env_prefix {prefix} in {module.__name__}")


def field_exists(model: type[BaseModel], path: list[str]) -> bool:
    field = model.model_fields.get(path[0].lower())
    if field is None:
        return False
    if len(path) == 1:
        return True
    nested = field.annotation
    return isinstance(nested, type) and issubclass(nested, BaseModel) and field_exists(nested, path[1:])


def assert_settings_fields(cls: type[BaseSettings], env: dict[str, Any], where: str) -> None:
    """Every name in ``env`` under the class's prefix is one of its fields (nested with ``__``)."""
    prefix = str(cls.model_config["env_prefix"])
    for key in env:
        if key.startswith(prefix):
            path = key[len(prefix) :].split("__")
            assert field_exists(cls, path), f"{where}: {key} is not a field of {cls.__name__}"


def secret_env_names(cls: type[BaseSettings]) -> set[str]:
    """The environment names of every ``SecretStr`` field, at the top level or in a group."""
    prefix = str(cls.model_config["env_prefix"])

    def walk(model: type[BaseModel], path: str) -> set[str]:
        names: set[str] = set()
        for name, field in model.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                names |= walk(annotation, f"{path}{name.upper()}__")
            elif SecretStr in getattr(annotation, "__args__", (annotation,)):
                names.add(f"{path}{name.upper()}")
        return names

    return walk(cls, prefix)


def load_with_env(cls: type[BaseSettings], env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``cls`` loaded from exactly ``env``: this process's own variables under the prefix are hidden."""
    drop_env(monkeypatch, str(cls.model_config["env_prefix"]))
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    return load_settings(cls)


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs, continuation lines joined, comments dropped."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, arguments = pending.strip().partition(" ")
        result.append((keyword.upper(), arguments.strip()))
        pending = ""
    return result


def arguments(dockerfile: Path, keyword: str) -> list[str]:
    return [args for kw, args in instructions(dockerfile) if kw == keyword]
