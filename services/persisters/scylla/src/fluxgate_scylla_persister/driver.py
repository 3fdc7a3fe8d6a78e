"""The one place ``cassandra-driver`` is configured: connection class, policies, errors.

The connection class is chosen explicitly: libev, which the driver's manylinux wheels
bundle. ``cassandra.cluster`` picks a default at import (libev, else ``asyncore``, which
Python 3.12 removed); importing the libev reactor first makes a missing libev fail here,
with a message that says what to do, instead of depending on ``asyncore``.
"""

from __future__ import annotations

import ssl
from typing import Any

from fluxgate_core.errors import ConfigError, SettingRefused

try:
    from cassandra.io.libevreactor import LibevConnection
except ImportError as exc:  # DependencyException is an ImportError too: the C extension is missing
    raise ConfigError(
        "cassandra-driver was built without its libev reactor; install it from a wheel "
        "(pip install --only-binary cassandra-driver cassandra-driver)"
    ) from exc


from cassandra import AuthenticationFailed, ConsistencyLevel, OperationTimedOut, RequestExecutionException
from cassandra.auth import AuthProvider, PlainTextAuthenticator
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

from fluxgate_core.store_access import ScyllaAccess, speaks_tls
from fluxgate_scylla_persister.settings import ConnectionSettings

CONNECTION_CLASS = LibevConnection
TLS_PROBE_TIMEOUT = 3.0
GROUP = "scylla"  # the settings group of the nodes' address and access (ScyllaSettings.scylla)

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
    if settings.username:
        options["auth_provider"] = SettingsAuthProvider(settings)
    if (context := tls_context(settings)) is not None:
        options["ssl_context"] = context
    return Cluster(**options)


class SettingsAuthProvider(AuthProvider):  # type: ignore[misc]  # the driver is untyped
    """PasswordAuthenticator's login, the password read at every new connection: a rotated
    ``password_file`` (a mounted Secret) is picked up without a restart."""

    def __init__(self, access: ScyllaAccess) -> None:
        self._access = access

    def new_authenticator(self, host: str) -> PlainTextAuthenticator:
        credentials = self._access.credentials()
        if credentials is None:
            raise AuthenticationFailed("no username set")
        return PlainTextAuthenticator(*credentials)


def tls_context(settings: ScyllaAccess) -> ssl.SSLContext | None:
    """The settings' TLS context; a CA file that cannot be read is a setting to fix."""
    try:
        return settings.tls_context()
    except (OSError, ssl.SSLError) as exc:
        raise settings.unreadable_ca(GROUP, exc) from exc


def refusal(error: BaseException, settings: ConnectionSettings) -> SettingRefused | None:
    """The setting to blame when the nodes refused to connect: the login, the TLS settings or
    the CA; None when nothing says a setting is wrong (the nodes are away: an outage)."""
    causes = list(error.errors.values()) if isinstance(error, NoHostAvailable) and error.errors else [error]
    where = f"Scylla/Cassandra at {', '.join(settings.contact_points)}:{settings.port}"
    for cause in causes:
        if isinstance(cause, AuthenticationFailed):
            return settings.login_refused(GROUP, where, str(cause))
        if "CERTIFICATE_VERIFY_FAILED" in str(cause):
            return settings.handshake_refused(GROUP, where, str(cause))
    timeout = min(settings.connect_timeout_s, TLS_PROBE_TIMEOUT)  # per contact point, on the way to exit 1
    if not settings.uses_tls and any(speaks_tls(host, settings.port, timeout) for host in settings.contact_points):
        return settings.tls_required(GROUP, where)
    return None


__all__ = ["CONNECTION_CLASS", "Cluster", "describe", "is_transient", "make_cluster", "refusal"]
