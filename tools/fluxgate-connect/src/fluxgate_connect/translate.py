"""A connector config, through the table in :mod:`fluxgate_connect.connectors`, as the Fluxgate
service's environment: every key set, noted, refused (all refusals at once) or warned about."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_settings import BaseSettings

from fluxgate_connect.client_ssl import store_errors
from fluxgate_connect.connectors import CASSANDRA_SINK, CONNECTORS, ELASTIC_SINK, Connector, by_class
from fluxgate_connect.errors import ConnectError
from fluxgate_connect.rules import (
    Covered,
    RuleError,
    Setting,
    Unsupported,
    boolean,
    elastic_urls,
    integer,
    is_transport,
    items,
)
from fluxgate_connect.sinks import CASSANDRA_10_CLASS, cassandra_driver_option
from fluxgate_connect.topic_creation import is_topic_creation_key, topic_creation
from fluxgate_connect.transforms import is_transform_key, sink_chain, source_refusal
from fluxgate_scylla_persister.table import (
    STREAM_REACTOR_10_CONSISTENCY,
    metadata_refusal,
    nested_warning,
    stream_reactor_10_options,
)
from fluxgate_sink.errors import KcqlError
from fluxgate_sink.kcql import EVENT_TIME_PROPERTY, parse


@dataclass
class Translation:
    """What the connector config means for its Fluxgate service."""

    connector: Connector
    name: str  # the connector's name (its service's when the config has none)
    values: dict[str, str] = field(default_factory=dict)  # field path -> environment value
    secrets: set[str] = field(default_factory=set)  # field paths holding secrets
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    replicas: int = 1
    topics: list[str] = field(default_factory=list)  # what a sink's KCQL reads

    @property
    def env(self) -> dict[str, str]:
        """The service's environment variables, secrets included."""
        return {env_name(self.connector.settings, path): value for path, value in self.values.items()}

    @property
    def secret_names(self) -> set[str]:
        return {env_name(self.connector.settings, path) for path in self.secrets}


def env_name(settings: type[BaseSettings], path: str) -> str:
    """``sink.kcql`` of the Hazelcast persister is ``FLUXGATE_HZ_SINK__KCQL``."""
    return (str(settings.model_config.get("env_prefix", "")) + path.replace(".", "__")).upper()


def has_field(settings: type[BaseModel], path: str) -> bool:
    """Whether ``path`` (``mqtt.host``) is a field of ``settings``, groups followed."""
    model: Any = settings
    for part in path.split("."):
        fields = getattr(model, "model_fields", {})
        if part not in fields:
            return False
        model = fields[part].annotation
    return True


def translate(config: Mapping[str, str]) -> Translation:
    """The Fluxgate settings of ``config``; raises ConnectError listing every key it refuses."""
    connector = _connector(config.get("connector.class", ""))
    result = Translation(connector, config.get("name", "").strip() or connector.service)
    errors: list[str] = []
    for key in sorted(config):
        read_together = is_transform_key(key) or (not connector.sink and is_topic_creation_key(key))
        if key != "connector.class" and not read_together:
            errors += _apply(result, key, config[key])
    errors += _transforms(result, config)
    errors += _topic_creation(result, config)
    errors += _combine(result, config)
    errors += cassandra_deletes(result, config)
    _json_only(result)
    errors += store_errors(config, connector.rules, lambda path: env_name(connector.settings, path))
    result.values.update(connector.fixed)
    errors += cassandra_10(result, config)  # after fixed: the 10.x class matches columns its own way
    result.values |= {path: value for path, value in connector.defaults.items() if path not in result.values}
    errors += _check_kcql(result, config)
    if errors:
        raise ConnectError(f"{connector.title} config ({connector.service}):\n  " + "\n  ".join(errors))
    return result


def _connector(name: str) -> Connector:
    found = by_class(name.strip())
    if found is None:
        known = "\n  ".join(f"{c.service}: {', '.join(c.classes)}" for c in CONNECTORS)
        what = f"connector.class {name!r} is not one" if name else "connector.class is missing: it names one"
        raise ConnectError(f"{what} of the connectors Fluxgate replaces:\n  {known}")
    return found


