"""device-status as a process against the real Kafka and registry; readings as the gateways write them."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from fluxgate_testing import ServiceProcess, consume, free_port, unique_topic

from fluxgate_core.consumed_record import ConsumedRecord
from fluxgate_core.schemas import SENSOR_READING, schema_dict, schema_text
from fluxgate_core.serde import AvroDecoder, AvroEncoder
from fluxgate_core.settings import KafkaSettings

pytestmark = pytest.mark.integration

THRESHOLD_S = 2.0
TICK_S = 0.25
HEARTBEAT_S = 1.0
ARGV = [str(Path(sys.executable).with_name("fluxgate-device-status"))]


class Fleet:
    """Writes ``SensorReading`` records keyed by device id, with librdkafka's partitioner, like a gateway."""

    def __init__(self, stack: Any, registry_client: Any, data_dir: Path) -> None:
        self.bootstrap = stack.bootstrap
        self.registry_url = stack.registry_url
        self.registry_client = registry_client
        self.readings_topic = unique_topic("sensors.readings", stack.bootstrap, partitions=3)
        self.status_topic = unique_topic("devices.status", stack.bootstrap, partitions=3)
        self.encoder = AvroEncoder.registered(
            registry_client, self.readings_topic, schema_text(SENSOR_READING), schema_dict(SENSOR_READING)
        )
        # As the gateways send them: KafkaSettings' defaults compress with lz4 (which aiokafka reads
        # only with its compression extra; make run found the service without it).
        gateway = KafkaSettings.model_validate({"bootstrap_servers": stack.bootstrap}).producer_config("test-fleet")
        self.producer = Producer({**gateway, "linger.ms": 0})
        self.app_id = f"device-status-{uuid.uuid4().hex[:8]}"
        self.data_dir = data_dir

    def send(
        self,
        device_id: str,
        value: float = 21.5,
        metric: str = "temperature",
        count: int = 1,
        encoder: AvroEncoder | None = None,
    ) -> None:
        """``count`` readings of one device, flushed; written with ``encoder``'s schema when given."""
        for _ in range(count):
            self._produce(device_id, value, metric, encoder or self.encoder)
        assert self.producer.flush(30) == 0

    def _produce(self, device_id: str, value: float, metric: str, encoder: AvroEncoder) -> None:
        now = int(time.time() * 1000)
        record = {
            "device_id": device_id,
            "metric": metric,
            "value": value,
            "unit": "Cel",
            "event_time": now - 5,
            "ingest_time": now,
            "source_protocol": "MQTT",
            "source": f"sensors/{device_id}/{metric}",
            "sequence": None,
            "attributes": {},
        }
        self.producer.produce(self.readings_topic, encoder.encode(record), key=device_id.encode())
        self.producer.poll(0)

    def service(self, registry_url: str | None = None, **env: str) -> ServiceProcess:
        port = free_port()
        settings = {
            "KAFKA__BOOTSTRAP_SERVERS": self.bootstrap,
            "REGISTRY__URL": registry_url or self.registry_url,
            "HTTP__HOST": "127.0.0.1",
            "HTTP__PORT": str(port),
            "STATUS__APP_ID": self.app_id,
            "STATUS__INPUT_TOPIC": self.readings_topic,
            "STATUS__STATUS_TOPIC": self.status_topic,
            "STATUS__SILENCE_THRESHOLD_S": str(THRESHOLD_S),
            "STATUS__TIMER_INTERVAL_S": str(TICK_S),
            "STATUS__SESSION_TIMEOUT_S": "6",
            "STATUS__HEARTBEAT_INTERVAL_S": str(HEARTBEAT_S),
            "STATUS__COMMIT_INTERVAL_S": "0.5",
            # Every restore here reads its changelog in bulk first (store.py), however little it holds.
            "STATUS__BULK_RESTORE_MIN_RECORDS": "0",
            "STATUS__DATA_DIR": str(self.data_dir / str(port)),
            **env,
        }
        return ServiceProcess(
            ARGV,
            {f"FLUXGATE_STATUS_{k}": v for k, v in settings.items()},
            health_port=port,
            isolate_prefix="FLUXGATE_STATUS_",
        )

    def committed(self) -> dict[int, int]:
        """The service's committed offsets on the readings topic (partition -> next offset)."""
        client = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.app_id})
        try:
            found = client.committed([TopicPartition(self.readings_topic, p) for p in range(3)], timeout=10)
        finally:
            client.close()
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}

    def changelog_records(self) -> int:
        """How many records the service's table changelog holds (what a restart restores from)."""
        client = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{self.app_id}-probe"})
        topic = f"{self.app_id}-devices-changelog"
        try:
            return sum(client.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3))
        except KafkaException:  # not created yet
            return 0
        finally:
            client.close()

    def transitions(self, expected: int, idle: float = 1.0) -> list[dict[str, Any]]:
        """Every DeviceStatus on the status topic, decoded through the registry."""
        records: list[ConsumedRecord] = consume(
            self.bootstrap, self.status_topic, expected=expected, idle=idle, decoder=AvroDecoder(self.registry_client)
        )
        assert all(r.key == r.record["device_id"].encode() for r in records if r.record)
        return [r.record for r in records if r.record is not None]


def device(service: ServiceProcess, device_id: str) -> tuple[int, dict[str, Any]]:
    status, body = service.get(f"/devices/{device_id}")
    try:
        return status, json.loads(body) if body else {}
    except ValueError:  # aiohttp's text for an exception no view handled: the service's log has it
        raise AssertionError(f"GET /devices/{device_id}: {status} {body[:200]}\n{service.log_tail()}") from None


def devices(service: ServiceProcess, query: str = "") -> list[dict[str, Any]]:
    status, body = service.get(f"/devices{query}")
    assert status == 200, body
    found: list[dict[str, Any]] = json.loads(body)["devices"]
    return found


def bulk_loads(service: ServiceProcess) -> list[int]:
    """The records each bulk load of the table's changelog applied (store.py), in order; fails
    with the reason when a load was left to faust's recovery."""
    log = service.log_text()
    assert "event=table.load_incomplete" not in log, log
    return [int(found.group(1)) for found in re.finditer(r"event=table\.loaded .*?records=(\d+)", log)]


def on_partition(partition: int, prefix: str) -> str:
    """A device id that librdkafka puts on ``partition`` of 3."""
    return next(f"{prefix}-{i}" for i in range(100) if zlib.crc32(f"{prefix}-{i}".encode()) % 3 == partition)


def keep_sending(fleet: Fleet, device_id: str, stop: threading.Event, sent_at: list[float] | None = None) -> None:
    """One reading of ``device_id`` per timer tick until ``stop``; when each was sent, in ``sent_at``."""
    while not stop.is_set():
        fleet.send(device_id)
        if sent_at is not None:
            sent_at.append(time.monotonic())
        stop.wait(TICK_S)


@pytest.fixture
def fleet(stack: Any, registry_client: Any, tmp_path: Path) -> Iterator[Fleet]:
    yield Fleet(stack, registry_client, tmp_path)
