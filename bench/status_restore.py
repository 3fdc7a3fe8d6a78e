"""device-status's restore at start: the changelog read in bulk (the default) or by faust alone.

One instance reads ``--devices`` readings (one per device, 3 partitions) into its table and
stops. Then fresh instances of the same app (empty data folders) start and restore the whole
table, taking turns: ``STATUS__BULK_RESTORE=false`` (faust's recovery, a record at a time: the
baseline, in the same run) and the default (``store.py`` loads the changelog in batches first).
For each: seconds from the start to a 200 on ``/readyz`` after ``table.restored``, the CPU
seconds the process used by then, the records it applied and the rebalances it went through.

Not in ``make bench``: it measures one behaviour (the table's store). Results: stdout and
``bench-results/status_restore.json``; bench/results/ keeps the ones quoted.
"""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path

from _common import cpu_seconds, print_table, write_results
from status_rejoin import APPLIED, fleet_input, instance, metric, restores


def restore(endpoints: object, topics: tuple[str, str], app_id: str, data_dir: Path, bulk: bool) -> dict[str, float]:
    service = instance(endpoints, topics, app_id, data_dir)
    service.env["FLUXGATE_STATUS_STATUS__BULK_RESTORE"] = str(bulk).lower()
    started = time.monotonic()
    service.start(wait_ready=False, timeout=600)
    try:
        service.wait_until(lambda: restores(service) > 0 and service.ready(), "the table restored", 3600)
        took = time.monotonic() - started
        cpu = cpu_seconds(service.process.pid if service.process else None)
        applied = metric(service, APPLIED)
        # More than one: the group dropped the member during the restore (a callback that held
        # aiokafka's heartbeats past the session) and rebalanced again.
        rebalances = service.log_text().count("Executing _on_partitions_assigned")
    finally:
        service.terminate(120)
    return {"seconds": round(took, 2), "cpu_s": round(cpu, 2), "applied": applied, "rebalances": rebalances}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=100_000, help="devices in the table, one reading each")
    parser.add_argument("--rounds", type=int, default=2, help="restores of each kind, taking turns")
    args = parser.parse_args()
    endpoints, topics = fleet_input(args.devices)
    app_id, data_dir = f"status-restore-{uuid.uuid4().hex[:6]}", Path("bench-results/status_restore")
    filler = instance(endpoints, topics, app_id, data_dir).start(timeout=600)
    filler.wait_until(lambda: metric(filler, "fluxgate_status_readings_total") >= args.devices, "every reading", 3600)
    filler.terminate(120)
    runs: dict[str, list[dict[str, float]]] = {"faust": [], "bulk": []}
    for _ in range(args.rounds):
        for kind in runs:
            runs[kind].append(restore(endpoints, topics, app_id, data_dir, bulk=kind == "bulk"))
            print(kind, runs[kind][-1], flush=True)
    rows = [[kind, *(min(r[field] for r in found) for field in ("seconds", "cpu_s", "applied"))]
            for kind, found in runs.items()]  # fmt: skip
    print_table(f"restore at start, {args.devices} devices (best of {args.rounds})",
                ["restore", "s to ready", "CPU s", "records applied"], rows)  # fmt: skip
    write_results("status_restore", {"devices": args.devices, "runs": runs})


if __name__ == "__main__":
    main()
