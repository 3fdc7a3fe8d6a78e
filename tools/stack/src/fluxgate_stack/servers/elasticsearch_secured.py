"""Elasticsearch with security on: HTTPS from the stack's CA, users, least-privilege roles.

A second single node (``elasticsearch-secured``, not started by a bare ``up``) beside the
lab's open one, on its own ports (9201 HTTPS, 9301 transport) and folders, from the same
integ-test zip (its x-pack-security module has TLS, the file realm and file roles):

- HTTP and transport TLS with the stack's server certificate (:mod:`fluxgate_stack.pki`),
  copied into the node's config folder (Elasticsearch reads TLS files only from there);
- users of the file realm, one per service that uses Elasticsearch, each with the one role
  it needs (:data:`ROLES`), and ``fluxgate-admin`` (``superuser``) for the stack itself and
  test clean-ups; no anonymous access (a request without credentials gets 401);
- passwords random, made once, kept 0600 in ``.local/pki/elasticsearch/<user>.password``
  beside their PBKDF2 hashes (what the node's ``users`` file holds), so a restart or a
  ``down``/``up`` keeps them. :func:`elasticsearch_user` and :func:`elasticsearch_env` give
  them to tests and ``make run``.

The reserved ``elastic`` user gets no password from the stack and is not used: the file realm's
``fluxgate-admin`` is the superuser. API keys and the native realm are not available: they live
in the ``.security`` index, which this distribution cannot create (it lacks the analysis-common
module; the node warns once at start that it failed to sync built-in roles to it).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from fluxgate_stack.errors import StackError
from fluxgate_stack.pki import Pki, ensure_pki
from fluxgate_stack.servers.base import Port
from fluxgate_stack.servers.elasticsearch import HEALTH_PATH, ElasticsearchServer
from fluxgate_stack.settings import StackSettings

SECURED_HEAP = "384m"
PBKDF2_ITERATIONS = 10_000  # Elasticsearch's default cost for {PBKDF2}: a login stays cheap
LOGIN_WAIT_SECONDS = 15.0
PROBE_TIMEOUT = 2.0


@dataclass(frozen=True)
class EsRole:
    """A user of the secured node and the one role it has (``definition``: roles.yml, as JSON)."""

    username: str
    role: str
    definition: dict[str, object] | None = None  # None: a built-in role (superuser)


# The aggregates' indices: the persisters' default alias (``temperatures``) and its daily
# indices, and a prefixed pipeline's (``<prefix>temperature_aggregates``: run_pipeline's
# Names, a soak run beside `make run`).
INDEX_PATTERNS = ["temperatures*", "*temperature_aggregates*"]

# What each service does to Elasticsearch, and no more. The es-persister checks health,
# puts its index templates (with their alias), creates the daily indices by writing to them,
# indexes and upserts, and its retention lists, deletes or closes expired indices. The
# console reads documents and counts per index.
ROLES: dict[str, EsRole] = {
    "admin": EsRole("fluxgate-admin", "superuser"),
    "es-persister": EsRole(
        "fluxgate-es-persister",
        "fluxgate_es_persister",
        {
            "cluster": ["monitor", "manage_index_templates"],
            "indices": [
                {
                    "names": INDEX_PATTERNS,
                    "privileges": [
                        "create_index",
                        "index",
                        "delete_index",
                        "monitor",
                        "view_index_metadata",
                        "indices:admin/close*",
                    ],
                }
            ],
        },
    ),
    "console": EsRole(
        "fluxgate-console",
        "fluxgate_console",
        {
            "cluster": ["monitor"],
            "indices": [{"names": INDEX_PATTERNS, "privileges": ["read", "monitor", "view_index_metadata"]}],
        },
    ),
}


class ElasticsearchSecuredServer(ElasticsearchServer):
    """Elasticsearch, single node, security on (TLS and users), on loopback."""

    name = "elasticsearch-secured"
    default = False

    def __init__(self, settings: StackSettings) -> None:
        # The parent's settings, moved to this node's ports and heap: its machinery stays as is.
        node = settings.model_copy(
            update={
                "es_port": settings.es_secure_port,
                "es_transport_port": settings.es_secure_transport_port,
                "es_heap": SECURED_HEAP,
            }
        )
        super().__init__(node, extra_settings=security_settings())
        self.stack_settings = settings
        self.certs_dir = self.config_dir / "certs"

    @property
    def url(self) -> str:
        return f"https://{self.settings.host}:{self.settings.es_port}"

    @property
    def pki(self) -> Pki:
        return Pki(self.settings.pki_dir)

    def ports(self) -> list[Port]:
        return [Port(self.settings.es_port), Port(self.settings.es_transport_port)]

    def config_files(self) -> dict[Path, str]:
        # Made here, before the fingerprint is taken: a new certificate or password restarts the node.
        pki = ensure_pki(self.settings.pki_dir, self.settings.host)
        accounts = ensure_credentials(self.settings)
        files = super().config_files()
        files[self.config_dir / "roles.yml"] = roles_yml(accounts)
        files[self.config_dir / "users_roles"] = users_roles(accounts)
        files[self.certs_dir / "server.crt"] = pki.server_cert.read_text()
        files[self.certs_dir / "ca.crt"] = pki.ca_cert.read_text()
        return files

    def prepare(self) -> None:
        """The secrets (the server key, the password hashes) go in 0600, owned by the node's user,
        never through ``config_files`` (which leaves files readable by everyone)."""
        self.certs_dir.mkdir(parents=True, exist_ok=True)
        private = {
            self.certs_dir / "server.key": self.pki.server_key.read_bytes(),
            self.config_dir / "users": users_file(ensure_credentials(self.settings)).encode(),
        }
        for path, data in private.items():
            _write_private(path, data)
        super().prepare()  # hands config/ (and so the files above) to the node's user

    def probe(self) -> bool:
        # Only read: `status` probes every server, and must not make passwords for one never started.
        admin = _load(credentials_dir(self.settings), ROLES["admin"])
        if admin is None:
            return False
        try:
            with self._client(admin.auth) as client:
                return client.get(HEALTH_PATH).status_code == 200
        except httpx.HTTPError:
            return False

    def provision(self) -> None:
        """Each user logs in (the file realm read them at start, or reloads them within seconds)."""
        deadline = time.monotonic() + LOGIN_WAIT_SECONDS
        for role, account in ensure_credentials(self.settings).items():
            while not self._logs_in(account):
                if time.monotonic() > deadline:
                    reason = f"user {account.username} ({role}) cannot log in"
                    raise StackError(f"{self.name}: {reason}; see {self.log_file}")
                time.sleep(0.5)

    def env(self) -> dict[str, str]:
        return {"FLUXGATE_ELASTICSEARCH_SECURE_URL": self.url, "FLUXGATE_ELASTICSEARCH_CA_FILE": str(self.pki.ca_cert)}

    def _logs_in(self, account: Account) -> bool:
        try:
            with self._client(account.auth) as client:
                answer = client.get("/_security/_authenticate")
        except httpx.HTTPError:
            return False
        return answer.status_code == 200 and answer.json().get("username") == account.username

    def _client(self, auth: tuple[str, str]) -> httpx.Client:
        return httpx.Client(base_url=self.url, auth=auth, verify=str(self.pki.ca_cert), timeout=PROBE_TIMEOUT)


def security_settings() -> dict[str, str]:
    """elasticsearch.yml's security part; TLS files relative to the config folder."""
    tls = {
        "key": "certs/server.key",
        "certificate": "certs/server.crt",
        "certificate_authorities": "certs/ca.crt",
    }
    settings = {
        "xpack.security.enabled": "true",
        "xpack.security.http.ssl.enabled": "true",
        # Not required here (single-node discovery bound to loopback skips the transport TLS
        # bootstrap check), but what every production node has: the node is configured as one.
        "xpack.security.transport.ssl.enabled": "true",
        # The stack's certificate is for servers (serverAuth only): with no second node, no
        # peer ever presents one, so only the chain is checked.
        "xpack.security.transport.ssl.verification_mode": "certificate",
    }
    for layer in ("http", "transport"):
        settings.update({f"xpack.security.{layer}.ssl.{key}": value for key, value in tls.items()})
    return settings


