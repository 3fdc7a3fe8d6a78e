"""Each connector's keys as Fluxgate settings: set, noted, refused with the reason, or warned about."""

from __future__ import annotations

import json

import pytest
from connect_fixtures import ELASTIC_ENV, fixture

from fluxgate_connect.errors import ConnectError
from fluxgate_connect.translate import translate

HZ = "com.datamountaineer.streamreactor.connect.hazelcast.sink.HazelCastSinkConnector"
ES = "io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector"
MQTT = "io.lenses.streamreactor.connect.mqtt.source.MqttSourceConnector"
CASSANDRA = "com.datamountaineer.streamreactor.connect.cassandra.sink.CassandraSinkConnector"


def test_the_coap_source_of_the_documents() -> None:
    result = fixture("coap-source.properties")
    assert result.connector.service == "coap-ingest"
    assert result.env == {
        "FLUXGATE_COAP_SOURCE_URI": "coap://localhost:5633",
        "FLUXGATE_COAP_KCQL": "INSERT INTO coap_sensor_topic SELECT * FROM sensors",
        "FLUXGATE_COAP_OUTPUT_FORMAT": "coap-message",
        "FLUXGATE_COAP_KAFKA__CLIENT_ID": "coap-source",
    }


def test_the_hazelcast_sink_of_the_documents() -> None:
    result = fixture("hazelcast-sink.properties")
    assert result.connector.service == "hazelcast-persister"
    assert result.env == {
        "FLUXGATE_HZ_HAZELCAST__MEMBERS": '["localhost:5701"]',
        "FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME": "dev",
        "FLUXGATE_HZ_SINK__KCQL": "INSERT INTO dev SELECT * FROM coap_sensor_topic WITHFORMAT JSON STOREAS QUEUE",
        "FLUXGATE_HZ_SINK__GROUP_ID": "connect-hazelcast-sink",
        "FLUXGATE_HZ_SINK__SEMANTICS": "stream-reactor",
    }
    assert result.topics == ["coap_sensor_topic"]


def test_every_hazelcast_config_reads_its_statements_as_stream_reactor_does() -> None:
    config = {"connector.class": HZ, "connect.hazelcast.kcql": "INSERT INTO m SELECT * FROM t STOREAS MAP TTL=5000"}
    assert translate(config).env["FLUXGATE_HZ_SINK__SEMANTICS"] == "stream-reactor"


def test_only_the_elastic_sink_parses_string_keys_as_json_first() -> None:
    # elastic7's TransformAndExtractPK.scala reads PK _key through JsonPayloadExtractor.scala; the
    # Hazelcast and Cassandra sinks never read the record key for a write: ours keep the text there.
    elastic = {"connector.class": ES, "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t PK _key"}
    hazelcast = {"connector.class": HZ, "connect.hazelcast.kcql": "INSERT INTO m SELECT * FROM t STOREAS MAP"}
    assert translate(elastic).env["FLUXGATE_ES_SINK__STRING_KEYS"] == "json"
    assert "FLUXGATE_HZ_SINK__STRING_KEYS" not in translate(hazelcast).env


def test_every_cassandra_config_matches_columns_as_stream_reactor_does() -> None:
    config = {"connector.class": CASSANDRA, "connect.cassandra.kcql": "INSERT INTO T SELECT DeviceId FROM t"}
    assert translate(config).env["FLUXGATE_SCYLLA_SCYLLA__COLUMN_MATCH"] == "stream-reactor"


@pytest.mark.parametrize(("given", "expected"), [(None, "NULL"), ("", "NULL"), ("NULL", "NULL"), ("UNSET", "UNSET")])
def test_cassandra_default_value_is_stream_reactors_null_unless_the_config_says_unset(
    given: str | None, expected: str
) -> None:
    # CassandraSettings.scala: DefaultValueServeStrategy.of(...) or NULL; CassandraJsonWriter.scala adds
    # DEFAULT UNSET to its INSERT ... JSON only for UNSET.
    config = {"connector.class": CASSANDRA, "connect.cassandra.kcql": "INSERT INTO t SELECT * FROM t"}
    if given is not None:
        config["connect.cassandra.default.value"] = given
    assert translate(config).env["FLUXGATE_SCYLLA_SCYLLA__DEFAULT_VALUE"] == expected


