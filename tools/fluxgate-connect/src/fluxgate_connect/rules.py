"""What one connector key means to Fluxgate: a setting of the same meaning (:class:`Setting`),
something Fluxgate always does so nothing is to set (:class:`Covered`), or something it does not
do (:class:`Unsupported`, an error naming why). Keys with no rule are unknown: a warning.

A :class:`Setting` names its targets as field paths of the service's Settings class
(``mqtt.host``, ``sink.kcql``): the environment variable is that class's prefix plus the path
with ``__`` (``FLUXGATE_MQTT_MQTT__HOST``), and a test checks every path is a real field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

Convert = Callable[[str], dict[str, str]]


class RuleError(ValueError):
    """A value a rule cannot convert; the message says what was expected."""


@dataclass(frozen=True)
class Setting:
    """The key sets ``fields`` (field paths) to what ``convert`` makes of its value; ``says``
    what a run should be told of one value (nothing: an empty string)."""

    fields: tuple[str, ...]
    convert: Convert
    secret: bool = False
    note: str = ""
    says: Callable[[str], str] = lambda _: ""

    def describe(self) -> str:
        return self.note


@dataclass(frozen=True)
class Covered:
    """Fluxgate always does what the key asks (or it has no meaning here): nothing to set.
    ``unless`` lists values that ask for something else, rejected with ``reason``."""

    reason: str
    accept: tuple[str, ...] = ()

    def accepts(self, value: str) -> bool:
        return not self.accept or value.strip().lower() in {choice.lower() for choice in self.accept}

    def choices(self) -> str:
        """The accepted values as a reader sees them (an empty value by that name)."""
        return " or ".join(choice or "an empty value" for choice in self.accept)

    def describe(self) -> str:
        only = f" (only {self.choices()})" if self.accept else ""
        return f"nothing to set{only}: {self.reason}"


@dataclass(frozen=True)
class Unsupported:
    """Understood, not supported: an error naming the key and ``reason``."""

    reason: str

    def describe(self) -> str:
        return f"not supported: {self.reason}"


Rule = Setting | Covered | Unsupported


def to(field: str, convert: Callable[[str], str] | None = None, note: str = "", secret: bool = False) -> Setting:
    """A key that is one field, its value converted by ``convert`` (as it is by default)."""
    one = convert or (lambda value: value)
    return Setting((field,), lambda value: {field: one(value)}, secret=secret, note=note)


def text(value: str) -> str:
    if not value.strip():
        raise RuleError("empty")
    return value.strip()


def boolean(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise RuleError(f"expected true or false, got {value!r}")
    return lowered


def integer(value: str) -> str:
    try:
        return str(int(value.strip()))
    except ValueError as exc:
        raise RuleError(f"expected a whole number, got {value!r}") from exc


def ms_to_seconds(value: str) -> str:
    """Milliseconds (Kafka Connect's unit) as the seconds our settings take."""
    return f"{int(integer(value)) / 1000:g}"


def ms_to_whole_seconds(value: str) -> str:
    """Milliseconds as whole seconds, rounded up (MQTT's keep alive is whole seconds, at least 1)."""
    return str(max(1, math.ceil(int(integer(value)) / 1000)))


def error_policy(value: str) -> str:
    policy = value.strip().upper()
    if policy not in ("NOOP", "THROW", "RETRY"):
        raise RuleError(f"expected NOOP, THROW or RETRY, got {value!r}")
    return policy


def items(value: str) -> list[str]:
    """A Kafka Connect list: comma-separated, blanks dropped."""
    found = [item.strip() for item in value.split(",") if item.strip()]
    if not found:
        raise RuleError("empty list")
    return found


def json_list(value: str, each: Callable[[str], str] = lambda item: item) -> str:
    return json.dumps([each(item) for item in items(value)])


def with_port(default_port: int) -> Callable[[str], str]:
    """``host`` becomes ``host:<default_port>``; ``host:port`` stays."""

    def one(address: str) -> str:
        host, _, port = address.rpartition(":") if address.count(":") == 1 else (address, "", "")
        return f"{host}:{port}" if port else f"{address}:{default_port}"

    return one


def mqtt_broker(value: str) -> dict[str, str]:
    """``tcp://host:1883`` (or ``ssl://host:8883``) as our host, port and TLS switch."""
    brokers = items(value)
    if len(brokers) > 1:
        raise RuleError(
            f"{len(brokers)} brokers given: mqtt-proxy connects to one broker (a clustered broker's "
            "load-balanced address, or one proxy per broker)"
        )
    parts = urlsplit(brokers[0] if "://" in brokers[0] else f"tcp://{brokers[0]}")
    schemes = {"tcp": False, "mqtt": False, "ssl": True, "tls": True, "mqtts": True}
    if parts.scheme not in schemes:
        raise RuleError(
            f"scheme {parts.scheme!r}: mqtt-proxy speaks MQTT over TCP (tcp://) or TLS (ssl://), not websockets"
        )
    tls = schemes[parts.scheme]
    port = parts.port or (8883 if tls else 1883)
    return {"mqtt.host": parts.hostname or "", "mqtt.port": str(port), "mqtt.tls": "true" if tls else "false"}


def mqtt_qos(value: str) -> str:
    """``connect.mqtt.service.quality`` as the KCQL subscriptions' QoS: 0 is subscribed at 1
    (:func:`mqtt_qos_note`), 1 and 2 as they are."""
    qos = integer(value)
    if qos not in ("0", "1", "2"):
        raise RuleError(f"expected 0, 1 or 2, got {value!r}")
    return "1" if qos == "0" else qos


def mqtt_qos_note(value: str) -> str:
    # At most once is asked, at least once is given: the proxy answers a message once Kafka has
    # it, so with the session kept the broker sends again what was in flight when the proxy
    # stopped; and a publisher's QoS 0 messages still come at QoS 0 (a subscription caps the
    # QoS, it never raises it). Nothing is lost by asking more.
    try:
        if integer(value) != "0":  # as mqtt_qos reads it: "00" and " 0 " are 0 too
            return ""
    except RuleError:
        return ""  # mqtt_qos refuses it, naming the key
    return (
        "subscribed at QoS 1 (at least once), not 0: the proxy answers a message once Kafka has it, so the broker "
        "sends again what was in flight when the proxy stopped (with the session kept: connect.mqtt.clean=false); "
        "a publisher's QoS 0 messages still arrive at QoS 0. FLUXGATE_MQTT_KCQL_QOS=0 subscribes at 0"
    )


def elastic_urls(value: str, protocol: str = "http") -> str:
    """``connect.elastic.url`` (``host:9200``, ``http://host:9200``, a comma list, the transport
    client's ``elasticsearch://host:9300``) as our JSON list of node URLs."""
    return json.dumps([_http_url(url, protocol) for url in items(value)])


TRANSPORT_PORT = 9300  # Elasticsearch's transport.port default; http.port's is 9200


def is_transport(url: str) -> bool:
    """Whether ``url`` is the transport client's address: ``elasticsearch://``, or a bare
    ``host:9300`` (the transport-era ``connect.elastic.url`` default). An ``http(s)://`` URL names an
    HTTP listener, whatever its port."""
    parts = urlsplit(url if "://" in url else f"none://{url}")
    return parts.scheme == "elasticsearch" or (parts.scheme == "none" and parts.port == TRANSPORT_PORT)


def _http_url(url: str, protocol: str) -> str:
    parts = urlsplit(url if "://" in url else f"{protocol}://{url}")
    if is_transport(url):
        return _transport_to_http(url, parts.hostname or "", parts.port, protocol)
    if parts.scheme not in ("http", "https"):
        raise RuleError(f"{url}: scheme {parts.scheme!r}: es-persister speaks HTTP(S) (http:// or https://)")
    return f"{parts.scheme}://{parts.hostname}:{parts.port or 9200}{parts.path.rstrip('/')}"


def _transport_to_http(url: str, host: str, port: int | None, protocol: str) -> str:
    """The HTTP address of the node a transport-client URL names.

    Stream-Reactor's Elastic sinks before 6 used the transport client (``connect.elastic.url``
    default ``localhost:9300``, ``connect.elastic.url.prefix`` ``elasticsearch``; ElasticSinkConfig
    of kafka-connect-elastic); its own quickstart then reads the documents back from the same
    node's HTTP API on 9200 (datamountaineer docs, elastic.rst). A node on the default transport
    port is taken to serve HTTP on the default 9200: one unambiguous address. A transport port of
    its own says nothing of its HTTP port, so the user is told exactly what to set.
    """
    if port in (None, TRANSPORT_PORT):
        return f"{protocol}://{host}:9200"
    raise RuleError(
        f"{url}: the transport protocol is gone from Elasticsearch 8 and es-persister speaks HTTP(S); "
        f"set connect.elastic.url=http://{host}:<its http.port> (9200 unless the node sets http.port)"
    )


def error_throw(value: str) -> dict[str, str]:
    """The first Elastic sink's ``connect.elastic.error.throw``: true stops, false goes on."""
    return {"sink.error_policy": "THROW" if boolean(value) == "true" else "NOOP"}


def ignore_errors_mode(value: str) -> dict[str, str]:
    """The Cassandra 10.x sink's ``ignore.errors.mode``: ``none`` stops on an error (the error
    policy decides), ``all``/``driver`` go on; ours dead-letters instead of ignoring."""
    mode = value.strip().lower()
    if mode not in ("none", "all", "driver"):
        raise RuleError(f"expected none, all or driver, got {value!r}")
    return {} if mode == "none" else {"sink.error_policy": "NOOP"}


def cassandra_default_value(value: str) -> str:
    """The Cassandra sink's ``default.value`` as scylla-persister's ``default_value``. Stream-Reactor
    takes only the exact names NULL and UNSET and reads anything else, an empty value (its default)
    included, as NULL (CassandraSettings.scala, DefaultValueServeStrategy.of: ``Try(withName(value))``,
    else None, which CassandraJsonWriter.scala serves as NULL). An empty value is its NULL here too;
    another spelling (``unset``) is refused rather than silently clearing columns as it would there."""
    chosen = value.strip()  # Kafka's ConfigDef trims a STRING value
    if chosen in ("", "NULL"):
        return "NULL"
    if chosen == "UNSET":
        return "UNSET"
    raise RuleError(
        f"expected NULL or UNSET, exactly (Stream-Reactor would read {value!r} as NULL and write null into "
        "every column a record lacks)"
    )


CASSANDRA_SSL_PROVIDERS = ("None", "JDK", "OpenSSL")


def cassandra_ssl_provider(value: str) -> dict[str, str]:
    """The Cassandra 10.x sink's ``ssl.provider``, checked: Stream-Reactor hands it to DataStax's
    connector (CassandraSettings.scala, getOSSCassandraSinkConfig), which takes exactly None, JDK or
    OpenSSL (datastax/kafka-sink ``sink/src/main/java/com/datastax/oss/kafka/sink/config/SslConfig.java``:
    ``Provider.valueOf``) and refuses any other spelling. Whether TLS is on is decided with
    ``ssl.enabled`` (:func:`fluxgate_connect.translate.cassandra_10`): None means without."""
    chosen = value.strip()  # Kafka's ConfigDef trims a STRING value
    if chosen not in CASSANDRA_SSL_PROVIDERS:
        raise RuleError(f"expected None, JDK or OpenSSL, exactly (DataStax's connector refuses {value!r})")
    return {}


def also_true(field: str, flag: str) -> Setting:
    """A file setting that only means something with TLS on: it sets ``flag`` too."""
    return Setting((field, flag), lambda value: {field: text(value), flag: "true"}, note="PEM file; turns TLS on")
