"""What Fluxgate's Grafana dashboards show: every panel's title, unit and PromQL queries, as plain data.

``tools/dashboards.py`` turns these into Grafana's JSON (with grafana-foundation-sdk);
``tools/dashboard_queries.py`` checks the queries against a real Prometheus. Every query reads
only metrics a service exports, labelled ``fluxgate_service`` as the alerts expect
(deploy/charts/fluxgate/files/prometheus-rules.yaml), and returns a series while the pipeline
runs: counters that count only failures are summed with ``or vector(0)``, so that a quiet
pipeline shows 0 rather than "No data" (the run's check still requires their families to be
exported).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

RATE = "$__rate_interval"  # Grafana's; the checks put a fixed range in its place


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class PanelSpec:
    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: Literal["timeseries", "stat"] = "timeseries"
    width: int = 12


@dataclass(frozen=True)
class DashboardSpec:
    uid: str  # also the JSON file's name
    title: str
    description: str
    rows: dict[str, tuple[PanelSpec, ...]] = field(default_factory=dict)


def q(expr: str, legend: str = "") -> Query:
    return Query(" ".join(expr.split()), legend)


def picked(metric: str, selector: str = "") -> str:
    """A metric's series, those ``selector`` (label matchers, without braces) picks."""
    return f"{metric}{{{selector}}}" if selector else metric


def watermark_behind(selector: str = "") -> str:
    """How far the watermark trails the clock; it is 0 until the first window closes: no point
    then, rather than "55 years behind"."""
    return f"time() - max by (fluxgate_service) ({picked('fluxgate_aggregator_watermark_seconds', selector)} > 0)"


def rate(metric: str, by: str, selector: str = "") -> str:
    return f"sum by ({by}) (rate({picked(metric, selector)}[{RATE}]))"


def p95(histogram: str, by: str, selector: str = "") -> str:
    return f"histogram_quantile(0.95, sum by ({by}, le) (rate({picked(histogram + '_bucket', selector)}[{RATE}])))"


def stat(title: str, description: str, aggregation: str, metric: str, by: str, width: int) -> PanelSpec:
    """A stat panel of one gauge: a value for each ``by`` label, named by it."""
    query = q(f"{aggregation} by ({by}) ({metric})", f"{{{{{by}}}}}")
    return PanelSpec(title, description, (query,), kind="stat", width=width)


DEAD_LETTERS = " or ".join(
    f"sum by (fluxgate_service) (rate({metric}[{RATE}]))"
    for metric in ("fluxgate_dead_letters_total", "fluxgate_sink_records_dead_lettered_total",
                   "fluxgate_aggregator_dead_letters")
)  # fmt: skip
READY = stat("Services ready", "Ready instances of each service (fluxgate_ready): 0 is a service up but not ready.",
             "sum", "fluxgate_ready", "fluxgate_service", width=10)  # fmt: skip
STORES_UP = stat("Stores reachable", "1 while each persister's store takes writes, 0 while it is down or overloaded.",
                 "min", "fluxgate_sink_store_up", "fluxgate_service", width=8)  # fmt: skip
DEVICES = stat("Devices", "Devices by the status device-status gives them.",
               "sum", "fluxgate_status_devices", "status", width=6)  # fmt: skip
LAG = "fluxgate_sink_consumer_lag or fluxgate_aggregator_consumer_lag or fluxgate_status_consumer_lag"


