"""Every Stream-Reactor connector ``fluxgate connect`` runs, and what each of its keys means here.

This table is the one place the mapping lives: ``translate`` applies it, the tables of
``docs/kafka-connect.md`` are generated from it (``python -m fluxgate_connect.reference``),
and a test loads each service's Settings class with what it produces.
Key names are the ones Stream-Reactor documents; where a release renamed a key
(``connect.hazelcast.sink.kcql`` -> ``connect.hazelcast.kcql``) both names are here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

from pydantic_settings import BaseSettings

from fluxgate_coap_ingest.settings import CoapIngestSettings
from fluxgate_connect import client_ssl
from fluxgate_connect.client_ssl import TlsTargets
from fluxgate_connect.rules import (
    Covered,
    Rule,
    Setting,
    Unsupported,
    also_true,
    boolean,
    elastic_urls,
    error_policy,
    error_throw,
    ignore_errors_mode,
    integer,
    json_list,
    mqtt_broker,
    ms_to_seconds,
    ms_to_whole_seconds,
    text,
    to,
    with_port,
)
from fluxgate_es_persister.settings import ElasticsearchSettings
from fluxgate_hazelcast_persister.settings import HazelcastSettings
from fluxgate_mqtt_proxy.settings import ProxySettings
from fluxgate_scylla_persister.settings import ScyllaSettings

# Settings the gateways gain with issue #23's source KCQL and CoAP record (other branches):
# the only names here that are not yet fields of the classes above.
MQTT_KCQL = "kcql"
COAP_KCQL = "kcql"
COAP_SOURCE_URI = "source_uri"
COAP_OUTPUT_FORMAT = "output_format"
COAP_MESSAGE = "coap-message"  # Stream-Reactor's CoAP record, what its consumers read


@dataclass(frozen=True)
class Connector:
    """One connector class family and the Fluxgate service doing its job."""

    title: str
    service: str  # the chart under deploy/charts has the same name
    script: str  # the service's console script
    settings: type[BaseSettings]
    classes: tuple[str, ...]
    rules: Mapping[str, Rule]
    sink: bool
    fixed: Mapping[str, str] = field(default_factory=dict)  # settings every such config implies
    # Settings the service's chart sets per pod (an MQTT client id per replica): not in its values.
    chart_owned: frozenset[str] = frozenset()

    @property
    def prefix(self) -> str:
        return str(self.settings.model_config.get("env_prefix", ""))


def _both(prefix: str, names: Mapping[str, Rule]) -> dict[str, Rule]:
    return {f"{prefix}.{name}": rule for name, rule in names.items()}


def _aliases(rule: Rule, *keys: str) -> dict[str, Rule]:
    return dict.fromkeys(keys, rule)


# Kafka Connect's error handling of converters and transforms (KIP-298): our services never
# stop on a record they cannot decode and never drop one; they dead-letter it with the reason.
_SOURCE_ERRORS = Covered(
    "a payload the gateway cannot turn into a record goes to the dead-letter topic with the reason in its "
    "headers and the gateway goes on; Kafka errors are retried until the record is delivered"
)
_PROGRESS = Covered("every service counts what it processed on /metrics (Prometheus)")
_AVRO = ("io.confluent.connect.avro.AvroConverter", "io.apicurio.registry.utils.converter.AvroConverter")


def _tasks(members: str) -> Covered:
    """tasks.max: how ``fluxgate connect``'s members (:mod:`fluxgate_connect.tasks`) share the work."""
    return Covered(
        f"`fluxgate connect` runs tasks.max processes of the service, {members}, each serving health on "
        "http.port + its index (0, 1, ...); --print-values sets the chart's replicaCount to it"
    )


_SINK_TASKS = _tasks(
    "members of the consumer group, each a static member `<group>-<index>` (its KAFKA__GROUP_INSTANCE_ID)"
)
_MQTT_TASKS = _tasks(
    "sharing the subscriptions as `$share/<name>/<filter>` (FLUXGATE_MQTT_MQTT__SHARE_GROUP, the connector's "
    "name unless set; --print-values makes it the chart's shareGroup), each with the MQTT client id "
    "`<client id>-<index>`"
)
_COAP_TASKS = _tasks(
    "each observing every tasks.max-th resource (FLUXGATE_COAP_MEMBERS and FLUXGATE_COAP_MEMBER, its index)"
)


