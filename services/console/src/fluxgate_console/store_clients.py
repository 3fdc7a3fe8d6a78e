"""The stores' clients, built from the console's settings with each store's TLS and
credentials: Elasticsearch's HTTP client, and the stores asked through blocking clients
(Scylla, Hazelcast), each an asker bounded in time, and what closes its client."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any

import httpx
import structlog

from fluxgate_console.hazelcast_store import ClientAnswers, hazelcast_view, structures
from fluxgate_console.scylla_store import GROUP as SCYLLA_GROUP
from fluxgate_console.scylla_store import CassandraAnswers, auth_provider, refusal, scylla_view
from fluxgate_console.settings import (
    ENV_PREFIX,
    ConsoleSettings,
    ElasticsearchStoreSettings,
    HazelcastStoreSettings,
    ScyllaStoreSettings,
)
from fluxgate_console.stores import BlockingStore, _es_get
from fluxgate_core.errors import ConfigError, env_variable

log = structlog.get_logger(__name__)
ES_GROUP = "elasticsearch"  # ConsoleSettings' field: refusals name its variables


def store_askers(settings: ConsoleSettings) -> tuple[list[BlockingStore], list[Callable[[], None]]]:
    """An asker per store that is shown (its addresses not empty), and the clients' closers.

    The whole ask may take a few statements' time (partition keys, then each series'
    count and newest row, concurrently), so it is bounded at four times one request's."""
    timeout = settings.request_timeout_s
    askers, closers = [], []
    if settings.scylla.contact_points:
        scylla = settings.scylla
        cassandra = CassandraAnswers(
            scylla.contact_points, scylla.port, scylla.table, timeout, **scylla_options(scylla)
        )
        ask = lambda: scylla_view(cassandra, scylla.table, scylla.days, scylla.max_partition_keys)  # noqa: E731
        askers.append(BlockingStore("scylla", ask, timeout * 4, every_s=scylla.refresh_s))
        closers.append(cassandra.close)
    if settings.hazelcast.members:
        targets = structures(settings.hazelcast.kcql)
        client = ClientAnswers(hazelcast_options(settings.hazelcast, timeout))
        askers.append(BlockingStore("hazelcast", lambda: hazelcast_view(client, targets), timeout * 4))
        closers.append(client.close)
    return askers, closers


def elasticsearch_options(es: ElasticsearchStoreSettings, timeout_s: float) -> dict[str, Any]:
    """Keyword arguments of the ``httpx.AsyncClient`` that asks Elasticsearch alone (apart from
    the one that scrapes the services, which must not send the store's credentials): its CA,
    or none verified, and its API key or basic auth, as the es-persister sends them."""
    options: dict[str, Any] = {"timeout": timeout_s, "verify": _es_tls(es)}
    if es.api_key is not None:
        options["headers"] = {"Authorization": f"ApiKey {es.api_key.get_secret_value()}"}
    elif (basic := es.basic_auth()) is not None:
        options["auth"] = httpx.BasicAuth(*basic)
    return options


def _es_tls(es: ElasticsearchStoreSettings) -> ssl.SSLContext:
    try:
        return es.tls_context()
    except (OSError, ssl.SSLError) as exc:  # read once, at start: a wrong path is a configuration error
        variable = env_variable(ENV_PREFIX, f"{ES_GROUP}.ca_certs")
        message = f"elasticsearch.ca_certs [env {variable}]: {exc}: {es.ca_certs}"
        raise ConfigError(f"invalid configuration:\n  {message}") from exc


async def check_elasticsearch(client: httpx.AsyncClient, es: ElasticsearchStoreSettings) -> None:
    """Ask Elasticsearch what the page asks, once, at start: a refused login or a certificate
    the CA did not sign stops the console (exit 2, naming the settings); Elasticsearch away
    does not (showing that is the page's job)."""
    if not es.hosts:
        return
    hosts = ", ".join(es.hosts)
    try:
        answer = await _es_get(client, es.hosts, f"_cat/indices/{es.alias}", {"format": "json", "h": "index"})
    except httpx.TransportError as exc:
        if _tls_refused(exc):
            raise es.handshake_refused(ES_GROUP, f"{hosts}: {exc}").named(ENV_PREFIX) from exc
        log.warning("console.elasticsearch_unreachable", hosts=hosts, error=f"{type(exc).__name__}: {exc}")
        return
    if answer.status_code == 401:
        refusal = es.login_refused(ES_GROUP, f"{hosts}: status 401 {_reason(answer)}")
        raise refusal.named(ENV_PREFIX)


def _tls_refused(exc: BaseException) -> bool:
    """Whether a certificate check is what failed (httpx keeps ssl's error as the cause)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(exc)


def _reason(answer: httpx.Response) -> str:
    """Elasticsearch's reason for a refusal (it names the user, never the password)."""
    try:
        return str(answer.json()["error"]["reason"])[:300]
    except (ValueError, KeyError, TypeError):
        return answer.reason_phrase


def scylla_options(scylla: ScyllaStoreSettings) -> dict[str, Any]:
    """``Cluster`` keyword arguments beyond the contact points: credentials, datacenter, TLS."""
    options: dict[str, Any] = {}
    if scylla.username:
        options["auth_provider"] = auth_provider(scylla)
    if scylla.local_datacenter:
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

        options["load_balancing_policy"] = TokenAwarePolicy(DCAwareRoundRobinPolicy(scylla.local_datacenter))
    try:
        context = scylla.tls_context()
    except (OSError, ssl.SSLError) as exc:  # read once, at start: a wrong path is a configuration error
        raise scylla.unreadable_ca(SCYLLA_GROUP, exc).named(ENV_PREFIX) from exc
    if context is not None:
        options["ssl_context"] = context
    return options


async def check_scylla(scylla: ScyllaStoreSettings, timeout_s: float) -> None:
    """Connect to Scylla once, at start: a refused login or TLS handshake stops the console
    (exit 2, naming the settings); Scylla away does not (showing that is the page's job)."""
    if not scylla.contact_points:
        return
    try:
        await asyncio.to_thread(_connect_once, scylla, timeout_s)
    except Exception as exc:
        refused = refusal(exc, scylla, scylla.contact_points, scylla.port, timeout_s)
        if refused is not None:
            raise refused.named(ENV_PREFIX) from exc
        log.warning("console.scylla_unreachable", error=f"{type(exc).__name__}: {exc}")


def _connect_once(scylla: ScyllaStoreSettings, timeout_s: float) -> None:
    from cassandra.cluster import Cluster

    cluster = Cluster(scylla.contact_points, port=scylla.port, connect_timeout=timeout_s,
                      control_connection_timeout=timeout_s, **scylla_options(scylla))  # fmt: skip
    try:
        cluster.connect()
    finally:
        cluster.shutdown()


def hazelcast_options(hazelcast: HazelcastStoreSettings, timeout_s: float) -> dict[str, Any]:
    """``HazelcastClient`` keyword arguments: members, cluster, timeouts, credentials, TLS."""
    return {
        "cluster_members": hazelcast.members,
        "cluster_name": hazelcast.cluster_name,
        "cluster_connect_timeout": timeout_s,
        "invocation_timeout": timeout_s,
        **hazelcast.access_options(),
    }
