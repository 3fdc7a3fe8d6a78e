"""Can this service use the schema registry, as itself? Asked once, at start.

Without it, a registry that refuses the service's credentials, or whose certificate the
service does not trust, showed only later and vaguely: a gateway stopped with "registry
refused schema ... 401" (exit 1, as if the registry were away), and a persister started,
consumed, and then retried each record's schema lookup for ever, unready. :func:`verify_registry`
asks for the subjects through the client every service uses (so the same TLS and
credentials), and turns each failure into an error naming the setting to fix:

- 401 (the credentials refused): :class:`ConfigError` naming ``basic_auth_user_info(_file)``;
- 403 (the credentials lack the read role): :class:`ConfigError` naming them too;
- a certificate that does not verify: :class:`ConfigError` naming ``ca_file``;
- another 4xx (a wrong path): :class:`ConfigError` naming ``url``;
- no answer, or a 5xx: :class:`RegistryError` (retriable) naming ``url``.

Reading is all the check can try without changing the registry; a service that registers
its schema at start does so inside :func:`registrations_named`, which names the credentials
when the registry refuses them the write (a readonly client where a writer is needed).

No message holds the secret: only the client's user name (the part before ``:``) is said.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator

import structlog
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from fluxgate_core.errors import ConfigError, RegistryError
from fluxgate_core.settings import RegistrySettings

log = structlog.get_logger(__name__)
REFUSED = {401: "refused the credentials of", 403: "gives no read access to"}


def verify_registry(
    registry: RegistrySettings, env_prefix: str, timeout: float = 10.0, *, away_ok: bool = False
) -> None:
    """List the registry's subjects with ``registry``'s settings; raise an error naming the
    setting at fault (``env_prefix``: the service's, e.g. ``FLUXGATE_MQTT_``). ``away_ok``:
    a registry that does not answer is only logged (a consumer that waits for it while it
    reads, as persisters do, need not fail its start for an outage)."""
    env = f"{env_prefix.upper()}REGISTRY__"
    error = _ask(registry, env, timeout)
    if error is None:
        log.info("registry.verified", url=registry.url, user=_user(registry))
    elif away_ok and isinstance(error, RegistryError):
        log.warning("registry.unreachable", url=registry.url, error=str(error))
    else:
        raise error


def _ask(registry: RegistrySettings, env: str, timeout: float) -> Exception | None:
    """GET /subjects; the error that says what is wrong, or None."""
    try:
        client = SchemaRegistryClient({**registry.client_config(), "timeout": timeout, "max.retries": 1})
        client.get_subjects()
    except SchemaRegistryError as exc:
        return _answered(registry, env, exc)
    except Exception as exc:  # httpx's transport errors, ssl's; the client wraps neither
        return _unanswered(registry, env, exc)
    return None


def _answered(registry: RegistrySettings, env: str, exc: SchemaRegistryError) -> Exception:
    status = exc.http_status_code
    if status in REFUSED:
        setting = registry.user_info_setting
        who = repr(_user(registry)) if _user(registry) else "an anonymous client"
        return ConfigError(
            f"registry.{setting} [env {env}{setting.upper()}]: the registry at {registry.url} {REFUSED[status]} "
            f"{who} ({status})"
        )
    if 400 <= status < 500:
        return ConfigError(f"registry.url [env {env}URL]: {registry.url} answered {status} to GET /subjects: {exc}")
    return RegistryError(f"registry.url [env {env}URL]: {registry.url} answered {status}: {exc}", retriable=True)


def _unanswered(registry: RegistrySettings, env: str, exc: Exception) -> Exception:
    if _certificate_refused(exc):
        trusted = f"the CA in {registry.ca_file}" if registry.ca_file else "the default CA bundle (certifi's)"
        return ConfigError(
            f"registry.ca_file [env {env}CA_FILE]: the registry's certificate at {registry.url} does not verify "
            f"with {trusted}: {exc}"
        )
    return RegistryError(f"registry.url [env {env}URL]: no answer from {registry.url}: {exc}", retriable=True)


def _certificate_refused(exc: BaseException) -> bool:
    """A TLS failure anywhere in the chain (httpx keeps ssl's error as the cause or context)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _user(registry: RegistrySettings) -> str | None:
    user_info = registry.user_info()
    return user_info.partition(":")[0] if user_info else None


@contextlib.contextmanager
def registrations_named(registry: RegistrySettings, env_prefix: str) -> Iterator[None]:
    """Around a service's registrations at start: a registration refused with 401 or 403 is the
    credentials' fault, not the registry's being away: :class:`ConfigError` naming them."""
    try:
        yield
    except RegistryError as exc:
        status = getattr(exc.__cause__, "http_status_code", None)
        if status not in REFUSED:
            raise
        setting = registry.user_info_setting
        who = repr(_user(registry)) if _user(registry) else "an anonymous client"
        raise ConfigError(
            f"registry.{setting} [env {env_prefix.upper()}REGISTRY__{setting.upper()}]: the registry at "
            f"{registry.url} does not let {who} register ({status}; this service needs a client that may "
            f"write schemas): {exc}"
        ) from None
