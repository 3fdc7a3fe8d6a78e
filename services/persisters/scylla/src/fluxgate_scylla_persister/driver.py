"""The one place ``cassandra-driver`` is configured: connection class, policies, errors.

The connection class is chosen explicitly: libev, which the driver's manylinux wheels
bundle. ``cassandra.cluster`` picks a default at import (libev, else ``asyncore``, which
Python 3.12 removed); importing the libev reactor first makes a missing libev fail here,
with a message that says what to do, instead of depending on ``asyncore``.
"""

from __future__ import annotations

from typing import Any

from fluxgate_core.errors import ConfigError

try:
    from cassandra.io.libevreactor import LibevConnection
except ImportError as exc:  # DependencyException is an ImportError too: the C extension is missing
    raise ConfigError(
        "cassandra-driver was built without its libev reactor; install it from a wheel "
        "(pip install --only-binary cassandra-driver cassandra-driver)"
    ) from exc


from cassandra import ConsistencyLevel, OperationTimedOut, RequestExecutionException
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.connection import ConnectionException
from cassandra.policies import (
    DCAwareRoundRobinPolicy,
    ExponentialReconnectionPolicy,
    FallthroughRetryPolicy,
    TokenAwarePolicy,
)
from cassandra.protocol import ErrorMessage, ServerError
from cassandra.protocol import RequestExecutionException as ServerExecutionError

from fluxgate_scylla_persister.settings import ConnectionSettings

CONNECTION_CLASS = LibevConnection

#: Errors after which the same statement may well succeed: the store is away, overloaded or
#: timing out. Everything else (InvalidRequest, a value the column cannot hold ...) never will.
TRANSIENT: tuple[type[BaseException], ...] = (
    RequestExecutionException,  # Unavailable, Read/WriteTimeout, Read/WriteFailure ...
    OperationTimedOut,
    NoHostAvailable,
    ConnectionException,
    ServerExecutionError,  # Overloaded, IsBootstrapping, as the server sends them
    ServerError,
)


def is_transient(error: BaseException) -> bool:
    return isinstance(error, TRANSIENT)


def describe(error: BaseException) -> str:
    """``Class: message``; the driver's server errors carry their text in ``summary``/``message``."""
    if isinstance(error, ErrorMessage):
        return f"{type(error).__name__}: {error.summary_msg()}"
    if isinstance(error, NoHostAvailable) and error.errors:
        causes = "; ".join(f"{host}: {type(cause).__name__}: {cause}" for host, cause in error.errors.items())
        return f"NoHostAvailable: {causes}"
    return f"{type(error).__name__}: {error}"


def make_cluster(settings: ConnectionSettings) -> Cluster:
    """A ``Cluster``: token-aware routing within the local datacenter, no retries of its own
    (retrying is the runner's job), quick reconnection after an outage."""
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=settings.local_datacenter)),
        retry_policy=FallthroughRetryPolicy(),
        consistency_level=ConsistencyLevel.name_to_value[settings.consistency],
        request_timeout=settings.request_timeout_s,
    )
    options: dict[str, Any] = {
        "contact_points": settings.contact_points,
        "port": settings.port,
        "connection_class": CONNECTION_CLASS,
        "execution_profiles": {EXEC_PROFILE_DEFAULT: profile},
        "reconnection_policy": ExponentialReconnectionPolicy(0.2, settings.reconnect_max_delay_s),
        "connect_timeout": settings.connect_timeout_s,
        "control_connection_timeout": settings.connect_timeout_s,
    }
    if settings.username and settings.password:
        options["auth_provider"] = PlainTextAuthProvider(settings.username, settings.password.get_secret_value())
    if (context := settings.tls_context()) is not None:
        options["ssl_context"] = context
    return Cluster(**options)


__all__ = ["CONNECTION_CLASS", "Cluster", "describe", "is_transient", "make_cluster"]