@dataclass(frozen=True)
class SecuredElasticsearch:
    """Where the secured node is and how to get in, for fixtures: behind the root conftest's
    ``secured_elasticsearch``."""

    url: str
    ca_file: Path
    settings: StackSettings

    def user(self, role: str) -> tuple[str, str]:
        """``(username, password)`` of ``role``: ``es-persister``, ``console`` or ``admin``."""
        return elasticsearch_user(role, self.settings)

    def env(self, prefix: str, role: str, group: str = "ELASTICSEARCH") -> dict[str, str]:
        """A service's Elasticsearch settings as ``role`` (see :func:`elasticsearch_env`)."""
        return elasticsearch_env(prefix, group, role, self.settings)


def secured_elasticsearch(settings: StackSettings | None = None) -> SecuredElasticsearch:
    """Start (or reuse) the secured node; where it is and how to get in."""
    from fluxgate_stack.stack import Stack  # the stack imports the servers: imported when called

    settings = settings or StackSettings()
    endpoints = Stack(settings).up([ElasticsearchSecuredServer.name])
    return SecuredElasticsearch(endpoints.secure_elasticsearch_url, endpoints.ca_file, settings)


# Credentials --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Account:
    """One user of the secured node: its name, role, password and where the password is kept."""

    username: str
    role: EsRole
    password: str = field(repr=False)  # never in a test's failure output or a log line
    password_file: Path
    password_hash: str = field(repr=False)

    @property
    def auth(self) -> tuple[str, str]:
        return (self.username, self.password)


def credentials_dir(settings: StackSettings) -> Path:
    """Where the secured node's passwords and their hashes are kept (mode 0700 folder, 0600 files)."""
    return settings.pki_dir / "elasticsearch"


