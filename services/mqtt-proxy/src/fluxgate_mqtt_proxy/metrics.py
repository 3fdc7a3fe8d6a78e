"""mqtt-proxy's own metrics, beside the shared ones in ``fluxgate_core.metrics``.

Labels stay low-cardinality: the rule's filter as configured and the QoS, never a topic.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

MESSAGES = Counter("fluxgate_mqtt_messages_total", "MQTT messages received", ["route", "qos"])
ACKNOWLEDGED = Counter("fluxgate_mqtt_acknowledged_total", "MQTT messages handled (acknowledged when QoS 1/2)", ["qos"])
UNACKNOWLEDGED = Counter(
    "fluxgate_mqtt_unacknowledged_total", "QoS 1/2 messages left for the broker to redeliver", ["reason"]
)
ACK_LATENCY = Histogram(
    "fluxgate_mqtt_ack_latency_seconds",
    "From receiving an MQTT message to acknowledging it, after Kafka confirmed its records",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
PENDING = Gauge("fluxgate_mqtt_pending_messages", "MQTT messages being handled (received, not yet acknowledged)")
CONNECTED = Gauge("fluxgate_mqtt_connected", "1 while connected to the broker and subscribed")
DISCONNECTS = Counter("fluxgate_mqtt_disconnects_total", "Connections to the broker lost")
READ_PAUSES = Counter("fluxgate_mqtt_read_pauses_total", "Times reading the broker's socket paused for backpressure")
