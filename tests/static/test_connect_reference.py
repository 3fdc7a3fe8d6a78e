"""``docs/kafka-connect.md``'s tables are what ``fluxgate connect`` does: generated from its
mapping (``python -m fluxgate_connect.reference --write docs/kafka-connect.md``), never written
twice. The root README links to the page and holds no table of its own."""

from __future__ import annotations

from pathlib import Path

from fluxgate_connect.reference import BEGIN, DOCUMENT, END, rewrite

ROOT = Path(__file__).resolve().parents[2]


def test_the_tables_are_generated_from_the_connector_mapping() -> None:
    committed = (ROOT / DOCUMENT).read_text()
    assert rewrite(committed) == committed, (
        f"{DOCUMENT} is stale: python -m fluxgate_connect.reference --write {DOCUMENT}"
    )


def test_the_readme_links_to_the_tables_instead_of_holding_them() -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"]({DOCUMENT})" in readme
    assert BEGIN not in readme and END not in readme
