"""device-status's Prometheus metrics. Labels are statuses and reasons, never device ids."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

READINGS = Counter("fluxgate_status_readings_total", "SensorReading records applied to the device table")
REPLAYS = Counter(
    "fluxgate_status_replayed_readings_total", "Readings skipped because the table had already counted them"
)
REGISTRY_WAITS = Counter(
    "fluxgate_status_registry_waits_total",
    "Times a reading waited for the schema registry to give its writer schema (it is read again, not skipped)",
)
UNDECODABLE = Counter("fluxgate_status_undecodable_total", "Input records that are not readable SensorReadings")
TRANSITIONS = Counter("fluxgate_status_transitions_total", "DeviceStatus transitions produced", ["status"])
DEVICES = Gauge("fluxgate_status_devices", "Devices in this instance's part of the table", ["status"])
CHECKS = Counter("fluxgate_status_silence_checks_total", "Silence checks the timer asked for")
CHANGELOG_APPLIED = Counter(
    "fluxgate_status_changelog_applied_total",
    "Changelog records a restore or a standby applied to the table (a rejoin reads only what was written since "
    "the table's last record of each partition it kept)",
)
UNREADABLE_ENTRIES = Counter(
    "fluxgate_status_unreadable_table_entries_total", "Restored table entries left out: not a device state"
)
JUDGED_LATE = Gauge(
    "fluxgate_status_partitions_judged_late",
    "Owned input partitions whose silences the last tick judged as of their newest record processed "
    "(readings wait to be processed) or not at all (not caught up since the restore, Kafka not answering)",
)
CONSUMER_LAG = Gauge(
    "fluxgate_status_consumer_lag",
    "Input records not processed yet (the partition's end offset minus the next offset to read), per owned "
    "partition, as of the last tick",
    ["topic", "partition"],
)
