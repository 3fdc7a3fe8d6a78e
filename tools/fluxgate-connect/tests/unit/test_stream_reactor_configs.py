"""Configs as Stream-Reactor users wrote them, over its releases: every class name it shipped, the
oldest key spellings, the transport client's URL, Hazelcast 4/5, the Cassandra 10.x sink,
Kafka's client SSL keys, DTLS pre-shared keys and Kafka Connect's ``errors.*`` keys.
Each fixture names its source in its first lines."""

from __future__ import annotations

import json
from typing import Any

import pytest
from connect_fixtures import fixture, load_env

from fluxgate_connect.errors import ConnectError
from fluxgate_connect.translate import Translation, translate

ES_OLD = "com.datamountaineer.streamreactor.connect.elastic.ElasticSinkConnector"
HZ5 = "io.lenses.streamreactor.connect.hazelcast.sink.HazelCastSinkConnector"
CASS10 = "io.lenses.streamreactor.connect.cassandra.CassandraSinkConnector"
CASS_OLD = "io.lenses.streamreactor.connect.cassandra.sink.CassandraSinkConnector"
MQTT = "io.lenses.streamreactor.connect.mqtt.source.MqttSourceConnector"

# Every class name a Stream-Reactor release shipped for the five connectors (lensesio/stream-reactor,
# each module's src/main/scala: the com.datamountaineer...connect packages until 2.x, the
# ...common packages of the 2.x line, io.lenses from 3.0, and Elastic 8's own class; Elastic 6 and 7
# kept the name ElasticSinkConnector under io.lenses, as docs.lenses.io's Elasticsearch page shows).
SHIPPED = {
    "mqtt-proxy": [
        "com.datamountaineer.streamreactor.connect.mqtt.source.MqttSourceConnector",
        "com.datamountaineer.streamreactor.common.mqtt.source.MqttSourceConnector",
        "io.lenses.streamreactor.connect.mqtt.source.MqttSourceConnector",
    ],
    "coap-ingest": [
        "com.datamountaineer.streamreactor.connect.coap.source.CoapSourceConnector",
        "com.datamountaineer.streamreactor.common.coap.source.CoapSourceConnector",
        "io.lenses.streamreactor.connect.coap.source.CoapSourceConnector",
    ],
    "es-persister": [
        ES_OLD,
        "com.datamountaineer.streamreactor.connect.elastic5.ElasticSinkConnector",
        "com.datamountaineer.streamreactor.connect.elastic6.ElasticSinkConnector",
        "com.datamountaineer.streamreactor.connect.elastic7.ElasticSinkConnector",
        "com.datamountaineer.streamreactor.connect.elastic8.ElasticSinkConnector",
        "com.datamountaineer.streamreactor.common.elastic6.ElasticSinkConnector",
        "com.datamountaineer.streamreactor.common.elastic7.ElasticSinkConnector",
        "io.lenses.streamreactor.connect.elastic6.ElasticSinkConnector",
        "io.lenses.streamreactor.connect.elastic7.ElasticSinkConnector",
        "io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector",
    ],
    "scylla-persister": [
        "com.datamountaineer.streamreactor.connect.cassandra.CassandraSinkConnector",
        "com.datamountaineer.streamreactor.connect.cassandra.sink.CassandraSinkConnector",
        "com.datamountaineer.streamreactor.common.cassandra.sink.CassandraSinkConnector",
        "io.lenses.streamreactor.connect.cassandra.sink.CassandraSinkConnector",
        CASS10,
    ],
    "hazelcast-persister": [
        "com.datamountaineer.streamreactor.connect.hazelcast.sink.HazelCastSinkConnector",
        "com.datamountaineer.streamreactor.common.hazelcast.sink.HazelCastSinkConnector",
        HZ5,
    ],
}


@pytest.mark.parametrize(("service", "name"), [(service, name) for service, names in SHIPPED.items() for name in names])
def test_every_class_name_stream_reactor_shipped_is_accepted(service: str, name: str) -> None:
    assert translate({"connector.class": name, **_minimal(service)}).connector.service == service


