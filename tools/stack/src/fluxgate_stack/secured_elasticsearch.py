"""The secured Elasticsearch node's users: who they are, their roles, their passwords.

One user of the file realm per service that uses Elasticsearch, each with the one role it
needs (:data:`ROLES`), and ``fluxgate-admin`` (``superuser``) for the stack and test clean-ups.
Passwords are random, made once, kept 0600 in ``.local/pki/elasticsearch/<user>.password``
beside their PBKDF2 hashes (what the node's ``users`` file holds), so a restart or a
``down``/``up`` keeps them. :func:`elasticsearch_user` and :func:`elasticsearch_env` give
them to tests and ``make run``; the node itself is ``servers/elasticsearch_secured.py``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from fluxgate_stack.errors import StackError
from fluxgate_stack.pki import Pki
from fluxgate_stack.private_files import locked, write_private
from fluxgate_stack.settings import StackSettings

PBKDF2_ITERATIONS = 10_000  # Elasticsearch's default cost for {PBKDF2}: a login stays cheap


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
    from fluxgate_stack.servers.elasticsearch_secured import ElasticsearchSecuredServer
    from fluxgate_stack.stack import Stack  # the stack imports the servers: imported when called

    settings = settings or StackSettings()
    endpoints = Stack(settings).up([ElasticsearchSecuredServer.name])
    return SecuredElasticsearch(endpoints.secure_elasticsearch_url, endpoints.ca_file, settings)


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
    accounts = {role: load_account(folder, spec) for role, spec in ROLES.items()}
    if all(accounts.values()):
        return {role: account for role, account in accounts.items() if account}
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    with locked(folder / ".lock"):
        return {role: load_account(folder, spec) or _make(folder, spec) for role, spec in ROLES.items()}


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
    separator = "_" if prefix and not prefix.endswith("_") else ""  # "" gives the group's bare names
    head = f"{prefix}{separator}{group.upper().rstrip('_')}__"
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


def load_account(folder: Path, spec: EsRole) -> Account | None:
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
    write_private(hash_file, stored.encode())  # the hash first: a password is never without its hash
    write_private(password_file, password.encode())
    return Account(spec.username, spec, password, password_file, stored)


__all__ = [
    "INDEX_PATTERNS",
    "ROLES",
    "Account",
    "EsRole",
    "SecuredElasticsearch",
    "credentials_dir",
    "elasticsearch_env",
    "elasticsearch_password_file",
    "elasticsearch_user",
    "ensure_credentials",
    "secured_elasticsearch",
]
