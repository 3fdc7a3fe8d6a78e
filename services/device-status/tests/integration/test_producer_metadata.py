"""``GET /devices/{id}`` is routed by the producer's metadata of the table's changelog
(faust's ``Router.key_store``): a producer that has lost the topic answers the request with a
500. This pins, against the real Kafka, what keeps it there through the refreshes that
sending to other topics makes."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from fluxgate_testing import unique_topic

from fluxgate_device_status.tracker import keep_in_metadata

pytestmark = pytest.mark.integration


async def test_the_changelog_stays_in_the_producers_metadata_after_it_sends_to_another_topic(stack: Any) -> None:
    changelog = unique_topic("status-metadata.changelog", stack.bootstrap)
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await producer.start()
    try:
        # As faust leaves it after creating its topics: a refresh of every topic in the cluster.
        await producer.client.force_metadata_update()
        await keep_in_metadata(producer, changelog)
        # The first silence check, to a topic the producer's metadata lacks: a refresh of it.
        checks = unique_topic("status-metadata.checks", stack.bootstrap)
        await producer.send_and_wait(checks, b"checked", key=b"dev-1")
        assert producer.client.cluster.partitions_for_topic(changelog) == {0, 1, 2}
    finally:
        await producer.stop()