def _minimal(service: str) -> dict[str, str]:
    kcql = "INSERT INTO t SELECT * FROM topic"
    return {
        "mqtt-proxy": {"connect.mqtt.kcql": "INSERT INTO t SELECT * FROM a/+"},
        "coap-ingest": {"connect.coap.kcql": "INSERT INTO t SELECT * FROM r", "connect.coap.uri": "coap://h"},
        "es-persister": {"connect.elastic.kcql": kcql},
        "scylla-persister": {"connect.cassandra.kcql": kcql},
        "hazelcast-persister": {"connect.hazelcast.kcql": kcql + " STOREAS QUEUE"},
    }[service]


def test_the_reference_config_runs_on_the_http_port_of_its_transport_node() -> None:
    result = fixture("elastic-sink-reference.properties")
    assert json.loads(result.env["FLUXGATE_ES_ELASTICSEARCH__HOSTS"]) == ["http://localhost:9200"]
    assert result.env["FLUXGATE_ES_SINK__KCQL"].endswith("WITHINDEXSUFFIX -{YYYY.MM.DD}")
    assert any("elasticsearch://localhost:9300" in note and "http://localhost:9200" in note for note in result.notes)
    assert result.warnings == []


def test_the_reference_configs_upper_case_dd_is_noted_where_its_index_names_differ() -> None:
    notes = [note for note in fixture("elastic-sink-reference.properties").notes if "WITHINDEXSUFFIX" in note]
    assert notes and "DD the day of the year" in notes[0] and "-2026.11.26" in notes[0]


