"""Fluxgate's local stack: real Kafka, schema registry, Mosquitto, Elasticsearch, Cassandra, Hazelcast
and CoAP servers on loopback.

Typical fixture use::

    from fluxgate_stack import ensure_up
    endpoints = ensure_up(["kafka", "registry", "mosquitto"])
    es_url = ensure_up(["elasticsearch"]).elasticsearch_url
    cql = ensure_up(["cassandra"]).cassandra_contact_point  # "127.0.0.1:9042"

Kafka's SASL_SSL listener (``.secure_bootstrap``, ``.ca_file``) and its principals::

    from fluxgate_stack import SERVICE_GRANTS, Grant, add_principal, remove_principal
    add_principal("aggregator-1", "secret", SERVICE_GRANTS["aggregator"])
"""

from fluxgate_stack.api import endpoints, ensure_up, kill, restart, start, stop
from fluxgate_stack.security import (
    SERVICE_GRANTS,
    Grant,
    Principal,
    add_principal,
    new_credentials,
    remove_principal,
    renamed,
)
from fluxgate_stack.settings import StackSettings
from fluxgate_stack.stack import Endpoints, Stack

__all__ = [
    "SERVICE_GRANTS",
    "Endpoints",
    "Grant",
    "Principal",
    "Stack",
    "StackSettings",
    "add_principal",
    "endpoints",
    "ensure_up",
    "kill",
    "new_credentials",
    "remove_principal",
    "renamed",
    "restart",
    "start",
    "stop",
]
