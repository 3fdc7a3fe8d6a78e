"""The connector configs the tests run: the documents' own, as files (never imported at run time)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

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
