"""The page's data, from what the services, Kafka and the stores said: pure functions, so
every view is tested from recorded answers.

Failed first: services sort down, degraded, unknown, ready; a service's state is its worst
instance's, with that instance's reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fluxgate_console.kafka_state import GroupState, KafkaState
from fluxgate_console.scrape import History, InstanceState, State
from fluxgate_console.settings import WatchedService

SEVERITY: dict[State, int] = {"down": 0, "degraded": 1, "unknown": 2, "ready": 3}

# (label, metric, labels): the figures worth a glance, shown when the service exposes them.
FIGURES: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("received", "fluxgate_records_in_total", {}),
    ("to Kafka", "fluxgate_records_out_total", {}),
    ("dead letters", "fluxgate_dead_letters_total", {}),
    ("in flight", "fluxgate_kafka_in_flight", {}),
    ("broker connected", "fluxgate_mqtt_connected", {}),
    ("observations", "fluxgate_coap_observations_active", {}),
    ("watermark", "fluxgate_aggregator_watermark_seconds", {}),
    ("rows in state", "fluxgate_aggregator_state_rows", {}),
    ("late", "fluxgate_aggregator_late_rows", {}),
    ("dead letters", "fluxgate_aggregator_dead_letters", {}),
    ("written", "fluxgate_sink_records_written_total", {}),
    ("retried", "fluxgate_sink_records_retried_total", {}),
    ("dead-lettered", "fluxgate_sink_records_dead_lettered_total", {}),
    ("store up", "fluxgate_sink_store_up", {}),
    ("readings", "fluxgate_status_readings_total", {}),
    ("devices online", "fluxgate_status_devices", {"status": "ONLINE"}),
    ("devices offline", "fluxgate_status_devices", {"status": "OFFLINE"}),
)
# What a stage takes in and gives out, by metric, when Kafka cannot say (gateways, sinks).
RATE_METRICS = {
    "gateway": ("fluxgate_records_in_total", "fluxgate_records_out_total"),
    "persister": (None, "fluxgate_sink_records_written_total"),
    "processor": (None, None),
}


@dataclass(frozen=True)
class Figure:
    label: str
    value: float
    at: float
    kind: str = "count"  # count, flag, epoch


@dataclass(frozen=True)
class ServiceView:
    service: WatchedService
    instances: tuple[InstanceState, ...]
    group: GroupState | None = None
    rate_in: float | None = None
    rate_out: float | None = None
    lag_growth: float | None = None  # records/s the lag grew by over the window
    figures: tuple[Figure, ...] = field(default_factory=tuple)
    late_share: float | None = None  # its late topic's rate over its input's, over the window

    @property
    def watermark(self) -> float | None:
        """The event-time watermark it reports (epoch s), if it has one."""
        return next((f.value for f in self.figures if f.kind == "epoch"), None)

    @property
    def name(self) -> str:
        return self.service.name

    @property
    def worst(self) -> InstanceState | None:
        return min(self.instances, key=lambda i: SEVERITY[i.state]) if self.instances else None

    @property
    def state(self) -> State:
        worst = self.worst
        return worst.state if worst else "unknown"

    @property
    def reason(self) -> str:
        worst = self.worst
        if worst is None:
            return "not asked yet"
        if len(self.instances) > 1 and worst.state != "ready":
            return f"{worst.url}: {worst.reason}"
        return worst.reason

    @property
    def ready_instances(self) -> int:
        return sum(1 for i in self.instances if i.state == "ready")

    @property
    def uptime_s(self) -> float | None:
        times = [i.uptime_s for i in self.instances if i.uptime_s is not None]
        return min(times) if times else None

    @property
    def at(self) -> float | None:
        return min((i.at for i in self.instances), default=None)

    @property
    def piling_up(self) -> bool:
        return self.group is not None and self.group.lag > 0 and (self.lag_growth or 0) > 0

    @property
    def store_down(self) -> bool:
        return any(i.total("fluxgate_sink_store_up") == 0 for i in self.instances)


def figures(instances: Sequence[InstanceState]) -> tuple[Figure, ...]:
    """The key figures, summed over instances (gauges too: instances split the work)."""
    shown: list[Figure] = []
    for label, metric, labels in FIGURES:
        values = [v for i in instances if (v := i.total(metric, **labels)) is not None]
        if not values:
            continue
        at = min(i.at for i in instances)
        kind = "epoch" if metric.endswith("watermark_seconds") else "flag" if label in FLAGS else "count"
        value = max(values) if kind == "epoch" else min(values) if kind == "flag" else sum(values)
        shown.append(Figure(label, value, at, kind))
    return tuple(shown)


FLAGS = {"store up", "broker connected"}


def record_history(
    history: History, services: Sequence[WatchedService], instances: Mapping[str, InstanceState], kafka: KafkaState
) -> None:
    """Add this refresh's counters to ``history`` (rates are differences over its window)."""
    for topic, ends in kafka.ends.items():
        history.add(f"topic:{topic}", kafka.at, float(sum(ends.values())))
    for name, group in kafka.groups.items():
        if group.error is None and group.partitions:
            history.add(f"group:{name}", kafka.at, float(group.consumed))
            history.add(f"lag:{name}", kafka.at, float(group.lag))
    for service in services:
        for metric in RATE_METRICS[service.role]:
            if metric is None:
                continue
            scraped = [instances[u] for u in service.urls if u in instances and instances[u].samples]
            if scraped:
                total = sum(i.total(metric) or 0.0 for i in scraped)
                history.add(f"{service.name}:{metric}", max(i.at for i in scraped), total)