def _framework(sink: bool, tasks: Covered) -> dict[str, Rule]:
    """Kafka Connect's own keys, the same for every connector of a kind."""
    rules: dict[str, Rule] = {
        "tasks.max": tasks,
        "value.converter": Covered(
            "records are Avro in the Confluent wire format, schemas in a registry", accept=_AVRO
        ),
        "value.converter.schema.registry.url": to("registry.url", text),
        "key.converter.schema.registry.url": Covered("the registry is value.converter's"),
        "value.converter.schemas.enable": Covered("JsonConverter's option: records are Avro"),
        "key.converter.schemas.enable": Covered("JsonConverter's option: records are Avro"),
        "connect.progress.enabled": _PROGRESS,
        **_aliases(
            Covered("records are retried, dead-lettered and logged by the service itself, never dropped"),
            "errors.retry.timeout",
            "errors.retry.delay.max.ms",
            "errors.log.enable",
            "errors.log.include.messages",
        ),
    }
    if sink:
        rules |= {
            "name": Setting(
                ("sink.group_id",),
                lambda value: {"sink.group_id": f"connect-{text(value)}"},
                note="connect-<name>, the sink connector's consumer group: the persister goes on from its offsets",
            ),
            "topics": Covered("the topics must be the ones the KCQL reads (checked): the KCQL is what is read"),
            "topics.regex": Unsupported("list the topics in the KCQL (one statement per topic)"),
            "key.converter": Covered("the record key is not read: a document's id comes from the KCQL PK"),
            "errors.tolerance": Covered(
                "none or all, a record that cannot be decoded goes to the dead-letter topic "
                "(errors.deadletterqueue.topic.name, else sink.deadletter_topic) with the reason in its headers, "
                "and the sink goes on: it neither stops (none) nor drops the record (all without a topic)"
            ),
            "errors.deadletterqueue.topic.name": to("sink.deadletter_topic", text),
            "errors.deadletterqueue.topic.replication.factor": Covered(
                "a missing dead-letter topic is created with 3 partitions and the broker's default replication "
                "(default.replication.factor); one created beforehand is used as it is"
            ),
            "errors.deadletterqueue.context.headers.enable": Covered("the reason is always in the headers"),
        }
    else:
        rules |= {
            "errors.tolerance": _SOURCE_ERRORS,
            "name": to("kafka.client_id", text, note="the Kafka client id"),
            "key.converter": Covered("the gateway writes its own record key (the device id)"),
        }
    return rules


def _sink_options(prefix: str, *, legacy_sink_prefix: bool, export_route: bool = False) -> dict[str, Rule]:
    """KCQL, error policy, retries and batch size: Stream-Reactor's names, our shared sink settings."""
    rules: dict[str, Rule] = {
        "kcql": to("sink.kcql", text),
        "error.policy": to("sink.error_policy", error_policy),
        "max.retries": to("sink.max_retries", integer),
        "retry.interval": to("sink.retry_interval_ms", integer),
        "batch.size": to("sink.batch_size", integer),
    }
    named = _both(prefix, rules)
    if legacy_sink_prefix:  # before 1.0: connect.<system>.sink.kcql and friends
        named |= _both(f"{prefix}.sink", rules)
    if export_route:  # 2016's first releases named the KCQL export.route.query (datamountaineer docs)
        named[f"{prefix}.export.route.query"] = rules["kcql"]
    return named


def _jks(instead: str) -> Unsupported:
    return Unsupported(
        f"Java key stores are not read: give {instead} a PEM file "
        "(`keytool -exportcert -rfc -alias <alias> -keystore <store>` writes one)"
    )


