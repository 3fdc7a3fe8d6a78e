"""Fixtures every package's tests share: the real local stack, started once per session.

Point the tests at an already-running stack with FLUXGATE_TEST_REUSE_STACK=1 (the
default is the same: `ensure_up` reuses servers that are already up and ready).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

# The paired phase's one group: xdist (--dist loadgroup) gives all its tests to one worker.
FIXED_NAMES_GROUP = "fixed-names"
# The parallel phase's Spark lane: every `spark` test on one worker, one after another, while
# the other workers take the rest file by file. Two Spark tests side by side on two cores
# slowed each other several times over (one ran from 24 s to 166 s, from run to run).
SPARK_LANE = "spark-lane"


# tryfirst: xdist's worker adds the group to each test's id in this same hook, and a
# conftest's hook would otherwise run after it (later-registered plugins run first), too late:
# the group was silently ignored and two fixed_names tests ran at once.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put every ``fixed_names`` test in one xdist group, so that ``make test``'s paired phase
    (two workers) never runs two of them at once; such a test must also be ``paired``, or the
    parallel phase would run it beside the others. Under ``--dist loadgroup``, the ``serial``
    tests go by the server they kill (:func:`killed_server`), and those that are neither
    ``paired`` nor ``serial`` (the parallel phase's) by :func:`lane`."""
    # Where the groups matter: in an xdist worker of a loadgroup session (it sets this option).
    grouped = bool(getattr(config.option, "loadgroup", False))
    for item in items:
        killed = killed_server(item)
        if item.get_closest_marker("fixed_names") is not None:
            if item.get_closest_marker("paired") is None:
                raise pytest.UsageError(f"{item.nodeid}: a fixed_names test must be marked paired as well")
            item.add_marker(pytest.mark.xdist_group(FIXED_NAMES_GROUP))
        elif killed is not None:
            if grouped:
                item.add_marker(pytest.mark.xdist_group(f"kills-{killed}"))
        elif grouped and item.get_closest_marker("paired") is None:
            item.add_marker(pytest.mark.xdist_group(lane(item)))


def killed_server(item: pytest.Item) -> str | None:
    """The server a ``serial`` test kills or restarts (``@pytest.mark.serial(kills=...)``; the
    shared sink suite's ``kills=STORE`` is its class's ``server``); None for another test.
    The serial phase runs the tests of one server on one worker, one after another, and those
    of different servers side by side; every test uses Kafka, so its killers run alone after."""
    marker = item.get_closest_marker("serial")
    if marker is None:
        return None
    # Imported here, not at the top: most sessions mark no test serial, and need no Kafka client.
    from fluxgate_testing.sink.suite import STORE

    killed = marker.kwargs.get("kills")
    if killed == STORE:
        killed = getattr(getattr(item, "cls", None), "server", None)
    if not isinstance(killed, str):
        raise pytest.UsageError(
            f"{item.nodeid}: a serial test names the server it kills: @pytest.mark.serial(kills=...)"
        )
    return killed


def lane(item: pytest.Item) -> str:
    """The xdist group of a parallel-phase test: the Spark lane for a ``spark`` test, else its
    file (as ``--dist loadfile`` would: a module's fixtures are set up on one worker)."""
    return SPARK_LANE if item.get_closest_marker("spark") is not None else item.nodeid.split("::", 1)[0]


@pytest.fixture(scope="session")
def stack() -> Iterator[Any]:
    """Kafka, the schema registry and Mosquitto on loopback, with the default topics."""
    from fluxgate_stack import ensure_up

    yield ensure_up(["kafka", "registry", "mosquitto"])


@pytest.fixture(scope="session")
def secured_kafka(stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Kafka's SASL_SSL listener (SCRAM, TLS from the stack's CA, ACLs): ``.bootstrap``
    (``127.0.0.1:9094``), ``.ca_file`` and ``.principal(name, grants)``, a
    ``fluxgate_testing.secured.Principal`` with a unique user name, a random password (and its
    0600 ``password_file``) and exactly ``grants`` (``fluxgate_stack.Grant``, or
    ``fluxgate_stack.SERVICE_GRANTS[...]``); ``principal.kafka_env("FLUXGATE_MQTT_")`` is a
    service's environment for it. Every principal is removed when the session ends."""
    from fluxgate_testing.secured import SecuredKafka

    secured = SecuredKafka(stack.secure_bootstrap, stack.ca_file, tmp_path_factory.mktemp("secured-kafka"))
    yield secured
    secured.close()


@pytest.fixture(scope="session")
def secured_elasticsearch() -> Any:
    """Elasticsearch with security on (server ``elasticsearch-secured``): HTTPS on
    ``.url`` (``https://127.0.0.1:9201``) with the stack's CA (``.ca_file``), no anonymous
    access, and a user per role (``es-persister``, ``console``, ``admin``): ``.user(role)``
    is ``(username, password)``, ``.env("FLUXGATE_ES_", role)`` a service's environment for it
    (hosts, username, password file, CA). See ``fluxgate_stack.secured_elasticsearch``."""
    from fluxgate_stack.secured_elasticsearch import secured_elasticsearch

    return secured_elasticsearch()


