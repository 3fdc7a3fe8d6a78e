"""Every panel query of the committed dashboards parses and evaluates on the stack's real
Prometheus (Debian's): status success even where no run is being scraped now, so a syntax
error or a function Prometheus lacks fails here, before ``make run``'s end-to-end check asks
the same queries for data; and ``dashboards.py render`` draws them from it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from dashboard_queries import committed, failing
from dashboards import render

from fluxgate_stack import Stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prometheus() -> str:
    Stack().up(["prometheus"])
    return f"http://127.0.0.1:{Stack().settings.prometheus_port}"


def test_every_panel_query_evaluates_without_error(prometheus: str) -> None:
    queries = committed()
    assert len(queries) > 50
    with httpx.Client(base_url=prometheus, timeout=10) as client:
        assert failing(client, queries, need_data=False) == []


def test_a_broken_query_is_reported_by_the_real_prometheus(prometheus: str) -> None:
    [query] = committed()[:1]
    broken = type(query)(query.dashboard, query.panel, query.expr + " +")
    with httpx.Client(base_url=prometheus, timeout=10) as client:
        [problem] = failing(client, [broken], need_data=False)
    assert problem.startswith(f"dashboard {query.dashboard}, panel {query.panel!r}:") and "bad_data" in problem


def test_render_draws_the_overview_from_the_real_prometheus(prometheus: str, tmp_path: Path) -> None:
    path = render(prometheus, tmp_path, minutes=10, rate_interval="1m")
    assert path == tmp_path / "fluxgate-overview.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