_MQTT = "connect.mqtt"
MQTT_SOURCE = Connector(
    title="MQTT source",
    service="mqtt-proxy",
    script="fluxgate-mqtt-proxy",
    settings=ProxySettings,
    classes=(
        "com.datamountaineer.streamreactor.connect.mqtt.source.MqttSourceConnector",
        "com.datamountaineer.streamreactor.common.mqtt.source.MqttSourceConnector",
        "io.lenses.streamreactor.connect.mqtt.source.MqttSourceConnector",
    ),
    sink=False,
    chart_owned=frozenset({"mqtt.client_id"}),
    rules={
        **_framework(sink=False, tasks=_MQTT_TASKS),
        **_aliases(to(MQTT_KCQL, text), f"{_MQTT}.kcql", f"{_MQTT}.source.kcql"),
        **_aliases(
            Setting(("mqtt.host", "mqtt.port", "mqtt.tls"), mqtt_broker, note="tcp://host:port; ssl:// sets tls"),
            f"{_MQTT}.hosts",
            f"{_MQTT}.connection.hosts",
        ),
        f"{_MQTT}.client.id": to("mqtt.client_id", text),
        **_aliases(to("mqtt.username", text), f"{_MQTT}.username", f"{_MQTT}.user"),
        f"{_MQTT}.password": to("mqtt.password", text, secret=True),
        **_aliases(to("mqtt.clean_start", boolean), f"{_MQTT}.clean", f"{_MQTT}.connection.clean"),
        **_aliases(
            to("mqtt.keepalive_s", ms_to_whole_seconds, note="ms to whole seconds"),
            f"{_MQTT}.keep.alive",
            f"{_MQTT}.connection.keep.alive",
        ),
        **_aliases(
            to("mqtt.connect_timeout_s", ms_to_seconds, note="ms to seconds"),
            f"{_MQTT}.timeout",
            f"{_MQTT}.connection.timeout",
        ),
        # connect.mqtt.connection.ssl.*: the 2016 releases' names (datamountaineer docs, mqtt.rst)
        **_aliases(also_true("mqtt.ca_file", "mqtt.tls"), f"{_MQTT}.ssl.ca.cert", f"{_MQTT}.connection.ssl.ca.cert"),
        **_aliases(also_true("mqtt.cert_file", "mqtt.tls"), f"{_MQTT}.ssl.cert", f"{_MQTT}.connection.ssl.cert"),
        **_aliases(also_true("mqtt.key_file", "mqtt.tls"), f"{_MQTT}.ssl.key", f"{_MQTT}.connection.ssl.key"),
        f"{_MQTT}.service.quality": Covered("KCQL subscriptions are made at QoS 1 (at least once)", accept=("1",)),
        **_aliases(_SOURCE_ERRORS, f"{_MQTT}.error.policy", f"{_MQTT}.max.retries", f"{_MQTT}.retry.interval"),
        # true asks the task to stop on a payload it cannot convert, false to drop it (MqttConfigConstants):
        # either way mqtt-proxy dead-letters it with the reason and goes on, which loses nothing and stops nothing.
        f"{_MQTT}.converter.throw.on.error": Covered(
            "a payload that does not convert is dead-lettered with the reason and the proxy goes on: "
            "neither stopped on (true) nor dropped (false)"
        ),
        f"{_MQTT}.process.duplicates": Covered(
            "a message the broker redelivers (DUP) is processed again: delivery is at least once, and the "
            "persisters' writes are idempotent"
        ),
        # Stream-Reactor 0.3.0 replaced both with KCQL's WITHCONVERTER (its README's renames).
        **_aliases(
            Unsupported(
                "write the converter into the KCQL: INSERT INTO <topic> SELECT * FROM <mqtt topic> "
                "WITHCONVERTER=`<class>`"
            ),
            f"{_MQTT}.source.converters",
            f"{_MQTT}.converters",
        ),
        f"{_MQTT}.polling.timeout": Covered("nothing is polled: the broker pushes messages"),
        f"{_MQTT}.share.replicate": Covered(
            "replicas share the subscriptions through one $share group (the chart's shareGroup)", accept=("false",)
        ),
        f"{_MQTT}.log.message": Covered("messages are counted on /metrics, not logged one by one", accept=("false",)),
        **_aliases(
            Unsupported(
                "mqtt-proxy writes SensorReading records (schemas/sensor_reading.avsc) from JSON, SenML or CBOR "
                "payloads"
            ),
            "connect.converter.avro.schemas",
            "connect.source.converter.avro.schemas",  # the 2016 releases' name
        ),
    },
)

