"""Users of the secured Cassandra node (server ``cassandra-secured``): one role per service,
allowed only what it needs, and a superuser in place of the default ``cassandra``.

Passwords are random, made once and kept in ``.local/pki/cassandra-secured.json`` (mode
0600, beside the CA's key); :func:`provision` makes the node's roles match them on every
``up``, idempotently. A service's environment for the node::

    from fluxgate_stack.secured_cassandra import cassandra_env
    env = cassandra_env("FLUXGATE_SCYLLA_", "scylla-persister")
    # FLUXGATE_SCYLLA_SCYLLA__PORT=9043, __USERNAME, __PASSWORD, __TLS_CA_FILE
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fluxgate_stack.cql import BAD_CREDENTIALS, CqlError, CqlSession, Node, quoted
from fluxgate_stack.errors import StackError
from fluxgate_stack.pki import Pki
from fluxgate_stack.private_files import locked, write_private
from fluxgate_stack.settings import StackSettings

__all__ = [
    "ADMIN",
    "KEYSPACE",
    "ROLE_GRANTS",
    "SecuredCassandra",
    "cassandra_env",
    "cassandra_user",
    "node",
    "provision",
    "users_file",
]

ADMIN = "admin"  # the superuser that replaces the default cassandra/cassandra
ADMIN_ROLE = "fluxgate_admin"
DEFAULT_SUPERUSER = ("cassandra", "cassandra")
#: The keyspace the scylla-persister writes (ConnectionSettings.keyspace's default), made by
#: provisioning: with it there, the persister needs CREATE on it alone, not on every keyspace.
KEYSPACE = "fluxgate"
#: Each service's permissions on KEYSPACE, and no more: the persister creates its tables
#: (AUTOCREATE) and writes them; the console only reads.
ROLE_GRANTS: dict[str, tuple[str, ...]] = {
    "scylla-persister": ("CREATE", "MODIFY", "SELECT"),
    "console": ("SELECT",),
}
LOGIN_WAIT = 60.0  # the default superuser appears a moment after the port opens


def users_file(settings: StackSettings | None = None) -> Path:
    return (settings or StackSettings()).pki_dir / "cassandra-secured.json"


def role_name(role: str) -> str:
    """The CQL role of a service (an unquoted identifier: no '-')."""
    return ADMIN_ROLE if role == ADMIN else role.replace("-", "_")


def cassandra_user(role: str, settings: StackSettings | None = None) -> tuple[str, str]:
    """``(username, password)`` of ``role`` ("scylla-persister", "console" or "admin") on the
    secured node; the password is made (once) if it is not yet."""
    if role != ADMIN and role not in ROLE_GRANTS:
        raise StackError(f"unknown Cassandra role {role!r}: want one of {', '.join([ADMIN, *ROLE_GRANTS])}")
    return role_name(role), _passwords(users_file(settings))[role]


def cassandra_env(
    prefix: str, role: str, settings: StackSettings | None = None, password_file: Path | None = None
) -> dict[str, str]:
    """A service's ``SCYLLA__*`` environment for the secured node as ``role``, e.g.
    ``cassandra_env("FLUXGATE_CONSOLE_", "console")``. With ``password_file`` the password is
    written there (mode 0600) and given as ``SCYLLA__PASSWORD_FILE``, as a mounted Secret would
    be, instead of inline."""
    settings = settings or StackSettings()
    username, password = cassandra_user(role, settings)
    group = f"{prefix}SCYLLA__"
    env = {
        f"{group}CONTACT_POINTS": json.dumps([settings.host]),
        f"{group}PORT": str(settings.cassandra_secure_port),
        f"{group}USERNAME": username,
        f"{group}PASSWORD": password,
        f"{group}TLS_CA_FILE": str(Pki(settings.pki_dir).ca_cert),
    }
    if password_file is not None:
        write_private(password_file, password + "\n")
        del env[f"{group}PASSWORD"]
        env[f"{group}PASSWORD_FILE"] = str(password_file)
    return env


@dataclass(frozen=True)
class SecuredCassandra:
    """Where the secured node is, for tests and scripts: ``host``, ``port`` (9043), ``ca_file``,
    each role's ``user(role)`` and a service's ``env(prefix, role)``."""

    settings: StackSettings

    @property
    def host(self) -> str:
        return self.settings.host

    @property
    def port(self) -> int:
        return self.settings.cassandra_secure_port

    @property
    def ca_file(self) -> Path:
        return Pki(self.settings.pki_dir).ca_cert

    def user(self, role: str) -> tuple[str, str]:
        return cassandra_user(role, self.settings)

    def env(self, prefix: str, role: str, password_file: Path | None = None) -> dict[str, str]:
        return cassandra_env(prefix, role, self.settings, password_file)


def node(settings: StackSettings) -> Node:
    return Node(settings.host, settings.cassandra_secure_port, Pki(settings.pki_dir).ca_cert)


def provision(settings: StackSettings) -> None:
    """Make the node's roles match the stored passwords: the admin superuser (dropping the
    default one), the keyspace, and each service's role with its grants. Only adds: a test
    running against the node meanwhile never loses a grant."""
    target = node(settings)
    with _admin_session(target, settings) as admin:
        admin.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} "
            "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        for role, permissions in ROLE_GRANTS.items():
            username, password = cassandra_user(role, settings)
            _ensure_role(admin, target, username, password, superuser=False)
            for permission in permissions:
                admin.execute(f"GRANT {permission} ON KEYSPACE {KEYSPACE} TO {username}")


@contextlib.contextmanager
def _admin_session(target: Node, settings: StackSettings) -> Iterator[CqlSession]:
    """Logged in as the admin; on a fresh node, made first (as the default superuser, which
    is then dropped: its well-known password must not open the node)."""
    username, password = cassandra_user(ADMIN, settings)
    deadline = time.monotonic() + LOGIN_WAIT
    while True:
        session = _login(target, username, password) or _login(target, *DEFAULT_SUPERUSER)
        if session is not None:
            break
        if time.monotonic() > deadline:
            raise StackError(
                f"cassandra-secured: neither {username} nor the default superuser can log in within {LOGIN_WAIT:g}s "
                f"({users_file(settings)} lost while the data stayed? `fluxgate-stack down --wipe cassandra-secured`)"
            )
        time.sleep(0.5)
    with session:
        _ensure_role(session, target, username, password, superuser=True)
    with CqlSession(target, username, password) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {DEFAULT_SUPERUSER[0]}")
        yield admin


def _login(target: Node, username: str, password: str) -> CqlSession | None:
    """A session, or None while the login is refused (a wrong password, or the node's auth
    tables not ready yet: both are BAD_CREDENTIALS or an unavailable consistency level)."""
    try:
        return CqlSession(target, username, password)
    except CqlError:
        return None
    except OSError:
        return None


def _ensure_role(admin: CqlSession, target: Node, username: str, password: str, *, superuser: bool) -> None:
    """Create the role, or give it the stored password if it does not log in with it (bcrypt
    on every ``up`` would cost time and churn the credentials cache for nothing)."""
    options = f"LOGIN = true AND SUPERUSER = {str(superuser).lower()} AND PASSWORD = {quoted(password)}"
    admin.execute(f"CREATE ROLE IF NOT EXISTS {username} WITH {options}")
    try:
        CqlSession(target, username, password).close()
    except CqlError as exc:
        if exc.code != BAD_CREDENTIALS:
            raise
        admin.execute(f"ALTER ROLE {username} WITH PASSWORD = {quoted(password)}")


def _passwords(path: Path) -> dict[str, str]:
    """Every role's password, made once for all roles (under a lock: parallel test workers)."""
    wanted = [ADMIN, *ROLE_GRANTS]
    stored = _read(path)
    if all(role in stored for role in wanted):
        return stored
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path.with_name(".cassandra-secured.lock")):
        stored = _read(path)
        if not all(role in stored for role in wanted):
            stored |= {role: secrets.token_urlsafe(24) for role in wanted if role not in stored}
            write_private(path, json.dumps(stored, indent=1, sort_keys=True) + "\n")
    return stored


def _read(path: Path) -> dict[str, str]:
    try:
        loaded = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {str(role): str(password) for role, password in loaded.items()}
