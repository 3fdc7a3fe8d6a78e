"""An MQTT message in, Kafka records out: the pure part of the proxy.

Used by the service and by the consumer-driven contract tests, so what the tests
verify is byte for byte what the proxy produces. MQTT 5 user properties become Kafka
headers named ``mqtt.user.<name>``, beside an ``mqtt.topic`` header: a device names its
properties at will, so under its own prefix it can never set a header we give a meaning
to (``fluxgate.*``: the dead-letter explanation a replay reads, or ``mqtt.topic``). They
are also ``attributes`` of the reading under their bare names: the schema names them
there, as data, and nothing decides anything on an attribute.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from fluxgate_core.errors import InvalidReading
from fluxgate_core.gateway import SubjectRefused
from fluxgate_core.kafka import KafkaRecord
from fluxgate_core.kcql import FieldPath
from fluxgate_core.limits import DEFAULT_LIMITS, PayloadLimits, header_bytes
from fluxgate_core.payloads import NO_ATTRIBUTES, load_document, parse_payload
from fluxgate_core.readings import Origin, build_reading
from fluxgate_core.serde import RecordEncoder
from fluxgate_mqtt_proxy.route_settings import RouteSettings
from fluxgate_mqtt_proxy.topic_routes import Route, compile_routes, route_for
from fluxgate_mqtt_proxy.topics import DerivedTargets

TOPIC_HEADER = "mqtt.topic"
USER_PROPERTY_PREFIX = "mqtt.user."  # every header a device names itself: never one of ours
ROUTE_CACHE_SIZE = 65_536  # distinct MQTT topics whose route is remembered (least recently used go)
# Kafka topics -> their encoders (Avro: registered), or why the registry refused a subject
Register = Callable[[Iterable[str]], Mapping[str, RecordEncoder | SubjectRefused]]
_MISSING = object()
ANY_DERIVED = DerivedTargets()  # the defaults of ProxySettings.derived_topics, without a dead-letter topic


class NoRoute(InvalidReading):
    """A message arrived on a topic no rule matches (a safety net: we only subscribe to rule filters)."""


class TooManyTargets(InvalidReading):
    """A ``$`` route would write one more distinct Kafka topic than ``derived_topics.max_topics``."""


class TopicPlan(NamedTuple):
    """What an MQTT topic says about its messages, worked out once per topic: devices publish
    on the same few topics again and again, and every message of a topic needs the same."""

    route: Route | None
    device: str | None  # from the topic, when the route takes it from there
    metric: str | None
    target: str | None  # the Kafka topic; None when there is no route or the derived name is invalid
    problem: str  # why there is no Kafka topic (raised as InvalidReading, after parsing)
    headers: list[tuple[str, bytes]]  # the Kafka headers of a message without user properties
    label: str  # the route's metrics label ("" without a route)
    header_bytes: int  # what those headers add to each record (counted against the output limit)


def plan_topic(routes: Sequence[Route], derived: DerivedTargets, topic: str) -> TopicPlan:
    route = route_for(routes, topic)
    headers = message_headers(topic, NO_ATTRIBUTES)
    if route is None:
        return TopicPlan(None, None, None, None, "", headers, "", 0)
    target, problem = None, ""
    try:
        target = route.kafka_topic(topic)
    except InvalidReading as exc:
        problem = str(exc)
    if target is not None and route.dynamic and (problem := derived.problem(target) or ""):
        target, problem = None, f"MQTT topic {topic[:256]!r} (INSERT INTO $): {problem}"
    device, metric = route.device_from_topic(topic), route.metric_from_topic(topic)
    return TopicPlan(route, device, metric, target, problem, headers, route.name, header_bytes(headers))


class MessageConverter:
    """Turns one MQTT message into the ``SensorReading`` records it holds."""

    def __init__(
        self,
        rules: Sequence[RouteSettings | Route],
        encoder: RecordEncoder | Mapping[str, RecordEncoder],
        limits: PayloadLimits = DEFAULT_LIMITS,
        register: Register | None = None,
        derived: DerivedTargets = ANY_DERIVED,
    ) -> None:
        """``encoder``: one for every Kafka topic, or one per topic (each registered under its own subject).
        ``register``: registers the schema for the topics ``INSERT INTO $`` routes derive (blocking),
        as many as ``derived`` allows."""
        self.limits = limits
        self.routes = [rule if isinstance(rule, Route) else compile_routes([rule])[0] for rule in rules]
        topics = {route.settings.topic for route in self.routes if not route.dynamic}
        self._encoders = dict(encoder) if isinstance(encoder, Mapping) else dict.fromkeys(topics, encoder)
        self._dynamic = any(route.dynamic for route in self.routes)
        self._registering = asyncio.Lock()
        self._register: Register = register or functools.partial(_one_encoder, encoder)
        self._derived_targets = derived
        self._derived_count = 0  # derived topics registered or refused: bounded by derived.max_topics
        self._refused: dict[str, str] = {}  # derived topic -> why the registry refused its subject
        # Devices publish on the same few topics again and again: each topic is planned once.
        self._origins: dict[str, Origin] = {}  # of the ingest time below, per MQTT topic
        self._origins_ms = -1
        self._plans = functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)(functools.partial(plan_topic, self.routes, derived))

    def plan(self, topic: str) -> TopicPlan:
        """What ``topic`` says about its messages (rules are tried in configured order)."""
        return self._plans(topic)  # type: ignore[no-any-return]

    def route(self, topic: str) -> Route | None:
        """The rule ``topic`` falls under."""
        return self.plan(topic).route

    async def prepare(self, topics: Iterable[str]) -> None:
        """Register the schema under the Kafka topics ``$`` routes derive from ``topics`` and have
        not met yet, off the event loop (a registry away raises: nothing of the batch is acked)."""
        if not self._dynamic:
            return
        # One batch at a time: a later batch waits here until this one has produced, so the
        # records of one MQTT topic keep their order across the registration.
        async with self._registering:
            if missing := self._unregistered(topics):
                self._remember(await asyncio.to_thread(self._register, missing))

    def _unregistered(self, topics: Iterable[str]) -> list[str]:
        """Derived topics not met yet, as many as the bound leaves room for (convert() dead-letters the rest)."""
        room = self._derived_targets.max_topics - self._derived_count
        names: list[str] = []
        for topic in topics:
            name = self._derived(topic)
            if name and name not in self._encoders and name not in self._refused and name not in names:
                if len(names) == room:
                    break
                names.append(name)
        return names

    def _remember(self, answers: Mapping[str, RecordEncoder | SubjectRefused]) -> None:
        for name, answer in answers.items():
            self._derived_count += 1
            if isinstance(answer, SubjectRefused):
                self._refused[name] = str(answer)  # asked once: a device cannot make us ask again
            else:
                self._encoders[name] = answer

    def _derived(self, topic: str) -> str | None:
        plan = self.plan(topic)
        # An invalid or refused derived name has no target: convert() dead-letters its messages.
        return plan.target if plan.route is not None and plan.route.dynamic else None

    def convert(
        self,
        topic: str,
        payload: bytes,
        user_properties: Mapping[str, str],
        now_ms: int,
        headers: Sequence[tuple[str, bytes]] | None = None,
        plan: TopicPlan | None = None,
    ) -> list[KafkaRecord]:
        """Records for ``payload`` (key = device id, or WITHKEY's values, as the encoder writes keys);
        raises PayloadError/InvalidReading for input to dead-letter.

        ``headers``: :func:`message_headers` of the message, and ``plan``: :meth:`plan` of its
        topic, when the caller has them already.
        """
        self.limits.check_size(payload)  # first: an oversized payload is not even looked at
        plan = plan or self.plan(topic)
        route = plan.route
        if route is None:
            raise NoRoute(f"no routing rule matches MQTT topic {topic[:256]!r}")
        measurements = parse_payload(payload, route.settings.format, route.fields, self.limits)
        origin = self._origin(topic, now_ms, plan, user_properties)
        if headers is None:
            headers = plan.headers if not user_properties else message_headers(topic, user_properties)
        target = plan.target
        if target is None:
            raise InvalidReading(plan.problem)
        encoder = self._encoders.get(target) or self._encoder(target)
        records: list[KafkaRecord] = []
        document = _MISSING
        # User properties are in every record twice (header, attribute): the output limit counts both.
        overhead = plan.header_bytes if headers is plan.headers else header_bytes(headers)
        produced, max_output = 0, self.limits.max_output_bytes
        for measurement in measurements:
            reading = build_reading(measurement, origin)
            if not route.key_fields:
                key = encoder.encode_key(reading["device_id"])
            else:
                if document is _MISSING and any(path[0] not in reading for path in route.key_fields):
                    document = load_document(payload, route.settings.format)
                key = encoder.encode_key(record_key(route.key_fields, route.settings.key_delimiter, reading, document))
            value = encoder.encode(reading)
            produced += len(value) + len(key) + overhead
            if produced > max_output:
                self.limits.check_output(produced, len(records) + 1)
            records.append(KafkaRecord(target, key, value, headers))
        return records

    def _origin(self, topic: str, now_ms: int, plan: TopicPlan, user_properties: Mapping[str, str]) -> Origin:
        if user_properties:
            return Origin("MQTT", topic, now_ms, plan.device, plan.metric, None, dict(user_properties))
        # Without user properties a topic's messages of one batch (one ingest time) share their origin.
        if now_ms != self._origins_ms:
            self._origins.clear()
            self._origins_ms = now_ms
        origin = self._origins.get(topic)
        if origin is None:
            origin = self._origins[topic] = Origin("MQTT", topic, now_ms, plan.device, plan.metric)
        return origin

    def _encoder(self, target: str) -> RecordEncoder:
        """A topic :meth:`prepare` did not register: refused by the registry, past the bound (both
        raise, to dead-letter the message), or one a caller that does not prepare meets here."""
        if target not in self._refused:
            if self._derived_count >= self._derived_targets.max_topics:
                raise TooManyTargets(
                    f"Kafka topic {target!r} (INSERT INTO $) would make more than "
                    f"{self._derived_targets.max_topics} distinct Kafka topics derived (DERIVED_TOPICS__MAX_TOPICS)"
                )
            self._remember(self._register([target]))
        if target in self._refused:
            raise SubjectRefused(self._refused[target])
        return self._encoders[target]


def _one_encoder(
    encoder: RecordEncoder | Mapping[str, RecordEncoder], topics: Iterable[str]
) -> dict[str, RecordEncoder]:
    """Without a registry (tests): the one encoder for every topic; per-topic encoders cannot guess."""
    if isinstance(encoder, Mapping):
        raise RuntimeError(f"no encoder for Kafka topics {sorted(topics)} and no registry to register them")
    return dict.fromkeys(topics, encoder)


def record_key(paths: Sequence[FieldPath], delimiter: str, reading: Mapping[str, Any], document: Any) -> str:
    """KCQL WITHKEY: the values of ``paths`` joined by ``delimiter``, each from the reading, else the payload
    (the text the topic's encoder writes as the key, in the output's key format)."""
    return delimiter.join(_key_part(path, reading, document) for path in paths)


def _key_part(path: FieldPath, reading: Mapping[str, Any], document: Any) -> str:
    value: Any = reading if path[0] in reading else document
    for name in path:
        if not isinstance(value, Mapping) or name not in value:
            raise InvalidReading(f"WITHKEY field {'.'.join(path)} is not in the reading nor the payload")
        value = value[name]
    if value is None or isinstance(value, Mapping | list):
        raise InvalidReading(f"WITHKEY field {'.'.join(path)} is {json.dumps(value)[:64]}, not a value a key holds")
    return value if isinstance(value, str) else json.dumps(value)


def message_headers(topic: str, user_properties: Mapping[str, str]) -> list[tuple[str, bytes]]:
    """Kafka headers for a message: its MQTT topic, then its MQTT 5 user properties, each
    under :data:`USER_PROPERTY_PREFIX`.

    Without user properties the list depends on the topic alone, and devices publish on the
    same topics again and again: it is built once per topic (nothing changes these lists).
    """
    if not user_properties:
        return _topic_headers(topic)
    own = ((USER_PROPERTY_PREFIX + key, value.encode()) for key, value in user_properties.items())
    return [(TOPIC_HEADER, topic.encode()), *own]


@functools.lru_cache(maxsize=ROUTE_CACHE_SIZE)
def _topic_headers(topic: str) -> list[tuple[str, bytes]]:
    return [(TOPIC_HEADER, topic.encode())]