def ensure_credentials(settings: StackSettings) -> dict[str, Account]:
    """Every role's account: passwords made once (random) and reused. Safe across processes."""
    folder = credentials_dir(settings)
    accounts = {role: _load(folder, spec) for role, spec in ROLES.items()}
    if all(accounts.values()):
        return {role: account for role, account in accounts.items() if account}
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    with _locked(folder / ".lock"):
        return {role: _load(folder, spec) or _make(folder, spec) for role, spec in ROLES.items()}


def elasticsearch_user(role: str, settings: StackSettings | None = None) -> tuple[str, str]:
    """``(username, password)`` of ``role`` (``es-persister``, ``console`` or ``admin``) on the secured node."""
    account = _account(role, settings)
    return account.username, account.password


def elasticsearch_password_file(role: str, settings: StackSettings | None = None) -> Path:
    """The 0600 file holding ``role``'s password (what ``..._ELASTICSEARCH__PASSWORD_FILE`` names)."""
    return _account(role, settings).password_file


def elasticsearch_env(prefix: str, group: str, role: str, settings: StackSettings | None = None) -> dict[str, str]:
    """A service's settings for the secured node as ``role``, e.g. for prefix ``FLUXGATE_ES_``,
    group ``ELASTICSEARCH``: ``FLUXGATE_ES_ELASTICSEARCH__HOSTS`` (a JSON list), ``__USERNAME``,
    ``__PASSWORD_FILE`` (the password stays out of the environment) and ``__CA_CERTS``."""
    settings = settings or StackSettings()
    account = _account(role, settings)
    head = f"{prefix if prefix.endswith('_') else prefix + '_'}{group.upper().rstrip('_')}__"
    return {
        f"{head}HOSTS": json.dumps([f"https://{settings.host}:{settings.es_secure_port}"]),
        f"{head}USERNAME": account.username,
        f"{head}PASSWORD_FILE": str(account.password_file),
        f"{head}CA_CERTS": str(Pki(settings.pki_dir).ca_cert),
    }


def roles_yml(accounts: dict[str, Account]) -> str:
    """The file roles; JSON is YAML, so each definition is written as JSON."""
    lines = ["# written by fluxgate-stack before every start"]
    lines += [
        f"{account.role.role}: {json.dumps(account.role.definition)}"
        for account in accounts.values()
        if account.role.definition is not None
    ]
    # Not read by Elasticsearch: the fingerprint follows the passwords, so a new one restarts the node.
    digest = hashlib.sha256(users_file(accounts).encode()).hexdigest()[:16]
    return "\n".join([*lines, f"# users sha256 {digest}"]) + "\n"


def users_roles(accounts: dict[str, Account]) -> str:
    return "".join(f"{account.role.role}:{account.username}\n" for account in accounts.values())


def users_file(accounts: dict[str, Account]) -> str:
    return "".join(f"{account.username}:{account.password_hash}\n" for account in accounts.values())


def pbkdf2_hash(password: str, salt: bytes | None = None, iterations: int = PBKDF2_ITERATIONS) -> str:
    """Elasticsearch's ``{PBKDF2}`` form: HMAC-SHA512, a 32-byte salt and a 256-bit key, base64."""
    salt = salt if salt is not None else secrets.token_bytes(32)
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, dklen=32)
    return f"{{PBKDF2}}{iterations}${base64.b64encode(salt).decode()}${base64.b64encode(key).decode()}"


def pbkdf2_matches(password: str, stored: str) -> bool:
    try:
        head, salt, _key = stored.split("$")
        iterations = int(head.removeprefix("{PBKDF2}"))
        expected = pbkdf2_hash(password, base64.b64decode(salt), iterations)
    except ValueError:
        return False
    return hmac.compare_digest(expected, stored)


def _account(role: str, settings: StackSettings | None) -> Account:
    if role not in ROLES:
        raise StackError(f"no Elasticsearch role {role!r}; known: {', '.join(ROLES)}")
    return ensure_credentials(settings or StackSettings())[role]


def _load(folder: Path, spec: EsRole) -> Account | None:
    """The account kept in ``folder``, or None when a file is missing or the hash is not the password's."""
    password_file, hash_file = folder / f"{spec.username}.password", folder / f"{spec.username}.hash"
    try:
        password, stored = password_file.read_text().strip(), hash_file.read_text().strip()
    except OSError:
        return None
    if not password or not pbkdf2_matches(password, stored):
        return None
    return Account(spec.username, spec, password, password_file, stored)


def _make(folder: Path, spec: EsRole) -> Account:
    password = secrets.token_urlsafe(24)
    stored = pbkdf2_hash(password)
    password_file, hash_file = folder / f"{spec.username}.password", folder / f"{spec.username}.hash"
    _write_private(hash_file, stored.encode())  # the hash first: a password is never without its hash
    _write_private(password_file, password.encode())
    return Account(spec.username, spec, password, password_file, stored)


def _write_private(path: Path, data: bytes) -> None:
    """Atomically, mode 0600 from the start."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


__all__ = [
    "ROLES",
    "ElasticsearchSecuredServer",
    "SecuredElasticsearch",
    "elasticsearch_env",
    "elasticsearch_password_file",
    "elasticsearch_user",
    "secured_elasticsearch",
]