@pytest.fixture(scope="session")
def secured_registry() -> Any:
    """The schema registry behind TLS with authentication (server ``registry-secured``, with
    its OIDC provider ``keycloak``): ``.url`` (``https://127.0.0.1:8444/apis/ccompat/v7``),
    ``.ca_file`` (the stack's CA), ``.client(role)`` (``(client_id, secret)`` of a service's
    Keycloak client, e.g. "mqtt-proxy" (sr-developer), "es-persister" (sr-readonly), "admin"),
    ``.client_config(role)`` (a ``SchemaRegistryClient``'s) and ``.env(prefix, role)`` (a
    service's ``REGISTRY__*`` environment). See ``fluxgate_stack.secured_registry``."""
    from fluxgate_stack import Stack
    from fluxgate_stack.secured_registry import SecuredRegistry

    stack = Stack()
    stack.up(["registry-secured"])
    return SecuredRegistry(stack.settings)


@pytest.fixture(scope="session")
def registry_client(stack: Any) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": stack.registry_url})


@pytest.fixture(scope="session")
def elasticsearch() -> str:
    """Elasticsearch 8.x on loopback (single node, security off); its URL, e.g. http://127.0.0.1:9200.

    A test crashes and revives it with ``fluxgate_stack.kill("elasticsearch")`` and
    ``fluxgate_stack.start("elasticsearch")``; a second node with its own static settings
    comes from ``fluxgate_stack.servers.elasticsearch.throwaway_node({...})``.
    """
    from fluxgate_stack import ensure_up

    return ensure_up(["elasticsearch"]).elasticsearch_url


@pytest.fixture(scope="session")
def cassandra() -> tuple[str, int]:
    """Apache Cassandra 5.0 on loopback (single node, no authentication), standing in for Scylla:
    ``(host, port)`` of the CQL native protocol, ``("127.0.0.1", 9042)`` by default.

    A test crashes and revives it with ``fluxgate_stack.kill("cassandra")`` and
    ``fluxgate_stack.start("cassandra")``; rows written before the kill are still there.
    """
    from fluxgate_stack import ensure_up

    endpoints = ensure_up(["cassandra"])
    return endpoints.cassandra_host, endpoints.cassandra_port


@pytest.fixture(scope="session")
def secured_cassandra() -> Any:
    """Cassandra with security on (server ``cassandra-secured``): CQL on ``.host``/``.port``
    (``127.0.0.1:9043``) through TLS only (the stack's CA, ``.ca_file``), passwords and
    grants; ``.user(role)`` is ``(username, password)`` of "scylla-persister", "console" or
    "admin", ``.env("FLUXGATE_SCYLLA_", role)`` a service's ``SCYLLA__*`` environment for it.
    See ``fluxgate_stack.secured_cassandra``."""
    from fluxgate_stack import Stack
    from fluxgate_stack.secured_cassandra import SecuredCassandra

    stack = Stack()
    stack.up(["cassandra-secured"])
    return SecuredCassandra(stack.settings)


@pytest.fixture(scope="session")
def hazelcast() -> tuple[str, str]:
    """A Hazelcast 5.x member on loopback: ``(address, cluster_name)``, ``("127.0.0.1:5701",
    "fluxgate")`` by default. Clients must present that cluster name.

    Ringbuffers hold 100 000 items, queues named ``bounded-*`` 100 (every other queue is
    unbounded). ``fluxgate_stack.kill("hazelcast")`` / ``fluxgate_stack.start("hazelcast")``
    crash and revive it; its data is in memory only, so it comes back empty.
    """
    from fluxgate_stack import ensure_up

    endpoints = ensure_up(["hazelcast"])
    return endpoints.hazelcast_address, endpoints.hazelcast_cluster


@pytest.fixture(scope="session")
def images() -> str:
    """Every service's image built with podman (``make images``); the tag the charts pull.
    Asked once per test process; an image already built from this commit, in a checkout with
    no change, is left as it is (CI builds them all early), any other is built again."""
    import subprocess
    import sys
    from pathlib import Path

    tool = Path(__file__).parent / "tools" / "images.py"
    result = subprocess.run([sys.executable, str(tool), "build"], capture_output=True, text=True, timeout=2400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return "0.1.0"


@pytest.fixture(autouse=True, scope="module")
def _no_cassandra_client_outlives_its_module() -> Iterator[None]:
    """Fail the module that leaves a cassandra-driver Cluster connected, and close it.

    A connected Cluster's event-loop thread draws from the ``random`` module whenever the server
    announces a schema change (cluster.py, ``_delay_for_event_type``), and every test's CREATE or
    DROP announces one to every client, the other worker's included. Hypothesis fails a property
    test whose draw saw the global ``random`` state change ("Do not use the `random` module inside
    strategies"), so a Cluster kept past its module made whichever property test ran later in the
    same worker fail at random (a red CI on test_avro_fast_repeats.py)."""
    yield
    driver = sys.modules.get("cassandra.cluster")
    if driver is None:
        return
    # Every connected Cluster is in this set until its shutdown() (the driver's atexit list).
    alive = [cluster for cluster in list(driver._clusters_for_shutdown) if not cluster.is_shutdown]
    for cluster in alive:
        cluster.shutdown()
    if alive:
        pytest.fail(f"{len(alive)} cassandra-driver Cluster(s) still connected after the module: shut each down")