def test_the_reference_config_loads_into_the_es_persister(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _loaded(fixture("elastic-sink-reference.properties"), monkeypatch)
    assert settings.elasticsearch.hosts == ["http://localhost:9200"]
    assert settings.sink.kcql.endswith("-{YYYY.MM.DD}")


@pytest.mark.parametrize("url", ["elasticsearch://es-0:9301", "elasticsearch://es-0:9301,es-1:9200"])
def test_a_transport_port_of_its_own_says_exactly_what_to_set(url: str) -> None:
    config = {"connector.class": ES_OLD, "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t",
              "connect.elastic.url": url}  # fmt: skip
    with pytest.raises(ConnectError, match=r"set connect\.elastic\.url=http://es-0:<its http\.port>"):
        translate(config)


@pytest.mark.parametrize(
    "config",
    [
        {"connect.elastic.hosts": "es-0", "connect.elastic.port": "9300"},  # Elastic8ConfigDef's default port
        {"connect.elastic.url": "http://es-0:9300"},
    ],
)
def test_an_http_address_on_9300_is_taken_as_it_is(config: dict[str, str]) -> None:
    # Only the transport-era URL (elasticsearch://, or a bare host:9300) meant the transport client;
    # the HTTP clients' hosts and port, or an http:// URL, name an HTTP listener even on 9300.
    config |= {"connector.class": SHIPPED["es-persister"][-1], "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t"}
    result = translate(config)
    assert json.loads(result.env["FLUXGATE_ES_ELASTICSEARCH__HOSTS"]) == ["http://es-0:9300"]
    assert not any("transport" in note for note in result.notes)


def test_the_elastic5_transport_client_type_runs_on_the_http_port() -> None:
    # elastic5's ElasticConfigConstants: connect.elastic.use.http is tcp (the default) or http.
    config = {"connector.class": SHIPPED["es-persister"][1], "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t",
              "connect.elastic.use.http": "tcp", "connect.elastic.url": "es-0:9300"}  # fmt: skip
    assert json.loads(translate(config).env["FLUXGATE_ES_ELASTICSEARCH__HOSTS"]) == ["http://es-0:9200"]


def test_the_oldest_elastic_quickstart_runs() -> None:
    result = fixture("elastic-sink-datamountaineer-quickstart.properties")
    assert json.loads(result.env["FLUXGATE_ES_ELASTICSEARCH__HOSTS"]) == ["http://localhost:9200"]
    assert result.env["FLUXGATE_ES_SINK__KCQL"] == "INSERT INTO INDEX_1 SELECT field1, field2 FROM TOPIC1"
    assert result.topics == ["TOPIC1"] and result.warnings == []


@pytest.mark.parametrize(("throw", "policy"), [("true", "THROW"), ("false", "NOOP")])
def test_the_old_elastic_error_throw_is_the_error_policy(throw: str, policy: str) -> None:
    config = {"connector.class": ES_OLD, "connect.elastic.sink.kcql": "INSERT INTO i SELECT * FROM t",
              "connect.elastic.error.throw": throw}  # fmt: skip
    assert translate(config).env["FLUXGATE_ES_SINK__ERROR_POLICY"] == policy


def test_the_oldest_cassandra_quickstart_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    result = fixture("cassandra-sink-datamountaineer-orders.properties")
    assert result.env["FLUXGATE_SCYLLA_SINK__KCQL"] == "INSERT INTO orders SELECT * FROM orders-topic"
    assert result.warnings == []
    assert _loaded(result, monkeypatch).scylla.keyspace == "demo"


def test_the_documented_cassandra_delete_keys_make_a_tombstone_delete_its_row(monkeypatch: pytest.MonkeyPatch) -> None:
    result = fixture("cassandra-sink-lenses-deletes.properties")
    assert result.warnings == []
    scylla = _loaded(result, monkeypatch).scylla
    assert scylla.delete_statement == "DELETE FROM orders WHERE id = ? and product = ?"
    delete = scylla.key_delete()
    assert delete is not None and delete.columns == ("id", "product") and delete.key_fields == ("id", "product")


DELETE = "DELETE FROM t WHERE id = ?"


@pytest.mark.parametrize(
    ("keys", "found"),
    [
        # As Stream-Reactor: the statement is read only when deletes are enabled.
        ({"connect.cassandra.delete.statement": "DELETE FROM t WHERE id = ?"}, None),
        ({"connect.cassandra.delete.enabled": "false", "connect.cassandra.delete.statement": "DELETE x"}, None),
        ({"connect.cassandra.delete.enabled": "TRUE", "connect.cassandra.delete.statement": DELETE}, DELETE),
    ],
)  # fmt: skip
def test_the_delete_statement_is_read_only_when_deletes_are_enabled(keys: dict[str, str], found: str | None) -> None:
    config = {"connector.class": CASS_OLD, "connect.cassandra.kcql": "INSERT INTO t SELECT * FROM t", **keys}
    assert translate(config).values.get("scylla.delete_statement") == found


@pytest.mark.parametrize(
    ("keys", "reason"),
    [
        ({"connect.cassandra.delete.enabled": "true"}, "connect.cassandra.delete.statement names the DELETE"),
        ({"connect.cassandra.delete.enabled": "yes"}, "expected true or false"),
    ],
)
def test_deletes_enabled_without_a_statement_are_refused(keys: dict[str, str], reason: str) -> None:
    config = {"connector.class": CASS_OLD, "connect.cassandra.kcql": "INSERT INTO t SELECT * FROM t", **keys}
    with pytest.raises(ConnectError, match=reason):
        translate(config)


def test_the_cassandra_10x_auth_ssl_and_local_dc_keys_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    result = fixture("cassandra-sink-10x-secured.properties")
    assert result.warnings == []
    scylla = _loaded(result, monkeypatch).scylla
    assert (scylla.username, scylla.password.get_secret_value()) == ("writer", "s3cret")
    assert (scylla.tls, scylla.tls_check_hostname, scylla.local_datacenter) == (True, True, "dc1")
    assert (scylla.request_timeout_s, scylla.max_in_flight) == (20.0, 100)
    assert "FLUXGATE_SCYLLA_SCYLLA__PASSWORD" in result.secret_names


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("connect.cassandra.auth.provider", "GSSAPI", "Kerberos"),
        ("connect.cassandra.ssl.truststore.path", "/ts.jks", "FLUXGATE_SCYLLA_SCYLLA__TLS_CA_FILE"),
        ("connect.cassandra.ssl.openssl.private.key", "/k.pem", "client certificates"),
    ],
)
def test_cassandra_10x_keys_that_cannot_be_honoured_name_the_alternative(key: str, value: str, reason: str) -> None:
    config = {"connector.class": CASS10, "connect.cassandra.kcql": "INSERT INTO k.t SELECT * FROM t", key: value}
    with pytest.raises(ConnectError, match=rf"{key}.*{reason}"):
        translate(config)