@pytest.mark.parametrize("value", ["unset", "Null", "DEFAULT"])
def test_a_cassandra_default_value_stream_reactor_would_misread_is_refused(value: str) -> None:
    config = {"connector.class": CASSANDRA, "connect.cassandra.kcql": "INSERT INTO t SELECT * FROM t",
              "connect.cassandra.default.value": value}  # fmt: skip
    with pytest.raises(ConnectError, match=r"connect\.cassandra\.default\.value.*NULL or UNSET"):
        translate(config)


@pytest.mark.parametrize("prefix", ["connect.cassandra.", "connect.cassandra.auth."])
def test_empty_cassandra_credentials_run_without_authentication(prefix: str) -> None:
    config = {"connector.class": CASSANDRA, "connect.cassandra.kcql": "INSERT INTO t SELECT * FROM t",
              f"{prefix}username": "", f"{prefix}password": " "}  # fmt: skip
    result = translate(config)
    assert (result.env["FLUXGATE_SCYLLA_SCYLLA__USERNAME"], result.env["FLUXGATE_SCYLLA_SCYLLA__PASSWORD"]) == ("", "")


def test_the_elastic_sink_of_the_documents() -> None:
    result = fixture("elastic-sink.json", ELASTIC_ENV)
    assert result.env == {
        "FLUXGATE_ES_ELASTICSEARCH__HOSTS": '["http://elasticsearch:9200"]',
        "FLUXGATE_ES_SINK__KCQL": "INSERT INTO temperatures SELECT * FROM temperatures.grouped"
        " WITHINDEXSUFFIX -{YYYY.MM.DD}",
        "FLUXGATE_ES_SINK__GROUP_ID": "connect-elastic-sink",
        "FLUXGATE_ES_REGISTRY__URL": "http://registry:8081/apis/ccompat/v7",
        "FLUXGATE_ES_SINK__DOCUMENT_ID": "stream-reactor",
        "FLUXGATE_ES_SINK__STRING_KEYS": "json",
    }
    noted = " ".join(result.notes)
    assert "connect.elastic.cluster.name" in noted and "connect.elastic.index.auto.create" in noted


def test_the_mqtt_source_splits_the_broker_url_and_keeps_the_password_secret() -> None:
    result = fixture("mqtt-source.properties")
    env = result.env
    assert (env["FLUXGATE_MQTT_MQTT__HOST"], env["FLUXGATE_MQTT_MQTT__PORT"], env["FLUXGATE_MQTT_MQTT__TLS"]) == (
        "mqtt",
        "1883",
        "false",
    )
    assert env["FLUXGATE_MQTT_MQTT__KEEPALIVE_S"] == "5"
    assert env["FLUXGATE_MQTT_MQTT__CONNECT_TIMEOUT_S"] == "3"
    assert env["FLUXGATE_MQTT_MQTT__CLEAN_START"] == "false"
    assert result.secret_names == {"FLUXGATE_MQTT_MQTT__PASSWORD"}
    assert result.replicas == 2


@pytest.mark.parametrize(
    ("hosts", "host", "port", "tls"),
    [
        ("ssl://broker:8883", "broker", "8883", "true"),
        ("ssl://broker", "broker", "8883", "true"),
        ("b:1", "b", "1", "false"),
    ],
)
def test_mqtt_hosts(hosts: str, host: str, port: str, tls: str) -> None:
    env = translate({"connector.class": MQTT, "connect.mqtt.hosts": hosts}).env
    assert (env["FLUXGATE_MQTT_MQTT__HOST"], env["FLUXGATE_MQTT_MQTT__PORT"], env["FLUXGATE_MQTT_MQTT__TLS"]) == (
        host,
        port,
        tls,
    )


def test_every_refusal_names_its_key_and_why_all_at_once() -> None:
    config = {
        "connector.class": MQTT,
        "connect.mqtt.hosts": "tcp://a:1883,tcp://b:1883",
        "connect.mqtt.service.quality": "3",
        "connect.converter.avro.schemas": "x=y",
    }
    with pytest.raises(ConnectError) as raised:
        translate(config)
    message = str(raised.value)
    assert "connect.mqtt.hosts=tcp://a:1883,tcp://b:1883: 2 brokers given: mqtt-proxy connects to one broker" in message
    assert "connect.mqtt.service.quality=3: expected 0, 1 or 2, got '3'" in message
    assert "connect.converter.avro.schemas: not supported: mqtt-proxy writes SensorReading records" in message


