"""What each instance of a service says about itself: ``/readyz`` and ``/metrics``.

An instance that does not answer is *down*, one that answers but is not ready (or answers
something unreadable) is *degraded*, with the reason it gives or the reason we could not
read it; never an exception out of here, so one broken service never blanks the page.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import httpx
from prometheus_client.parser import text_string_to_metric_families

State = Literal["ready", "degraded", "down", "unknown"]
MAX_REASON = 300


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class InstanceState:
    """One instance's answer, as of ``at`` (epoch seconds)."""

    url: str
    state: State
    reason: str
    at: float
    samples: tuple[Sample, ...] = ()
    metrics_error: str | None = None

    def total(self, name: str, **labels: str) -> float | None:
        """The sum of ``name``'s samples whose labels include ``labels``; None when it has none."""
        values = [s.value for s in self.samples if s.name == name and _within(labels, s.labels)]
        return sum(values) if values else None

    def by_label(self, name: str, label: str) -> dict[str, float]:
        totals: dict[str, float] = {}
        for sample in self.samples:
            if sample.name == name and label in sample.labels:
                totals[sample.labels[label]] = totals.get(sample.labels[label], 0.0) + sample.value
        return totals

    @property
    def uptime_s(self) -> float | None:
        started = self.total("process_start_time_seconds")
        return max(0.0, self.at - started) if started else None


def _within(wanted: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in wanted.items())


def parse_metrics(text: str) -> tuple[Sample, ...]:
    """Every sample of a Prometheus text exposition; ValueError when it is not one."""
    samples = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.append(Sample(sample.name, dict(sample.labels), float(sample.value)))
    return tuple(samples)


def readiness(status: int, body: str) -> tuple[State, str]:
    """The state a ``/readyz`` answer means, and why (the failing checks it names)."""
    try:
        answer = json.loads(body)
        checks = answer.get("checks", {}) if isinstance(answer, dict) else {}
    except ValueError:
        return "degraded", f"/readyz answered {status} with something that is not JSON: {body[:80]!r}"
    if status == 200:
        return "ready", "ready"
    failing = sorted(name for name, ok in checks.items() if not ok) if isinstance(checks, dict) else []
    return "degraded", f"not ready (HTTP {status})" + (f": failing {', '.join(failing)}" if failing else "")


async def scrape_instance(client: httpx.AsyncClient, url: str, now: float | None = None) -> InstanceState:
    """Ask one instance; whatever happens, an :class:`InstanceState` comes back."""
    at = time.time() if now is None else now
    base = url.rstrip("/")
    try:
        ready = await client.get(f"{base}/readyz")
    except httpx.HTTPError as exc:
        return InstanceState(url, "down", _short(f"no answer: {type(exc).__name__}: {root_cause(exc)}"), at)
    state, reason = readiness(ready.status_code, ready.text)
    try:
        reply = await client.get(f"{base}/metrics")
        reply.raise_for_status()
        samples = parse_metrics(reply.text)
    except (httpx.HTTPError, ValueError, TypeError) as exc:
        problem = _short(f"/metrics unreadable: {type(exc).__name__}: {exc}")
        return InstanceState(url, "degraded", problem if state == "ready" else reason, at, (), problem)
    return InstanceState(url, state, reason, at, samples)


async def scrape_all(client: httpx.AsyncClient, urls: Iterable[str]) -> dict[str, InstanceState]:
    urls = list(urls)
    states = await asyncio.gather(*(scrape_instance(client, url) for url in urls))
    return dict(zip(urls, states, strict=True))


def root_cause(exc: BaseException) -> str:
    """What went wrong at the bottom of ``exc``'s chain, as a person would name it.

    httpx says only "All connection attempts failed" (anyio's wording); the reason is the
    socket error under it: "Connection refused", "Name or service not known", a timeout.
    Several attempts (an address per family) each with their own error are all named."""
    inner, seen = exc, {id(exc)}
    # a cancellation under a timeout is how the deadline was enforced, not why it passed
    while (below := inner.__cause__ or inner.__context__) is not None and id(below) not in seen:
        if isinstance(below, asyncio.CancelledError):
            break
        inner, seen = below, seen | {id(below)}
    if isinstance(inner, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(root_cause(e) for e in inner.exceptions))
    if isinstance(inner, OSError) and inner.errno:
        named = os.strerror(inner.errno) if inner.errno > 0 else inner.strerror or str(inner)
        detail = inner.strerror if inner.strerror and inner.strerror != named else None
        return f"{named} ({detail})" if detail else named
    if isinstance(inner, TimeoutError) and not str(inner):
        return "timed out"
    return str(inner) or str(exc) or type(inner).__name__


def _short(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


@dataclass
class History:
    """Counter values over time, for records per second over the last ``window_s``."""

    window_s: float
    points: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def add(self, key: str, at: float, value: float | None) -> None:
        if value is None:
            return
        series = self.points.setdefault(key, [])
        series.append((at, value))
        while len(series) > 2 and series[1][0] <= at - self.window_s:
            series.pop(0)

    def rate(self, key: str) -> float | None:
        """Per second between the oldest and newest point in the window; a counter that went
        down (a restart) counts from the restart."""
        series = self.points.get(key, [])
        if len(series) < 2 or series[-1][0] <= series[0][0]:
            return None
        (t0, v0), (t1, v1) = series[0], series[-1]
        return max(0.0, v1 - v0 if v1 >= v0 else v1) / (t1 - t0)