def _apply(result: Translation, key: str, value: str) -> list[str]:
    """One key's effect on ``result``; the errors it causes."""
    rule = result.connector.rules.get(key)
    if rule is None and result.connector is CASSANDRA_SINK and (driver := cassandra_driver_option(key)):
        message, refused = driver
        if refused:
            return [message]
        result.warnings.append(message)
        return []
    if rule is None:
        result.warnings.append(f"{key}: not a key of the {result.connector.title} that Fluxgate knows: ignored")
        return []
    if isinstance(rule, Unsupported):
        return [f"{key}: not supported: {rule.reason}"]
    if isinstance(rule, Covered):
        if not rule.accepts(value):
            return [f"{key}={value}: not supported: {rule.reason} (only {rule.choices()})"]
        if key == "tasks.max":
            return _replicas(result, value)
        result.notes.append(f"{key}: nothing to set: {rule.reason}")
        return []
    return _set(result, key, value, rule)


def _set(result: Translation, key: str, value: str, rule: Setting) -> list[str]:
    try:
        converted = rule.convert(value)
    except RuleError as exc:
        return [f"{key}={value}: {exc}"]
    result.values.update(converted)
    if rule.secret:
        result.secrets.update(converted)
    if said := rule.says(value):
        result.notes.append(f"{key}={value}: {said}")
    return []


def _replicas(result: Translation, value: str) -> list[str]:
    try:
        result.replicas = int(integer(value))
    except RuleError as exc:
        return [f"tasks.max={value}: {exc}"]
    if result.replicas < 1:
        return [f"tasks.max={value}: at least 1"]
    if result.replicas > 1:
        result.notes.append(f"tasks.max={value}: {value} members of {result.connector.service}")
    return []


def _transforms(result: Translation, config: Mapping[str, str]) -> list[str]:
    """``transforms``/``predicates`` keys, together: a sink's chain, a source's refusal."""
    if not result.connector.sink:
        return source_refusal(config)
    chain, errors, warnings = sink_chain(config)
    result.warnings += warnings
    if chain is not None:
        result.values["sink.transforms"] = chain
    return errors


def _topic_creation(result: Translation, config: Mapping[str, str]) -> list[str]:
    """A source's ``topic.creation.*`` keys, together (a sink creates no topics: unknown keys there)."""
    if result.connector.sink:
        return []
    values, errors = topic_creation(config)
    result.values.update(values)
    return errors


def _combine(result: Translation, config: Mapping[str, str]) -> list[str]:
    """Keys that mean something only together: the Elastic sink's hosts, port and protocol."""
    prefix = "connect.elastic."
    if result.connector is not ELASTIC_SINK or not {f"{prefix}hosts", f"{prefix}url"} & config.keys():
        return []
    if f"{prefix}url" in config and f"{prefix}hosts" in config:
        return [f"{prefix}url and {prefix}hosts: set one way to name the nodes"]
    protocol = config.get(f"{prefix}protocol", "http").strip().lower()
    port = config.get(f"{prefix}port", "9200").strip()
    listed = config.get(f"{prefix}hosts", "").split(",")
    # A URL without a scheme takes connect.elastic.protocol's, as the connector does.
    # The HTTP clients' hosts and port are an HTTP address even on 9300 (their ConfigDefs' default port).
    hosts = config.get(f"{prefix}url") or ",".join(
        f"{protocol}://{host.strip()}:{port}" for host in listed if host.strip()
    )
    try:
        result.values["elasticsearch.hosts"] = elastic_urls(hosts, protocol)
    except RuleError as exc:
        return [f"{prefix}hosts/port/protocol: {exc}"]
    if transport := [url for url in items(hosts) if is_transport(url)]:
        result.notes.append(
            f"{prefix}url: {', '.join(transport)} is the transport client's address (gone from Elasticsearch 8): "
            f"es-persister writes to the same node's HTTP API, {result.values['elasticsearch.hosts']}; if the "
            "node sets its own http.port, set connect.elastic.url=http://<host>:<http.port> instead"
        )
    return []