@pytest.mark.parametrize(("quality", "qos"), [("1", "1"), ("2", "2"), (" 2 ", "2")])
def test_the_mqtt_quality_of_service_is_the_kcql_subscriptions(quality: str, qos: str) -> None:
    result = translate({"connector.class": MQTT, "connect.mqtt.service.quality": quality})
    assert result.env["FLUXGATE_MQTT_KCQL_QOS"] == qos
    assert not [note for note in result.notes if "service.quality" in note]


@pytest.mark.parametrize("quality", ["0", "00", " 0 "])
def test_quality_of_service_0_runs_at_1_with_a_note(quality: str) -> None:
    # Real configs ask for 0 often (Aiven's Terraform demos, tasmota examples): at least once
    # loses nothing more, so the run goes on and says what it does instead.
    result = translate({"connector.class": MQTT, "connect.mqtt.service.quality": quality})
    assert result.env["FLUXGATE_MQTT_KCQL_QOS"] == "1"
    assert [note for note in result.notes if "service.quality" in note] == [
        f"connect.mqtt.service.quality={quality}: subscribed at QoS 1 (at least once), not 0: the proxy answers "
        "a message once Kafka has it, so the broker sends again what was in flight when the proxy stopped "
        "(with the session kept: connect.mqtt.clean=false); a publisher's QoS 0 messages still arrive at QoS 0. "
        "FLUXGATE_MQTT_KCQL_QOS=0 subscribes at 0"
    ]


def test_logging_every_message_runs_with_a_note() -> None:
    result = translate({"connector.class": MQTT, "connect.mqtt.log.message": "true"})
    assert any(
        note.startswith("connect.mqtt.log.message: nothing to set: messages are counted") for note in result.notes
    )


def test_java_key_stores_are_refused_with_what_to_give_instead() -> None:
    config = {
        "connector.class": ES,
        "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t",
        "ssl.truststore.location": "/etc/ts.jks",
    }
    with pytest.raises(ConnectError, match=r"ssl.truststore.location: .*FLUXGATE_ES_ELASTICSEARCH__CA_CERTS.*keytool"):
        translate(config)


def test_an_unknown_key_is_a_warning_naming_it() -> None:
    result = translate({"connector.class": HZ, "connect.hazelcast.kcql": "INSERT INTO q SELECT * FROM t STOREAS QUEUE",
                        "connect.hazelcast.frobnicate": "yes"})  # fmt: skip
    assert result.warnings == [
        "connect.hazelcast.frobnicate: not a key of the Hazelcast sink that Fluxgate knows: ignored"
    ]


def test_a_sink_takes_kafka_connects_header_converters_and_refuses_another_naming_the_key() -> None:
    config = {"connector.class": HZ, "connect.hazelcast.kcql": "INSERT INTO q SELECT _header.gw FROM t STOREAS QUEUE"}
    simple = translate({**config, "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter"})
    assert "sink.header_format" not in simple.values  # Kafka Connect's default, the persisters' too
    text = translate({**config, "header.converter": "org.apache.kafka.connect.storage.StringConverter"})
    assert text.env["FLUXGATE_HZ_SINK__HEADER_FORMAT"] == "string"
    with pytest.raises(
        ConnectError,
        match=r"header\.converter=org\.example\.HeaderConverter: expected "
        r"org\.apache\.kafka\.connect\.storage\.SimpleHeaderConverter or .*StringConverter or .*JsonConverter or "
        r".*ByteArrayConverter or .*LongConverter .*BooleanConverter",
    ):
        translate({**config, "header.converter": "org.example.HeaderConverter"})


@pytest.mark.parametrize("key", ["key.converter.encoding", "value.converter.encoding", "header.converter.encoding"])
def test_string_converters_in_utf8_run_and_another_charset_is_refused_naming_the_key(key: str) -> None:
    sink = {"connector.class": HZ, "connect.hazelcast.kcql": "INSERT INTO q SELECT * FROM t STOREAS QUEUE"}
    assert any(note.startswith(f"{key}: nothing to set") for note in translate({**sink, key: "utf8"}).notes)
    with pytest.raises(ConnectError, match=rf"{key}=ISO-8859-1: .*UTF-8 only"):
        translate({**sink, key: "ISO-8859-1"})
    if not key.startswith("header"):  # a gateway writes no headers a converter makes
        with pytest.raises(ConnectError, match=rf"{key}=UTF-16: .*UTF-8 only"):
            translate({"connector.class": MQTT, key: "UTF-16"})


