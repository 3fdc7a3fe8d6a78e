"""The dashboard query check of ``run_pipeline --check`` (tools/dashboard_queries.py), against a
fake Prometheus API: an error or an empty result fails, naming the dashboard and the panel; a
series that appears a moment later is waited for; legends and metric names are read as Grafana
and the alerts' check read them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from dashboard_queries import PanelQuery, failing, failing_panels, legend_of, panel_metrics, panel_queries, query_range
from dashboards import with_gaps
from fluxgate_testing.json_server import JsonServer

SERIES = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"a": "b"}, "value": [1, "2"]}]}}
EMPTY = {"status": "success", "data": {"resultType": "vector", "result": []}}
BAD = {"status": "error", "errorType": "bad_data", "error": 'parse error: unexpected "}"'}
MODEL = {
    "uid": "fluxgate-x",
    "panels": [
        {"type": "row", "title": "Row", "panels": [
            {"type": "timeseries", "title": "Nested", "targets": [{"expr": "nested_total", "refId": "A"}]}]},
        {"type": "timeseries", "title": "Flow", "targets": [
            {"expr": "sum by (le) (rate(x_seconds_bucket[$__rate_interval]))", "legendFormat": "{{topic}} in"},
            {"expr": "sum(rate(y_total[$__rate_interval])) or vector(0)"}]},
    ],
}  # fmt: skip


def prometheus(answers: dict[str, Any], asked: list[dict[str, list[str]]]) -> httpx.Client:
    def handle(request: httpx.Request) -> httpx.Response:
        form = parse_qs(request.content.decode())
        asked.append(form)
        assert request.url.path == "/api/v1/query"
        return httpx.Response(200 if answers[form["query"][0]] is not BAD else 400, json=answers[form["query"][0]])

    return httpx.Client(transport=httpx.MockTransport(handle), base_url="http://prometheus")


def test_panel_queries_reads_every_target_of_every_panel_rows_included() -> None:
    queries = panel_queries(MODEL)
    assert [(q.dashboard, q.panel) for q in queries] == [("fluxgate-x", "Nested"), ("fluxgate-x", "Flow"),
                                                        ("fluxgate-x", "Flow")]  # fmt: skip
    assert queries[1].concrete("30s") == "sum by (le) (rate(x_seconds_bucket[30s]))"


def test_a_query_that_errors_or_returns_nothing_fails_naming_dashboard_and_panel() -> None:
    good, empty, bad = (PanelQuery("fluxgate-overview", title, expr) for title, expr in
                        (("Flow", "up"), ("Lag", "lag"), ("Dead letters", "rate(x[$__rate_interval]")))  # fmt: skip
    asked: list[dict[str, list[str]]] = []
    client = prometheus({"up": SERIES, "lag": EMPTY, "rate(x[1m]": BAD}, asked)
    problems = failing(client, [good, empty, bad], rate_interval="1m", at=123.0)
    assert problems == [
        "dashboard fluxgate-overview, panel 'Lag': 'lag' returns no series",
        "dashboard fluxgate-overview, panel 'Dead letters': 'rate(x[$__rate_interval]' failed: bad_data: "
        'parse error: unexpected "}"',
    ]
    assert all(form["time"] == ["123.0"] for form in asked)
    assert failing(client, [empty], need_data=False) == []  # parses: enough for the integration test


def test_an_unreachable_prometheus_is_a_problem_not_a_crash() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = httpx.Client(transport=httpx.MockTransport(refuse), base_url="http://prometheus")
    [problem] = failing(client, [PanelQuery("d", "p", "up")])
    assert problem.startswith("dashboard d, panel 'p': 'up' could not be asked: refused")


class FakePrometheus:
    """Answers /api/v1/query: no series for ``late`` until it was asked ``ready_after`` times."""

    asked: dict[str, int] = {}
    ready_after = 2

    @classmethod
    def answer(cls, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        query = parse_qs(body.decode())["query"][0]
        cls.asked[query] = cls.asked.get(query, 0) + 1
        if query == "broken(":
            return 200, BAD
        if query == "never":
            return 200, EMPTY
        return 200, SERIES if query != "late" or cls.asked[query] > cls.ready_after else EMPTY


@pytest.fixture
def fake_prometheus() -> Iterator[str]:
    FakePrometheus.asked = {}
    with JsonServer(FakePrometheus.answer) as server:
        yield server.url


def dashboards(folder: Path, *exprs: str) -> Path:
    panels = [{"type": "timeseries", "title": f"Panel {n}", "targets": [{"expr": e}]} for n, e in enumerate(exprs)]
    (folder / "fluxgate-test.json").write_text(json.dumps({"uid": "fluxgate-test", "panels": panels}))
    return folder


def test_failing_panels_waits_for_a_series_not_scraped_yet(fake_prometheus: str, tmp_path: Path) -> None:
    assert failing_panels(fake_prometheus, wait=30, every=0.01, folder=dashboards(tmp_path, "up", "late")) == []
    assert FakePrometheus.asked == {"up": 1, "late": 3}


def test_failing_panels_reports_errors_at_once_and_empty_queries_after_the_wait(
    fake_prometheus: str, tmp_path: Path
) -> None:
    problems = failing_panels(
        fake_prometheus, wait=0.2, every=0.05, folder=dashboards(tmp_path, "broken(", "never", "up")
    )
    assert problems[0] == "dashboard fluxgate-test, panel 'Panel 0': 'broken(' failed: bad_data: " + BAD["error"]
    assert problems[1:] == ["dashboard fluxgate-test, panel 'Panel 1': 'never' returns no series"]
    assert FakePrometheus.asked["broken("] == 1 and FakePrometheus.asked["up"] == 1


def test_panel_metrics_names_families_as_the_scrape_metadata_does(tmp_path: Path) -> None:
    (tmp_path / "fluxgate-x.json").write_text(json.dumps(MODEL))
    assert panel_metrics(tmp_path) == {
        "dashboard fluxgate-x, panel 'Nested'": {"nested_total"},
        "dashboard fluxgate-x, panel 'Flow'": {"x_seconds", "y_total"},
    }


def test_query_range_fills_in_grafanas_legends() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        form = parse_qs(request.content.decode())
        assert request.url.path == "/api/v1/query_range" and form["step"] == ["1.0"]
        assert form["query"] == ["rate(x[2m])"]
        result = [{"metric": {"topic": "t"}, "values": [[10, "1.5"], [11, "NaN"]]}]
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": result}})

    client = httpx.Client(transport=httpx.MockTransport(handle), base_url="http://prometheus")
    [(legend, points)] = query_range(client, PanelQuery("d", "p", "rate(x[$__rate_interval])", "{{topic}} in"),
                                     0, 100, rate_interval="2m")  # fmt: skip
    assert legend == "t in" and points[0] == (10.0, 1.5)
    assert legend_of("", {"a": "b"}) == '{"a": "b"}'


def test_the_rendered_lines_break_where_nothing_was_scraped() -> None:
    xs, ys = with_gaps([(0.0, 1.0), (60.0, 2.0), (120.0, 3.0), (600.0, 4.0)], end=600.0)
    assert xs == [-10.0, -9.0, -8.0, 0.0, 0.0]
    assert ys[:3] == [1.0, 2.0, 3.0] and ys[3] != ys[3] and ys[4] == 4.0  # NaN: the gap


def test_make_runs_check_wants_every_metric_a_panel_reads_scraped(monkeypatch: pytest.MonkeyPatch) -> None:
    import run_pipeline

    wanted = set().union(*panel_metrics().values()) | {"up"}
    scraped = [{"metric": name.removesuffix("_total")} for name in wanted - {"fluxgate_sink_write_seconds"}]
    scraped += [{"metric": m} for alert in run_pipeline.rule_metrics(run_pipeline.ROOT / run_pipeline.PROMETHEUS_RULES)
                .values() for m in alert]  # fmt: skip

    def metadata(url: str, **kwargs: Any) -> httpx.Response:
        return httpx.Response(200, json={"status": "success", "data": scraped}, request=httpx.Request("GET", url))

    monkeypatch.setattr(run_pipeline.httpx, "get", metadata)
    missing = run_pipeline.unscraped_metrics()
    assert missing == {
        "dashboard fluxgate-overview, panel 'Latency from window close to store'": {"fluxgate_sink_write_seconds"},
        **{f"dashboard fluxgate-{name}, panel 'Write latency'": {"fluxgate_sink_write_seconds"}
           for name in ("es-persister", "hazelcast-persister", "scylla-persister")},
    }  # fmt: skip