_COAP = "connect.coap"
_COAP_STORES = ("truststore.path", "truststore.pass", "keystore.path", "keystore.pass", "certs", "cert.chain.key")
_COAP_DTLS = Unsupported(
    "coap-ingest secures CoAP with DTLS pre-shared keys (coaps:// with connect.coap.username and "
    "connect.coap.password, or FLUXGATE_COAP_DTLS__PSK_IDENTITY and FLUXGATE_COAP_DTLS__PSK_KEY), not "
    "certificates, raw public keys or Java key stores"
)
COAP_SOURCE = Connector(
    title="CoAP source",
    service="coap-ingest",
    script="fluxgate-coap-ingest",
    settings=CoapIngestSettings,
    classes=(
        "com.datamountaineer.streamreactor.connect.coap.source.CoapSourceConnector",
        "com.datamountaineer.streamreactor.common.coap.source.CoapSourceConnector",
        "io.lenses.streamreactor.connect.coap.source.CoapSourceConnector",
    ),
    sink=False,
    fixed={COAP_OUTPUT_FORMAT: COAP_MESSAGE},
    rules={
        **_framework(sink=False, tasks=_COAP_TASKS),
        **_aliases(to(COAP_KCQL, text), f"{_COAP}.kcql", f"{_COAP}.source.kcql"),
        **_aliases(to(COAP_SOURCE_URI, text), f"{_COAP}.uri", f"{_COAP}.source.uri"),
        **{f"{_COAP}.{where}{name}": _COAP_DTLS for name in _COAP_STORES for where in ("", "source.")},
        # CoapConstants: username is the PSK identity, password the PSK secret (its UTF-8 bytes, as
        # Californium's StaticPskStore takes String.getBytes; coap-ingest encodes the key the same way).
        **_aliases(to("dtls.psk_identity", text, note="PSK identity"), f"{_COAP}.username", f"{_COAP}.source.username"),
        **_aliases(
            to("dtls.psk_key", text, secret=True, note="PSK secret; the URI must be coaps://"),
            f"{_COAP}.password",
            f"{_COAP}.source.password",
        ),
        **_aliases(_COAP_DTLS, f"{_COAP}.public.key.file", f"{_COAP}.private.key.file"),
        **_aliases(
            Covered("each notification is produced at once; the Kafka producer batches (linger_ms)"),
            f"{_COAP}.batch.size",
            "connect.source.linger.ms",
        ),
        **_aliases(
            Unsupported("coap-ingest is a client only: it binds an ephemeral local port"),
            f"{_COAP}.host",
            f"{_COAP}.port",
            f"{_COAP}.bind.host",
            f"{_COAP}.bind.port",
        ),
        **_aliases(
            _SOURCE_ERRORS,
            f"{_COAP}.error.policy",
            f"{_COAP}.retry.interval",
            f"{_COAP}.max.retries",
            f"{_COAP}.max.retires",  # sic: the key as Stream-Reactor spelled it
        ),
    },
)