def test_a_sink_reads_exactly_its_topics() -> None:
    config = {"connector.class": HZ, "topics": "a,b", "connect.hazelcast.kcql": "INSERT INTO q SELECT * FROM a"}
    with pytest.raises(ConnectError, match="topics=a,b: the KCQL reads a: they must be the same"):
        translate(config)


def test_a_sink_without_kcql_says_which_keys_set_it() -> None:
    with pytest.raises(ConnectError, match=r"no KCQL: set connect\.hazelcast\.kcql or connect\.hazelcast\.sink\.kcql"):
        translate({"connector.class": HZ})


@pytest.mark.parametrize("separator", ["_", " | ", ""])
def test_the_elastic_pk_separator_joins_stream_reactor_ids_as_it_is(separator: str) -> None:
    config = {"connector.class": ES, "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t PK a.b, c",
              "connect.elastic.pk.separator": separator}  # fmt: skip
    env = translate(config).env
    assert (env["FLUXGATE_ES_SINK__DOCUMENT_ID"], env["FLUXGATE_ES_SINK__PK_SEPARATOR"]) == (
        "stream-reactor",
        separator,
    )


def test_elastic_hosts_port_and_protocol_make_node_urls() -> None:
    config = {"connector.class": ES, "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t",
              "connect.elastic.hosts": "es-0,es-1", "connect.elastic.port": "9201",
              "connect.elastic.protocol": "https"}  # fmt: skip
    hosts = json.loads(translate(config).env["FLUXGATE_ES_ELASTICSEARCH__HOSTS"])
    assert hosts == ["https://es-0:9201", "https://es-1:9201"]


def test_a_url_without_a_scheme_takes_the_protocol() -> None:
    config = {"connector.class": ES, "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t",
              "connect.elastic.url": "es-0:9200,https://es-1:9243", "connect.elastic.protocol": "https"}  # fmt: skip
    hosts = json.loads(translate(config).env["FLUXGATE_ES_ELASTICSEARCH__HOSTS"])
    assert hosts == ["https://es-0:9200", "https://es-1:9243"]


def test_the_transport_client_port_is_the_same_nodes_http_port() -> None:
    config = {"connector.class": ES, "connect.elastic.kcql": "INSERT INTO i SELECT * FROM t",
              "connect.elastic.url": "es:9300"}  # fmt: skip
    result = translate(config)
    assert json.loads(result.env["FLUXGATE_ES_ELASTICSEARCH__HOSTS"]) == ["http://es:9200"]
    assert any("transport client" in note for note in result.notes)


def test_an_unknown_connector_class_lists_the_known_ones() -> None:
    with pytest.raises(ConnectError, match=r"is not one of the connectors Fluxgate replaces:\n.*mqtt-proxy"):
        translate({"connector.class": "org.example.Other"})


# Stream-Reactor 10.x's Cassandra sink: the class whose settings CassandraSettings.scala
# (io.lenses.streamreactor.connect.cassandra) hands to DataStax's connector.
CASSANDRA_10 = "io.lenses.streamreactor.connect.cassandra.CassandraSinkConnector"


def _cassandra_10(**keys: str) -> dict[str, str]:
    config = {"connector.class": CASSANDRA_10, "connect.cassandra.kcql": "INSERT INTO ks.t SELECT a FROM t"}
    return config | {f"connect.cassandra.{key.replace('_', '.')}": value for key, value in keys.items()}


@pytest.mark.parametrize("provider", [None, "None"])
def test_cassandra_10_ssl_enabled_without_a_provider_keeps_tls_and_warns_where_stream_reactor_drops_it(
    provider: str | None,
) -> None:
    # ssl.provider defaults to None, and DataStax's connector turns TLS on only for JDK or OpenSSL:
    # Stream-Reactor 10.x would connect in plain text. We never downgrade what ssl.enabled asks.
    keys = {"ssl_enabled": "true"} | ({"ssl_provider": provider} if provider else {})
    result = translate(_cassandra_10(**keys))
    assert result.env["FLUXGATE_SCYLLA_SCYLLA__TLS"] == "true"
    assert any("WITHOUT TLS" in warning and "provider=JDK" in warning for warning in result.warnings)