@pytest.mark.parametrize(("mode", "policy"), [("all", "NOOP"), ("driver", "NOOP")])
def test_cassandra_ignored_errors_are_dead_lettered(mode: str, policy: str) -> None:
    config = {"connector.class": CASS10, "connect.cassandra.kcql": "INSERT INTO k.t SELECT * FROM t",
              "connect.cassandra.ignore.errors.mode": mode}  # fmt: skip
    assert translate(config).env["FLUXGATE_SCYLLA_SINK__ERROR_POLICY"] == policy


def test_the_hazelcast_4_and_5_keys_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    result = fixture("hazelcast-sink-hz5.properties")
    assert result.warnings == []
    settings = _loaded(result, monkeypatch)
    assert settings.hazelcast.members == ["hz-0:5701", "hz-1:5701"]
    assert (settings.hazelcast.cluster_name, settings.hazelcast.connect_timeout_s) == ("prod", 5.0)
    assert (settings.hazelcast.ssl_enabled, settings.hazelcast.ssl_cafile) == (True, "/etc/hazelcast/ca.pem")
    assert (settings.sink.deadletter_topic, settings.sink.error_policy) == ("orders.dlq", "RETRY")


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"ssl.truststore.location": "/ts.jks"}, r"ssl\.truststore\.location.*keytool"),
        ({"ssl.truststore.type": "JKS", "ssl.truststore.location": "/ts.jks"}, r"ssl\.truststore\.type=JKS"),
        ({"ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"}, r"write it to a file"),
        ({"ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"}, r"write it to a file"),
    ],
)
def test_kafka_client_ssl_keys_take_pem_files_only(extra: dict[str, str], reason: str) -> None:
    config = {"connector.class": HZ5, "connect.hazelcast.kcql": "INSERT INTO q SELECT * FROM t STOREAS QUEUE",
              "connect.hazelcast.ssl.enabled": "true", **extra}  # fmt: skip
    with pytest.raises(ConnectError, match=reason):
        translate(config)


def test_hazelcast_cannot_honour_a_hostname_check() -> None:
    # The Hazelcast Python client checks a member's name only with ssl_check_hostname, which
    # hazelcast-persister's settings do not have: the check Kafka's default asks for is refused.
    config = {"connector.class": HZ5, "connect.hazelcast.kcql": "INSERT INTO q SELECT * FROM t STOREAS QUEUE",
              "ssl.endpoint.identification.algorithm": "https"}  # fmt: skip
    with pytest.raises(ConnectError, match=r"ssl\.endpoint\.identification\.algorithm=https: .*ssl_check_hostname"):
        translate(config)
    assert translate(config | {"ssl.endpoint.identification.algorithm": ""}).warnings == []


def test_a_pem_key_store_is_the_hazelcast_client_certificate() -> None:
    config = {"connector.class": HZ5, "connect.hazelcast.kcql": "INSERT INTO q SELECT * FROM t STOREAS QUEUE",
              "connect.hazelcast.ssl.enabled": "true", "ssl.keystore.type": "PEM",
              "ssl.keystore.location": "/client.pem", "ssl.key.password": "k"}  # fmt: skip
    result = translate(config)
    assert result.env["FLUXGATE_HZ_HAZELCAST__SSL_CERTFILE"] == "/client.pem"
    assert "FLUXGATE_HZ_HAZELCAST__SSL_PASSWORD" in result.secret_names


def test_an_elastic_pem_trust_store_is_the_ca_bundle() -> None:
    config = {"connector.class": ES_OLD, "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t",
              "connect.elastic.url": "https://es:9200", "ssl.truststore.type": "PEM",
              "ssl.truststore.location": "/ca.pem", "ssl.endpoint.identification.algorithm": "https"}  # fmt: skip
    assert translate(config).env["FLUXGATE_ES_ELASTICSEARCH__CA_CERTS"] == "/ca.pem"