_HZ = "connect.hazelcast"
_SOCKET = Covered("a socket option the Hazelcast Python client sets itself")
HAZELCAST_SINK = Connector(
    title="Hazelcast sink",
    service="hazelcast-persister",
    script="fluxgate-hazelcast-persister",
    settings=HazelcastSettings,
    classes=(
        "com.datamountaineer.streamreactor.connect.hazelcast.sink.HazelCastSinkConnector",
        "com.datamountaineer.streamreactor.common.hazelcast.sink.HazelCastSinkConnector",
        "io.lenses.streamreactor.connect.hazelcast.sink.HazelCastSinkConnector",
    ),
    sink=True,
    rules={
        **_framework(sink=True, tasks=_SINK_TASKS),
        **_sink_options(_HZ, legacy_sink_prefix=True),
        **_aliases(
            to("hazelcast.members", partial(json_list, each=with_port(5701)), note="host[:port] list, port 5701"),
            f"{_HZ}.cluster.members",
            f"{_HZ}.sink.cluster.members",
        ),
        # The Hazelcast 4/5 client's releases renamed group.name to cluster.name and dropped
        # "connection." from the socket options (HazelCastSinkConfigConstants, io.lenses and 2.x).
        **_aliases(
            to("hazelcast.cluster_name", text, note="Hazelcast 3's group is 4+'s cluster"),
            f"{_HZ}.cluster.name",
            f"{_HZ}.group.name",
            f"{_HZ}.sink.group.name",
        ),
        f"{_HZ}.ssl.enabled": to("hazelcast.ssl_enabled", boolean, note="TLS to the members (Enterprise)"),
        **client_ssl.rules(
            TlsTargets(
                ca="hazelcast.ssl_cafile",
                flag="hazelcast.ssl_enabled",
                cert="hazelcast.ssl_certfile",
                key_password="hazelcast.ssl_password",  # noqa: S106 - a field path, not a password
                no_hostname_check="the client verifies a member's certificate chain, not its name: "
                "hazelcast-persister has no setting for the client's ssl_check_hostname, so only an empty value "
                "(no name check) can be honoured",
            )
        ),
        **_aliases(
            Covered(
                "Hazelcast 4+ has no group password (3.11+ members ignored it); Enterprise credentials are "
                "FLUXGATE_HZ_HAZELCAST__USERNAME and __PASSWORD"
            ),
            f"{_HZ}.group.password",
            f"{_HZ}.sink.group.password",
        ),
        **_aliases(
            to("hazelcast.connect_timeout_s", ms_to_seconds, note="ms to seconds"),
            f"{_HZ}.timeout",
            f"{_HZ}.connection.timeout",
        ),
        **_aliases(
            Covered("the client retries connecting for connect_timeout_s"),
            f"{_HZ}.retries",
            f"{_HZ}.connection.retries",
        ),
        **_aliases(
            _SOCKET,
            *(
                f"{_HZ}.{where}{option}"
                for where in ("", "connection.")
                for option in ("keep.alive", "tcp.no.delay", "reuse.address", "linger.seconds", "buffer.size")
            ),
        ),
        **_aliases(
            Covered("each partition's batch is written as one; tasks.max (replicas) adds writers"),
            f"{_HZ}.parallel.write",
            f"{_HZ}.threadpool.size",
            f"{_HZ}.sink.threadpool.size",
        ),
    },
)

