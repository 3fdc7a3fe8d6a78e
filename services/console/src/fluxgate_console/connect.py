"""Kafka Connect's REST status API, read-only, with each Fluxgate service as a connector and
each of its instances as a task, so the tools people already run against Connect
(kafka-connect-ui, Kafka UI, Redpanda Console) show Fluxgate's services unchanged.

The shapes are Kafka Connect's (``GET /connectors``, ``?expand=status|info``,
``/connectors/<name>``, ``/status``, ``/config``, ``/tasks``, ``/connector-plugins``, ``/``).
States: an instance that is ready is ``RUNNING``; a persister pausing for its store to come
back is ``PAUSED``; one that is not ready or does not answer is ``FAILED`` with the reason as
``trace``; one not asked yet ``UNASSIGNED``. The connector itself is ``RUNNING`` while any
instance answers, ``FAILED`` when none does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from fluxgate_console.scrape import InstanceState
from fluxgate_console.view import ServiceView

VERSION = "0.1.0"


def connector_type(view: ServiceView) -> str:
    return "source" if view.service.role == "gateway" else "sink"


def worker_id(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc or url


def task_state(instance: InstanceState | None) -> tuple[str, str | None]:
    """Connect's task state and trace for one instance."""
    if instance is None or instance.state == "unknown":
        return "UNASSIGNED", None
    if instance.state == "ready":
        return "RUNNING", None
    if instance.total("fluxgate_sink_store_up") == 0 and instance.state == "degraded":
        return "PAUSED", None
    return "FAILED", instance.reason


def config(view: ServiceView) -> dict[str, str]:
    """The connector's config: every value a string, as Connect returns them."""
    service = view.service
    shown = {
        "name": service.name,
        "connector.class": f"io.fluxgate.{service.name}",
        "tasks.max": str(len(service.urls)),
        "fluxgate.role": service.role,
        "fluxgate.urls": ",".join(service.urls),
    }
    if service.inputs:
        shown["topics"] = ",".join(service.inputs)
    if service.outputs:
        shown["fluxgate.outputs"] = ",".join(service.outputs)
    if service.group:
        shown["fluxgate.group"] = service.group
    if service.store:
        shown["fluxgate.store"] = service.store
    return shown


def status(view: ServiceView) -> dict[str, Any]:
    """``GET /connectors/<name>/status``."""
    by_url = {i.url: i for i in view.instances}
    tasks = []
    for index, url in enumerate(view.service.urls):
        state, trace = task_state(by_url.get(url))
        task: dict[str, Any] = {"id": index, "state": state, "worker_id": worker_id(url)}
        if trace:
            task["trace"] = trace
        tasks.append(task)
    answering = [i for i in view.instances if i.state in ("ready", "degraded")]
    connector: dict[str, Any] = {"state": "RUNNING", "worker_id": worker_id(view.service.urls[0])}
    if not view.instances or all(i.state == "unknown" for i in view.instances):
        connector["state"] = "UNASSIGNED"
    elif not answering:
        connector["state"] = "FAILED"
        connector["trace"] = view.reason
    return {"name": view.name, "connector": connector, "tasks": tasks, "type": connector_type(view)}


def info(view: ServiceView) -> dict[str, Any]:
    """``GET /connectors/<name>``."""
    return {
        "name": view.name,
        "config": config(view),
        "tasks": [{"connector": view.name, "task": index} for index in range(len(view.service.urls))],
        "type": connector_type(view),
    }


def tasks(view: ServiceView) -> list[dict[str, Any]]:
    """``GET /connectors/<name>/tasks``."""
    return [
        {"id": {"connector": view.name, "task": index}, "config": {**config(view), "fluxgate.url": url}}
        for index, url in enumerate(view.service.urls)
    ]


def connectors(views: Sequence[ServiceView], expand: Sequence[str]) -> list[str] | dict[str, dict[str, Any]]:
    """``GET /connectors``: names, or with ``expand=status``/``expand=info`` a map of them."""
    ordered = sorted(views, key=lambda v: v.name)
    wanted = [e for e in expand if e in ("status", "info")]
    if not wanted:
        return [v.name for v in ordered]
    shown: dict[str, dict[str, Any]] = {}
    for view in ordered:
        entry: dict[str, Any] = {}
        if "status" in wanted:
            entry["status"] = status(view)
        if "info" in wanted:
            entry["info"] = info(view)
        shown[view.name] = entry
    return shown


def plugins(views: Sequence[ServiceView]) -> list[dict[str, str]]:
    """``GET /connector-plugins``."""
    return [
        {"class": f"io.fluxgate.{v.name}", "type": connector_type(v), "version": VERSION}
        for v in sorted(views, key=lambda v: v.name)
    ]


def not_found(name: str) -> dict[str, Any]:
    return {"error_code": 404, "message": f"Connector {name} not found"}


def root(cluster_id: str | None) -> dict[str, Any]:
    """``GET /``: what Connect says about itself."""
    return {"version": VERSION, "commit": "fluxgate-console", "kafka_cluster_id": cluster_id or ""}
