"""The consumer side of a consumer-driven contract on an Avro topic, as a Pact V4 message pact.

A consumer describes itself as a :class:`MessagePact`: its name, the producer, the fields
its ``consumed.py`` declares and an example record. This module builds the pact from the
declaration with matchers rather than literal values (``type`` for strings, ``number`` for
doubles, ``integer`` for ints, longs and epoch-ms timestamps, a regex over the symbols for
enums, base64 text for bytes, "same type or null" for nullable fields), hands the example to the consumer's own
half of the test, and keeps the committed copy in ``contracts-tests/pacts/`` honest. The
producers verify those copies against what their real serializers write.

Regenerate the committed pacts after changing a declaration with ``FLUXGATE_UPDATE_PACTS=1``.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fastavro
from pact import Pact, match

from fluxgate_core.contract import AvroType, ConsumedFields, is_nullable, kind

UPDATE_VARIABLE = "FLUXGATE_UPDATE_PACTS"
READINGS_MESSAGE = "a sensor reading on sensors.readings"
READING_EXAMPLE: Mapping[str, Any] = {
    "device_id": "Sensor4",
    "metric": "temperature",
    "value": 23.6,
    "unit": "Cel",
    "event_time": 1486997194029,
    "ingest_time": 1486997194112,
    "source_protocol": "MQTT",
    "source": "sensors/Sensor4/temperature",
    "sequence": 42,
}
"""The example ``SensorReading`` of every pact on ``sensors.readings``."""
# Consumers compare ``metric`` with configured names as is, so they rely on the gateways'
# normalisation (lower case, aliases resolved), not merely on a string.
READING_PATTERNS: Mapping[str, str] = {"metric": r"^[a-z][a-z0-9_.\-]{0,63}$"}
COAP_MESSAGES_MESSAGE = "a CoAP message on a coap-ingest topic (output_format coap-message)"
COAP_MESSAGE_EXAMPLE: Mapping[str, Any] = {
    "ingest_time": 1486997194029,
    "message_id": 4711,
    "type": "CON",
    "code": "2.05",
    "raw_code": 69,
    "source": "127.0.0.1:5633",
    "token": "c0ffee01",
    "content_format": 50,
    "observe": 17,
    "payload": base64.b64encode(b'{"temperature": 23.6}').decode(),
}
"""The example ``CoapMessage`` of the pacts on coap-ingest's coap-message topics, bytes as base64."""
# Bytes travel in the JSON as Kafka Connect's JsonConverter writes them: standard base64, padded.
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"

# Avro resolution promotes int/long/float writers to double: any JSON number will do for a
# double; timestamps and counts must stay whole numbers.
MATCHERS: dict[str, Callable[[Any], Any]] = {
    "string": match.type,
    "double": match.number,
    "int": match.int,
    "long": match.int,
    "timestamp-millis": match.int,
    "bytes": lambda example: match.regex(example, regex=BASE64),
}
NULL_OR_SAME_TYPE = {"combine": "OR", "matchers": [{"match": "type"}, {"match": "null"}]}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

ConsumerHalf = Callable[[dict[str, Any]], None]
"""Takes the decoded record the consumer sees (timestamps as aware datetimes); fails
(assertion) when the consumer cannot use it."""


def pacts_dir() -> Path:
    """``contracts-tests/pacts`` of the source checkout this module runs from."""
    for parent in Path(__file__).resolve().parents:
        if (candidate := parent / "contracts-tests" / "pacts").is_dir():
            return candidate
    raise FileNotFoundError("no contracts-tests/pacts above this checkout")


