"""``ElasticsearchSink``: bulk writes into daily indices, failures reported per item.

``INSERT`` is an ``index`` action and ``UPSERT`` an ``update`` with ``doc_as_upsert``,
both with ``_id`` = the statement's PK, so writing the same items twice changes nothing.
The raw bulk API (rather than the helpers) keeps one request per chunk and its
per-item statuses in order, which is all the runner needs: item ``i`` of the response is
item ``i`` of the chunk.

A request Elasticsearch refuses as a whole (400, 413) may be one item's fault (an ``_id``
over 512 bytes fails the whole bulk request, not that item): the chunk is then sent again
in halves, down to the one item that is refused alone, which fails with the store's reason
while the rest is written. Nothing of a refused request was written, so nothing is doubled.
A request the client cannot serialize (a value with no JSON form: a ``datetime.time``) is never
sent, and is halved the same way. Bytes (an Avro or JsonConverter ``bytes`` field, a ByteArrayConverter
header) are written as standard base64 with padding, as Kafka Connect's JsonConverter writes a BYTES
value (``convertToJson``: a Jackson ``BinaryNode``; checked against the connect-json 4.4.0 jar).
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import structlog
from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport import ConnectionTimeout, SerializationError, TlsError, TransportError
from elasticsearch import ApiError, AsyncElasticsearch
from elasticsearch.serializer import NdjsonSerializer

from fluxgate_core.errors import SettingRefused
from fluxgate_es_persister.mapping import IndexFamily, index_template
from fluxgate_es_persister.settings import ConnectionSettings
from fluxgate_sink.errors import SinkError, StoreUnavailable
from fluxgate_sink.sink import ItemFailure, Sink, SinkItem

if TYPE_CHECKING:
    from fluxgate_sink.kcql import Statement

log = structlog.get_logger(__name__)

#: Item errors that succeed when written again later: a full write queue, a shard moving,
#: a concurrent update of the same document.
RETRIABLE_TYPES = frozenset(
    {
        "es_rejected_execution_exception",
        "circuit_breaking_exception",
        "unavailable_shards_exception",
        "version_conflict_engine_exception",
        "cluster_block_exception",  # read-only-allow-delete after a full disk clears by itself
    }
)
# Only the outcome of each item travels back, not the whole echo of every action.
BULK_FILTER = "errors,items.*.status,items.*.error"
#: Statuses of a whole bulk request that one of its items may have caused: a validation
#: failure (400, an ``_id`` too long ...) or a body too large (413). Not 401/403: writing
#: fewer items changes nothing about the credentials.
ITEM_CAUSED_STATUSES = frozenset({400, 413})
GROUP = "elasticsearch"  # the settings group of ConnectionSettings: refusals name its fields


class RequestRefused(SinkError):
    """Elasticsearch refused a bulk request as a whole with a status one item may cause."""

    def __init__(self, message: str, item_error: SinkError) -> None:
        super().__init__(message)
        self.item_error = item_error  # what the one item is refused with, if it is alone


class DocumentSerializer(NdjsonSerializer):
    """The bulk request's serializer: the client's, with bytes as base64 (see the module)."""

    def default(self, data: Any) -> Any:
        if isinstance(data, bytes | bytearray):
            return b64encode(data).decode("ascii")
        return super().default(data)


#: The bulk API's body (the client takes the compatibility mode's mimetype from it too).
SERIALIZERS = {NdjsonSerializer.mimetype: DocumentSerializer()}


class ElasticsearchSink(Sink):
    """Writes :class:`SinkItem` batches with the bulk API of ``AsyncElasticsearch``."""

    name = "elasticsearch"

    def __init__(self, settings: ConnectionSettings, client: AsyncElasticsearch | None = None) -> None:
        self._settings = settings
        self._client = client or AsyncElasticsearch(**settings.client_options(), serializers=SERIALIZERS)
        self._closed = False

    @property
    def client(self) -> AsyncElasticsearch:
        return self._client

    async def setup(self, statements: Sequence[Statement]) -> None:
        """Check that Elasticsearch answers, then put one index template (with its alias) per target.

        A failed setup closes the client: the process is about to exit, without a warning
        about an unclosed session."""
        try:
            await self._setup(statements)
        except (SinkError, SettingRefused):
            await self.close()
            raise

    async def _setup(self, statements: Sequence[Statement]) -> None:
        hosts = ", ".join(self._settings.hosts)
        try:
            # Not ``GET /`` (info, ping): that lives in the rest-root module, which minimal
            # distributions (the integ-test zip) leave out; cluster health is always there.
            health = await self._client.cluster.health()
        except TlsError as exc:  # the node answered with a certificate this CA did not sign
            raise self._settings.handshake_refused(GROUP, f"{hosts}: {_tls_reason(exc)}") from exc
        except ApiError as exc:
            if _status(exc) == 401:  # said now, or the runner would wait for a store that is up
                raise self._settings.login_refused(GROUP, f"{hosts}: {_describe(exc)}") from exc
            raise StoreUnavailable(f"Elasticsearch at {hosts} does not answer: {_describe(exc)}") from exc
        except TransportError as exc:
            raise StoreUnavailable(f"Elasticsearch at {hosts} does not answer: {_describe(exc)}") from exc
        log.info("elasticsearch.connected", hosts=hosts, cluster=health["cluster_name"], status=health["status"])
        for family in families(statements):
            await self._put_template(family)

    async def _put_template(self, family: IndexFamily) -> None:
        body = index_template(
            family, shards=self._settings.number_of_shards, replicas=self._settings.number_of_replicas
        )
        try:
            await self._client.indices.put_index_template(name=family.target, **body)
        except ApiError as exc:
            if _status(exc) >= 500 or _status(exc) == 429:
                raise StoreUnavailable(f"index template {family.target}: {_describe(exc)}") from exc
            if _status(exc) == 403 and self._settings.username:  # another service's user, or a role short
                raise SettingRefused(
                    f"Elasticsearch user {self._settings.username!r} may not put the index template "
                    f"{family.target} (its roles lack manage_index_templates?): {_describe(exc)}",
                    (f"{GROUP}.username",),
                ) from exc
            raise SinkError(f"index template {family.target} refused: {_describe(exc)}") from exc
        except TransportError as exc:
            raise StoreUnavailable(f"index template {family.target}: {_describe(exc)}") from exc
        log.info("elasticsearch.template", name=family.target, pattern=family.wildcard, alias=family.alias)

    async def write_batch(self, items: Sequence[SinkItem]) -> list[ItemFailure]:
        failures: list[ItemFailure] = []
        step = self._settings.bulk_max_actions
        for start in range(0, len(items), step):
            failures.extend(await self._write_chunk(items[start : start + step], start))
        return failures

    async def _write_chunk(self, chunk: Sequence[SinkItem], offset: int) -> list[ItemFailure]:
        try:
            response = await self._bulk(bulk_operations(chunk))
        except RequestRefused as exc:
            if len(chunk) == 1:
                return [ItemFailure(offset, exc.item_error)]
            # Halving finds the one item in log2(n) rounds; nothing of the refused request was written.
            log.warning("elasticsearch.request_refused", items=len(chunk), error=str(exc.item_error))
            half = len(chunk) // 2
            return [
                *await self._write_chunk(chunk[:half], offset),
                *await self._write_chunk(chunk[half:], offset + half),
            ]
        return item_failures(response, offset=offset)

    async def _bulk(self, operations: list[Mapping[str, Any]]) -> Mapping[str, Any]:
        try:
            response = await self._client.bulk(operations=operations, filter_path=BULK_FILTER)
        except (TransportConnectionError, ConnectionTimeout) as exc:
            raise StoreUnavailable(f"Elasticsearch unreachable: {_describe(exc)}") from exc
        except TlsError as exc:
            raise SinkError(f"TLS with Elasticsearch failed: {_describe(exc)}") from exc
        except SerializationError as exc:
            if not str(exc).startswith("Unable to serialize"):  # a response that does not parse
                raise StoreUnavailable(f"Elasticsearch request failed: {_describe(exc)}") from exc
            # A value with no JSON form (a time of day, a map keyed by dates): the client refuses
            # the request before sending it, as Elasticsearch refuses a bad document; not an outage.
            refusal = SinkError(f"a document has no JSON form: {exc.errors[0] if exc.errors else exc}")
            raise RequestRefused(f"the bulk request does not serialize: {refusal}", refusal) from exc
        except ApiError as exc:
            status = _status(exc)
            if status == 429 or status >= 500:
                raise StoreUnavailable(f"Elasticsearch refused the bulk request: {_describe(exc)}") from exc
            if status in ITEM_CAUSED_STATUSES:
                refusal = item_error(status, _error_of(exc))
                raise RequestRefused(f"Elasticsearch refused the bulk request: {refusal}", refusal) from exc
            # 401/403 on the whole request: writing it again changes nothing.
            raise SinkError(f"Elasticsearch refused the bulk request: {_describe(exc)}") from exc
        except TransportError as exc:
            raise StoreUnavailable(f"Elasticsearch request failed: {_describe(exc)}") from exc
        body: Mapping[str, Any] = response.body
        return body

    async def ping(self) -> bool:
        try:
            await self._client.cluster.health()
        except (TransportError, ApiError):
            return False
        return True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._client.close()


def families(statements: Sequence[Statement]) -> list[IndexFamily]:
    """One index family per distinct target (two statements writing one target share it)."""
    seen: dict[str, IndexFamily] = {}
    for statement in statements:
        seen.setdefault(statement.target, IndexFamily(statement.target, statement.index_suffix or None))
    return list(seen.values())


def bulk_operations(items: Sequence[SinkItem]) -> list[Mapping[str, Any]]:
    """The action and source lines of a bulk request, in item order."""
    operations: list[Mapping[str, Any]] = []
    for item in items:
        if item.statement.mode == "UPSERT":
            operations.append({"update": {"_index": item.target, "_id": item.id, "retry_on_conflict": 3}})
            operations.append({"doc": item.document, "doc_as_upsert": True})
        else:
            operations.append({"index": {"_index": item.target, "_id": item.id}})
            operations.append(item.document)
    return operations


def item_failures(response: Mapping[str, Any], *, offset: int = 0) -> list[ItemFailure]:
    """The failed items of one bulk response, indexed in the batch (``offset`` + position in the chunk)."""
    if not response.get("errors"):
        return []
    failures = []
    for position, outcome in enumerate(response.get("items", [])):
        (result,) = outcome.values()
        error = result.get("error")
        if error is not None:
            failures.append(ItemFailure(offset + position, item_error(int(result.get("status", 0)), error)))
    return failures


def item_error(status: int, error: Mapping[str, Any] | str) -> SinkError:
    """One item's error: retriable when the store was only busy, never when the document is wrong."""
    if isinstance(error, str):
        kind, reason = "error", error
    else:
        kind, reason = str(error.get("type", "error")), str(error.get("reason", ""))
        cause = error.get("caused_by")
        if isinstance(cause, Mapping) and cause.get("reason"):
            reason = f"{reason}: {cause.get('type')}: {cause['reason']}"
    retriable = status == 429 or status >= 500 or kind in RETRIABLE_TYPES
    return SinkError(f"{kind} (status {status}): {reason}", retriable=retriable)


def _error_of(exc: ApiError) -> Mapping[str, Any] | str:
    """The ``error`` object of a refused request's body (type, reason), else what the client says."""
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, Mapping) else None
    return error if isinstance(error, Mapping | str) else str(exc)


def _status(exc: ApiError) -> int:
    status = getattr(exc, "status_code", None)
    return int(status) if isinstance(status, int) else 0


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def _tls_reason(exc: TlsError) -> str:
    """What the TLS library said (``TlsError`` itself only says "TLS error"): the innermost cause."""
    reason, seen = _describe(exc), exc.__cause__ or exc.__context__
    while seen is not None:
        reason = str(seen) or reason
        seen = seen.__cause__ or seen.__context__
    for error in getattr(exc, "errors", ()):  # elastic-transport keeps each node's error here
        reason = str(error) or reason
    return reason
