"""The sinks of the table: Stream-Reactor's Hazelcast, Elastic and Cassandra sink connectors, run
by the persisters. See :mod:`fluxgate_connect.connectors`."""

from __future__ import annotations

from functools import partial

from fluxgate_connect import client_ssl
from fluxgate_connect.client_ssl import TlsTargets
from fluxgate_connect.framework import SINK_TASKS, Connector, aliases, framework, jks, sink_options
from fluxgate_connect.rules import (
    Covered,
    Rule,
    Setting,
    Unsupported,
    boolean,
    cassandra_default_value,
    cassandra_ssl_provider,
    elastic_urls,
    error_throw,
    ignore_errors_mode,
    integer,
    json_list,
    ms_to_seconds,
    text,
    to,
    with_port,
)
from fluxgate_es_persister.settings import ElasticsearchSettings
from fluxgate_hazelcast_persister.settings import HazelcastSettings
from fluxgate_scylla_persister.settings import ScyllaSettings

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
    # Stream-Reactor's reading of a statement, so data lands where its connector put it: no STOREAS
    # (or MAP) is a reliable topic, TTL is milliseconds on an IMap only, keys as its writers make them
    # (kafka-connect-hazelcast HazelCastSinkSettings.scala, MapWriter.scala, Writer.scala; see
    # fluxgate_hazelcast_persister.structures). Our services keep ours (hazelcast-persister README).
    fixed={"sink.semantics": "stream-reactor"},
    rules={
        **framework(sink=True, tasks=SINK_TASKS),
        **sink_options(_HZ, legacy_sink_prefix=True),
        **aliases(
            to("hazelcast.members", partial(json_list, each=with_port(5701)), note="host[:port] list, port 5701"),
            f"{_HZ}.cluster.members",
            f"{_HZ}.sink.cluster.members",
        ),
        # The Hazelcast 4/5 client's releases renamed group.name to cluster.name and dropped
        # "connection." from the socket options (HazelCastSinkConfigConstants, io.lenses and 2.x).
        **aliases(
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
        **aliases(
            Covered(
                "Hazelcast 4+ has no group password (3.11+ members ignored it); Enterprise credentials are "
                "FLUXGATE_HZ_HAZELCAST__USERNAME and __PASSWORD"
            ),
            f"{_HZ}.group.password",
            f"{_HZ}.sink.group.password",
        ),
        **aliases(
            to("hazelcast.connect_timeout_s", ms_to_seconds, note="ms to seconds"),
            f"{_HZ}.timeout",
            f"{_HZ}.connection.timeout",
        ),
        **aliases(
            Covered("the client retries connecting for connect_timeout_s"),
            f"{_HZ}.retries",
            f"{_HZ}.connection.retries",
        ),
        **aliases(
            _SOCKET,
            *(
                f"{_HZ}.{where}{option}"
                for where in ("", "connection.")
                for option in ("keep.alive", "tcp.no.delay", "reuse.address", "linger.seconds", "buffer.size")
            ),
        ),
        **aliases(
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
    # Stream-Reactor's document ids, so a replay overwrites what its connector wrote: the PK values
    # joined by connect.elastic.pk.separator, else topic-partition-offset (fluxgate_sink.ids, from
    # ElasticJsonWriter.scala and JsonBulkWriter.scala). Our services keep ours (es-persister README).
    # A string key parsed as JSON first for PK _key, as elastic7's JsonPayloadExtractor.scala reads it
    # (fluxgate_sink.formats.json_first); the Hazelcast and Cassandra sinks never read the key to write.
    fixed={"sink.document_id": "stream-reactor", "sink.string_keys": "json"},
    rules={
        **framework(sink=True, tasks=SINK_TASKS),
        **sink_options(_ES, legacy_sink_prefix=True, export_route=True),
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
        **aliases(
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
        # Every Elastic config class spells it so (ElasticConfigConstants of elastic5/6/7, ElasticConfigDef
        # and ElasticCommonConfigConstants' "pk.separator" of io.lenses); taken as it is, spaces included.
        f"{_ES}.pk.separator": to(
            "sink.pk_separator",
            note="joins the PK values of a document id, and the topic, partition and offset of one without a PK "
            "(default -)",
        ),
        f"{_ES}.tableprefix": Unsupported("write the prefix into the KCQL target (INSERT INTO <prefix><index>)"),
        f"{_ES}.index.suffix": Unsupported("use KCQL's WITHINDEXSUFFIX"),
        f"{_ES}.document.type": Unsupported("mapping types are gone since Elasticsearch 7"),
        **aliases(_TRANSPORT, f"{_ES}.xpack.settings", f"{_ES}.xpack.plugins"),
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
# Stream-Reactor 10.x's Cassandra sink, a wrapper of DataStax's connector (CassandraSinkTask.scala
# starts a CassandraProcessor, DataStax's AbstractSinkTask, with getOSSCassandraSinkConfig's settings).
CASSANDRA_10_CLASS = "io.lenses.streamreactor.connect.cassandra.CassandraSinkConnector"
_DRIVER = f"{_CASS}.driver."
# Driver options a config must not lose silently: TLS and authentication, which have keys of their own.
_DRIVER_REFUSED = {
    "advanced.ssl-engine-factory.": f"set TLS with {_CASS}.ssl.enabled and {_CASS}.ssl.provider (PEM: TLS_CA_FILE)",
    "advanced.auth-provider.": f"set a password with {_CASS}.auth.provider=PLAIN and {_CASS}.auth.username/password",
}


def cassandra_driver_option(key: str) -> tuple[str, bool] | None:
    """What becomes of a ``connect.cassandra.driver.*`` key with no rule of its own: a message and
    whether it is an error (TLS and authentication, named with the keys that set them) or a warning
    (the others: a DataStax Java driver option the Python driver has no equal of); None for other keys."""
    if not key.startswith(_DRIVER):
        return None
    option = key.removeprefix(_DRIVER)
    for prefix, instead in _DRIVER_REFUSED.items():
        if option.startswith(prefix):
            return f"{key}: not supported: the DataStax Java driver's datastax-java-driver.{option}; {instead}", True
    return (
        f"{key}: the DataStax Java driver's datastax-java-driver.{option}: scylla-persister's Python driver "
        "has no such option: ignored",
        False,
    )


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
    # Read only for auth.provider=GSSAPI (CassandraSettings.scala, extractAuthSettings; DataStax's
    # AuthenticatorConfig), refused above: with None or PLAIN they mean nothing, as there
    # (auth.gssapi.service even has a default, dse). Checked against lensesio/stream-reactor's
    # io/lenses/streamreactor/connect/cassandra/CassandraConfigConstants.scala (2026).
    **aliases(
        Covered("Kerberos (GSSAPI) only, which auth.provider refuses: with None or PLAIN they mean nothing"),
        *(f"{_CASS}.auth.gssapi.{what}" for what in ("keytab", "principal", "service")),
    ),
    # None (its default), JDK or OpenSSL, exactly (DataStax's SslConfig.java, Provider.valueOf). None
    # means no TLS even with ssl.enabled=true in the 10.x sink: DataStax's connector sets TLS up only
    # for JDK or OpenSSL (LifeCycleManager's processSslConfig, SessionBuilder.java). We keep TLS on
    # as ssl.enabled asks, and say so: translate.cassandra_10.
    f"{_CASS}.ssl.provider": Setting(
        ("scylla.tls",),
        cassandra_ssl_provider,
        note="None (the default), JDK or OpenSSL, exactly; TLS follows connect.cassandra.ssl.enabled "
        "(Python's ssl module). The 10.x sink (the class "
        f"{CASSANDRA_10_CLASS}) connects without TLS for None even with ssl.enabled=true: scylla-persister "
        "does not downgrade, and warns",
    ),
    **aliases(
        jks("FLUXGATE_SCYLLA_SCYLLA__TLS_CA_FILE"),
        f"{_CASS}.ssl.truststore.path",
        f"{_CASS}.ssl.truststore.password",
    ),
    **aliases(
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
    # connect.cassandra.driver.<option> is the DataStax Java driver's datastax-java-driver.<option>
    # (CassandraSettings.scala, configureSink's driverSettings): the two options scylla-persister has;
    # the others: cassandra_driver_option.
    f"{_CASS}.driver.basic.request.consistency": to("scylla.consistency", lambda v: text(v).upper()),
    f"{_CASS}.driver.basic.load-balancing-policy.local-datacenter": to("scylla.local_datacenter", text),
    f"{_CASS}.max.concurrent.requests": to("scylla.max_in_flight", integer),
    f"{_CASS}.connection.pool.size": Covered("the driver keeps its own connection pool per node"),
    f"{_CASS}.compression": Covered("the connection runs uncompressed (writes are small rows)"),
    # DataStax's maxNumberOfRecordsInBatch (CassandraSettings.scala, getOSSCassandraSinkConfig): the
    # statements of one topic, table and partition key sent as one UNLOGGED BATCH at most
    # (datastax/kafka-sink BoundStatementProcessor.java, runLoop/categorizeStatement): ours is
    # scylla.partition_batch_rows, not the sink's batch of Kafka records.
    f"{_CASS}.max.batch.size": to(
        "scylla.partition_batch_rows", integer, note="rows of one partition key per UNLOGGED BATCH"
    ),
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
        CASSANDRA_10_CLASS,  # 10.x, the DataStax driver's
    ),
    sink=True,
    # Stream-Reactor writes each record with Cassandra's JSON insert, so fields find their columns
    # as Cassandra folds names: lower-cased unless double-quoted, the keyspace and table too
    # (CassandraJsonWriter.scala; scylla-persister README, Columns). Our services keep exact names.
    # The 10.x class maps them through DataStax's connector instead: translate.cassandra_10.
    fixed={"scylla.column_match": "stream-reactor"},
    # Without connect.cassandra.default.value its JSON insert writes null into the columns a record
    # lacks (CassandraJsonWriter.scala adds DEFAULT UNSET only for UNSET); ours leave them (UNSET), and
    # so does the 10.x class (DataStax's nullToUnset: translate.cassandra_10).
    defaults={"scylla.default_value": "NULL"},
    exceptions={
        "scylla.column_match": f"stream-reactor-10 for the 10.x class ({CASSANDRA_10_CLASS}): exact names, as "
        "DataStax's mapping takes them",
        "scylla.default_value": "UNSET for the 10.x class: DataStax's nullToUnset",
    },
    rules={
        **framework(sink=True, tasks=SINK_TASKS),
        **sink_options(_CASS, legacy_sink_prefix=True, export_route=True),
        # A source key: CassandraConfig.scala defines batch.size (records drained from the reader
        # queue, default 100) for CassandraConfigSource only (the 2017 datamountaineer constants
        # named it connect.cassandra.source.task.batch.size), and the 10.x constants have none: no
        # Stream-Reactor Cassandra sink reads it, so it sets nothing here either.
        **aliases(
            Covered(
                "the Cassandra source's (records drained per poll): Stream-Reactor's sink does not read it; "
                "scylla-persister keeps its batch size"
            ),
            f"{_CASS}.batch.size",
            f"{_CASS}.sink.batch.size",
        ),
        **_CASSANDRA_10,
        f"{_CASS}.contact.points": to("scylla.contact_points", json_list, note="comma list"),
        f"{_CASS}.port": to("scylla.port", integer),
        f"{_CASS}.key.space": to("scylla.keyspace", text),
        # CassandraConnection.scala (addAuthMode): an empty username or password means no authentication.
        **aliases(
            to("scylla.username", str.strip, note="empty: no authentication"),
            f"{_CASS}.username",
            f"{_CASS}.auth.username",
        ),
        **aliases(
            to("scylla.password", str.strip, secret=True, note="empty: no authentication"),
            f"{_CASS}.password",
            f"{_CASS}.auth.password",
        ),
        f"{_CASS}.ssl.enabled": to("scylla.tls", boolean),
        f"{_CASS}.consistency.level": to("scylla.consistency", lambda v: text(v).upper()),
        **aliases(
            jks("FLUXGATE_SCYLLA_SCYLLA__TLS_CA_FILE"),
            *(f"{_CASS}.trust.store.{what}" for what in ("path", "password", "type")),
        ),
        **aliases(
            _CLIENT_CERT,
            *(f"{_CASS}.key.store.{what}" for what in ("path", "password", "type")),
            f"{_CASS}.ssl.client.cert.auth",
        ),
        **aliases(
            to("scylla.request_timeout_s", ms_to_seconds, note="ms to seconds"),
            f"{_CASS}.read.timeout.ms",
            f"{_CASS}.query.timeout.ms",
        ),
        f"{_CASS}.connect.timeout.ms": to("scylla.connect_timeout_s", ms_to_seconds, note="ms to seconds"),
        # CassandraConfigConstants' default.value: NULL (its default) writes null into the columns a
        # record lacks, UNSET leaves them as they are (CassandraJsonWriter.scala; scylla.default_value).
        f"{_CASS}.default.value": to(
            "scylla.default_value",
            cassandra_default_value,
            note="NULL (or empty, Stream-Reactor's default) writes null into a column the record has no field "
            "for, UNSET leaves it as it is; any other spelling is refused (Stream-Reactor reads it as NULL)",
        ),
        f"{_CASS}.load.balancing.policy": Covered(
            "the driver routes each write token-aware to a replica in the local datacenter "
            "(connect.cassandra.load.balancing.local.dc)"
        ),
        f"{_CASS}.threadpool.size": Covered("statements in flight are bounded by scylla.max_in_flight"),
        # Read together (translate.cassandra_deletes): the statement only when deletes are enabled.
        f"{_CASS}.delete.enabled": Setting(
            ("scylla.delete_statement",),
            lambda _: {},
            note="true: a tombstone runs connect.cassandra.delete.statement (false, the default: it is dead-lettered)",
        ),
        f"{_CASS}.delete.statement": Setting(
            ("scylla.delete_statement",),
            lambda _: {},
            note="read when connect.cassandra.delete.enabled is true: DELETE [<column>, ...] FROM <table> WHERE "
            "<column> = ? AND ..., of a row, its cells, a partition or a range of it (USING, IF and IN are refused, "
            "naming it)",
        ),
        f"{_CASS}.delete.struct_flds": Setting(
            ("scylla.delete_key_fields",),
            lambda _: {},
            note="the record key's fields that fill the statement's markers, in order; none: the key itself",
        ),
    },
)