def service_views(
    services: Sequence[WatchedService],
    instances: Mapping[str, InstanceState],
    kafka: KafkaState,
    history: History,
) -> list[ServiceView]:
    """Every watched service's view, failed first."""
    views = []
    for service in services:
        found = tuple(instances[u] for u in service.urls if u in instances)
        group = kafka.groups.get(service.group) if service.group else None
        metric_in, metric_out = RATE_METRICS[service.role]
        rate_in = history.rate(f"group:{service.group}") if service.group else None
        if metric_in:
            rate_in = history.rate(f"{service.name}:{metric_in}")
        rate_out = history.rate(f"{service.name}:{metric_out}") if metric_out else _sole_output_rate(
            service, services, history
        )  # fmt: skip
        growth = _lag_growth(history, service.group) if service.group else None
        late = _late_share(service, history)
        views.append(ServiceView(service, found, group, rate_in, rate_out, growth, figures(found), late))
    return sorted(views, key=lambda v: (SEVERITY[v.state], not v.piling_up, v.name))


def _late_share(service: WatchedService, history: History) -> float | None:
    """Records/s into its late topic over records/s into its inputs (Kafka's counts both)."""
    if service.late is None or not service.inputs:
        return None
    late = history.rate(f"topic:{service.late}")
    rates = [history.rate(f"topic:{topic}") for topic in service.inputs]
    if late is None or any(r is None for r in rates):
        return None
    arriving = sum(r for r in rates if r is not None)
    return late / arriving if arriving > 0 else None


@dataclass(frozen=True)
class Alert:
    """Something a ready pipeline still needs an operator to look at."""

    kind: str
    service: str
    text: str


def clock_alerts(views: Sequence[ServiceView], now: float, clock_ahead_s: float, late_share: float) -> list[Alert]:
    """A watermark ahead of the wall clock (event time from a clock that runs ahead moved it),
    and a late share far above normal (the same, or a stage stopped into a backlog): both are
    invisible in every service's readiness."""
    alerts = []
    for view in views:
        mark = view.watermark
        if mark is not None and mark - now > clock_ahead_s:
            text = f"watermark {span(mark - now)} ahead of the clock: a device's clock runs ahead"
            alerts.append(Alert("clock ahead", view.name, text))
        if view.late_share is not None and view.late_share > late_share:
            text = f"{view.late_share:.0%} of its input went late over the rate window (above {late_share:.0%})"
            alerts.append(Alert("late", view.name, text))
    return alerts


def span(seconds: float) -> str:
    """``95`` -> ``1m 35s``; ``3700`` -> ``1h 1m``."""
    whole = int(seconds)
    if whole < 120:
        return f"{whole}s"
    if whole < 7200:
        return f"{whole // 60}m {whole % 60}s"
    return f"{whole // 3600}h {whole % 3600 // 60}m"


def _sole_output_rate(service: WatchedService, services: Sequence[WatchedService], history: History) -> float | None:
    """Records/s into the first output topic only this service writes (the aggregator's)."""
    for topic in service.outputs:
        if sum(topic in other.outputs for other in services) == 1:
            return history.rate(f"topic:{topic}")
    return None


def _lag_growth(history: History, group: str) -> float | None:
    return lag_growth(history.points.get(f"lag:{group}", []))


def lag_growth(series: Sequence[tuple[float, float]]) -> float | None:
    """Records/s the lag's floor rose by: the lowest lag of the window's second half against
    its first half's. A micro-batch consumer's lag is a sawtooth (the aggregator's rises for
    a trigger interval, then drops to ~0); its two ends compared said "piling up" about a
    healthy job on every rising edge (seen in make run's console). Its troughs rise only
    when it really falls behind."""
    if len(series) < 2 or series[-1][0] <= series[0][0]:
        return None
    half = (series[-1][0] - series[0][0]) / 2
    middle = series[0][0] + half
    early = min(lag for at, lag in series if at <= middle)
    late = min(lag for at, lag in series if at > middle)
    return (late - early) / half


@dataclass(frozen=True)
class Column:
    """One column of the flow: services of one depth, or the topics between two depths."""

    services: tuple[ServiceView, ...] = ()
    topics: tuple[str, ...] = ()


def flow(views: Sequence[ServiceView]) -> list[Column]:
    """The pipeline's stages left to right: services by depth (no input 0; else one more than
    the deepest writer of what it reads), with the topics they hand over in between."""
    by_name = {v.name: v for v in views}
    writers: dict[str, list[str]] = {}
    for view in views:
        for topic in view.service.outputs:
            writers.setdefault(topic, []).append(view.name)
    depth: dict[str, int] = {}

    def depth_of(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name not in depth:
            inputs = [w for t in by_name[name].service.inputs for w in writers.get(t, []) if w not in seen]
            depth[name] = 1 + max((depth_of(w, seen | {name}) for w in inputs), default=-1)
        return depth[name]

    columns: list[Column] = []
    for level in range(max((depth_of(n) for n in by_name), default=-1) + 1):
        stage = tuple(sorted((v for v in views if depth[v.name] == level), key=lambda v: v.name))
        if level:
            read = sorted({t for v in stage for t in v.service.inputs})
            columns.append(Column(topics=tuple(read)))
        columns.append(Column(services=stage))
    return columns
