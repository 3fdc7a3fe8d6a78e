"""``HazelcastSink``: batched, non-blocking writes into ringbuffers, queues, maps and reliable topics.

* ``RING_BUFFER``: ``add_all``, at most 1000 items a call (the protocol's limit).
* ``QUEUE``: ``add_all`` per 1000 items; when the queue has no room for the whole chunk,
  ``offer`` one item at a time, each waiting ``queue_offer_timeout_ms``. An offer that
  times out is backpressure: the rest of the batch is reported as retriable failures and
  the runner writes it again after a backoff, pausing the partition meanwhile. Nothing is
  dropped.
* ``IMAP``: ``put_all`` keyed by the statement's PK values (``Sensor4|temperature|1486997160000``);
  with ``TTL`` (seconds; milliseconds with ``sink.semantics=stream-reactor``), ``set`` with that
  TTL per entry, concurrently.
* ``RELIABLE_TOPIC``: ``publish_all``, 1000 a call.

Only the map is idempotent; for the others see ``written_offsets.py``.

A request the cluster refuses as a whole, for good (a member's ClassCastException on an
indexed map, a value it cannot take ...), may be one item's fault: the rest of the group is
then written again in halves, in order, down to the item refused alone, which fails with
the member's reason while the others are written. Not a refusal of the client itself
(credentials, permissions): fewer items change nothing about those.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, cast

import structlog
from hazelcast import errors as hz
from hazelcast.protocol.codec import ringbuffer_add_all_codec as add_all_codec
from hazelcast.proxy.ringbuffer import OVERFLOW_POLICY_FAIL, OVERFLOW_POLICY_OVERWRITE

from fluxgate_hazelcast_persister.connect import connect
from fluxgate_hazelcast_persister.settings import ConnectionSettings
from fluxgate_hazelcast_persister.structures import Semantics, Structure, check_statements, structure_of, ttl_seconds
from fluxgate_hazelcast_persister.values import (
    Value,
    add_all_json_request,
    json_bytes,
    json_data,
    json_documents,
    text_json,
    value_of,
)
from fluxgate_hazelcast_persister.written_offsets import already_written, record_key, written_through
from fluxgate_sink.errors import KcqlError, SinkError, StoreUnavailable
from fluxgate_sink.kcql import Statement
from fluxgate_sink.sink import ItemFailure, Sink, SinkItem

log = structlog.get_logger(__name__)
MAX_BATCH = 1000  # items per add_all/publish_all: the client refuses more
OVERFLOW_PROPERTY = "ringbuffer.overflow"  # PROPERTIES('ringbuffer.overflow'='FAIL'): back off instead of overwriting
ClientFactory = Callable[[ConnectionSettings], Awaitable[Any]]
# The cluster or the connection is away: the same write may succeed later as it is.
UNAVAILABLE = (
    hz.TargetDisconnectedError,
    hz.HazelcastClientNotActiveError,
    hz.ClientOfflineError,
    hz.OperationTimeoutError,
    hz.HazelcastTimeoutError,
    hz.HazelcastInstanceNotActiveError,
    hz.TargetNotMemberError,
    hz.MemberLeftError,
    hz.RetryableHazelcastError,
    hz.RetryableIOError,
    hz.HazelcastIOError,
    hz.HazelcastOverloadError,
    hz.NoDataMemberInClusterError,
    hz.PartitionMigratingError,
    hz.WrongTargetError,
    hz.IndeterminateOperationStateError,
    hz.SplitBrainProtectionError,
    ConnectionError,
    TimeoutError,
)


# Refusals of the client, not of any item: splitting the request cannot help.
NOT_ABOUT_ITEMS = (hz.AccessControlError, hz.AuthenticationError, hz.ClientNotAllowedInClusterError)


class Backpressure(SinkError):
    """A bounded queue (or a ringbuffer with the FAIL overflow policy) has no room now."""

    retriable = True


@dataclass(slots=True)
class _Group:
    """The items of one batch bound for one structure, in batch order."""

    structure: Structure
    target: str
    statement: Statement  # the first item's; the group's items share its structure, target and format
    indices: list[int] = field(default_factory=list)
    values: list[Value] = field(default_factory=list)  # of ``indices``, once encoded (see ``framed``)
    refused: list[ItemFailure] = field(default_factory=list)  # items with no value the store can hold
    written: int = 0  # how many of ``indices`` (a prefix) are in the store
    error: SinkError | None = None
    keys: dict[int, str] = field(default_factory=dict)  # item index -> its offset record's key (appended)
    text: bool = False  # StringConverter values: each item's consumed text is what is stored (text_json)
    as_string: bool = False  # JSON as a java.lang.String, not a HazelcastJsonValue (Stream-Reactor's; values.py)

    @property
    def framed(self) -> bool:
        """A ringbuffer of JSON: its values are the JSON itself (bytes), which the sink frames
        into the request at once (:func:`add_all_json_request`); every other group's are what
        the client sends (:func:`value_of`)."""
        return self.structure is Structure.RING_BUFFER and self.statement.format != "AVRO"

    def encode(self, items: Sequence[SinkItem]) -> None:
        """Values of the items to write; the ones that cannot be encoded are refused, not written."""
        if self.text:
            # StringConverter values: the consumed text, not the document read from it, as one JSON string,
            # what lensesio/stream-reactor's kafka-connect-hazelcast writers/Writer.scala stores
            # (toJson(record).toString: SimpleJsonConverter.scala's TextNode); see values.text_json.
            texts = [text_json(items[index].source.value) for index in self.indices]
            self.values = list(texts) if self.framed else [json_data(t, self.as_string) for t in texts]
            return
        try:  # the usual case, every value encodes: at once, no bookkeeping per item
            if self.framed:
                self.values = list(json_documents([items[index].document for index in self.indices]))
            else:
                self.values = [value_of(items[index], self.as_string) for index in self.indices]
            return
        except SinkError:
            self.values = []
        self.encode_each(items)

    def encode_each(self, items: Sequence[SinkItem]) -> None:
        """:meth:`encode` item by item, refusing the ones that do not encode."""
        kept: list[int] = []
        for index in self.indices:
            try:
                self.values.append(_json_of(items[index]) if self.framed else value_of(items[index], self.as_string))
            except SinkError as exc:
                self.refused.append(ItemFailure(index, exc))
                continue
            kept.append(index)
        self.indices = kept


class HazelcastSink(Sink):
    """Writes :class:`SinkItem` batches with the asyncio ``hazelcast-python-client``."""

    name = "hazelcast"

    def __init__(
        self,
        settings: ConnectionSettings,
        group: str,
        client_factory: ClientFactory = connect,
        semantics: Semantics = "fluxgate",
        text_values: bool = False,
    ) -> None:
        self._settings = settings
        self._semantics: Semantics = semantics
        # sink.value_format=string (StringConverter): the consumed text is stored, as one JSON string.
        self.stores_whole_text = text_values
        self._offsets_map = settings.offsets_map_prefix + group
        self._factory = client_factory
        self._client: Any = None
        self._proxies: dict[tuple[Structure, str], Any] = {}
        self._closed = False

    async def setup(self, statements: Sequence[Statement]) -> None:
        """Check the statements, connect, and say where each one writes; fail fast."""
        check_statements(statements, self._semantics)
        await self._connect()
        for statement in statements:
            structure = structure_of(statement, self._semantics)
            if statement.ttl is not None and structure is not Structure.IMAP:
                # Stream-Reactor's semantics only (ours refuse it): its writers but MapWriter.scala ignore TTL.
                log.warning("hazelcast.ttl_ignored", target=statement.target, structure=structure.value)
            if self.stores_whole_text and not statement.selects_everything:
                # Stream-Reactor's semantics only (ours refuse it, structures.check_value_format): its
                # ConverterUtil.scala `convert` returns a value that is not a Struct as it is.
                log.warning("hazelcast.projection_not_applied", target=statement.target, statement=statement.text)
            log.info(
                "hazelcast.target",
                target=statement.target,
                structure=structure.value,
                format=statement.format or "JSON",
                topic=statement.topic,
            )

    async def _connect(self) -> None:
        members = ", ".join(self._settings.members)
        try:
            self._client = await self._factory(self._settings)
        except (hz.HazelcastError, OSError) as exc:  # a refusal is SettingRefused (see connect.py)
            raise StoreUnavailable(f"Hazelcast at {members} does not answer: {_describe(exc)}") from exc
        self._proxies.clear()
        log.info("hazelcast.connected", members=members, cluster=self._settings.cluster_name)

    def needs_ids(self, statement: Statement) -> bool:
        """Only an IMap keys by the id. A STOREAS that names no structure says yes here and is
        refused by ``setup``, where every statement is checked, with its message."""
        try:
            return structure_of(statement, self._semantics).idempotent
        except KcqlError:
            return True

    async def write_batch(self, items: Sequence[SinkItem]) -> list[ItemFailure]:
        groups = _groups(items, self._semantics, self.stores_whole_text)
        appended = [g for g in groups if not g.structure.idempotent]
        for group in appended:
            group.keys = _record_keys(group, items)
        recorded = await self._read_offsets(appended) if appended else {}
        for group in appended:
            if _may_hold_written(group, items, recorded):
                group.indices = [
                    i for i in group.indices if not already_written(items[i].source.offset, group.keys[i], recorded)
                ]
        for group in groups:
            group.encode(items)
        await asyncio.gather(*(self._write_group(group, items) for group in groups if group.indices))
        failed = [g for g in groups if g.error is not None]
        nothing_written = not any(g.written for g in groups if g.error is None or g.written)
        if failed and nothing_written and all(isinstance(g.error, StoreUnavailable) for g in failed):
            # Nothing of the batch went in: the runner's outage path (pause, ping, write again).
            raise failed[0].error or StoreUnavailable("Hazelcast unavailable")
        await self._record_offsets(items, appended)
        for group in failed:
            if isinstance(group.error, SinkError) and isinstance(group.error.__cause__, NOT_ABOUT_ITEMS):
                raise group.error  # the client is refused, not an item: stop, dead-letter nothing
        refused = [failure for group in groups for failure in group.refused]
        return refused + [
            ItemFailure(index, group.error)
            for group in failed
            if group.error is not None
            for index in group.indices[group.written :]
        ]

    async def _write_group(self, group: _Group, items: Sequence[SinkItem]) -> None:
        try:
            proxy = await self._proxy(group.structure, group.target)
            try:
                await self._write(group, proxy, items)
            except Exception as exc:
                refusal = _as_sink_error(exc, group)
                if refusal.retriable or isinstance(_leaf(exc), NOT_ABOUT_ITEMS):
                    raise
                await self._write_rest_around(group, proxy, items, refusal)
        except Exception as exc:
            group.error = _as_sink_error(exc, group)
            log.warning(
                "hazelcast.write_failed",
                target=group.target,
                structure=group.structure.value,
                written=group.written,
                of=len(group.indices),
                error=str(group.error),
            )

    async def _write(self, group: _Group, proxy: Any, items: Sequence[SinkItem]) -> None:
        values = group.values
        if group.structure is Structure.IMAP:
            await self._put(proxy, group.statement, [items[i].id for i in group.indices], values)
            group.written = len(values)
            return
        for start in range(0, len(values), MAX_BATCH):
            chunk = values[start : start + MAX_BATCH]
            if group.structure is Structure.RING_BUFFER:
                await _add_to_ringbuffer(proxy, chunk, group)
            elif group.structure is Structure.QUEUE:
                await self._add_to_queue(proxy, chunk, group)
            else:
                await proxy.publish_all(chunk)
            group.written = start + len(chunk)

    async def _write_rest_around(
        self, group: _Group, proxy: Any, items: Sequence[SinkItem], refusal: SinkError
    ) -> None:
        """The group's items past its written prefix, refused as a whole with ``refusal``,
        written in halves; ``group`` then holds the written ones in order (the refused ones
        move to ``group.refused``). A retriable error on the way leaves the rest unwritten."""
        rest = list(zip(group.indices[group.written :], group.values[group.written :], strict=True))
        del group.indices[group.written :], group.values[group.written :]
        log.warning("hazelcast.request_refused", target=group.target, items=len(rest), error=str(refusal))
        try:
            await self._halves(group, proxy, items, rest, refusal)
        except Exception:
            done = set(group.indices) | {failure.index for failure in group.refused}
            unwritten = [(index, value) for index, value in rest if index not in done]
            group.indices.extend(index for index, _ in unwritten)
            group.values.extend(value for _, value in unwritten)
            raise

    async def _halves(
        self, group: _Group, proxy: Any, items: Sequence[SinkItem], refused: list[tuple[int, Value]], why: SinkError
    ) -> None:
        """Write ``refused`` (refused as a whole with ``why``) in two halves, each in its turn,
        down to the one item refused alone."""
        if len(refused) == 1:
            group.refused.append(ItemFailure(refused[0][0], why))
            return
        half = len(refused) // 2
        for part in (refused[:half], refused[half:]):
            trial = _Group(
                group.structure,
                group.target,
                group.statement,
                [i for i, _ in part],
                [v for _, v in part],
                text=group.text,
            )
            try:
                await self._write(trial, proxy, items)
            except Exception as exc:
                error = _as_sink_error(exc, group)
                _add_written(group, part[: trial.written])
                if error.retriable or isinstance(_leaf(exc), NOT_ABOUT_ITEMS):
                    raise
                await self._halves(group, proxy, items, part[trial.written :], error)
            else:
                _add_written(group, part)

    async def _put(self, proxy: Any, statement: Statement, keys: list[str], values: list[Value]) -> None:
        ttl = ttl_seconds(statement, self._semantics)
        if ttl is None:
            entries = list(zip(keys, values, strict=True))
            for start in range(0, len(entries), MAX_BATCH):
                await proxy.put_all(dict(entries[start : start + MAX_BATCH]))
            return
        await asyncio.gather(*(proxy.set(key, value, ttl) for key, value in zip(keys, values, strict=True)))

    async def _add_to_queue(self, proxy: Any, chunk: list[Value], group: _Group) -> None:
        try:
            await proxy.add_all(chunk)
            return
        except hz.IllegalStateError:  # "Queue full": no room for the whole chunk, item by item then
            pass
        timeout = self._settings.queue_offer_timeout_ms / 1000
        done = group.written
        for value in chunk:
            if not await proxy.offer(value, timeout):
                raise Backpressure(f"queue {group.target} full: no room within {timeout:g}s")
            done += 1
            group.written = done

    async def _proxy(self, structure: Structure, name: str) -> Any:
        proxy = self._proxies.get((structure, name))
        if proxy is None:
            client = self._require_client()
            getter = {
                Structure.RING_BUFFER: client.get_ringbuffer,
                Structure.QUEUE: client.get_queue,
                Structure.IMAP: client.get_map,
                Structure.RELIABLE_TOPIC: client.get_reliable_topic,
            }[structure]
            proxy = self._proxies[(structure, name)] = await getter(name)
        return proxy

    async def _read_offsets(self, groups: list[_Group]) -> dict[str, int]:
        keys = {key for g in groups for key in g.keys.values()}
        try:
            offsets = await self._offsets()
            found = await offsets.get_all(list(keys))
        except Exception as exc:
            raise _as_unavailable(exc, "reading the offset record") from exc
        return {str(k): int(v) for k, v in found.items()}

    async def _record_offsets(self, items: Sequence[SinkItem], groups: list[_Group]) -> None:
        """Best effort: a record that fails to be written costs at most a repeated batch, while
        raising would repeat it for sure (the runner writes the whole batch again)."""
        through: dict[str, int] = {}
        for group in groups:
            keys = list(map(group.keys.__getitem__, group.indices))
            offsets = list(map(_offset, map(items.__getitem__, group.indices)))
            refused: dict[str, int] = {}
            for failure in group.refused:
                key = group.keys[failure.index]
                offset = items[failure.index].source.offset
                refused[key] = min(offset, refused.get(key, offset))
            for key, offset in written_through(keys, offsets, group.written, refused).items():
                through[key] = max(offset, through.get(key, -1))
        if not through:
            return
        try:
            await (await self._offsets()).put_all(through)
        except Exception as exc:
            log.warning("hazelcast.offset_record_failed", map=self._offsets_map, error=_describe(exc))

    async def _offsets(self) -> Any:
        return await self._proxy(Structure.IMAP, self._offsets_map)

    def _require_client(self) -> Any:
        if self._client is None:
            raise StoreUnavailable("not connected to Hazelcast")
        return self._client

    async def ping(self) -> bool:
        """The cluster answers a map size; a client that gave up reconnecting is replaced."""
        if self._closed:
            return False
        if self._client is None or not self._client.lifecycle_service.is_running():
            try:
                await self._connect()
            except SinkError:
                return False
        try:
            await (await self._offsets()).size()
        except Exception:
            return False
        return True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            await self._client.shutdown()


def _groups(items: Sequence[SinkItem], semantics: Semantics = "fluxgate", text: bool = False) -> list[_Group]:
    """Items by structure, target and format, each group in batch order. A batch is mostly runs
    of one statement and target: the group is worked out once a run, not once an item."""
    groups: dict[tuple[Structure, str, bool], _Group] = {}
    statement: Statement | None = None
    target = ""
    group: _Group | None = None
    for index, item in enumerate(items):
        if item.statement is not statement or item.target != target or group is None:
            statement, target = item.statement, item.target
            key = (structure_of(statement, semantics), target, statement.format == "AVRO")
            group = groups.get(key)
            if group is None:
                as_string = semantics == "stream-reactor"
                group = groups[key] = _Group(key[0], target, statement, text=text, as_string=as_string)
        group.indices.append(index)
    return list(groups.values())


def _add_written(group: _Group, written: list[tuple[int, Value]]) -> None:
    group.indices.extend(index for index, _ in written)
    group.values.extend(value for _, value in written)
    group.written = len(group.indices)


def _json_of(item: SinkItem) -> bytes:
    return json_bytes(item.document)


def _record_keys(group: _Group, items: Sequence[SinkItem]) -> dict[int, str]:
    """Each item's offset record key, made once per partition of the batch, not once per item.
    A runner's batch is one partition's: then one key for all, set in C (:func:`_record_keys_each`
    is the general path, which a unit test holds this to)."""
    if group.indices:
        partitions = set(map(_coordinates, map(items.__getitem__, group.indices)))
        if len(partitions) == 1:
            return dict.fromkeys(group.indices, record_key(group.structure, items[group.indices[0]]))
    return _record_keys_each(group, items)


def _record_keys_each(group: _Group, items: Sequence[SinkItem]) -> dict[int, str]:
    made: dict[tuple[str, int], str] = {}
    keys: dict[int, str] = {}
    for index in group.indices:
        source = items[index].source
        tp = (source.topic, source.partition)
        key = made.get(tp)
        if key is None:
            key = made[tp] = record_key(group.structure, items[index])
        keys[index] = key
    return keys


_coordinates = attrgetter("source.topic", "source.partition")  # of an item
_offset = attrgetter("source.offset")  # of an item; with map(), no Python call per item


def _may_hold_written(group: _Group, items: Sequence[SinkItem], recorded: Mapping[str, int]) -> bool:
    """Whether any item is at or below its partition's recorded offset (a replay): only then is
    each one checked. A batch past the record, the usual case, is decided for all at once."""
    known = [recorded[key] for key in set(group.keys.values()) if key in recorded]
    if not known:
        return False
    lowest: int = min(map(_offset, map(items.__getitem__, group.indices)))
    return lowest <= max(known)


async def _add_to_ringbuffer(proxy: Any, chunk: list[Value], group: _Group) -> None:
    statement = group.statement
    fail = statement.properties.get(OVERFLOW_PROPERTY, "OVERWRITE").upper() == "FAIL"
    policy = OVERFLOW_POLICY_FAIL if fail else OVERFLOW_POLICY_OVERWRITE
    if group.framed:  # the JSON of each value: what add_all would send, framed at once
        request = add_all_json_request(proxy.name, cast(list[bytes], chunk), policy, group.as_string)
        sequence = await proxy._invoke(request, add_all_codec.decode_response)
    else:  # Avro bytes, which the client serializes itself
        sequence = await proxy.add_all(chunk, policy)
    if sequence == -1:
        raise Backpressure(f"ringbuffer {statement.target} full (overflow policy FAIL, items within their TTL)")


def _leaf(exc: Exception) -> Exception:
    """The first real error inside the ExceptionGroup that put_all's TaskGroup raises."""
    while isinstance(exc, ExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _as_sink_error(exc: Exception, group: _Group) -> SinkError:
    exc = _leaf(exc)
    if isinstance(exc, SinkError):
        return exc
    if isinstance(exc, hz.HazelcastSerializationError | hz.MaxMessageSizeExceededError):
        error = SinkError(f"{group.structure.value} {group.target} refused the value: {_describe(exc)}")
        error.__cause__ = exc
        return error
    if isinstance(exc, hz.TopicOverloadError):
        return _chained(Backpressure(f"reliable topic {group.target} overloaded: {_describe(exc)}"), exc)
    return _as_unavailable(exc, f"writing {group.structure.value} {group.target}")


def _as_unavailable(exc: Exception, doing: str) -> SinkError:
    exc = _leaf(exc)
    if isinstance(exc, SinkError):
        return exc
    if isinstance(exc, UNAVAILABLE):
        return _chained(StoreUnavailable(f"Hazelcast unavailable {doing}: {_describe(exc)}"), exc)
    # Security, a wrong configuration on the member...: writing again changes nothing.
    return _chained(SinkError(f"Hazelcast failed {doing}: {_describe(exc)}"), exc)


def _chained(error: SinkError, cause: Exception) -> SinkError:
    error.__cause__ = cause
    return error


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