@pytest.mark.parametrize("provider", ["JDK", "OpenSSL"])
def test_cassandra_10_ssl_with_a_provider_turns_tls_on(provider: str) -> None:
    result = translate(_cassandra_10(ssl_enabled="true", ssl_provider=provider))
    assert result.env["FLUXGATE_SCYLLA_SCYLLA__TLS"] == "true"


def test_the_older_cassandra_sinks_ssl_enabled_turns_tls_on_without_a_provider() -> None:
    config = {"connector.class": CASSANDRA, "connect.cassandra.kcql": "INSERT INTO t SELECT * FROM t",
              "connect.cassandra.ssl.enabled": "true"}  # fmt: skip
    assert translate(config).env["FLUXGATE_SCYLLA_SCYLLA__TLS"] == "true"


@pytest.mark.parametrize("provider", ["jdk", "openssl", "NONE", "BoringSSL"])
def test_a_cassandra_ssl_provider_datastax_would_refuse_is_refused(provider: str) -> None:
    # SslConfig.java (datastax/kafka-sink): Provider.valueOf, so None, JDK or OpenSSL exactly.
    with pytest.raises(ConnectError, match=r"connect\.cassandra\.ssl\.provider.*None, JDK or OpenSSL"):
        translate(_cassandra_10(ssl_enabled="true", ssl_provider=provider))


@pytest.mark.parametrize("key", ["auth.gssapi.service", "auth.gssapi.keytab", "auth.gssapi.principal"])
@pytest.mark.parametrize("provider", ["None", "PLAIN"])
def test_cassandra_gssapi_keys_without_gssapi_run_as_stream_reactor_ignores_them(key: str, provider: str) -> None:
    # CassandraSettings.scala reads auth.gssapi.* only for a provider other than None, and DataStax's
    # connector uses them only for GSSAPI; auth.gssapi.service even has a default, dse.
    config = _cassandra_10(auth_provider=provider) | {f"connect.cassandra.{key}": "dse"}
    translate(config)


def test_cassandra_gssapi_itself_is_still_refused() -> None:
    with pytest.raises(ConnectError, match=r"connect\.cassandra\.auth\.provider=GSSAPI"):
        translate(_cassandra_10(auth_provider="GSSAPI") | {"connect.cassandra.auth.gssapi.service": "dse"})


def test_cassandra_10_driver_options_that_fluxgate_has_are_set() -> None:
    # CassandraSettings.scala: connect.cassandra.driver.<x> is the DataStax driver's datastax-java-driver.<x>.
    result = translate(
        _cassandra_10()
        | {
            "connect.cassandra.driver.basic.request.consistency": "local_one",
            "connect.cassandra.driver.basic.load-balancing-policy.local-datacenter": "dc2",
        }
    )
    assert result.env["FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY"] == "LOCAL_ONE"
    assert result.env["FLUXGATE_SCYLLA_SCYLLA__LOCAL_DATACENTER"] == "dc2"


@pytest.mark.parametrize(
    "option", ["advanced.ssl-engine-factory.class", "advanced.auth-provider.class", "advanced.auth-provider.username"]
)
def test_cassandra_10_driver_tls_or_authentication_options_are_refused_naming_the_keys_to_use(option: str) -> None:
    with pytest.raises(ConnectError, match=rf"connect\.cassandra\.driver\.{option}.*connect\.cassandra\.(ssl|auth)\."):
        translate(_cassandra_10() | {f"connect.cassandra.driver.{option}": "x"})


def test_other_cassandra_10_driver_options_are_named_in_a_warning() -> None:
    result = translate(_cassandra_10() | {"connect.cassandra.driver.advanced.heartbeat.interval": "30 seconds"})
    assert any(
        "connect.cassandra.driver.advanced.heartbeat.interval" in w and "DataStax Java driver" in w
        for w in result.warnings
    )


def test_cassandra_10_leaves_the_columns_a_record_lacks_as_datastax_does() -> None:
    # The 10.x sink writes through DataStax's connector: only the mapped columns, and a null as UNSET
    # (datastax/kafka-sink TableConfig.java: nullToUnset, default true); it has no default.value key.
    assert translate(_cassandra_10()).env["FLUXGATE_SCYLLA_SCYLLA__DEFAULT_VALUE"] == "UNSET"


