"""Registering against the real registry the way a fresh pipeline does: every service at once."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from fluxgate_core.errors import RegistryError
from fluxgate_core.schemas import SENSOR_READING, schema_text
from fluxgate_core.serde import register

pytestmark = pytest.mark.integration


def test_services_starting_together_on_a_new_subject_all_get_the_same_id(stack: Any) -> None:
    # `make run` starts both gateways and the aggregator at once; Apicurio then answered
    # all but one of them 409 "rule already exists" about one start in four.
    def start_a_service(subject: str) -> int:
        client = SchemaRegistryClient({"url": stack.registry_url})
        return register(client, subject, schema_text(SENSOR_READING), "BACKWARD")

    for _ in range(15):
        subject = f"race-{uuid.uuid4().hex}-value"
        with ThreadPoolExecutor(6) as pool:
            ids = set(pool.map(start_a_service, [subject] * 6))
        assert len(ids) == 1, ids


def test_an_incompatible_schema_is_refused_at_once(registry_client: Any) -> None:
    subject = f"incompatible-{uuid.uuid4().hex}-value"
    register(registry_client, subject, '{"type":"record","name":"A","fields":[{"name":"a","type":"int"}]}', "BACKWARD")
    with pytest.raises(RegistryError, match="Incompatible"):
        register(
            registry_client, subject, '{"type":"record","name":"A","fields":[{"name":"b","type":"string"}]}', "BACKWARD"
        )