def test_an_elastic_client_certificate_is_refused_naming_why() -> None:
    config = {"connector.class": ES_OLD, "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t",
              "ssl.keystore.type": "PEM", "ssl.keystore.location": "/client.pem"}  # fmt: skip
    with pytest.raises(ConnectError, match=r"ssl\.keystore\.location: not supported: es-persister"):
        translate(config)


def test_coap_dtls_pre_shared_key(monkeypatch: pytest.MonkeyPatch) -> None:
    result = fixture("coap-source-dtls.properties")
    assert result.warnings == []
    assert result.secret_names == {"FLUXGATE_COAP_DTLS__PSK_KEY"}
    settings = _loaded(result, monkeypatch)
    assert settings.dtls.psk_identity == "Client_identity"
    assert settings.dtls.psk_key.get_secret_value() == "secretPSK"
    assert settings.resources[0].uri.startswith("coaps://localhost:5634/")


def test_coap_raw_public_keys_are_refused_naming_the_pre_shared_key() -> None:
    config = {"connector.class": SHIPPED["coap-ingest"][0], "connect.coap.uri": "coaps://h",
              "connect.coap.kcql": "INSERT INTO t SELECT * FROM r",
              "connect.coap.private.key.file": "/k.pem"}  # fmt: skip
    with pytest.raises(ConnectError, match=r"private\.key\.file: not supported: .*FLUXGATE_COAP_DTLS__PSK_KEY"):
        translate(config)


def test_throw_on_error_runs_with_a_note_that_bad_payloads_are_dead_lettered() -> None:
    result = fixture("mqtt-source-datamountaineer-throw.properties")
    assert result.warnings == []
    noted = [note for note in result.notes if note.startswith("connect.mqtt.converter.throw.on.error")]
    assert noted and "dead-letter" in noted[0]


def test_the_mqtt_avro_quickstart_is_refused_for_its_schema_file() -> None:
    with pytest.raises(ConnectError, match=r"connect\.source\.converter\.avro\.schemas: not supported") as raised:
        fixture("mqtt-source-datamountaineer-avro.properties")
    assert "connect.mqtt.source.converters: not supported: write the converter into the KCQL" in str(raised.value)


def test_the_old_mqtt_connection_ssl_keys() -> None:
    config = {"connector.class": MQTT, "connect.mqtt.kcql": "INSERT INTO t SELECT * FROM a/+",
              "connect.mqtt.connection.ssl.ca.cert": "/ca.pem"}  # fmt: skip
    env = translate(config).env
    assert (env["FLUXGATE_MQTT_MQTT__CA_FILE"], env["FLUXGATE_MQTT_MQTT__TLS"]) == ("/ca.pem", "true")


@pytest.mark.parametrize(
    "key", ["errors.tolerance", "errors.retry.timeout", "errors.retry.delay.max.ms", "errors.log.enable"]
)
def test_kafka_connect_error_keys_run_with_a_note_on_a_source(key: str) -> None:
    result = translate({"connector.class": MQTT, "connect.mqtt.kcql": "INSERT INTO t SELECT * FROM a/+", key: "0"})
    assert result.warnings == [] and any(note.startswith(key) for note in result.notes)


@pytest.mark.parametrize("tolerance", ["none", "all"])
def test_errors_tolerance_on_a_sink_says_what_happens_instead(tolerance: str) -> None:
    config = {"connector.class": HZ5, "connect.hazelcast.kcql": "INSERT INTO q SELECT * FROM t STOREAS QUEUE",
              "errors.tolerance": tolerance, "errors.retry.timeout": "60000",
              "errors.deadletterqueue.topic.replication.factor": "3"}  # fmt: skip
    result = translate(config)
    assert result.warnings == []
    assert any(note.startswith("errors.tolerance") and "dead-letter topic" in note for note in result.notes)


def _loaded(result: Translation, monkeypatch: pytest.MonkeyPatch) -> Any:
    return load_env(result.connector.settings, result.env, monkeypatch)
