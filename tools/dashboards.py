"""``make dashboards``: Fluxgate's Grafana dashboards, written as JSON from code (grafana-foundation-sdk).

What each dashboard shows is in ``tools/dashboard_panels.py``; this turns it into Grafana's
JSON, one file per dashboard in ``deploy/charts/fluxgate/files/dashboards/`` (the umbrella
chart's ConfigMap for Grafana's sidecar, ``dashboards.enabled``). A static test keeps the
committed files equal to what this writes.

    python tools/dashboards.py                         # write the JSON files
    python tools/dashboards.py render --prometheus http://127.0.0.1:9090 --out DIR
        # the overview's panels over the last --minutes, from a real Prometheus, as one PNG
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

from dashboard_panels import DashboardSpec, PanelSpec, dashboards
from grafana_foundation_sdk.builders import common, dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as options
from grafana_foundation_sdk.models.dashboard import DataSourceRef

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "deploy/charts/fluxgate/files/dashboards"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
PANEL_HEIGHT = 8
UNIT_NAMES = {"rps": "per second", "s": "seconds", "bytes": "bytes"}  # Grafana's units, for the PNG


def panel(spec: PanelSpec, panel_id: int) -> timeseries.Panel | stat.Panel:
    built = graph() if spec.kind == "timeseries" else big_values()
    built.id(panel_id).title(spec.title).description(spec.description).unit(spec.unit)
    built.datasource(DATASOURCE).span(spec.width).height(PANEL_HEIGHT)
    for number, query in enumerate(spec.queries):
        target = prometheus.Dataquery().expr(query.expr).ref_id(chr(ord("A") + number))
        if query.legend:
            target.legend_format(query.legend)
        built.with_target(target.range())
    return built


def graph() -> timeseries.Panel:
    """A time series panel: every series in the tooltip, the legend a table below with the last value."""
    legend = common.VizLegendOptions().display_mode(options.LegendDisplayMode.TABLE)
    legend.placement(options.LegendPlacement.BOTTOM).show_legend(True).calcs(["lastNotNull", "max"])
    tooltip = common.VizTooltipOptions().mode(options.TooltipDisplayMode.MULTI).sort(options.SortOrder.DESCENDING)
    return timeseries.Panel().legend(legend).tooltip(tooltip).fill_opacity(10).span_nulls(False)


def big_values() -> stat.Panel:
    """A stat panel: each series' last value, with its recent course behind it."""
    reduce = common.ReduceDataOptions().calcs(["lastNotNull"]).values(False)
    return stat.Panel().reduce_options(reduce).graph_mode(options.BigValueGraphMode.AREA)


def build(spec: DashboardSpec) -> dict[str, Any]:
    """One dashboard as Grafana's JSON model (a dict, keys sorted when written)."""
    board = (
        dashboard.Dashboard(spec.title)
        .uid(spec.uid)
        .description(spec.description)
        .tags(["fluxgate"])
        .time("now-1h", "now")
        .refresh("30s")
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    )
    panel_id = 1
    for title, panels in spec.rows.items():
        board.with_row(dashboard.Row(title).id(panel_id))
        panel_id += 1
        for item in panels:
            board.with_panel(panel(item, panel_id))
            panel_id += 1
    model: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    return model


def generated() -> dict[str, str]:
    """Each dashboard's file name and the text ``make dashboards`` writes into it."""
    return {f"{spec.uid}.json": json.dumps(build(spec), indent=2, sort_keys=True) + "\n" for spec in dashboards()}


def write(folder: Path = FOLDER) -> list[Path]:
    """Write every dashboard into ``folder``, and remove the files of dashboards no longer made."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = generated()
    for stale in set(p.name for p in folder.glob("*.json")) - set(texts):
        (folder / stale).unlink()
    for name, text in texts.items():
        (folder / name).write_text(text)
    return [folder / name for name in texts]


def render(prometheus_url: str, out: Path, minutes: float, rate_interval: str, end: float | None = None) -> Path:
    """The overview's panels over the ``minutes`` before ``end`` (now), a line per series, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import httpx
    import matplotlib.pyplot as plt
    from dashboard_queries import panel_queries, query_range

    overview = json.loads((FOLDER / "fluxgate-overview.json").read_text())
    units = {p["title"]: p.get("fieldConfig", {}).get("defaults", {}).get("unit", "") for p in overview["panels"]}
    panels: dict[str, list[Any]] = {}
    for query in panel_queries(overview):
        panels.setdefault(query.panel, []).append(query)
    end = time.time() if end is None else end
    start, rows = end - minutes * 60, (len(panels) + 1) // 2
    figure, axes = plt.subplots(rows, 2, figsize=(14, 3.2 * rows))
    with httpx.Client(base_url=prometheus_url, timeout=30) as client:
        for ax, (title, queries) in zip(axes.flat, panels.items(), strict=False):
            for query in queries:
                for label, points in query_range(client, query, start, end, rate_interval):
                    ax.plot(*with_gaps(points, end), label=label)
            ax.set_title(title)
            ax.set_xlabel("minutes before the end")
            ax.set_ylabel(UNIT_NAMES.get(units.get(title, ""), ""))
            ax.set_xlim(-minutes, 0)
            if ax.has_data():
                ax.legend(fontsize=6, loc="upper left")
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(end))
    figure.suptitle(f"{overview['title']}: its panels' queries on {prometheus_url}, up to {when}")
    figure.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "fluxgate-overview.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def with_gaps(points: list[tuple[float, float]], end: float) -> tuple[list[float], list[float]]:
    """A series' minutes before ``end`` and values, broken (NaN) where samples are missing, as
    Grafana leaves a gap rather than drawing a line across a time nothing was scraped."""
    steps = sorted(b[0] - a[0] for a, b in itertools.pairwise(points))
    usual = steps[len(steps) // 2] if steps else 0.0
    xs: list[float] = []
    ys: list[float] = []
    for number, (at, value) in enumerate(points):
        if number and at - points[number - 1][0] > 2 * usual:
            xs.append((at - end) / 60)
            ys.append(float("nan"))
        xs.append((at - end) / 60)
        ys.append(value)
    return xs, ys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command")
    drawing = commands.add_parser("render", help="draw the overview's panels from a real Prometheus into a PNG")
    drawing.add_argument("--prometheus", default="http://127.0.0.1:9090", help="Prometheus's base URL")
    drawing.add_argument("--out", type=Path, default=ROOT / "bench-results", help="folder for the PNG")
    drawing.add_argument("--minutes", type=float, default=30.0, help="how far back the charts go")
    drawing.add_argument("--rate-interval", default="1m", help="what $__rate_interval stands for")
    drawing.add_argument("--end", type=float, default=None, help="the charts' end, epoch seconds (default: now)")
    args = parser.parse_args(argv)
    if args.command == "render":
        print(render(args.prometheus, args.out, args.minutes, args.rate_interval, args.end))
    else:
        for path in write():
            print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
