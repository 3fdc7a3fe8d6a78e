"""Settings fail at start naming the field; the codecs and the partitioner."""

from __future__ import annotations

import gc
import zlib
from typing import Any

import pytest
from faust.serializers import codecs

from fluxgate_core.errors import ConfigError, RegistryError, SerializationError
from fluxgate_core.settings import load_settings
from fluxgate_device_status.codec import (
    AvroDecoding,
    AvroEncoding,
    AwaitingRegistry,
    Undecodable,
    librdkafka_partitioner,
    pack,
    unpack,
    unpack_restored,
)
from fluxgate_device_status.device_state import Reading, apply_reading
from fluxgate_device_status.settings import StatusSettings


def test_defaults_match_the_local_stack() -> None:
    settings = StatusSettings()
    assert settings.status.silence_threshold_s == 60.0
    assert (settings.status.input_topic, settings.status.status_topic) == ("sensors.readings", "devices.status")
    assert settings.http.port == 9107


@pytest.mark.parametrize(
    ("name", "value"),
    [("FLUXGATE_STATUS_STATUS__SILENCE_THRESHOLD_S", "0"), ("FLUXGATE_STATUS_HTTP__PORT", "http")],
)
def test_a_bad_value_names_its_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=name):
        load_settings(StatusSettings)


def test_a_tick_longer_than_the_threshold_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUXGATE_STATUS_STATUS__SILENCE_THRESHOLD_S", "1")
    monkeypatch.setenv("FLUXGATE_STATUS_STATUS__TIMER_INTERVAL_S", "2")
    with pytest.raises(ConfigError, match="timer_interval_s must not exceed"):
        load_settings(StatusSettings)


class FakeDecoder:
    registry_up = True

    def decode(self, data: bytes) -> dict[str, Any]:
        if data == b"bad":
            raise SerializationError("not wire format")
        if not self.registry_up:
            raise RegistryError("schema registry unreachable fetching id 3")
        return {"device_id": data.decode()}


class FakeEncoder:
    def encode(self, record: dict[str, Any]) -> bytes:
        return str(record).encode()


def test_a_poison_value_becomes_undecodable_instead_of_ending_the_agent() -> None:
    codec = AvroDecoding(FakeDecoder())
    assert codec.loads(b"dev-1") == {"device_id": "dev-1"}
    assert codec.loads(b"bad") == Undecodable("not wire format")


def test_a_value_met_while_the_registry_is_away_waits_to_be_decoded_again_and_never_raises() -> None:
    decoder = FakeDecoder()
    decoder.registry_up = False
    waiting = AvroDecoding(decoder).loads(b"dev-2")
    assert isinstance(waiting, AwaitingRegistry) and "unreachable" in waiting.reason
    assert isinstance(waiting.again(), AwaitingRegistry)
    decoder.registry_up = True
    assert waiting.again() == {"device_id": "dev-2"}


def test_the_encoding_codec_uses_the_registered_encoder() -> None:
    assert AvroEncoding(FakeEncoder()).dumps({"a": 1}) == b"{'a': 1}"


def test_partitioner_is_librdkafkas_crc32() -> None:
    for key in (b"dev-1", b"sensor-42", "ü".encode()):
        assert librdkafka_partitioner(key, [0, 1, 2], [0, 1, 2]) == zlib.crc32(key) % 3
    assert librdkafka_partitioner(None, [0, 1, 2], [1]) == 1


def test_a_packed_state_is_the_json_faust_wrote_to_the_changelog_and_unpacks_to_itself() -> None:
    state = online_state()
    packed = pack(state)
    assert packed == bytes(codecs.get_codec("json").dumps(state))  # what older versions restore
    assert unpack(packed) == unpack_restored(packed) == state


def test_a_packed_state_costs_the_garbage_collector_nothing() -> None:
    """A dict of dicts is tracked; a million of them made each full collection seconds long."""
    state = online_state()
    assert gc.is_tracked(state) and not gc.is_tracked(pack(state))


@pytest.mark.parametrize(
    ("packed", "reason"),
    [
        (b"not json", "not JSON"),
        (b'{"device_id": "dev-1"}', "no 'status'"),
        (b"[1, 2]", "not an object: list"),
    ],
)
def test_a_restored_entry_that_is_not_a_state_says_why(packed: bytes, reason: str) -> None:
    unreadable = unpack_restored(packed)
    assert isinstance(unreadable, Undecodable) and unreadable.reason.startswith(reason)


def online_state() -> dict[str, Any]:
    reading = Reading("dev-1", "temperature", 21.5, "Cel", 995, 1_000, "MQTT", "sensors/dev-1", 0, 5)
    return apply_reading(None, reading, 1_010)[0]
