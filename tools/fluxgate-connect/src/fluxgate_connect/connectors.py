"""Every Stream-Reactor connector ``fluxgate connect`` runs, and what each of its keys means here.

This table is the one place the mapping lives, written in :mod:`fluxgate_connect.sources` and
:mod:`fluxgate_connect.sinks` with :mod:`fluxgate_connect.framework`'s shared parts: ``translate``
applies it, the tables of ``docs/kafka-connect.md`` are generated from it
(``python -m fluxgate_connect.reference``), a test loads each service's Settings class with what
it produces, and ``tests/unit/test_stream_reactor_keys.py`` holds it to Stream-Reactor's keys.
Key names are the ones Stream-Reactor documents; where a release renamed a key
(``connect.hazelcast.sink.kcql`` -> ``connect.hazelcast.kcql``) both names are here.
"""

from __future__ import annotations

from fluxgate_connect.framework import (
    COAP_KCQL,
    COAP_MESSAGE,
    COAP_OUTPUT_FORMAT,
    COAP_SOURCE_URI,
    MQTT_KCQL,
    Connector,
)
from fluxgate_connect.sinks import CASSANDRA_SINK, ELASTIC_SINK, HAZELCAST_SINK
from fluxgate_connect.sources import COAP_SOURCE, MQTT_SOURCE

__all__ = [
    "CASSANDRA_SINK",
    "COAP_KCQL",
    "COAP_MESSAGE",
    "COAP_OUTPUT_FORMAT",
    "COAP_SOURCE",
    "COAP_SOURCE_URI",
    "CONNECTORS",
    "ELASTIC_SINK",
    "HAZELCAST_SINK",
    "MQTT_KCQL",
    "MQTT_SOURCE",
    "Connector",
    "by_class",
]

CONNECTORS = (MQTT_SOURCE, COAP_SOURCE, ELASTIC_SINK, CASSANDRA_SINK, HAZELCAST_SINK)


def by_class(name: str) -> Connector | None:
    for connector in CONNECTORS:
        if name in connector.classes:
            return connector
    return None