def overview() -> DashboardSpec:
    flow = PanelSpec(
        "Flow per stage",
        "Records a second through each stage: received and sent to Kafka by the gateways, processed by "
        "the aggregator, written by each persister, read by device-status.",
        (
            q(rate("fluxgate_records_in_total", "fluxgate_service"), "{{fluxgate_service}} received"),
            q(rate("fluxgate_records_out_total", "fluxgate_service"), "{{fluxgate_service}} to Kafka"),
            q("sum by (fluxgate_service) (fluxgate_aggregator_processed_rows_per_second)", "aggregator processed"),
            q(rate("fluxgate_sink_records_written_total", "fluxgate_service"), "{{fluxgate_service}} written"),
            q(rate("fluxgate_status_readings_total", "fluxgate_service"), "{{fluxgate_service}} read"),
        ),
        unit="rps",
        width=24,
    )
    lag = PanelSpec(
        "Consumer lag",
        "Records on each topic that a consuming stage has not processed yet (FluxgateLagGrowing pages on it).",
        (q(f"sum by (fluxgate_service, topic) ({LAG})", "{{fluxgate_service}} on {{topic}}"),),
    )
    dead = PanelSpec(
        "Dead letters",
        "Records a second sent to a dead-letter topic, by stage (FluxgateDeadLettersRising pages on it).",
        (q(DEAD_LETTERS, "{{fluxgate_service}}"),),
        unit="rps",
    )
    latency = PanelSpec(
        "Latency from window close to store",
        "The legs after a window closes: the aggregator's micro-batch that emits it and each persister's "
        "write (95th percentile); Kafka's hop between them shows as consumer lag, the wait before the "
        "window closes as the watermark.",
        (
            q("max by (fluxgate_service) (fluxgate_aggregator_batch_duration_seconds)", "aggregator micro-batch"),
            q(p95("fluxgate_sink_write_seconds", "fluxgate_service"), "{{fluxgate_service}} write p95"),
        ),
        unit="s",
    )
    watermark = PanelSpec(
        "Watermark",
        "How far the aggregator's event-time watermark trails the clock: how long after its end a window "
        "closes (FluxgateWatermarkStalled pages when it stops moving).",
        (q(watermark_behind(), "behind the clock"),),
        unit="s",
    )
    return DashboardSpec(
        "fluxgate-overview",
        "Fluxgate / Overview",
        "The whole pipeline: flow per stage, lag, dead letters, latency to the stores and the watermark.",
        {
            "Health": (READY, STORES_UP, DEVICES),
            "Flow": (flow, lag, dead),
            "Time": (latency, watermark),
        },
    )


def events(metric: str, by: str, selector: str, legend: str) -> Query:
    """A counter that counts only what went wrong (it has no series until it first counts): 0 until then."""
    return q(f"{rate(metric, by, selector)} or vector(0)", legend)


def common(selector: str) -> tuple[PanelSpec, ...]:
    """What every service shows first: readiness, its checks, CPU and memory per instance."""
    return (
        PanelSpec("Ready", "1 while the instance is ready (fluxgate_ready).",
                  (q(f"min by (instance) (fluxgate_ready{{{selector}}})", "{{instance}}"),), width=6),
        PanelSpec("Readiness checks", "Each check behind readiness: 1 passing, 0 failing.",
                  (q(f"min by (check) (fluxgate_ready_check{{{selector}}})", "{{check}}"),), width=6),
        PanelSpec("CPU", "CPU seconds a second, per instance.",
                  (q(rate("process_cpu_seconds_total", "instance", selector), "{{instance}}"),), width=6),
        PanelSpec("Memory", "Resident memory per instance.",
                  (q(f"sum by (instance) (process_resident_memory_bytes{{{selector}}})", "{{instance}}"),),
                  unit="bytes", width=6),
    )  # fmt: skip


