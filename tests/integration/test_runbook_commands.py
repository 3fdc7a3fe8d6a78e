"""The runbooks' commands, run as written against the local stack's Kafka: a command an
operator pastes during an incident must work the first time.

Kafka's own ``kafka-consumer-groups.sh`` runs ``ConsumerGroupCommand`` from the kafka-tools
jar, which the stack's broker does not carry: the test fetches that jar (and its
dependencies) from Maven Central at the broker's version and puts a launcher of that name on
the block's PATH, as Kafka's script is (a ``java -cp`` of the class)."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from fluxgate_testing import unique_topic

from fluxgate_stack import fetch
from fluxgate_stack.settings import StackSettings

pytestmark = [pytest.mark.integration, pytest.mark.downloads]  # kafka-tools, from Maven Central

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "docs" / "runbooks"
_BLOCK = re.compile(r"<!-- runbook: (?P<name>[\w-]+) -->\n```bash\n(?P<text>.*?)\n```", re.DOTALL)
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def runbook_block(page: str, name: str) -> str:
    found = {m["name"]: m["text"] for m in _BLOCK.finditer((RUNBOOKS / page).read_text(encoding="utf-8"))}
    return found[name]


@pytest.fixture(scope="module")
def kafka_tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``kafka-consumer-groups.sh``, for a PATH."""
    settings = StackSettings()
    libs = Path.home() / ".cache" / "fluxgate" / f"kafka-tools-{settings.kafka_version}"
    if not libs.is_dir():
        coordinate = f"org.apache.kafka:kafka-tools:{settings.kafka_version}"
        work = tmp_path_factory.mktemp("kafka-tools-pom")
        fetch.install_atomically(
            libs, lambda into: fetch.maven_copy_dependencies(settings.mvn, [coordinate], work, into)
        )
    folder = tmp_path_factory.mktemp("bin")
    script = folder / "kafka-consumer-groups.sh"
    script.write_text(f'#!/bin/sh\nexec java -cp "{libs}/*" {GROUP_COMMAND} "$@"\n')
    script.chmod(0o755)
    return folder


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def test_the_store_runbooks_rewind_moves_a_stopped_persisters_group_to_the_backups_time(
    stack: Any, kafka_tools: Path
) -> None:
    topic = unique_topic("runbook.aggregated", stack.bootstrap, partitions=2)
    group = f"fluxgate-es-persister-{topic.rsplit('.', 1)[1]}"
    backup = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
    backup_ms = int(backup.timestamp() * 1000)
    producer = Producer({"bootstrap.servers": stack.bootstrap})
    # Per partition: three records written before the backup, four after it.
    for partition in (0, 1):
        for second in (-30, -20, -10, 0, 10, 20, 30):
            producer.produce(topic, b"aggregate", partition=partition, timestamp=backup_ms + second * 1000)
    assert producer.flush(30) == 0
    # The persister had written everything, then stopped (the group has no member).
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, p, 7) for p in (0, 1)], asynchronous=False)
    consumer.close()
    assert committed(stack.bootstrap, group, topic, 2) == {0: 7, 1: 7}

    since = backup.strftime("%Y-%m-%dT%H:%M:%S.000")
    env = {"PATH": f"{kafka_tools}:{os.environ['PATH']}", "KAFKA": stack.bootstrap, "GROUP": group,
           "TOPIC": topic, "SINCE": since, "TZ": "UTC"}  # fmt: skip
    block = runbook_block("FluxgateStoreUnreachable.md", "rewind")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, capture_output=True, text=True,
                          timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # The first record at or after the backup's time: the fourth of each partition.
    assert committed(stack.bootstrap, group, topic, 2) == {0: 3, 1: 3}, done.stdout + done.stderr
