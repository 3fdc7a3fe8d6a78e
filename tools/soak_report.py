"""The soak run's report: ``report.json``, ``report.md`` and ``timeline.png`` in the run's folder."""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

from soak_check import Result

STAGES = ("sensors.readings", "temperatures.aggregated", "elasticsearch", "scylla", "hazelcast")


def write_report(
    folder: Path, args: argparse.Namespace, run: Any, result: Result, samples: list[dict[str, Any]]
) -> Path:
    settings = {key: str(value) for key, value in vars(args).items() if key not in ("no_aggregator", "no_persisters")}
    document = {
        "passed": result.passed,
        "seed": run.seed,
        "prefix": run.prefix,
        "settings": settings,
        "warmup_s": run.warmup_s,
        "faults": run.faults,
        "drained": run.drained,
        "exits": run.exits,
        "unhealthy": run.unhealthy,
        "problems": result.problems,
        "figures": result.figures,
        "timeline": samples,
    }
    (folder / "report.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    chart(folder / "timeline.png", samples, run.faults)
    (folder / "report.md").write_text(markdown(document))
    return folder / "report.md"


def markdown(document: dict[str, Any]) -> str:
    lines = [f"# Soak run {document['prefix'].rstrip('-')}: {'PASSED' if document['passed'] else 'FAILED'}", ""]
    lines.append(f"seed {document['seed']} (replay: `tools/soak.py --seed {document['seed']}` with the same options)")
    lines += ["", "| fault | at (s) | held (s) | whole again after (s) |", "|---|---|---|---|"]
    for fault in document["faults"]:
        whole = fault["whole_after_s"] if fault["whole_after_s"] is not None else "NOT within the timeout"
        lines.append(f"| {fault['kind']} {fault['target']} | {fault['at_s']} | {fault['hold']:.0f} | {whole} |")
    lines += ["", "## Problems", ""]
    lines += [f"- {problem}" for problem in document["problems"]] or ["none"]
    lines += ["", "## Figures", "", "```json", json.dumps(document["figures"], indent=2), "```"]
    lines += ["", "![throughput per stage](timeline.png)", ""]
    return "\n".join(lines)


def chart(path: Path, samples: list[dict[str, Any]], faults: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(14, 5))
    for stage in STAGES:
        points = [(s["t"], s[stage]) for s in samples if stage in s]
        rates = [((t1 + t0) / 2, (v1 - v0) / (t1 - t0)) for (t0, v0), (t1, v1) in itertools.pairwise(points)
                 if t1 > t0]  # fmt: skip
        if rates:
            # A count that fell (a killed Hazelcast's ringbuffer, an Elasticsearch shard still
            # recovering) is no negative flow: drawn as 0, and marked where it happened.
            line = axis.plot([t for t, _ in rates], [max(rate, 0.0) for _, rate in rates], label=stage, linewidth=1)
            fell = [t for t, rate in rates if rate < 0]
            if fell:
                axis.plot(fell, [0.0] * len(fell), "v", color=line[0].get_color(), markersize=6)
    axis.plot([], [], "v", color="grey", label="a store's count fell (restarted)")
    axis.set_yscale("symlog")
    for index, fault in enumerate(faults):
        axis.axvspan(fault["at_s"], fault["at_s"] + fault["hold"], color=f"C{index % 10}", alpha=0.15)
        label = f"{fault['kind']} {fault['target']}"
        place = ("data", "axes fraction")
        axis.annotate(label, (fault["at_s"], 0.98), rotation=90, fontsize=7, va="top", xycoords=place)
    axis.set_xlabel("seconds into the run")
    axis.set_ylabel("records per second")
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=6, fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
