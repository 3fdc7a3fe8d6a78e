"""The stores the console asks through blocking clients (Scylla, Hazelcast), built from its
settings: each an asker bounded in time, and what closes its client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fluxgate_console.hazelcast_store import ClientAnswers, hazelcast_view, structures
from fluxgate_console.scylla_store import CassandraAnswers, scylla_view
from fluxgate_console.settings import ConsoleSettings, HazelcastStoreSettings, ScyllaStoreSettings
from fluxgate_console.stores import BlockingStore


def store_askers(settings: ConsoleSettings) -> tuple[list[BlockingStore], list[Callable[[], None]]]:
    """An asker per store that is shown (its addresses not empty), and the clients' closers.

    The whole ask may take a few statements' time (partition keys, then each series'
    count and newest row, concurrently), so it is bounded at four times one request's."""
    timeout = settings.request_timeout_s
    askers, closers = [], []
    if settings.scylla.contact_points:
        scylla = settings.scylla
        cassandra = CassandraAnswers(
            scylla.contact_points, scylla.port, scylla.table, timeout, **_scylla_options(scylla)
        )
        ask = lambda: scylla_view(cassandra, scylla.table, scylla.days, scylla.max_partition_keys)  # noqa: E731
        askers.append(BlockingStore("scylla", ask, timeout * 4))
        closers.append(cassandra.close)
    if settings.hazelcast.members:
        targets = structures(settings.hazelcast.kcql)
        client = ClientAnswers(_hazelcast_options(settings.hazelcast, timeout))
        askers.append(BlockingStore("hazelcast", lambda: hazelcast_view(client, targets), timeout * 4))
        closers.append(client.close)
    return askers, closers


def _scylla_options(scylla: ScyllaStoreSettings) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if scylla.username and scylla.password:
        from cassandra.auth import PlainTextAuthProvider

        options["auth_provider"] = PlainTextAuthProvider(scylla.username, scylla.password.get_secret_value())
    if scylla.local_datacenter:
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

        options["load_balancing_policy"] = TokenAwarePolicy(DCAwareRoundRobinPolicy(scylla.local_datacenter))
    return options


def _hazelcast_options(hazelcast: HazelcastStoreSettings, timeout_s: float) -> dict[str, Any]:
    options: dict[str, Any] = {
        "cluster_members": hazelcast.members,
        "cluster_name": hazelcast.cluster_name,
        "cluster_connect_timeout": timeout_s,
        "invocation_timeout": timeout_s,
    }
    if hazelcast.username and hazelcast.password:
        options["creds_username"] = hazelcast.username
        options["creds_password"] = hazelcast.password.get_secret_value()
    return options