def gateway(selector: str) -> tuple[PanelSpec, ...]:
    """What both gateways (mqtt-proxy, coap-ingest) export through fluxgate_core's metrics."""
    return (
        PanelSpec("Records", "Input messages received, by source, and records Kafka confirmed, by topic.",
                  (q(rate("fluxgate_records_in_total", "source", selector), "received from {{source}}"),
                   q(rate("fluxgate_records_out_total", "topic", selector), "to {{topic}}")), unit="rps"),
        PanelSpec("Dead letters", "Messages sent to the dead-letter topic, by reason.",
                  (events("fluxgate_dead_letters_total", "reason", selector, "{{reason}}"),), unit="rps"),
        PanelSpec("Ingest latency", "From receiving a message to Kafka's acknowledgement, 95th percentile.",
                  (q(p95("fluxgate_ingest_latency_seconds", "instance", selector), "{{instance}}"),), unit="s"),
        PanelSpec("Kafka", "Records produced but not yet confirmed, and records Kafka rejected.",
                  (q(f"sum by (instance) (fluxgate_kafka_in_flight{{{selector}}})", "in flight {{instance}}"),
                   events("fluxgate_kafka_delivery_errors_total", "topic", selector, "rejected {{topic}}"))),
    )  # fmt: skip


def mqtt_proxy(selector: str) -> dict[str, tuple[PanelSpec, ...]]:
    mqtt = (
        PanelSpec("MQTT messages", "Messages from the broker, by route and QoS.",
                  (q(rate("fluxgate_mqtt_messages_total", "route, qos", selector), "{{route}} QoS {{qos}}"),),
                  unit="rps"),
        PanelSpec("Broker connection", "1 while connected to the broker; disconnects a second.",
                  (q(f"min by (instance) (fluxgate_mqtt_connected{{{selector}}})", "connected {{instance}}"),
                   q(rate("fluxgate_mqtt_disconnects_total", "instance", selector), "disconnects {{instance}}"))),
        PanelSpec("Backpressure", "Messages received but not yet acknowledged, and reads paused a second.",
                  (q(f"sum by (instance) (fluxgate_mqtt_pending_messages{{{selector}}})", "pending {{instance}}"),
                   q(rate("fluxgate_mqtt_read_pauses_total", "instance", selector), "pauses {{instance}}"))),
        PanelSpec("Acknowledgements", "Messages acknowledged to the broker a second, by QoS, and the 95th "
                  "percentile from receipt to acknowledgement.",
                  (q(rate("fluxgate_mqtt_acknowledged_total", "qos", selector), "QoS {{qos}}"),
                   q(p95("fluxgate_mqtt_ack_latency_seconds", "instance", selector), "p95 s {{instance}}"))),
    )  # fmt: skip
    return {"Service": common(selector), "Flow": gateway(selector), "MQTT": mqtt}


def coap_ingest(selector: str) -> dict[str, tuple[PanelSpec, ...]]:
    coap = (
        PanelSpec("Notifications", "CoAP notifications a second, by device host.",
                  (q(rate("fluxgate_coap_notifications_total", "host", selector), "{{host}}"),), unit="rps"),
        PanelSpec("Observations", "Resources observed, by host.",
                  (q(f"sum by (host) (fluxgate_coap_observations_active{{{selector}}})", "{{host}}"),)),
        PanelSpec("Dropped", "Duplicate notifications dropped and notifications dead-lettered, by host.",
                  (q(rate("fluxgate_coap_duplicates_dropped_total", "host", selector), "duplicates {{host}}"),
                   events("fluxgate_coap_dead_letters_total", "host", selector, "dead letters {{host}}")),
                  unit="rps"),
    )  # fmt: skip
    return {"Service": common(selector), "Flow": gateway(selector), "CoAP": coap}


