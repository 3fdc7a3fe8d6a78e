"""The Hazelcast persister as a consumer of coap-ingest's CoAP message records (output_format coap-message).

Stream-Reactor users ran its CoAP source into its Hazelcast sink and read the queue as JSON. This
writes the Pact V4 message pact ``contracts-tests/pacts/hazelcast-persister-coap-ingest.json`` from
``fluxgate_hazelcast_persister.consumed.COAP_MESSAGE_FIELDS``; coap-ingest verifies the committed
copy against what its real converter and Avro encoder write
(``contracts-tests/test_coap_messages_pacts.py``). The consumer half here: the example message
routed through that seed statement into the queue's JSON value.

Regenerate after changing the declaration with::

    FLUXGATE_UPDATE_PACTS=1 .venv/bin/python -m pytest --import-mode=importlib \
        services/persisters/hazelcast/tests/contract
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from fluxgate_testing.pact import coap_messages_pact
from fluxgate_testing.sink.pact import routed
from hazelcast_store import read_json

from fluxgate_core.contract import schema_mismatches
from fluxgate_core.schemas import COAP_MESSAGE
from fluxgate_hazelcast_persister.consumed import COAP_MESSAGE_FIELDS
from fluxgate_hazelcast_persister.structures import Structure, check_statements, structure_of
from fluxgate_hazelcast_persister.values import value_of
from fluxgate_sink.kcql import parse

PACT = coap_messages_pact(
    "hazelcast-persister",
    COAP_MESSAGE_FIELDS,
    "The fields of CoapMessage that readers of the Hazelcast JSON values rely on (the CoAP response whole).",
    "fluxgate_hazelcast_persister.consumed",
)
TOPIC = "coap_sensor_topic"
SEED_KCQL = f"INSERT INTO dev SELECT * FROM {TOPIC} WITHFORMAT JSON STOREAS QUEUE"


def persister_writes(record: dict[str, Any]) -> None:
    """The consumer half: the message routes through the seed statement into a queue item whose
    JSON holds every consumed field, the payload as base64 of the record's bytes."""
    (item,) = routed(SEED_KCQL, record, TOPIC)
    assert structure_of(item.statement) is Structure.QUEUE
    value = read_json(value_of(item))
    assert set(value) >= set(COAP_MESSAGE_FIELDS)
    assert base64.b64decode(value["payload"]) == record["payload"] == b'{"temperature": 23.6}'
    assert (value["code"], value["observe"]) == ("2.05", 17)


def test_every_consumed_field_has_its_type_in_the_coap_message_schema() -> None:
    wrong = schema_mismatches(COAP_MESSAGE_FIELDS, COAP_MESSAGE)
    assert not wrong, f"consumed fields that schemas/coap_message.avsc does not declare so: {wrong}"


def test_the_seed_statement_is_valid() -> None:
    check_statements(parse(SEED_KCQL))


def test_the_persister_can_use_the_message_it_asks_for() -> None:
    PACT.verify(persister_writes)


def test_the_pact_coap_ingest_verifies_is_the_one_written_here(tmp_path: Path) -> None:
    PACT.check_committed(tmp_path)
