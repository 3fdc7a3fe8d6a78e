"""A gateway's record keys as Kafka Connect's key converters write them (OUTPUT__KEY_FORMAT): StringConverter's
UTF-8 text (the default, unchanged), JsonConverter's JSON string (envelope or bare), and AvroConverter's Avro
string registered under ``<topic>-key``; chosen in one place (``gateway.with_key``) for every topic, at start
and for a target met at run time."""

from __future__ import annotations

import io
import json
import struct
from types import SimpleNamespace
from typing import Any

import fastavro
import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from fluxgate_core import gateway
from fluxgate_core.errors import SerializationError
from fluxgate_core.json_records import ConnectJsonEncoder, KeyedEncoder, OutputSettings, json_key_encoder
from fluxgate_core.schemas import SENSOR_READING, schema_dict
from fluxgate_core.serde import AvroEncoder
from fluxgate_core.settings import KafkaSettings, RegistrySettings

KEYS = ["dev-1", 'a "quoted"\\key', "capteur-é-温度", "tab\tnew\nline"]
READING = {"device_id": "dev-1", "metric": "temperature", "value": 21.0, "unit": None, "event_time": 1,
           "ingest_time": 2, "source_protocol": "MQTT", "source": "s/dev-1", "sequence": None,
           "attributes": {}}  # fmt: skip


class Registry:
    """A registry client that gives each subject its own id and refuses the subjects in ``refuse``."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.registered: dict[str, str] = {}
        self.refuse = refuse

    def set_compatibility(self, subject_name: str, level: str) -> None:
        return None

    def register_schema(self, subject: str, schema: Any) -> int:
        if subject in self.refuse:
            raise SchemaRegistryError(409, 409, f"no, {subject}")
        self.registered[subject] = schema.schema_str
        return 100 + len(self.registered)


def value_encoder() -> ConnectJsonEncoder:
    return ConnectJsonEncoder(schema_dict(SENSOR_READING))


@pytest.mark.parametrize("key", KEYS)
def test_string_keys_are_the_utf8_text_by_default(key: str) -> None:
    output = OutputSettings()
    assert (output.key_format, output.key_schemas_enable, output.uses_registry) == ("string", True, True)
    encoder = value_encoder()
    assert gateway.with_key(encoder, output) is encoder  # no wrapper: the value encoders write these keys
    assert encoder.encode_key(key) == key.encode("utf-8")
    assert AvroEncoder(schema_dict(SENSOR_READING), schema_id=1).encode_key(key) == key.encode("utf-8")


@pytest.mark.parametrize("key", KEYS)
def test_json_keys_with_schemas_are_jsonconverters_envelope_of_a_string(key: str) -> None:
    keyed = gateway.with_key(value_encoder(), OutputSettings(key_format="json"))
    written = keyed.encode_key(key)
    # What JsonConverter.fromConnectData writes for Schema.STRING_SCHEMA: compact, the schema first.
    assert (
        written
        == b'{"schema":{"type":"string","optional":false},"payload":'
        + json.dumps(key, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        + b"}"
    )
    assert json.loads(written) == {"schema": {"type": "string", "optional": False}, "payload": key}
    assert keyed.encode(READING) == value_encoder().encode(READING)  # the value as before


@pytest.mark.parametrize("key", KEYS)
def test_json_keys_without_schemas_are_the_bare_json_string(key: str) -> None:
    keyed = gateway.with_key(value_encoder(), OutputSettings(key_format="json", key_schemas_enable=False))
    assert json.loads(keyed.encode_key(key)) == key
    assert keyed.encode_key("dev-1") == b'"dev-1"'


def test_a_key_no_json_holds_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError, match="record key is not JSON"):
        json_key_encoder()("\ud800")  # a lone surrogate (a JSON payload's "\ud800" device id)


@pytest.mark.parametrize("key", KEYS)
def test_avro_keys_are_a_registered_avro_string_in_the_wire_format(key: str) -> None:
    registry = Registry()
    keyed = gateway.with_key(value_encoder(), OutputSettings(key_format="avro"), "readings", registry, "BACKWARD")  # type: ignore[arg-type]
    written = keyed.encode_key(key)
    assert registry.registered == {"readings-key": '"string"'}
    magic, schema_id = struct.unpack(">bI", written[:5])
    assert (magic, schema_id) == (0, 101)
    assert fastavro.schemaless_reader(io.BytesIO(written[5:]), "string") == key  # what AvroConverter reads


def test_a_keyed_encoder_hands_each_call_to_its_own_function() -> None:
    keyed = KeyedEncoder(value_encoder(), lambda key: b"<" + key.encode() + b">")
    assert (keyed.encode_key("d"), keyed.encode(READING)) == (b"<d>", value_encoder().encode(READING))


def test_targets_met_at_run_time_register_their_avro_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``$`` target: its key subject registered, or refused like its value subject (dead-lettered)."""
    registry = Registry(refuse=frozenset({"other-key"}))
    monkeypatch.setattr(gateway, "registry_client", lambda settings: registry)
    output = OutputSettings(value_format="json", key_format="avro")
    answers = gateway.register_targets(RegistrySettings(), ["ok", "other"], output=output)
    assert registry.registered == {"ok-key": '"string"'}  # JSON values: no value subject
    assert answers["ok"].encode_key("d") == b"\x00\x00\x00\x00\x65" + b"\x02d"  # type: ignore[union-attr]
    assert isinstance(answers["other"], gateway.SubjectRefused) and "'other-key'" in str(answers["other"])


def test_json_keys_met_at_run_time_need_no_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway, "registry_client", lambda settings: pytest.fail("the registry was contacted"))
    output = OutputSettings(value_format="string", key_format="json", key_schemas_enable=False)
    answers = gateway.register_targets(RegistrySettings(), ["t"], output=output)
    assert answers["t"].encode_key("d") == b'"d"'  # type: ignore[union-attr]


class Producer:
    async def start(self) -> None:
        return None


@pytest.mark.parametrize(
    ("key_format", "registered"), [("json", {}), ("avro", {"a-key": '"string"', "b-key": '"string"'})]
)
async def test_the_output_keys_every_topic_and_asks_the_registry_only_for_avro_keys(
    monkeypatch: pytest.MonkeyPatch, key_format: Any, registered: dict[str, str]
) -> None:
    registry, checked = Registry(), []
    monkeypatch.setattr(gateway, "verify_kafka", lambda kafka, service, prefix, topics: None)
    monkeypatch.setattr(gateway, "verify_registry", lambda settings, prefix: checked.append(prefix))
    monkeypatch.setattr(gateway, "registry_client", lambda settings: registry)
    monkeypatch.setattr(gateway, "fit_batches_to_topics", lambda config, topics: config)
    monkeypatch.setattr(gateway, "make_producer", lambda config, max_in_flight: Producer())
    monkeypatch.setattr(gateway, "TopicWatch", lambda kafka, service, topics: SimpleNamespace(start=lambda: topics))
    output = await gateway.open_gateway_output(
        "demo", KafkaSettings(), RegistrySettings(), ["b", "a"], "dlq", 7, env_prefix="FX_",
        output=OutputSettings(value_format="json", key_format=key_format),
    )  # fmt: skip
    assert registry.registered == registered and checked == (["FX_"] if registered else [])
    assert sorted(output.encoders) == ["a", "b"]
    assert all(isinstance(encoder, KeyedEncoder) for encoder in output.encoders.values())