def aggregator(selector: str) -> dict[str, tuple[PanelSpec, ...]]:
    rows = (
        PanelSpec("Rows a second", "Spark's input and processed rows a second, by query.",
                  (q(f"sum by (query) (fluxgate_aggregator_input_rows_per_second{{{selector}}})", "{{query}} in"),
                   q(f"sum by (query) (fluxgate_aggregator_processed_rows_per_second{{{selector}}})",
                     "{{query}} processed")), unit="rps"),
        PanelSpec("Consumer lag", "Readings on sensors.readings not processed yet, by partition.",
                  (q(f"sum by (topic, partition) (fluxgate_aggregator_consumer_lag{{{selector}}})",
                     "{{topic}} {{partition}}"),)),
        PanelSpec("Late and dead-lettered", "Readings a second that arrived after their window closed, and "
                  "rows dead-lettered.",
                  (q(rate("fluxgate_aggregator_late_rows", "fluxgate_service", selector), "late"),
                   q(rate("fluxgate_aggregator_dead_letters", "fluxgate_service", selector), "dead letters")),
                  unit="rps"),
        PanelSpec("Rows in state", "Windows and dedup keys Spark holds in its state store.",
                  (q(f"sum by (fluxgate_service) (fluxgate_aggregator_state_rows{{{selector}}})", "state rows"),)),
    )  # fmt: skip
    time_ = (
        PanelSpec("Watermark behind the clock", "How long after its end a window closes.",
                  (q(watermark_behind(selector), "behind the clock"),), unit="s"),
        PanelSpec("Micro-batches", "Each query's last micro-batch duration, and the mean time per phase.",
                  (q(f"max by (query) (fluxgate_aggregator_batch_duration_seconds{{{selector}}})", "{{query}}"),
                   q(f"{rate('fluxgate_aggregator_phase_seconds_sum', 'phase', selector)} / "
                     f"{rate('fluxgate_aggregator_phase_seconds_count', 'phase', selector)}", "{{phase}}")),
                  unit="s"),
        PanelSpec("Restarts and losses", "Times the query failed and was resumed, and Spark's data-loss "
                  "alerts (readings removed from Kafka before they were read).",
                  (q(f"sum by (fluxgate_service) (fluxgate_aggregator_query_restarts_total{{{selector}}})",
                     "restarts"),
                   q(f"max by (fluxgate_service) (fluxgate_aggregator_data_loss_alerts{{{selector}}})",
                     "data-loss alerts"))),
    )  # fmt: skip
    return {"Service": common(selector), "Rows": rows, "Time": time_}


def persister(selector: str) -> dict[str, tuple[PanelSpec, ...]]:
    """One of the three persisters: the sink runtime's metrics (libs/fluxgate-sink)."""
    flow = (
        PanelSpec("Records written", "Records the store confirmed, by KCQL target.",
                  (q(rate("fluxgate_sink_records_written_total", "target", selector), "{{target}}"),), unit="rps"),
        PanelSpec("Records failed", "Records written again after a failure, refused by the store for good, "
                  "and dead-lettered.",
                  (events("fluxgate_sink_records_retried_total", "target", selector, "retried {{target}}"),
                   events("fluxgate_sink_records_rejected_total", "target", selector, "rejected {{target}}"),
                   events("fluxgate_sink_records_dead_lettered_total", "target", selector,
                          "dead-lettered {{target}}")), unit="rps"),
        PanelSpec("Consumer lag", "Records on the topic not yet committed, by partition.",
                  (q(f"sum by (topic, partition) (fluxgate_sink_consumer_lag{{{selector}}})",
                     "{{topic}} {{partition}}"),)),
        PanelSpec("Offset commits", "Offset commits a second, each after a written batch.",
                  (q(rate("fluxgate_sink_offsets_committed_total", "instance", selector), "{{instance}}"),)),
        PanelSpec("Records held", "Records taken from Kafka and not yet written, all partitions together: "
                  "at SINK__MAX_HELD_RECORDS the persister pauses its partitions until its writes catch up.",
                  (q(f"max by (instance) (fluxgate_sink_records_held{{{selector}}})", "{{instance}}"),)),
    )  # fmt: skip
    store = (
        PanelSpec("Store reachable", "1 while the store takes writes, 0 while it is down or overloaded.",
                  (q(f"min by (instance) (fluxgate_sink_store_up{{{selector}}})", "{{instance}}"),)),
        PanelSpec("Write latency", "Time of one batch write, 95th percentile.",
                  (q(p95("fluxgate_sink_write_seconds", "instance", selector), "{{instance}}"),), unit="s"),
        PanelSpec("Batch size", "Records per write, on average.",
                  (q(f"{rate('fluxgate_sink_batch_size_sum', 'instance', selector)} / "
                     f"{rate('fluxgate_sink_batch_size_count', 'instance', selector)}", "{{instance}}"),)),
    )  # fmt: skip
    return {"Service": common(selector), "Flow": flow, "Store": store}