def test_cassandra_10_matches_columns_by_exact_name_as_datastax_mapping_quotes_them() -> None:
    # CassandraSettings.scala maps each named field as "<alias>"="value.<field>": DataStax's
    # MappingInspector.java takes a quoted column exactly; the older sinks' JSON insert folds names.
    assert translate(_cassandra_10()).env["FLUXGATE_SCYLLA_SCYLLA__COLUMN_MATCH"] == "stream-reactor-10"
    older = {"connector.class": CASSANDRA, "connect.cassandra.kcql": "INSERT INTO t SELECT * FROM t"}
    assert translate(older).env["FLUXGATE_SCYLLA_SCYLLA__COLUMN_MATCH"] == "stream-reactor"


@pytest.mark.parametrize("key", ["connect.cassandra.batch.size", "connect.cassandra.sink.batch.size"])
def test_the_cassandra_batch_size_is_a_source_key_its_sinks_never_read(key: str) -> None:
    # CassandraConfig.scala defines batch.size for CassandraConfigSource only (records drained from
    # the reader queue, default 100); the sink's ConfigDef has no such key, so it changes nothing there.
    config = {"connector.class": CASSANDRA, "connect.cassandra.kcql": "INSERT INTO t SELECT * FROM t", key: "5"}
    result = translate(config)
    assert "FLUXGATE_SCYLLA_SINK__BATCH_SIZE" not in result.env
    assert any(key in note and "source" in note for note in result.notes)
    assert "FLUXGATE_SCYLLA_SINK__BATCH_SIZE" not in translate(_cassandra_10(max_batch_size="5")).env


def test_cassandra_10_max_batch_size_is_the_rows_of_one_partition_per_batch() -> None:
    # DataStax's maxNumberOfRecordsInBatch (CassandraSettings.scala, getOSSCassandraSinkConfig) caps the
    # statements of one topic, table and partition key in one UNLOGGED BATCH (BoundStatementProcessor.java).
    env = translate(_cassandra_10(max_batch_size="5")).env
    assert env["FLUXGATE_SCYLLA_SCYLLA__PARTITION_BATCH_ROWS"] == "5"


def _cassandra_10_kcql(kcql: str, **keys: str) -> dict[str, str]:
    return _cassandra_10(**keys) | {"connect.cassandra.kcql": kcql}


@pytest.mark.parametrize(
    ("select", "named"),
    [("a, _header", r"_header: Stream-Reactor 10\.x refuses it too"),
     ("a, _value", r"_value: Stream-Reactor 10\.x writes the whole record value")],
)  # fmt: skip
def test_cassandra_10_refuses_a_bare_header_or_value_naming_why(select: str, named: str) -> None:
    # CassandraSettings.scala (getTopicMappings): a bare _header fails its start, a bare _value is "c"="value".
    with pytest.raises(ConnectError, match=named):
        translate(_cassandra_10_kcql(f"INSERT INTO ks.t SELECT {select} FROM t"))


def test_cassandra_10_takes_key_header_and_value_prefixed_fields() -> None:
    # CassandraSettings.scala (getTopicMappings) maps _key.x to DataStax's key.x, _header.h to header.h and
    # _value.x to value.x; the sink's projection reads each (fluxgate_sink.kcql, Statement.project).
    kcql = "INSERT INTO ks.t SELECT a, _key.id AS device, _header.source AS src, _value.v FROM t"
    result = translate(_cassandra_10_kcql(kcql))
    assert result.values["sink.kcql"] == kcql


def test_cassandra_10_warns_that_its_mapping_fails_records_with_nested_fields() -> None:
    # Kcql's Field: alias = the last name; DataStax's record has top-level fields only, so
    # RecordMapper.ensureAllFieldsPresent fails each record mapping value.a.b.
    result = translate(_cassandra_10_kcql("INSERT INTO ks.t SELECT a.b, c FROM t"))
    assert any(
        "a.b: Stream-Reactor 10.x maps it to column b" in w and "fails every record" in w for w in result.warnings
    )


def test_cassandra_10_writes_at_the_tables_consistency_level_local_one_by_default() -> None:
    # DataStax's TableConfig.java: consistencyLevel, LOCAL_ONE by default, set on every statement
    # (CassandraSinkTask.java), so the driver's basic.request.consistency never applies.
    assert translate(_cassandra_10()).env["FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY"] == "LOCAL_ONE"
    kcql = "INSERT INTO ks.t SELECT a FROM t PROPERTIES(consistencyLevel=quorum)"
    result = translate(_cassandra_10_kcql(kcql) | {"connect.cassandra.driver.basic.request.consistency": "ONE"})
    assert result.env["FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY"] == "QUORUM"
    assert any("configured consistency ONE" in w for w in result.warnings)