def cassandra_deletes(result: Translation, config: Mapping[str, str]) -> list[str]:
    """The older Cassandra sinks' deletes: with ``connect.cassandra.delete.enabled=true`` a tombstone
    runs ``delete.statement`` bound from its key (``delete.struct_flds``); otherwise both are unused,
    as there (lensesio/stream-reactor ``CassandraSettings.scala``: read only when enabled;
    ``sink/CassandraJsonWriter.scala``, ``delete``)."""
    prefix = "connect.cassandra.delete."
    if result.connector is not CASSANDRA_SINK or not any(key.startswith(prefix) for key in config):
        return []
    try:
        enabled = boolean(config.get(f"{prefix}enabled", "false")) == "true"
    except RuleError as exc:
        return [f"{prefix}enabled: {exc}"]
    statement = config.get(f"{prefix}statement", "").strip()
    if not enabled:
        if statement:
            result.notes.append(
                f"{prefix}statement: unused, as {prefix}enabled is not true: tombstones are dead-lettered"
            )
        return []
    if not statement:
        return [f"{prefix}enabled is true: {prefix}statement names the DELETE a tombstone runs"]
    result.values["scylla.delete_statement"] = statement
    fields = config.get(f"{prefix}struct_flds", "")
    if fields.strip():
        result.values["scylla.delete_key_fields"] = json.dumps(items(fields))
    return []


def cassandra_10(result: Translation, config: Mapping[str, str]) -> list[str]:
    """What Stream-Reactor 10.x's Cassandra sink does differently from the older ones, for its class.

    Columns: it writes through DataStax's connector, only the columns its KCQL maps and a null as
    UNSET (datastax/kafka-sink ``sink/src/main/java/com/datastax/oss/kafka/sink/config/TableConfig.java``:
    ``nullToUnset``, default true), so a column a record lacks is left as it is (scylla's UNSET),
    where the older sinks' JSON insert writes null (the connector's NULL default). Its KCQL becomes
    DataStax's mapping, one quoted ``"<alias>"="value.<field>"`` per field a SELECT names and none
    for ``*`` (lensesio/stream-reactor ``io/lenses/streamreactor/connect/cassandra/CassandraSettings.scala``,
    ``CassandraTableSetting``), which DataStax takes by exact name (``config/MappingInspector.java``)
    and checks at start against the table (``state/LifeCycleManager.java``,
    ``validateMappingColumns``): scylla-persister's ``stream-reactor-10`` column matching, where the
    older sinks' JSON insert lower-cases unquoted names (``stream-reactor``).

    TLS: it connects with TLS only when ``ssl.enabled`` is true and
    ``ssl.provider`` is JDK or OpenSSL: its default, None, connects without, whatever ``ssl.enabled``
    says (lensesio/stream-reactor ``io/lenses/streamreactor/connect/cassandra/CassandraSettings.scala``
    passes ``ssl.provider`` on to DataStax's connector, whose ``LifeCycleManager.processSslConfig`` and
    ``ssl/SessionBuilder.java`` (datastax/kafka-sink) set TLS up for JDK and OpenSSL only). We do not
    follow it there: a config that says ``ssl.enabled=true`` gets TLS, as the older sinks give it
    (``ssl.enabled`` alone, CassandraConnection.scala), and a warning says where Stream-Reactor would
    have connected in plain text. A silent downgrade is worse than a difference.

    KCQL: :func:`_cassandra_10_kcql`. Returns the errors."""
    if result.connector is not CASSANDRA_SINK or config.get("connector.class", "").strip() != CASSANDRA_10_CLASS:
        return []
    result.values.setdefault("scylla.default_value", "UNSET")
    result.values["scylla.column_match"] = "stream-reactor-10"
    errors = _cassandra_10_kcql(result, config)
    try:
        enabled = boolean(config.get("connect.cassandra.ssl.enabled", "false")) == "true"
    except RuleError:
        return errors  # ssl.enabled's own rule says what is wrong
    if enabled and config.get("connect.cassandra.ssl.provider", "None").strip() == "None":
        result.warnings.append(
            "connect.cassandra.ssl.enabled=true with connect.cassandra.ssl.provider None (its default): "
            "Stream-Reactor 10.x connects WITHOUT TLS then; scylla-persister connects with TLS, as "
            "ssl.enabled asks (set connect.cassandra.ssl.provider=JDK so that both agree)"
        )
    return errors


