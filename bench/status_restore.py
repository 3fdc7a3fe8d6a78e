"""device-status's restore: the changelog read in bulk (the default) or by faust alone.

One instance reads ``--devices`` readings (one per device, 3 partitions) into its table and
stops. Then, taking turns, ``STATUS__BULK_RESTORE=false`` (faust's recovery, a record at a time:
the baseline, in the same run) and the default (``store.py`` loads the changelog in batches
first), in fresh instances of the same app (empty data folders):

- **start**: one instance restores the whole table. Seconds from its start to a 200 on
  ``/readyz`` after ``table.restored``, the CPU seconds and peak memory (VmHWM) it used by then,
  the records it applied and the rebalances it went through.
- **takeover** (``--takeover``): two instances with ``STATUS__STANDBY_REPLICAS=1``, so each
  keeps every partition, active or standby. The first stops, as a rolling update stops a pod;
  the second takes its partitions over. Seconds from the stop to the second's next
  ``table.restored`` and a 200, the records it applied then, and its peak memory since its start;
  also the records it applied, its peak and its indexing's seconds before the stop (``joined_``),
  and the indexing's seconds at the takeover (``index_s``, from the ``table.restored`` lines).

Not in ``make bench``: it measures one behaviour (the table's store). Results: stdout and
``bench-results/status_restore.json``; bench/results/ keeps the ones quoted.
"""

from __future__ import annotations

import argparse
import re
import time
import uuid
from pathlib import Path

from _common import cpu_seconds, print_table, write_results
from fluxgate_testing import ServiceProcess
from kstreams.peer import peak_rss_mib
from status_rejoin import APPLIED, fleet_input, instance, metric, restores

Run = dict[str, float]


def started(endpoints: object, topics: tuple[str, str], app_id: str, data_dir: Path, bulk: bool,
            min_records: int | None, standby: int = 0) -> ServiceProcess:  # fmt: skip
    """An instance restoring the table from an empty data folder, not yet waited for;
    ``min_records`` None: the service's default threshold."""
    service = instance(endpoints, topics, app_id, data_dir)
    service.env["FLUXGATE_STATUS_STATUS__BULK_RESTORE"] = str(bulk).lower()
    service.env["FLUXGATE_STATUS_STATUS__STANDBY_REPLICAS"] = str(standby)
    if min_records is not None:
        service.env["FLUXGATE_STATUS_STATUS__BULK_RESTORE_MIN_RECORDS"] = str(min_records)
    return service.start(wait_ready=False, timeout=600)


def restored_after(service: ServiceProcess, before: int, what: str) -> None:
    """Until ``service`` logged a ``table.restored`` past its ``before``-th and answers ready."""
    service.wait_until(lambda: restores(service) > before and service.ready(), what, 3600)


def index_seconds(service: ServiceProcess) -> list[float]:
    """What each restore's indexing of the entries took (the ``table.restored`` lines)."""
    return [float(found) for found in re.findall(r"event=table\.restored .*?seconds=([0-9.]+)", service.log_text())]


def peak_mib(service: ServiceProcess) -> float:
    return peak_rss_mib([service.process.pid] if service.process else [])


def restore(endpoints: object, topics: tuple[str, str], app_id: str, data_dir: Path, bulk: bool,
            min_records: int | None) -> Run:  # fmt: skip
    began = time.monotonic()
    service = started(endpoints, topics, app_id, data_dir, bulk, min_records)
    try:
        restored_after(service, 0, "the table restored")
        took = time.monotonic() - began
        cpu = cpu_seconds(service.process.pid if service.process else None)
        applied, peak = metric(service, APPLIED), peak_mib(service)
        # More than one: the group dropped the member during the restore (a callback that held
        # aiokafka's heartbeats past the session) and rebalanced again.
        rebalances = service.log_text().count("Executing _on_partitions_assigned")
    finally:
        service.terminate(120)
    return {"seconds": round(took, 2), "cpu_s": round(cpu, 2), "applied": applied, "rebalances": rebalances,
            "peak_mib": peak}  # fmt: skip


def takeover(endpoints: object, topics: tuple[str, str], app_id: str, data_dir: Path, bulk: bool,
             min_records: int | None) -> Run:  # fmt: skip
    """The second of two instances, each keeping every partition, takes the first's over."""
    first = started(endpoints, topics, app_id, data_dir, bulk, min_records, standby=1)
    second: ServiceProcess | None = None
    try:
        restored_after(first, 0, "the first restored")
        second = started(endpoints, topics, app_id, data_dir, bulk, min_records, standby=1)
        restored_after(second, 0, "the second restored, its standbys kept")
        restored_after(first, 1, "the first ready again beside the second")
        before, applied, joined_peak = restores(second), metric(second, APPLIED), peak_mib(second)
        indexed = index_seconds(second)
        began = time.monotonic()
        first.terminate(120)
        restored_after(second, before, "the second took the first's partitions over")
        took = time.monotonic() - began
        return {"seconds": round(took, 2), "applied": metric(second, APPLIED) - applied, "peak_mib": peak_mib(second),
                "joined_applied": applied, "joined_peak_mib": joined_peak, "joined_index_s": indexed[0],
                "index_s": index_seconds(second)[-1]}  # fmt: skip
    finally:
        for service in (first, second):
            if service is not None and service.running:
                service.terminate(120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=100_000, help="devices in the table, one reading each")
    parser.add_argument("--rounds", type=int, default=2, help="restores of each kind, taking turns")
    parser.add_argument("--takeover", action="store_true", help="a standby's takeover instead of a restore at start")
    parser.add_argument("--min-records", type=int, help="STATUS__BULK_RESTORE_MIN_RECORDS (0: always in bulk)")
    args = parser.parse_args()
    endpoints, topics = fleet_input(args.devices)
    app_id, data_dir = f"status-restore-{uuid.uuid4().hex[:6]}", Path("bench-results/status_restore")
    filler = instance(endpoints, topics, app_id, data_dir).start(timeout=600)
    filler.wait_until(lambda: metric(filler, "fluxgate_status_readings_total") >= args.devices, "every reading", 3600)
    filler.terminate(120)
    scenario = takeover if args.takeover else restore
    runs: dict[str, list[Run]] = {"faust": [], "bulk": []}
    for _ in range(args.rounds):
        for kind in runs:
            runs[kind].append(scenario(endpoints, topics, app_id, data_dir, kind == "bulk", args.min_records))
            print(kind, runs[kind][-1], flush=True)
    fields = ("seconds", "applied", "peak_mib") if args.takeover else ("seconds", "cpu_s", "applied", "peak_mib")
    rows = [[kind, *(min(r[field] for r in found) for field in fields)] for kind, found in runs.items()]
    what = "a standby's takeover" if args.takeover else "restore at start"
    print_table(f"{what}, {args.devices} devices (best of {args.rounds})", ["restore", *fields], rows)
    name = "status_takeover" if args.takeover else "status_restore"
    write_results(name, {"devices": args.devices, "runs": runs})


if __name__ == "__main__":
    main()