def test_cassandra_10_statements_at_different_consistency_levels_are_refused() -> None:
    kcql = "INSERT INTO ks.t SELECT a FROM t PROPERTIES(consistencyLevel=QUORUM); INSERT INTO ks.u SELECT a FROM u"
    with pytest.raises(ConnectError, match=r"consistencyLevel: .*QUORUM .*LOCAL_ONE .*one connector per consistency"):
        translate(_cassandra_10_kcql(kcql) | {"topics": "t,u"})


@pytest.mark.parametrize(
    ("props", "named"),
    [("query='INSERT INTO ks.t (a) VALUES (:a)'", r"query: not supported: .*SELECT <field> AS <column>"),
     ("mapping='a=value.a'", r"mapping: not supported"), ("'codec.timeZone'='UTC'", r"codec\.timeZone: not supported"),
     ("consistencyLevel=SERIAL", r"consistencyLevel=SERIAL: one of"), ("ttl=x", r"ttl=x: an integer"),
     ("ttl=60, ttlTimeUnit=MINUTES", r"ttlTimeUnit=MINUTES: .*SECONDS only"), ("deletesEnabled=yes", "true or false")],
)  # fmt: skip
def test_cassandra_10_properties_it_cannot_honour_are_refused_with_the_alternative(props: str, named: str) -> None:
    # CassandraSettings.scala passes PROPERTIES on as DataStax's table settings (TableConfig.java;
    # codec.*: TopicConfig.java).
    with pytest.raises(ConnectError, match=named):
        translate(_cassandra_10_kcql(f"INSERT INTO ks.t SELECT a FROM t PROPERTIES({props})"))


def test_cassandra_10_ignores_a_kcql_ttl_clause_so_it_is_refused_naming_the_property() -> None:
    with pytest.raises(
        ConnectError, match=r"TTL=60: Stream-Reactor 10\.x ignores KCQL's TTL clause: .*PROPERTIES\(ttl"
    ):
        translate(_cassandra_10_kcql("INSERT INTO ks.t SELECT a FROM t TTL=60"))


def test_cassandra_10_properties_datastax_ignores_are_named_in_a_warning() -> None:
    result = translate(_cassandra_10_kcql("INSERT INTO ks.t SELECT a FROM t PROPERTIES(ttl=60, colour=red)"))
    assert any("PROPERTIES colour" in w and "ignores it" in w for w in result.warnings)
    assert not any("PROPERTIES ttl" in w for w in result.warnings)


def test_cassandra_10_warns_of_a_nested_key_field_as_of_a_nested_value_field() -> None:
    # CassandraSettings.scala maps _key.a.b to key.a.b; DataStax's record holds the key's top-level fields only.
    result = translate(_cassandra_10_kcql("INSERT INTO ks.t SELECT _key.a.b, _value.c.d, _header.e.f, g FROM t"))
    nested = [w for w in result.warnings if "fails every record" in w]
    assert len(nested) == 2
    assert "'Required field key.a.b" in nested[0] and "'Required field value.c.d" in nested[1]


def test_key_and_header_fields_of_a_select_are_noted_where_stream_reactor_writes_nothing_for_them() -> None:
    # Elastic's ElasticJsonWriter.scala projects Kcql.getFields, the value's fields only (Kcql.java files
    # `_key.`/`_header.` entries apart): those entries write nothing there; the persister writes them.
    config = {"connector.class": ES, "connect.elastic.kcql": "INSERT INTO i SELECT _key.id AS device, t FROM t"}
    [note] = [n for n in translate(config).notes if "_key.<field>" in n]
    assert "INSERT INTO i SELECT _key.id AS device, t FROM t" in note and "writes nothing for them" in note
    plain = {"connector.class": ES, "connect.elastic.kcql": "INSERT INTO i SELECT t FROM t"}
    assert not [n for n in translate(plain).notes if "_key.<field>" in n]
    assert not [n for n in translate(_cassandra_10_kcql("INSERT INTO ks.t SELECT a, _key.id FROM t")).notes
                if "_key.<field>" in n]  # fmt: skip
