"""HTTP on faust's web server: the device views, ``/healthz``, ``/readyz``, ``/metrics``.

``GET /devices/{id}`` goes through faust's table routing: the instance owning the key's
partition answers, any other one forwards the request there. ``GET /devices`` asks every
instance the assignment names for its own devices (``?local=1``) and merges them.
``GET /partitions`` says which input partitions this instance owns and which it keeps a
standby copy of (``standby_replicas``), with the device entries it holds for each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faust
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from fluxgate_core.health import readiness_metrics
from fluxgate_device_status.device_state import view
from fluxgate_device_status.tracker import DeviceTracker

STATUSES = ("ONLINE", "OFFLINE")


def install_views(app: faust.App, tracker: DeviceTracker, ready: Callable[[], dict[str, bool]]) -> None:
    """Register every route on ``app``'s web server."""

    @app.page("/devices/{device_id}")
    class DeviceView(View):
        @app.table_route(table=tracker.table, match_info="device_id")  # type: ignore[arg-type]  # the key is an extra argument
        async def get(self, request: Request, device_id: str) -> Response:
            state = tracker.get(device_id)
            if state is None:
                return self.json({"error": f"no device {device_id!r}"}, status=404)
            return self.json(view(state))

    @app.page("/devices")
    class DevicesView(View):
        async def get(self, request: Request) -> Response:
            wanted = request.query.get("status")
            if wanted is not None and wanted not in STATUSES:
                return self.json({"error": f"status must be one of {', '.join(STATUSES)}"}, status=400)
            devices = [view(s) for s in tracker.local_devices() if wanted is None or s["status"] == wanted]
            if request.query.get("local") != "1":
                devices += await _from_other_instances(app, request)
            return self.json({"devices": sorted(devices, key=lambda d: str(d["device_id"]))})

    @app.page("/partitions")
    class PartitionsView(View):
        async def get(self, request: Request) -> Response:
            return self.json(tracker.partitions())

    @app.page("/healthz")
    class Healthz(View):
        async def get(self, request: Request) -> Response:
            return self.json({"status": "ok"})

    @app.page("/readyz")
    class Readyz(View):
        async def get(self, request: Request) -> Response:
            checks = ready()
            return self.json(
                {"ready": all(checks.values()), "checks": checks}, status=200 if all(checks.values()) else 503
            )

    @app.page("/metrics")
    class Metrics(View):
        async def get(self, request: Request) -> Response:
            body = generate_latest(REGISTRY) + readiness_metrics(ready())
            return self.bytes(body, content_type=CONTENT_TYPE_LATEST.split(";")[0])


async def _from_other_instances(app: faust.App, request: Request) -> list[dict[str, Any]]:
    own = str(app.conf.canonical_url).rstrip("/")
    devices: list[dict[str, Any]] = []
    for host in app.router.table_metadata("devices"):
        if str(host).rstrip("/") == own:
            continue
        params = {"local": "1", **({"status": request.query["status"]} if "status" in request.query else {})}
        async with app.http_client.get(f"{str(host).rstrip('/')}/devices", params=params) as reply:
            reply.raise_for_status()
            devices.extend((await reply.json())["devices"])
    return devices
