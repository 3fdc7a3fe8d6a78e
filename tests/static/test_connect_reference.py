"""README's "Coming from Kafka Connect" tables are what ``fluxgate connect`` does: generated from
its mapping (``python -m fluxgate_connect.reference --write README.md``), never written twice."""

from __future__ import annotations

from pathlib import Path

from fluxgate_connect.reference import rewrite

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_tables_are_generated_from_the_connector_mapping() -> None:
    committed = (ROOT / "README.md").read_text()
    assert rewrite(committed) == committed, "README.md is stale: python -m fluxgate_connect.reference --write README.md"