_ES = "connect.elastic"
_TRANSPORT = Unsupported("a transport-client option: es-persister speaks HTTP(S) with basic auth or an API key")
# Every class the Elastic modules shipped: kafka-connect-elastic (Elasticsearch 2, 2016), elastic5,
# elastic6/7/8 under com.datamountaineer (connect, and common in the 2.x line), then io.lenses, where
# 6 and 7 kept ElasticSinkConnector (docs.lenses.io's Elasticsearch page) and 8 is Elastic8SinkConnector.
_ES_CLASSES = (
    "com.datamountaineer.streamreactor.connect.elastic.ElasticSinkConnector",
    "com.datamountaineer.streamreactor.connect.elastic5.ElasticSinkConnector",
    "com.datamountaineer.streamreactor.connect.elastic6.ElasticSinkConnector",
    "com.datamountaineer.streamreactor.connect.elastic7.ElasticSinkConnector",
    "com.datamountaineer.streamreactor.connect.elastic8.ElasticSinkConnector",
    "com.datamountaineer.streamreactor.common.elastic6.ElasticSinkConnector",
    "com.datamountaineer.streamreactor.common.elastic7.ElasticSinkConnector",
    "io.lenses.streamreactor.connect.elastic6.ElasticSinkConnector",
    "io.lenses.streamreactor.connect.elastic7.ElasticSinkConnector",
    "io.lenses.streamreactor.connect.elastic8.Elastic8SinkConnector",
)
ELASTIC_SINK = Connector(
    title="Elastic sink (6, 7, 8)",
    service="es-persister",
    script="fluxgate-es-persister",
    settings=ElasticsearchSettings,
    classes=_ES_CLASSES,
    sink=True,
    rules={
        **_framework(sink=True, tasks=_SINK_TASKS),
        **_sink_options(_ES, legacy_sink_prefix=True, export_route=True),
        f"{_ES}.url": to(
            "elasticsearch.hosts",
            elastic_urls,
            note="host:port list; http:// unless given; the transport client's elasticsearch://host:9300 "
            "(or host:9300) is the same node's HTTP API on 9200, another transport port is refused",
        ),
        f"{_ES}.url.prefix": Covered(
            "the transport client's scheme (elasticsearch://): read with connect.elastic.url", accept=("elasticsearch",)
        ),
        f"{_ES}.error.throw": Setting(
            ("sink.error_policy",), error_throw, note="the first releases' switch: true is THROW, false NOOP"
        ),
        **_aliases(
            Setting(("elasticsearch.hosts",), lambda _: {}, note="<protocol>://<host>:<port> for each host"),
            f"{_ES}.hosts",
            f"{_ES}.port",
            f"{_ES}.protocol",
        ),
        # elastic5's client type: tcp (its default, the transport client) or http.
        f"{_ES}.use.http": Covered(
            "es-persister speaks HTTP(S); with tcp, the transport client, it writes to the same node's HTTP API "
            "(see connect.elastic.url)",
            accept=("http", "https", "true", "tcp"),
        ),
        f"{_ES}.use.http.username": to("elasticsearch.username", text),
        f"{_ES}.use.http.password": to("elasticsearch.password", text, secret=True),
        f"{_ES}.cluster.name": Covered("the HTTP client does not need it (the transport client did)"),
        f"{_ES}.index.auto.create": Covered(
            "es-persister creates each daily index as it writes, with its own mapping", accept=("true",)
        ),
        f"{_ES}.write.timeout": to("elasticsearch.request_timeout", ms_to_seconds, note="ms to seconds"),
        f"{_ES}.pk.separator": Unsupported("a document's id is its PK fields joined by '|', always"),
        f"{_ES}.tableprefix": Unsupported("write the prefix into the KCQL target (INSERT INTO <prefix><index>)"),
        f"{_ES}.index.suffix": Unsupported("use KCQL's WITHINDEXSUFFIX"),
        f"{_ES}.document.type": Unsupported("mapping types are gone since Elasticsearch 7"),
        **_aliases(_TRANSPORT, f"{_ES}.xpack.settings", f"{_ES}.xpack.plugins"),
        **client_ssl.rules(
            TlsTargets(
                ca="elasticsearch.ca_certs",
                no_cert="es-persister authenticates with a password or an API key, not a client certificate "
                "(connect.elastic.use.http.username/password)",
            )
        ),
    },
)