def device_status(selector: str) -> dict[str, tuple[PanelSpec, ...]]:
    devices = (
        PanelSpec("Devices", "Devices by status.",
                  (q(f"sum by (status) (fluxgate_status_devices{{{selector}}})", "{{status}}"),)),
        PanelSpec("Transitions", "Devices changing status a second, by the status they change to.",
                  (events("fluxgate_status_transitions_total", "status", selector, "{{status}}"),), unit="rps"),
        PanelSpec("Readings", "Readings read a second, those skipped as already counted, and those that "
                  "did not decode.",
                  (q(rate("fluxgate_status_readings_total", "instance", selector), "read {{instance}}"),
                   q(rate("fluxgate_status_replayed_readings_total", "instance", selector), "replayed {{instance}}"),
                   q(rate("fluxgate_status_undecodable_total", "instance", selector), "undecodable {{instance}}")),
                  unit="rps"),
        PanelSpec("Consumer lag", "Readings on sensors.readings not processed yet, by partition.",
                  (q(f"sum by (topic, partition) (fluxgate_status_consumer_lag{{{selector}}})",
                     "{{topic}} {{partition}}"),)),
        PanelSpec("Silence timer", "Silence checks a second, and partitions judged late.",
                  (q(rate("fluxgate_status_silence_checks_total", "instance", selector), "checks {{instance}}"),
                   q(f"sum by (instance) (fluxgate_status_partitions_judged_late{{{selector}}})",
                     "late partitions {{instance}}"))),
    )  # fmt: skip
    return {"Service": common(selector), "Devices": devices}


def console(selector: str) -> dict[str, tuple[PanelSpec, ...]]:
    page = (
        PanelSpec("Refresh time", "Time to ask every service, Kafka and the stores once, 95th percentile.",
                  (q(p95("fluxgate_console_refresh_seconds", "instance", selector), "{{instance}}"),), unit="s"),
        PanelSpec("Scrapes", "Services' metrics read a second, by outcome.",
                  (q(rate("fluxgate_console_scrapes_total", "state", selector), "{{state}}"),), unit="rps"),
        PanelSpec("Parts failing", "Parts of the page (services, Kafka, stores) the last refresh could not read.",
                  (q(f"max by (instance) (fluxgate_console_parts_failing{{{selector}}})", "{{instance}}"),)),
        PanelSpec("Replays", "Dead letters replayed a second, and replays that failed.",
                  (q(rate("fluxgate_console_replayed_total", "instance", selector), "replayed {{instance}}"),
                   q(rate("fluxgate_console_replay_failures_total", "instance", selector), "failed {{instance}}")),
                  unit="rps"),
    )  # fmt: skip
    return {"Service": common(selector), "Console": page}


SERVICES = {
    "mqtt-proxy": mqtt_proxy,
    "coap-ingest": coap_ingest,
    "aggregator": aggregator,
    "es-persister": persister,
    "scylla-persister": persister,
    "hazelcast-persister": persister,
    "device-status": device_status,
    "console": console,
}


def dashboards() -> list[DashboardSpec]:
    """The overview, then one dashboard per service (its series picked by ``fluxgate_service``)."""
    found = [overview()]
    for name, rows in SERVICES.items():
        found.append(
            DashboardSpec(f"fluxgate-{name}", f"Fluxgate / {name}", f"{name}: every metric it exports.",
                          rows(f'fluxgate_service="{name}"'))
        )  # fmt: skip
    return found
