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
import json
import sys
import time
from pathlib import Path
from typing import Any

from dashboard_panels import DashboardSpec, PanelSpec, dashboards
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "deploy/charts/fluxgate/files/dashboards"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
PANEL_HEIGHT = 8


def panel(spec: PanelSpec, panel_id: int) -> timeseries.Panel | stat.Panel:
    built = timeseries.Panel() if spec.kind == "timeseries" else stat.Panel()
    built.id(panel_id).title(spec.title).description(spec.description).unit(spec.unit)
    built.datasource(DATASOURCE).span(spec.width).height(PANEL_HEIGHT)
    for number, query in enumerate(spec.queries):
        target = prometheus.Dataquery().expr(query.expr).ref_id(chr(ord("A") + number))
        if query.legend:
            target.legend_format(query.legend)
        built.with_target(target.instant() if spec.kind == "stat" else target.range())
    return built


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


def render(prometheus_url: str, out: Path, minutes: float, rate_interval: str) -> Path:
    """The overview's panels over the last ``minutes``, each query a line per series, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import httpx
    import matplotlib.pyplot as plt
    from dashboard_queries import panel_queries, query_range

    overview = json.loads((FOLDER / "fluxgate-overview.json").read_text())
    panels: dict[str, list[Any]] = {}
    for query in panel_queries(overview):
        panels.setdefault(query.panel, []).append(query)
    end = time.time()
    figure, axes = plt.subplots((len(panels) + 1) // 2, 2, figsize=(14, 3.2 * ((len(panels) + 1) // 2)))
    with httpx.Client(base_url=prometheus_url, timeout=30) as client:
        for ax, (title, queries) in zip(axes.flat, panels.items(), strict=False):
            for query in queries:
                for label, points in query_range(client, query, end - minutes * 60, end, rate_interval):
                    ax.plot([(t - end) / 60 for t, _ in points], [v for _, v in points], label=label)
            ax.set_title(title)
            ax.set_xlabel("minutes before now")
            if ax.has_data():
                ax.legend(fontsize=6, loc="upper left")
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    figure.suptitle(f"{overview['title']} ({prometheus_url}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(end))})")
    figure.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "fluxgate-overview.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command")
    drawing = commands.add_parser("render", help="draw the overview's panels from a real Prometheus into a PNG")
    drawing.add_argument("--prometheus", default="http://127.0.0.1:9090", help="Prometheus's base URL")
    drawing.add_argument("--out", type=Path, default=ROOT / "bench-results", help="folder for the PNG")
    drawing.add_argument("--minutes", type=float, default=30.0, help="how far back the charts go")
    drawing.add_argument("--rate-interval", default="1m", help="what $__rate_interval stands for")
    args = parser.parse_args(argv)
    if args.command == "render":
        print(render(args.prometheus, args.out, args.minutes, args.rate_interval))
    else:
        for path in write():
            print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
