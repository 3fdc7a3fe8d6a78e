"""The dashboards' PromQL, read back from their JSON and asked of a real Prometheus.

``run_pipeline.py --check`` (what ``make run``'s end-to-end test runs) calls
:func:`failing_panels` while the pipeline runs: every panel query of every committed dashboard
must evaluate without error (``/api/v1/query``) and return at least one series. It also
passes :func:`panel_metrics` to the check that every metric an alert reads was scraped, so a
panel's metric that counts only failures (``or vector(0)``) must still be exported.
``dashboards.py render`` draws the overview from ``/api/v1/query_range``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from fluxgate_stack.servers.prometheus import metrics_read

FOLDER = Path(__file__).resolve().parents[1] / "deploy/charts/fluxgate/files/dashboards"
NO_SERIES = "returns no series"
HISTOGRAM_PARTS = re.compile(r"_(?:bucket|sum|count)$")


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str  # the file's name, without .json
    panel: str
    expr: str
    legend: str = ""

    def concrete(self, rate_interval: str = "1m") -> str:
        """The query as Prometheus takes it: Grafana's ``$__rate_interval`` replaced."""
        return self.expr.replace("$__rate_interval", rate_interval)

    def __str__(self) -> str:
        return f"dashboard {self.dashboard}, panel {self.panel!r}"


def panel_queries(model: dict[str, Any], name: str | None = None) -> list[PanelQuery]:
    """Every query of every panel of a dashboard's JSON model (rows' panels included)."""
    name = name or str(model["uid"])
    found = []
    for item in model.get("panels", []):
        for panel in [item, *item.get("panels", [])]:
            for target in panel.get("targets", []):
                found.append(PanelQuery(name, panel["title"], target["expr"], target.get("legendFormat", "")))
    return found


def committed(folder: Path | None = None) -> list[PanelQuery]:
    """Every panel query of the dashboards in ``folder`` (the repository's by default)."""
    paths = sorted((folder or FOLDER).glob("*.json"))
    return [query for path in paths for query in panel_queries(json.loads(path.read_text()), path.stem)]


def panel_metrics(folder: Path | None = None) -> dict[str, set[str]]:
    """Each panel (``dashboard X, panel 'Y'``) and the metric families its queries read."""
    found: dict[str, set[str]] = {}
    for query in committed(folder):
        found.setdefault(str(query), set()).update(HISTOGRAM_PARTS.sub("", m) for m in metrics_read(query.expr))
    return found


def problem(client: httpx.Client, query: PanelQuery, rate_interval: str = "1m", at: float | None = None,
            need_data: bool = True) -> str | None:  # fmt: skip
    """What is wrong with a query, asked of the Prometheus ``client`` is based at: an error, or
    (with ``need_data``) no series; None when it is fine."""
    params = {"query": query.concrete(rate_interval), **({"time": str(at)} if at is not None else {})}
    try:
        body = client.post("/api/v1/query", data=params).json()
    except (httpx.HTTPError, ValueError) as exc:
        return f"{query}: {query.expr!r} could not be asked: {exc}"
    if body.get("status") != "success":
        return f"{query}: {query.expr!r} failed: {body.get('errorType')}: {body.get('error')}"
    if need_data and not body["data"]["result"]:
        return f"{query}: {query.expr!r} {NO_SERIES}"
    return None


def failing(client: httpx.Client, queries: list[PanelQuery], rate_interval: str = "1m",
            at: float | None = None, need_data: bool = True) -> list[str]:  # fmt: skip
    """:func:`problem` of every query that has one."""
    return [found for query in queries if (found := problem(client, query, rate_interval, at, need_data))]


def failing_panels(prometheus_url: str, rate_interval: str = "1m", wait: float = 30.0, every: float = 2.5,
                   folder: Path | None = None) -> list[str]:  # fmt: skip
    """:func:`failing` for every committed dashboard, against the Prometheus at ``prometheus_url``.
    A query without series is asked again for up to ``wait`` seconds: a series set just before
    the check is not scraped yet, and a counter's rate needs two scrapes. An error is final."""
    deadline = time.monotonic() + wait
    with httpx.Client(base_url=prometheus_url, timeout=10) as client:
        errors: list[str] = []
        pending = committed(folder)
        while True:
            found = {query: problem(client, query, rate_interval) for query in pending}
            errors += [text for text in found.values() if text and not text.endswith(NO_SERIES)]
            pending = [query for query, text in found.items() if text and text.endswith(NO_SERIES)]
            if not pending or time.monotonic() >= deadline:
                return errors + [str(found[query]) for query in pending]
            time.sleep(every)


def query_range(client: httpx.Client, query: PanelQuery, start: float, end: float, rate_interval: str = "1m",
                points: int = 240) -> Iterator[tuple[str, list[tuple[float, float]]]]:  # fmt: skip
    """Each series of a query over ``start``-``end``: its legend (Grafana's ``{{label}}``
    filled in) and its (time, value) points."""
    params = {"query": query.concrete(rate_interval), "start": str(start), "end": str(end),
              "step": str(max(1.0, (end - start) / points))}  # fmt: skip
    reply = client.post("/api/v1/query_range", data=params)
    body = reply.json()
    if body.get("status") != "success":
        raise RuntimeError(f"{query}: {body.get('errorType')}: {body.get('error')}")
    for series in body["data"]["result"]:
        legend = legend_of(query.legend, series["metric"])
        yield legend, [(float(t), float(v)) for t, v in series["values"]]


def legend_of(template: str, labels: dict[str, str]) -> str:
    """Grafana's legend: ``{{label}}`` filled in from the series' labels (all of them without a template)."""
    filled = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda match: labels.get(match.group(1), ""), template)
    return filled.strip() or json.dumps(labels, sort_keys=True)
