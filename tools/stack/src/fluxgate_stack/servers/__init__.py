"""The registry of servers the stack knows, in start order (dependencies first)."""

from __future__ import annotations

from fluxgate_stack.errors import UnknownServer
from fluxgate_stack.servers.base import JavaServer, Port, Server
from fluxgate_stack.servers.cassandra import CassandraServer
from fluxgate_stack.servers.cassandra_secured import SecuredCassandraServer
from fluxgate_stack.servers.coap import CoapServer
from fluxgate_stack.servers.elasticsearch import ElasticsearchServer
from fluxgate_stack.servers.elasticsearch_secured import ElasticsearchSecuredServer
from fluxgate_stack.servers.hazelcast import HazelcastServer
from fluxgate_stack.servers.kafka import KafkaServer
from fluxgate_stack.servers.keycloak import KeycloakServer
from fluxgate_stack.servers.mosquitto import MosquittoServer
from fluxgate_stack.servers.prometheus import PrometheusServer
from fluxgate_stack.servers.registry import RegistryServer
from fluxgate_stack.servers.registry_secured import SecuredRegistryServer
from fluxgate_stack.settings import StackSettings

SERVER_TYPES: dict[str, type[Server]] = {
    server.name: server
    for server in (
        KafkaServer,
        RegistryServer,
        KeycloakServer,
        SecuredRegistryServer,
        MosquittoServer,
        ElasticsearchServer,
        ElasticsearchSecuredServer,
        CassandraServer,
        SecuredCassandraServer,
        HazelcastServer,
        CoapServer,
        PrometheusServer,
    )
}


def default_names() -> list[str]:
    return [name for name, server in SERVER_TYPES.items() if server.default]


def with_requirements(names: list[str] | None) -> list[str] | None:
    """``names`` plus every server they require, transitively (``None``/empty stays as is)."""
    if not names:
        return names
    wanted, pending = set(names), list(names)
    while pending:
        server = SERVER_TYPES.get(pending.pop())
        for required in server.requires if server else ():
            if required not in wanted:
                wanted.add(required)
                pending.append(required)
    return [*names, *sorted(wanted - set(names))]


def build(names: list[str] | None, settings: StackSettings, *, all_if_empty: bool = False) -> list[Server]:
    """Server objects for ``names`` in registry order; empty means the defaults (or all)."""
    if not names:
        names = list(SERVER_TYPES) if all_if_empty else default_names()
    unknown = sorted(set(names) - set(SERVER_TYPES))
    if unknown:
        raise UnknownServer(f"unknown server(s) {', '.join(unknown)}; known: {', '.join(SERVER_TYPES)}")
    return [server(settings) for name, server in SERVER_TYPES.items() if name in names]


__all__ = ["SERVER_TYPES", "JavaServer", "Port", "Server", "build", "default_names", "with_requirements"]