def _cassandra_10_kcql(result: Translation, config: Mapping[str, str]) -> list[str]:
    """What the 10.x class's KCQL asks that scylla-persister must know at translate time.

    Its SELECT may name the record key's fields and headers (``_key.x``, ``_header.h``), which the
    sink's projection reads as 10.x maps them (fluxgate_sink.kcql, Statement.project); what it still
    cannot write (a bare ``_header`` or ``_value``) is refused, as at its start
    (table.metadata_refusal); nested fields, which 10.x's DataStax mapping fails on, are warned
    about (table.nested_warning). Its
    PROPERTIES become DataStax's table settings (CassandraSettings.scala, getExtraSettingsMappings;
    DataStax's TableConfig.java): ttl and nullToUnset the persister reads from the KCQL itself;
    query, mapping and codec.* are refused (table.stream_reactor_10_options); the consistency,
    LOCAL_ONE unless consistencyLevel says otherwise, is set on each statement
    (CassandraSinkTask.java), overriding the driver's default, so it becomes scylla.consistency;
    and deletesEnabled, true unless set, makes the persister delete rows as 10.x does (table.RowBinder.deleted)."""
    try:
        statements = parse(result.values.get("sink.kcql", ""))
    except KcqlError:
        return []  # _check_kcql says what is wrong
    errors: list[str] = []
    levels: dict[str, str] = {}
    for statement in statements:
        try:
            options = stream_reactor_10_options(statement)
        except KcqlError as exc:
            errors.append(f"KCQL: {exc}")
            continue
        levels[statement.text] = options.consistency
        named = [ref for ref in statement.fields if not ref.wildcard]  # a wildcard: refused at the persister's start
        errors += [f"KCQL: {statement.text}: {why}" for ref in named if (why := metadata_refusal(ref.path))]
        result.warnings += [w for ref in named if (w := nested_warning(ref.path, ref.alias))]
        ignored = sorted(set(statement.properties) - _SR10_PROPERTIES)
        result.warnings += [
            f"KCQL PROPERTIES {key}: Stream-Reactor 10.x passes it to DataStax's connector, which ignores it; "
            "so does scylla-persister"
            for key in ignored
        ]
        if options.deletes_enabled:
            result.notes.append(
                f"KCQL {statement.target}: deletesEnabled (true unless PROPERTIES set it false): if the SELECT maps "
                "every column of the table, a record with only null non-key fields deletes its row, as 10.x "
                "does, and so does a tombstone whose key fills the primary key (SELECT _key.id AS id, say), "
                "each timed by its record (10.x's DELETE is timed when it runs); "
                "PROPERTIES(deletesEnabled=false) writes its key alone instead"
            )
    if len(set(levels.values())) > 1:
        listed = ", ".join(f"{level} ({text})" for text, level in levels.items())
        errors.append(
            f"KCQL PROPERTIES consistencyLevel: Stream-Reactor 10.x writes each table at its own ({listed}; "
            f"{STREAM_REACTOR_10_CONSISTENCY} unless set); scylla-persister writes all at one "
            "(FLUXGATE_SCYLLA_SCYLLA__CONSISTENCY): run one connector per consistency level"
        )
    elif levels:
        (level,) = set(levels.values())
        given = result.values.get("scylla.consistency")
        if given is not None and given != level:
            result.warnings.append(
                f"the configured consistency {given} is not what Stream-Reactor 10.x writes at: it sets each "
                f"table's consistencyLevel ({level}; {STREAM_REACTOR_10_CONSISTENCY} unless PROPERTIES set it) "
                "on every statement; scylla-persister writes at that too"
            )
        result.values["scylla.consistency"] = level
    return errors


# The PROPERTIES a 10.x statement may set that mean something here (table.stream_reactor_10_options;
# event.time.field is ours).
_SR10_PROPERTIES = frozenset(
    {
        "ttl",
        "ttlTimeUnit",
        "timestampTimeUnit",
        "consistencyLevel",
        "nullToUnset",
        "deletesEnabled",
        EVENT_TIME_PROPERTY,
    }
)


