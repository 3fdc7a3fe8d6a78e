"""The connector configs the tests run: the documents' own, as files (never imported at run time)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic_settings import BaseSettings

from fluxgate_connect.config import load
from fluxgate_connect.translate import Translation, translate

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# What the Elastic sink's placeholders stand for in a deployment like the reference one.
ELASTIC_ENV = {
    "GROUPED_TOPIC": "temperatures.grouped",
    "ELASTIC_URL": "http://elasticsearch:9200",
    "ELASTIC_CLUSTER_NAME": "fluxgate",
    "SCHEMA_REGISTRY_URL": "http://registry:8081/apis/ccompat/v7",
}


def fixture(name: str, environ: Mapping[str, str] | None = None) -> Translation:
    return translate(load(FIXTURES / name, environ or {}))


def with_tasks(name: str, folder: Path, tasks: int, connector: str | None = None) -> Path:
    """A copy in ``folder`` of the ``.properties`` fixture ``name`` with ``tasks.max=<tasks>``,
    and ``name=<connector>`` when given (a consumer or $share group of the test's own)."""
    text = re.sub(r"(?m)^tasks\.max\s*=.*$", f"tasks.max={tasks}", (FIXTURES / name).read_text())
    if connector is not None:
        text = re.sub(r"(?m)^name\s*=.*$", f"name={connector}", text)
    path = folder / name
    path.write_text(text)
    return path


def load_env(settings: type[BaseSettings], env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``settings`` loaded from ``env`` alone, as the service loads them (no FLUXGATE_* of ours)."""
    from fluxgate_core.settings import load_settings

    for name in [name for name in os.environ if name.startswith("FLUXGATE_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings(settings)
