"""faust codecs over ``fluxgate_core.serde``: the Confluent wire format, schemas in the registry.

faust calls a codec's ``_loads``/``_dumps`` for every value of a topic it is attached to,
so ``sensors.readings`` decodes with the same :class:`AvroDecoder` (writer schemas
fetched by id, cached) as every other consumer, and ``devices.status`` encodes with an
:class:`AvroEncoder` whose schema was registered at start. No second Avro stack.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import faust
from faust.serializers import codecs

from fluxgate_core.errors import RegistryError, SerializationError
from fluxgate_core.serde import AvroDecoder, AvroEncoder


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A value that is not a readable ``SensorReading``: counted and skipped by the agent.

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


class TableStates(faust.Codec):
    """The device table's values as JSON, as faust writes them; an entry that is not JSON
    loads as an :class:`Undecodable` instead of raising. faust's recovery stops at a value
    it cannot load and never becomes ready; the tracker drops such entries after the restore
    (``DeviceTracker._on_restored``)."""

    _json = codecs.get_codec("json")

    def _dumps(self, s: Any) -> bytes:
        return bytes(self._json.dumps(s))

    def _loads(self, s: bytes) -> Any:
        try:
            return self._json.loads(s)
        except ValueError as exc:
            return Undecodable(f"not JSON: {exc}")


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