def _json_only(result: Translation) -> None:
    """``*.converter.schemas.enable`` is JsonConverter's: with other converters it sets nothing."""
    sides = (("value", "sink"), ("key", "sink"), ("header", "sink"), ("value", "output"), ("key", "output"))
    for side, group in sides:
        flag = f"{group}.{side}_schemas_enable"
        if result.values.get(f"{group}.{side}_format") != "json" and flag in result.values:
            del result.values[flag]
            result.notes.append(
                f"{side}.converter.schemas.enable: nothing to set: JsonConverter's, not {side}.converter"
            )


def _check_kcql(result: Translation, config: Mapping[str, str]) -> list[str]:
    """A sink's KCQL must parse, and read exactly the connector's ``topics``."""
    if not result.connector.sink:
        return []
    kcql = result.values.get("sink.kcql")
    if kcql is None:
        keys = sorted(
            k for k, r in result.connector.rules.items() if isinstance(r, Setting) and "sink.kcql" in r.fields
        )
        return [f"no KCQL: set {' or '.join(keys)}"]
    try:
        statements = parse(kcql)
    except KcqlError as exc:
        return [f"KCQL: {exc}"]
    result.topics = list(dict.fromkeys(statement.topic for statement in statements))
    result.notes += [_suffix_note(s.index_suffix) for s in statements if s.index_suffix and _java_only(s.index_suffix)]
    if config.get("connector.class", "").strip() != CASSANDRA_10_CLASS:  # 10.x maps them: _cassandra_10_kcql
        result.notes += [_metadata_note(s.text) for s in statements if s.reads_key or s.reads_headers]
    listed = [topic.strip() for topic in config.get("topics", "").split(",") if topic.strip()]
    if listed and set(listed) != set(result.topics):
        return [f"topics={','.join(listed)}: the KCQL reads {', '.join(result.topics)}: they must be the same"]
    return []


def _metadata_note(text: str) -> str:
    """What a SELECT naming the key's fields or headers writes here that Stream-Reactor did not.

    Its Kcql.java files ``_key.``/``_header.`` entries apart from the value's fields, and its
    Elastic and Hazelcast sinks project ``Kcql.getFields`` only (ElasticJsonWriter.scala;
    KcqlSettings.scala's getFieldsMap for Hazelcast), so such an entry wrote nothing there."""
    return (
        f"KCQL {text}: its SELECT names the record key's fields or headers (_key.<field>, _header.<name>); "
        "this Stream-Reactor sink projects the value's fields only and writes nothing for them; the persister "
        "writes them (the key in the key.converter's format, a header as the header.converter reads it, Kafka "
        "Connect's SimpleHeaderConverter by default)"
    )


def _java_only(suffix: str) -> bool:
    return "YYYY" in suffix or "DD" in suffix


def _suffix_note(suffix: str) -> str:
    """Where an index name differs from Stream-Reactor's for the same WITHINDEXSUFFIX.

    Stream-Reactor formats the suffix with Java's ``DateTimeFormatter.ofPattern`` at the time of
    the write (``DateTimeFragment``: ``LocalDateTime.now(Clock.systemUTC())``, elastic
    indexname/IndexNameFragment.scala), where ``YYYY`` is the week-based year and ``DD`` the day of
    the year; es-persister reads them as the calendar year and the day of the month of the record's
    event time (fluxgate_sink.dates), so a pattern written for a date files under that date.
    """
    return (
        f"WITHINDEXSUFFIX {suffix}: Stream-Reactor formatted it with Java's DateTimeFormatter at write time "
        "(YYYY the week-based year, DD the day of the year: -2026.11.330 on 26 November 2026); es-persister "
        "reads YYYY as the year and DD as the day of the month of each record's event time (-2026.11.26): "
        "indices the connector wrote keep their names, new documents go to the calendar-dated ones"
    )


def dumps_env(env: Mapping[str, str]) -> str:
    """``NAME=value`` lines; a value that is JSON or has spaces is single-quoted for a shell."""
    return "".join(f"{name}={_quoted(value)}\n" for name, value in sorted(env.items()))


def _quoted(value: str) -> str:
    plain = value and all(c.isalnum() or c in "-_.:/,@+=%" for c in value)
    return value if plain else "'" + value.replace("'", "'\\''") + "'"
