"""coap-ingest's own Prometheus metrics, beside the shared ones in ``fluxgate_core.metrics``.

Labels are the CoAP server host, never the resource or device, to stay low-cardinality.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

NOTIFICATIONS = Counter("fluxgate_coap_notifications_total", "CoAP notifications received", ["host"])
REREGISTRATIONS = Counter(
    "fluxgate_coap_reregistrations_total", "Observations registered again after they ended", ["host", "reason"]
)
DUPLICATES = Counter("fluxgate_coap_duplicates_dropped_total", "Notifications dropped as duplicates", ["host"])
DEAD_LETTERED = Counter("fluxgate_coap_dead_letters_total", "Notifications sent to the dead-letter topic", ["host"])
OBSERVATIONS_ACTIVE = Gauge("fluxgate_coap_observations_active", "Observations currently registered", ["host"])