_CASS = "connect.cassandra"
_CLIENT_CERT = Unsupported(
    "client certificates are not supported: the nodes are verified (TLS_CA_FILE), the client uses a password"
)
# The 10.x sink's own keys (CassandraConfigConstants of io.lenses.streamreactor.connect.cassandra):
# the DataStax driver's authentication, SSL, load balancing and request options.
_CASSANDRA_10: dict[str, Rule] = {
    f"{_CASS}.auth.provider": Covered(
        "a password (PLAIN: connect.cassandra.auth.username/password) or none; Kerberos (GSSAPI) is not supported: "
        "give the persister a password role",
        accept=("None", "PLAIN"),
    ),
    **_aliases(
        Unsupported("Kerberos (GSSAPI) is not supported: give the persister a password role (auth.username/password)"),
        *(f"{_CASS}.auth.gssapi.{what}" for what in ("keytab", "principal", "service")),
    ),
    f"{_CASS}.ssl.provider": Covered("TLS is OpenSSL's, through Python's ssl module (JDK or OpenSSL alike)"),
    **_aliases(
        _jks("FLUXGATE_SCYLLA_SCYLLA__TLS_CA_FILE"),
        f"{_CASS}.ssl.truststore.path",
        f"{_CASS}.ssl.truststore.password",
    ),
    **_aliases(
        _CLIENT_CERT,
        f"{_CASS}.ssl.keystore.path",
        f"{_CASS}.ssl.keystore.password",
        f"{_CASS}.ssl.openssl.key.cert.chain",
        f"{_CASS}.ssl.openssl.private.key",
    ),
    f"{_CASS}.ssl.cipher.suites": Unsupported(
        "not configurable: the driver uses OpenSSL's default ciphers (TLS 1.2+); remove the key"
    ),
    f"{_CASS}.ssl.hostname.verification": to("scylla.tls_check_hostname", boolean),
    f"{_CASS}.load.balancing.local.dc": to("scylla.local_datacenter", text),
    f"{_CASS}.max.concurrent.requests": to("scylla.max_in_flight", integer),
    f"{_CASS}.connection.pool.size": Covered("the driver keeps its own connection pool per node"),
    f"{_CASS}.compression": Covered("the connection runs uncompressed (writes are small rows)"),
    f"{_CASS}.max.batch.size": to("sink.batch_size", integer, note="records per write"),
    f"{_CASS}.ignore.errors.mode": Setting(
        ("sink.error_policy",),
        ignore_errors_mode,
        note="all or driver: NOOP, the failed record dead-lettered rather than ignored; none: the error policy",
    ),
}
CASSANDRA_SINK = Connector(
    title="Cassandra sink",
    service="scylla-persister",
    script="fluxgate-scylla-persister",
    settings=ScyllaSettings,
    classes=(
        "com.datamountaineer.streamreactor.connect.cassandra.CassandraSinkConnector",  # 2016's first
        "com.datamountaineer.streamreactor.connect.cassandra.sink.CassandraSinkConnector",
        "com.datamountaineer.streamreactor.common.cassandra.sink.CassandraSinkConnector",
        "io.lenses.streamreactor.connect.cassandra.sink.CassandraSinkConnector",
        "io.lenses.streamreactor.connect.cassandra.CassandraSinkConnector",  # 10.x, the DataStax driver's
    ),
    sink=True,
    rules={
        **_framework(sink=True, tasks=_SINK_TASKS),
        **_sink_options(_CASS, legacy_sink_prefix=True, export_route=True),
        **_CASSANDRA_10,
        f"{_CASS}.contact.points": to("scylla.contact_points", json_list, note="comma list"),
        f"{_CASS}.port": to("scylla.port", integer),
        f"{_CASS}.key.space": to("scylla.keyspace", text),
        **_aliases(to("scylla.username", text), f"{_CASS}.username", f"{_CASS}.auth.username"),
        **_aliases(to("scylla.password", text, secret=True), f"{_CASS}.password", f"{_CASS}.auth.password"),
        f"{_CASS}.ssl.enabled": to("scylla.tls", boolean),
        f"{_CASS}.consistency.level": to("scylla.consistency", lambda v: text(v).upper()),
        **_aliases(
            _jks("FLUXGATE_SCYLLA_SCYLLA__TLS_CA_FILE"),
            *(f"{_CASS}.trust.store.{what}" for what in ("path", "password", "type")),
        ),
        **_aliases(
            _CLIENT_CERT,
            *(f"{_CASS}.key.store.{what}" for what in ("path", "password", "type")),
            f"{_CASS}.ssl.client.cert.auth",
        ),
        **_aliases(
            to("scylla.request_timeout_s", ms_to_seconds, note="ms to seconds"),
            f"{_CASS}.read.timeout.ms",
            f"{_CASS}.query.timeout.ms",
        ),
        f"{_CASS}.connect.timeout.ms": to("scylla.connect_timeout_s", ms_to_seconds, note="ms to seconds"),
        # CassandraConfigConstants' default.value: NULL (its default) writes null into the columns a
        # record lacks, UNSET leaves them as they are; scylla-persister always leaves them (table.py).
        f"{_CASS}.default.value": Covered(
            "a field the record lacks leaves its column as it is (UNSET); NULL, clearing it, is not supported",
            accept=("UNSET",),
        ),
        f"{_CASS}.load.balancing.policy": Covered(
            "the driver routes each write token-aware to a replica in the local datacenter "
            "(connect.cassandra.load.balancing.local.dc)"
        ),
        f"{_CASS}.threadpool.size": Covered("statements in flight are bounded by scylla.max_in_flight"),
        f"{_CASS}.delete.enabled": Covered("scylla-persister never deletes rows", accept=("false",)),
        **_aliases(
            Unsupported("row deletion is not supported"), f"{_CASS}.delete.statement", f"{_CASS}.delete.struct_flds"
        ),
    },
)

CONNECTORS = (MQTT_SOURCE, COAP_SOURCE, ELASTIC_SINK, CASSANDRA_SINK, HAZELCAST_SINK)


def by_class(name: str) -> Connector | None:
    for connector in CONNECTORS:
        if name in connector.classes:
            return connector
    return None
