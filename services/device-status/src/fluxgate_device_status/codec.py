"""faust codecs over ``fluxgate_core.serde``: the Confluent wire format, schemas in the registry;
and the device table's values, packed.

faust calls a codec's ``_loads``/``_dumps`` for every value of a topic it is attached to,
so ``sensors.readings`` decodes with the same :class:`AvroDecoder` (writer schemas
fetched by id, cached) as every other consumer, and ``devices.status`` encodes with an
:class:`AvroEncoder` whose schema was registered at start. No second Avro stack.

The table's values are bytes (faust's raw codec): each state packed as JSON by the tracker
(``pack``), read back where it is used (``unpack``).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import faust
from faust.utils import json as faust_json
from mode.utils.compat import want_bytes

from fluxgate_core.errors import RegistryError, SerializationError
from fluxgate_core.serde import AvroDecoder, AvroEncoder
from fluxgate_device_status.device_state import State, unreadable_because


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A value that is not a readable ``SensorReading`` (counted and skipped by the agent), or
    a restored table entry that is not a device state (left out after the restore).

    faust throws a codec's exception into the agent's stream, which would end the agent
    for one bad record; a poison record must cost that record only.
    """

    reason: str


@dataclass(frozen=True, slots=True)
class AwaitingRegistry:
    """A value whose writer schema the registry was asked for and did not give (it is down
    or out of reach): a good reading, maybe, decoded again by the agent until it answers.

    Raising instead would let faust acknowledge the record before any agent saw it (its
    conductor acks a value that fails to load, then throws the error into the stream): the
    reading would be lost and the agent would end.
    """

    reason: str
    again: Callable[[], Any]  # the value decoded again: a record, Undecodable or AwaitingRegistry


class AvroDecoding(faust.Codec):
    """Decodes wire-format values; refuses to encode (this service never writes readings)."""

    def __init__(self, decoder: AvroDecoder) -> None:
        super().__init__()
        self._decoder = decoder

    def _loads(self, s: bytes) -> Any:
        try:
            return self._decoder.decode(s)
        except RegistryError as exc:  # not the record's fault: it is read again, not skipped
            return AwaitingRegistry(str(exc), partial(self._loads, s))
        except SerializationError as exc:
            return Undecodable(str(exc))

    def _dumps(self, s: Any) -> bytes:
        raise TypeError("this codec only decodes")


class AvroEncoding(faust.Codec):
    """Encodes dicts of one registered record type in the wire format."""

    def __init__(self, encoder: AvroEncoder) -> None:
        super().__init__()
        self._encoder = encoder

    def _dumps(self, s: Any) -> bytes:
        return self._encoder.encode(s)

    def _loads(self, s: bytes) -> Any:
        raise TypeError("this codec only encodes")


def pack(state: State) -> bytes:
    """A device's state as the table holds it, in memory and in its changelog: its JSON.

    Held as a dict (of dicts: its metrics), every device was two objects the garbage
    collector tracks, and each full collection walked them all while holding the GIL:
    0.7 s at 157,000 devices, growing with the fleet, so the consumer's heartbeat thread
    stalled with it (bench/results/2026-11-29-device-status-gc.md). Bytes are not tracked.
    The JSON is faust's, as it wrote the changelog before: the same bytes either way. It is
    copied once: orjson's bytes keep the 4 KiB it allocated to write them (4,121 B held per
    393-byte state, against 452 B for the copy)."""
    return bytes(memoryview(want_bytes(faust_json.dumps(state))))


def unpack(packed: bytes) -> State:
    """A state this service packed (the restore checked each entry: ``unpack_restored``)."""
    state: State = faust_json.loads(packed)  # type: ignore[arg-type]  # orjson and json.loads take bytes too
    return state


def unpack_restored(packed: Any) -> State | Undecodable:
    """A restored changelog entry as a state, or why it is not one: written by something
    else, or by a version that kept other fields."""
    try:
        value = faust_json.loads(packed)
    except (TypeError, ValueError) as exc:
        return Undecodable(f"not JSON: {exc}")
    reason = unreadable_because(value)
    return value if reason is None else Undecodable(reason)


def librdkafka_partitioner(key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
    """librdkafka's default ``consistent_random`` partitioner (CRC32 of the key), which the
    gateways' producers use for ``sensors.readings``.

    faust routes ``GET /devices/{id}`` to the instance owning the key's partition, computed
    with the producer's partitioner; aiokafka's default (murmur2, Java's) would pick another
    partition than the one the device's readings, and so its table entry, are on.
    """
    if key is None:
        return random.choice(list(available or all_partitions))
    return sorted(all_partitions)[zlib.crc32(key) % len(all_partitions)]