@dataclass(frozen=True)
class MessagePact:
    """One consumer's pact with one producer: ``<consumer>-<provider>.json``, written from ``fields``."""

    consumer: str  # e.g. "device-status"
    provider: str  # e.g. "mqtt-proxy"
    message: str  # what the message is, e.g. READINGS_MESSAGE
    fields: ConsumedFields  # the consumer's ``consumed.CONSUMED_FIELDS``
    example: Mapping[str, Any]  # a value for every declared field, timestamps as epoch ms
    purpose: str  # the pact's first comment: what the consumer does with the fields
    declared_in: str  # the module holding the declaration, named in comments and messages
    patterns: Mapping[str, str] = field(default_factory=dict)  # field -> regex its strings must match

    @property
    def file_name(self) -> str:
        return f"{self.consumer}-{self.provider}.json"

    def build(self) -> Pact:
        """The consumer's expectations of the provider's records, from its declaration."""
        pact = Pact(self.consumer, self.provider).with_specification("V4")
        body = {name: self._matcher(name, avro) for name, avro in self.fields.items()}
        nullable = {f"$.{name}": NULL_OR_SAME_TYPE for name, avro in self.fields.items() if is_nullable(avro)}
        interaction = (
            pact.upon_receiving(self.message, "Async")
            .with_body(body, "application/json")
            .with_matching_rules({"body": nullable})
            .add_text_comment(self.purpose)
            .add_text_comment(f"See {self.declared_in}. Contents: the decoded record, timestamps as epoch ms.")
        )
        if any(kind(avro) == "bytes" for avro in self.fields.values()):
            interaction.add_text_comment("Bytes as standard base64, as Kafka Connect's JsonConverter writes them.")
        return pact

    def _matcher(self, name: str, avro: AvroType) -> Any:
        example = self.example[name]
        if is_nullable(avro):
            return example  # its rule (type or null) goes in with_matching_rules: the DSL cannot say OR
        if name in self.patterns:
            return match.regex(example, regex=self.patterns[name])
        if isinstance(avro, dict) and avro.get("type") == "enum":
            return match.regex(example, regex=f"^({'|'.join(map(re.escape, avro['symbols']))})$")
        return MATCHERS[kind(avro)](example)

    def decoded(self, body: str | bytes | None) -> dict[str, Any]:
        """A pact message as the record a consumer decodes: timestamps as aware datetimes,
        checked with fastavro against the declared fields."""
        assert body is not None, "the message has no contents"
        message: dict[str, Any] = json.loads(body)
        record = {name: self._as_avro(name, value) for name, value in message.items()}
        view = {
            "type": "record",
            "name": "Consumed",
            "fields": [{"name": n, "type": t} for n, t in self.fields.items()],
        }
        fastavro.validation.validate(record, fastavro.parse_schema(view), raise_errors=True)
        return record

    def verify(self, consumer_half: ConsumerHalf) -> None:
        """Hand the pact's example message, decoded, to ``consumer_half``."""

        def handler(body: str | bytes | None, metadata: dict[str, object]) -> None:
            consumer_half(self.decoded(body))

        self.build().verify(handler, "Async")

    def check_committed(self, scratch: Path) -> None:
        """Fail unless the committed pact is the one the declaration makes (the pact-rust
        version stamp aside); with ``FLUXGATE_UPDATE_PACTS=1``, rewrite it first."""
        committed = pacts_dir() / self.file_name
        if os.environ.get(UPDATE_VARIABLE) == "1":
            self.build().write_file(committed.parent, overwrite=True)
        self.build().write_file(scratch, overwrite=True)
        assert committed.is_file() and _comparable(committed) == _comparable(scratch / self.file_name), (
            f"contracts-tests/pacts/{self.file_name} no longer matches what {self.declared_in} declares; "
            f"regenerate with {UPDATE_VARIABLE}=1 and commit it"
        )

    def _as_avro(self, name: str, value: Any) -> Any:
        """A JSON value as Avro decodes it: epoch ms as a datetime, base64 text as bytes."""
        declared = kind(self.fields[name]) if name in self.fields else None
        if declared == "timestamp-millis":
            return _as_datetime(value)
        if declared == "bytes" and isinstance(value, str):
            return base64.b64decode(value, validate=True)
        return value


def readings_pact(consumer: str, provider: str, fields: ConsumedFields, purpose: str, declared_in: str) -> MessagePact:
    """A consumer's pact with one gateway (mqtt-proxy, coap-ingest) on ``sensors.readings``."""
    return MessagePact(
        consumer, provider, READINGS_MESSAGE, fields, READING_EXAMPLE, purpose, declared_in, READING_PATTERNS
    )


def coap_messages_pact(consumer: str, fields: ConsumedFields, purpose: str, declared_in: str) -> MessagePact:
    """A consumer's pact with coap-ingest on the topic of its ``CoapMessage`` records."""
    return MessagePact(
        consumer, "coap-ingest", COAP_MESSAGES_MESSAGE, fields, COAP_MESSAGE_EXAMPLE, purpose, declared_in
    )


def _as_datetime(epoch_ms: Any) -> Any:
    return _EPOCH + timedelta(milliseconds=epoch_ms) if isinstance(epoch_ms, int) else epoch_ms


def _comparable(pact_file: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(pact_file.read_text(encoding="utf-8"))
    document["metadata"].pop("pactRust", None)
    return document
