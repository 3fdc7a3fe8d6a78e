"""The corpus in tests/fixtures, as a whole: every config either translates with every key known
(no warning) or is refused for a reason of the documented list (docs/kafka-connect.md), and every
file says where it comes from. A new fixture must be added to one of the two tables below."""

from __future__ import annotations

import pytest
from connect_fixtures import ELASTIC_ENV, FIXTURES, fixture

from fluxgate_connect.errors import ConnectError

# What the placeholders of the local-stack fixtures stand for here (any value of the right shape).
ENVIRONMENT = ELASTIC_ENV | {
    "AGGREGATES_TOPIC": "temperatures.aggregated",
    "CASSANDRA_HOST": "cassandra",
    "CASSANDRA_PORT": "9042",
    "CASSANDRA_TABLE": "aggregates",
    "MQTT_CLIENT_ID": "mqtt-source",
    "MQTT_HOST": "mqtt",
    "MQTT_PORT": "1883",
    "MQTT_PREFIX": "sensors",
    "READINGS_TOPIC": "sensors.readings",
}

TRANSLATED = [
    "cassandra-sink-10x-secured.properties",
    "cassandra-sink-datamountaineer-json.properties",
    "cassandra-sink-datamountaineer-orders.properties",
    "cassandra-sink-lenses-deletes.properties",
    "cassandra-sink-local.properties",
    "cassandra-sink.properties",
    "coap-source-dtls.properties",
    "coap-source.properties",
    "elastic-sink-datamountaineer-quickstart.properties",
    "elastic-sink-confluent-smt.properties",
    "elastic-sink-reference.properties",
    "elastic-sink.json",
    "hazelcast-sink-hz5.properties",
    "hazelcast-sink-kafka-predicates.properties",
    "hazelcast-sink.properties",
    "mqtt-source-datamountaineer-throw.properties",
    "mqtt-source-local-json.properties",
    "mqtt-source-local.properties",
    "mqtt-source.properties",
]
# File -> the warnings it runs with: keys of something other than the connector (a platform's),
# ignored as Kafka Connect ignores a key no ConfigDef declares.
WARNED = {
    "mqtt-source-aiven-terraform-qos0.properties": [
        "_aiven.restart.on.failure: not a key of the MQTT source that Fluxgate knows: ignored"
    ],
}
# File -> the reason it is refused: an option Fluxgate has no such thing for (Avro payloads read
# with a schema file), a converter to move into the KCQL, a source's transforms, a transform class
# that is not one of Kafka's.
REFUSED = {
    "mqtt-source-datamountaineer-avro.properties": [
        "connect.source.converter.avro.schemas: not supported: mqtt-proxy writes SensorReading records",
        "connect.mqtt.source.converters: not supported: write the converter into the KCQL",
    ],
    "mqtt-source-kafka-docs-smt.properties": [
        "transforms, transforms.InsertSource.static.field,",
        "not supported: a gateway builds its records itself",
    ],
    "elastic-sink-confluent-filter.properties": [
        "transforms.filterExample1.type: io.confluent.connect.transforms.Filter$Value is not supported; "
        "the supported transforms are org.apache.kafka.connect.transforms.InsertField$Key,",
    ],
}


def test_every_fixture_is_in_one_table() -> None:
    assert sorted(path.name for path in FIXTURES.iterdir()) == sorted([*TRANSLATED, *WARNED, *REFUSED])


@pytest.mark.parametrize("name", TRANSLATED)
def test_a_translated_fixture_knows_every_key(name: str) -> None:
    assert fixture(name, ENVIRONMENT).warnings == []


@pytest.mark.parametrize("name", sorted(WARNED))
def test_a_warned_fixture_runs_with_only_its_foreign_keys_warned(name: str) -> None:
    assert fixture(name, ENVIRONMENT).warnings == WARNED[name]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_fixture_says_why(name: str) -> None:
    with pytest.raises(ConnectError) as raised:
        fixture(name, ENVIRONMENT)
    assert all(reason in str(raised.value) for reason in REFUSED[name])


@pytest.mark.parametrize("name", [name for name in [*TRANSLATED, *WARNED, *REFUSED] if name.endswith(".properties")])
def test_a_fixture_says_where_it_comes_from(name: str) -> None:
    # A comment before the first key: its source, or the document it follows.
    head = (FIXTURES / name).read_text().split("\n", 1)[0]
    assert head.startswith("#") and any(word in head for word in ("Source", "document", "Stream-Reactor"))
