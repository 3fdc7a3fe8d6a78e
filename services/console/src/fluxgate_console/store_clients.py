"""The stores' clients, built from the console's settings with each store's TLS and
credentials: Elasticsearch's HTTP client, and the stores asked through blocking clients
(Scylla, Hazelcast), each an asker bounded in time, and what closes its client."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

import httpx

from fluxgate_console.hazelcast_store import ClientAnswers, hazelcast_view, structures
from fluxgate_console.scylla_store import CassandraAnswers, scylla_view
from fluxgate_console.settings import (
    ConsoleSettings,
    ElasticsearchStoreSettings,
    HazelcastStoreSettings,
    ScyllaStoreSettings,
)
from fluxgate_console.stores import BlockingStore
from fluxgate_core.errors import ConfigError


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
        askers.append(BlockingStore("scylla", ask, timeout * 4))
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
    elif es.username and es.password:
        options["auth"] = httpx.BasicAuth(es.username, es.password.get_secret_value())
    return options


def _es_tls(es: ElasticsearchStoreSettings) -> ssl.SSLContext:
    try:
        return es.tls_context()
    except (OSError, ssl.SSLError) as exc:  # read once, at start: a wrong path is a configuration error
        variable = "FLUXGATE_CONSOLE_ELASTICSEARCH__CA_CERTS"
        raise ConfigError(f"invalid configuration:\n  elasticsearch.ca_certs [env {variable}]: {exc}") from exc


def scylla_options(scylla: ScyllaStoreSettings) -> dict[str, Any]:
    """``Cluster`` keyword arguments beyond the contact points: credentials, datacenter, TLS."""
    options: dict[str, Any] = {}
    if scylla.username and scylla.password:
        from cassandra.auth import PlainTextAuthProvider

        options["auth_provider"] = PlainTextAuthProvider(scylla.username, scylla.password.get_secret_value())
    if scylla.local_datacenter:
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

        options["load_balancing_policy"] = TokenAwarePolicy(DCAwareRoundRobinPolicy(scylla.local_datacenter))
    if (context := scylla.tls_context()) is not None:
        options["ssl_context"] = context
    return options


def hazelcast_options(hazelcast: HazelcastStoreSettings, timeout_s: float) -> dict[str, Any]:
    """``HazelcastClient`` keyword arguments: members, cluster, timeouts, credentials, TLS."""
    return {
        "cluster_members": hazelcast.members,
        "cluster_name": hazelcast.cluster_name,
        "cluster_connect_timeout": timeout_s,
        "invocation_timeout": timeout_s,
        **hazelcast.access_options(),
    }
