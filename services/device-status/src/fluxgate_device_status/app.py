"""``fluxgate-device-status``: configure from the environment, register the schema, run faust.

faust's worker owns the event loop and the signals: SIGTERM (and SIGINT) stop it
gracefully (agents finish the event in hand, offsets and the changelog are flushed,
the consumer leaves its group). Its logs come out in fluxgate_core's format.

Exit codes: 0 after a clean stop, 2 for bad configuration (one line naming the field),
1 when the registry or Kafka refused or could not be reached at start.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import faust
import structlog

from fluxgate_core.errors import ConfigError, FluxgateError
from fluxgate_core.kafka_access import verify_kafka
from fluxgate_core.lifecycle import EXIT_FAILED, config_failed, quiet
from fluxgate_core.logs import configure_logging
from fluxgate_core.registry_access import registrations_named, verify_registry
from fluxgate_core.schemas import DEVICE_STATUS, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder, registry_client
from fluxgate_core.settings import load_settings
from fluxgate_core.topic_watch import TopicWatch
from fluxgate_device_status.changelog_load import ChangelogLoader
from fluxgate_device_status.codec import AvroDecoding, AvroEncoding, librdkafka_partitioner
from fluxgate_device_status.credentials import broker_credentials
from fluxgate_device_status.end_offsets import EndOffsets
from fluxgate_device_status.recovery import LoadingTableManager
from fluxgate_device_status.settings import SERVICE, StatusSettings
from fluxgate_device_status.tracker import DeviceTracker
from fluxgate_device_status.transport import StatusApp
from fluxgate_device_status.web import install_views

log = structlog.get_logger(__name__)
FAUST_REQUEST_TIMEOUT_S = 90.0  # faust's own default for broker_request_timeout


def build_app(settings: StatusSettings, watch: TopicWatch | None = None) -> tuple[faust.App, DeviceTracker]:
    """The faust app with its table, agents, timer and views; registers ``DeviceStatus``.
    ``watch``, on the input and status topics, is one more readiness check."""
    status, http = settings.status, settings.http
    Path(status.data_dir).mkdir(parents=True, exist_ok=True)  # faust makes only the last level
    client = registry_client(settings.registry)
    encoder = AvroEncoder.registered(
        client,
        status.status_topic,
        schema_text(DEVICE_STATUS),
        schema_dict(DEVICE_STATUS),
        settings.registry.compatibility,
    )
    app = StatusApp(
        status.app_id,
        broker=[f"kafka://{host.strip()}" for host in settings.kafka.bootstrap_servers.split(",")],
        broker_client_id=settings.kafka.client_id or SERVICE,
        # SASL (PLAIN, SCRAM) and/or TLS for the consumer, the producer and the topic creation.
        broker_credentials=broker_credentials(settings.kafka),
        # The changelog is the state, restored into memory at start and kept across rebalances
        # (store.py: a rejoin reads only what was written since).
        store="fluxgate-retaining://",
        TableManager=LoadingTableManager,  # the store loads the changelog in bulk first (recovery.py)
        autodiscover=False,
        datadir=status.data_dir,
        web_enabled=True,
        web_host=http.host,
        web_port=http.port,
        canonical_url=f"http://{http.advertised_host}:{http.port}",
        topic_partitions=status.partitions,
        table_standby_replicas=status.standby_replicas,
        producer_partitioner=librdkafka_partitioner,
        # Batching and compression as the Kafka settings say, as the other services' librdkafka
        # producers take them. faust's own defaults (no linger, no compression) sent each
        # changelog update in a request of its own (settings.KAFKA_LINGER_MS says what it cost).
        producer_linger=settings.kafka.linger_ms / 1000,
        producer_compression_type=None
        if settings.kafka.compression_type == "none"
        else settings.kafka.compression_type,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=status.session_timeout_s,
        # faust refuses a session longer than its requests' timeout (90 s by default) when it
        # makes the consumer; a static member's session may well be longer than a pod's restart.
        broker_request_timeout=max(FAUST_REQUEST_TIMEOUT_S, status.session_timeout_s),
        broker_commit_interval=status.commit_interval_s,
        broker_heartbeat_interval=status.heartbeat_interval_s,
        # Static membership: a restarted instance takes its partitions back without the group
        # waiting out the killed one's session (aiokafka sends no LeaveGroup for it on stop).
        consumer_group_instance_id=settings.kafka.group_instance_id,
    )
    # The Kafka clients below take SERVICE as the client id unless settings.kafka names one.
    if status.bulk_restore:  # read by the table's store (store.py)
        app.changelog_loader = ChangelogLoader(settings.kafka, SERVICE, status.bulk_restore_min_records)
    ends = EndOffsets(settings.kafka, SERVICE)
    tracker = DeviceTracker(app, status, AvroDecoding(AvroDecoder(client)), AvroEncoding(encoder), ends)

    def ready() -> dict[str, bool]:
        checks = {"kafka_assigned_and_restored": tracker.settled(), "devices_routable": tracker.routable}
        if watch is not None:
            checks["topics_present"] = watch.present()
        return checks

    install_views(app, tracker, ready)
    return app, tracker


def main() -> None:
    """Console-script entry point."""
    try:
        settings = load_settings(StatusSettings)
    except ConfigError as exc:
        sys.exit(config_failed(SERVICE, exc))
    configure_logging(SERVICE, settings.log)
    quiet(("httpx", "httpx2", "aiokafka"))  # a line per registry request or fetch otherwise
    try:
        # A refused login or TLS handshake fails here, in one line naming the setting.
        status = settings.status
        topics = {status.input_topic: "status.input_topic", status.status_topic: "status.status_topic"}
        verify_kafka(settings.kafka, SERVICE, "FLUXGATE_STATUS_", topics)
        verify_registry(settings.registry, "FLUXGATE_STATUS_")  # a refused secret or CA, named alike
        watch = TopicWatch(settings.kafka, SERVICE, topics)  # deleted while running
        with registrations_named(settings.registry, "FLUXGATE_STATUS_"):
            app, _ = build_app(settings, watch.start())
    except ConfigError as exc:
        sys.exit(config_failed(SERVICE, exc))
    except FluxgateError as exc:
        log.error("service.failed", error=str(exc), error_class=type(exc).__name__)
        sys.exit(EXIT_FAILED)
    worker = faust.Worker(app, loglevel=settings.log.level, override_logging=False, redirect_stdouts=False, quiet=True)
    # What the imports and the app made lives as long as the process: left out of every later
    # collection, which then walks only what came since. A full collection holds the GIL, and
    # so aiokafka's heartbeat thread (bench/results/2026-11-29-device-status-gc.md).
    gc.freeze()
    worker.execute_from_commandline()


if __name__ == "__main__":
    main()
