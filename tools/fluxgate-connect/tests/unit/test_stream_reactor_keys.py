"""Every key Stream-Reactor's config classes define for the five connectors has a rule, so the
tables of docs/kafka-connect.md (generated from the rules) cover them all and none is a warning.

The lists are Stream-Reactor's, by release: lensesio/stream-reactor's ``*ConfigConstants.scala``
and ``*ConfigDef.scala`` (the com.datamountaineer...connect, ...common and io.lenses packages),
the 2016-2017 keys its datamountaineer documentation shows (hunterjackson/docs, a fork of
datamountaineer/docs) and the renames in its README's 0.3.0 notes, and Kafka's client SSL keys
the Elastic and Hazelcast sinks add (``withClientSslSupport``). Source-only Cassandra keys and
the MQTT sink's are not listed.
"""

from __future__ import annotations

import pytest

from fluxgate_connect.connectors import (
    CASSANDRA_SINK,
    COAP_SOURCE,
    ELASTIC_SINK,
    HAZELCAST_SINK,
    MQTT_SOURCE,
    Connector,
)


def _prefixed(prefix: str, names: str) -> list[str]:
    return [f"{prefix}.{name}" for name in names.split()]


FRAMEWORK = ["name", "tasks.max", "key.converter", "value.converter", "connect.progress.enabled",
             "value.converter.schemas.enable", "key.converter.schemas.enable"]  # fmt: skip
SINK_ERRORS = ["errors.tolerance", "errors.deadletterqueue.topic.name", "errors.retry.timeout",
               "errors.deadletterqueue.topic.replication.factor", "errors.deadletterqueue.context.headers.enable",
               "errors.retry.delay.max.ms", "errors.log.enable", "errors.log.include.messages"]  # fmt: skip
KAFKA_CLIENT_SSL = _prefixed(
    "ssl",
    "protocol provider cipher.suites enabled.protocols keystore.type keystore.location keystore.password "
    "key.password keystore.key keystore.certificate.chain truststore.certificates truststore.type "
    "truststore.location truststore.password keymanager.algorithm trustmanager.algorithm "
    "endpoint.identification.algorithm secure.random.implementation engine.factory.class",
)


STREAM_REACTOR_KEYS: dict[str, list[str]] = {
    # MqttConfigConstants (io.lenses, 2.x common); mqtt.rst of 2016 (connection.*, user, source.*).
    "mqtt-proxy": [
        *_prefixed(
            "connect.mqtt",
            "kcql hosts service.quality username password client.id timeout polling.timeout clean "
            "keep.alive ssl.ca.cert ssl.cert ssl.key converter.throw.on.error share.replicate "
            "error.policy retry.interval max.retries log.message process.duplicates source.kcql "
            "connection.clean connection.timeout connection.keep.alive user connection.ssl.ca.cert "
            "connection.ssl.cert connection.ssl.key source.converters converters",
        ),
        "connect.converter.avro.schemas",
        "connect.source.converter.avro.schemas",
        "errors.tolerance",
        *FRAMEWORK,
    ],
    # CoapConstants (com.datamountaineer...common.coap.configs); coap docs' max.retires.
    "coap-ingest": [
        *_prefixed(
            "connect.coap",
            "kcql uri port host username password public.key.file private.key.file truststore.pass "
            "truststore.path certs keystore.pass keystore.path cert.chain.key error.policy "
            "retry.interval max.retries max.retires batch.size",
        ),
        "connect.source.linger.ms",
        *FRAMEWORK,
    ],
    # ElasticSinkConfigConstants (kafka-connect-elastic), elastic.rst of 2016, ElasticConfigConstants
    # (elastic5/6/7), Elastic8ConfigDef and ElasticConfigDef (io.lenses elastic-common).
    "es-persister": [
        *_prefixed(
            "connect.elastic",
            "url cluster.name url.prefix sink.kcql write.timeout error.throw export.route.query port "
            "kcql protocol hosts tableprefix use.http use.http.username use.http.password batch.size "
            "error.policy max.retries retry.interval pk.separator index.auto.create document.type "
            "xpack.settings xpack.plugins",
        ),
        *KAFKA_CLIENT_SSL,
        *SINK_ERRORS,
        *FRAMEWORK,
    ],
    # CassandraConfigConstants: com.datamountaineer...connect and io.lenses...config (the sink's keys),
    # io.lenses.streamreactor.connect.cassandra (10.x); cassandra-sink.rst of 2016.
    "scylla-persister": [
        *_prefixed(
            "connect.cassandra",
            "sink.kcql sink.error.policy sink.max.retries sink.retry.interval "
            "key.space contact.points port username password ssl.enabled trust.store.path "
            "trust.store.password trust.store.type ssl.client.cert.auth key.store.path "
            "key.store.password key.store.type error.policy retry.interval max.retries kcql "
            "threadpool.size consistency.level delete.enabled delete.statement delete.struct_flds "
            "default.value load.balancing.policy connect.timeout.ms read.timeout.ms export.route.query "
            "max.concurrent.requests connection.pool.size compression query.timeout.ms max.batch.size "
            "load.balancing.local.dc auth.provider auth.username auth.password auth.gssapi.keytab "
            "auth.gssapi.principal auth.gssapi.service ssl.provider ssl.truststore.path "
            "ssl.truststore.password ssl.keystore.path ssl.keystore.password ssl.cipher.suites "
            "ssl.hostname.verification ssl.openssl.key.cert.chain ssl.openssl.private.key "
            "ignore.errors.mode",
        ),
        *SINK_ERRORS,
        *FRAMEWORK,
    ],
    # HazelCastSinkConfigConstants: ...common (Hazelcast 3 client: group.*), ...connect and io.lenses
    # (4/5 client: cluster.name), the sink.* names before 1.0.
    "hazelcast-persister": [
        *_prefixed(
            "connect.hazelcast",
            "cluster.members group.name group.password cluster.name parallel.write timeout retries "
            "keep.alive tcp.no.delay reuse.address linger.seconds buffer.size kcql error.policy "
            "retry.interval max.retries threadpool.size ssl.enabled sink.kcql sink.cluster.members "
            "sink.group.name sink.group.password sink.batch.size sink.error.policy sink.max.retries "
            "sink.retry.interval",
        ),
        *KAFKA_CLIENT_SSL,
        *SINK_ERRORS,
        *FRAMEWORK,
    ],
}


@pytest.mark.parametrize(
    "connector", [MQTT_SOURCE, COAP_SOURCE, ELASTIC_SINK, CASSANDRA_SINK, HAZELCAST_SINK], ids=lambda c: c.service
)
def test_every_key_stream_reactor_defines_has_a_rule(connector: Connector) -> None:
    missing = [key for key in STREAM_REACTOR_KEYS[connector.service] if key not in connector.rules]
    assert not missing, f"{connector.title}: no rule for {missing}"
