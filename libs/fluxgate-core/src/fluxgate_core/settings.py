"""Settings building blocks: every service has one frozen ``BaseSettings`` made of these.

Each service sets its own ``env_prefix`` (``FLUXGATE_MQTT_``, ``FLUXGATE_COAP_`` ...) and
nested groups are reached with ``__``: ``FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS``.
:func:`load_settings` turns pydantic's validation errors into a :class:`ConfigError`
that names the environment variable, so a bad deploy fails at start with a usable message.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretBytes,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from fluxgate_core.errors import ConfigError

Compatibility = Literal[
    "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"
]


# Client properties that hold a secret (librdkafka's and the Java client's names).
SECRET_PROPERTY = re.compile(r"password|secret|jaas", re.IGNORECASE)


class Group(BaseModel):
    """A nested, frozen group of settings that rejects unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class TopicCreationSettings(Group):
    """Whether a service creates the topics it needs that do not exist yet, and how (Kafka
    Connect's ``topic.creation.default.*``). Off by default: a missing topic then stops the
    service at start, naming it and the command that creates it."""

    enable: bool = Field(
        False,
        description="create a missing topic this service writes or reads, at start (off: a missing topic exits 2, "
        "naming it and the command that creates it)",
    )
    partitions: int = Field(3, ge=-1, description="partitions of a topic created here; -1: the broker's num.partitions")
    replication_factor: int = Field(
        -1, ge=-1, description="replication factor of a topic created here; -1: the broker's default.replication.factor"
    )
    config: dict[str, str] = Field(
        default_factory=dict,
        description='topic-level config of a topic created here (JSON, e.g. {"retention.ms": "604800000"})',
    )

    @field_validator("partitions", "replication_factor")
    @classmethod
    def _not_zero(cls, count: int) -> int:
        if count == 0:
            raise ValueError("at least 1, or -1 for the broker's default")
        return count


class KafkaSettings(Group):
    """How to reach Kafka. ``extra`` passes any librdkafka property through unchanged."""

    bootstrap_servers: str = Field("127.0.0.1:9092", min_length=1, description="host:port list of brokers")
    client_id: str | None = Field(None, description="client.id; defaults to the service name")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = Field(
        None, description="SASL password (from a Secret); excludes sasl_password_file"
    )
    sasl_password_file: Path | None = Field(
        None,
        description="file holding the SASL password (a mounted Secret), read at every connection so a rotated "
        "password is picked up; excludes sasl_password",
    )
    ssl_ca_location: str | None = Field(None, description="CA bundle (PEM) for SSL/SASL_SSL; default: the system's")
    linger_ms: int = Field(5, ge=0, le=10_000, description="producer batching delay")
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "lz4"
    max_buffered_messages: int = Field(
        100_000, ge=1, description="librdkafka queue bound; beyond it producing applies backpressure"
    )
    group_instance_id: str | None = Field(
        None,
        min_length=1,
        max_length=249,
        description="group.instance.id (static membership, KIP-345) of a persister or device-status instance: "
        "unique in the group and stable across restarts (the pod name). A member restarted with it "
        "gets its partitions back at once, without a rebalance; one that stops for good holds them "
        "until the session times out (it never leaves the group, even on SIGTERM)",
    )
    extra: dict[str, str] = Field(
        default_factory=dict, description="extra librdkafka properties (never a secret: those have their settings)"
    )
    topic_creation: TopicCreationSettings = Field(default_factory=TopicCreationSettings)

    @field_validator("extra")
    @classmethod
    def _no_secret_in_extra(cls, extra: dict[str, str]) -> dict[str, str]:
        """``extra`` is a plain setting: a password there would show in the rendered config,
        the chart's values and any dump of the settings."""
        secret = sorted(key for key in extra if SECRET_PROPERTY.search(key))
        if secret:
            raise ValueError(f"{', '.join(secret)}: a secret does not go in extra; use sasl_password(_file)")
        return extra

    @model_validator(mode="after")
    def _credentials_complete(self) -> KafkaSettings:
        """A SASL protocol without a mechanism, a user or a password would only fail at the
        first connection, as a retried transport error; say which setting is missing now.
        Each message starts with the field it is about (see :func:`_describe`)."""
        sasl = self.security_protocol.startswith("SASL_")
        if self.sasl_password is not None and self.sasl_password_file is not None:
            raise ValueError("sasl_password_file: set either it or sasl_password, not both")
        if not sasl:
            if self.sasl_mechanism or self.sasl_username:
                raise ValueError(f"security_protocol: {self.security_protocol} uses no SASL, yet SASL settings are set")
            return self
        if self.sasl_mechanism is None:
            raise ValueError(f"sasl_mechanism: required with security_protocol {self.security_protocol}")
        if not self.sasl_username:
            raise ValueError(f"sasl_username: required with security_protocol {self.security_protocol}")
        if self.sasl_password is None and self.sasl_password_file is None:
            raise ValueError("sasl_password_file: a password is required (sasl_password or sasl_password_file)")
        if self.sasl_password_file is not None:
            self._read_password_file()
        return self

    def _read_password_file(self) -> str:
        assert self.sasl_password_file is not None
        return read_secret_file(self.sasl_password_file, "sasl_password_file")

    def password(self) -> str | None:
        """The SASL password, from the secret setting or read from its file now."""
        if self.sasl_password is not None:
            return self.sasl_password.get_secret_value()
        return self._read_password_file() if self.sasl_password_file is not None else None

    def client_config(self, default_client_id: str) -> dict[str, Any]:
        """Connection properties common to producers, consumers and admin clients."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id or default_client_id,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
            config["sasl.username"] = self.sasl_username or ""
            config["sasl.password"] = self.password() or ""
        if self.ssl_ca_location:
            config["ssl.ca.location"] = self.ssl_ca_location
        return config

    def producer_config(self, default_client_id: str) -> dict[str, Any]:
        """An idempotent, acks=all producer: no duplicates from retries, no loss on leader change."""
        config = self.client_config(default_client_id)
        config.update(
            {
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": self.linger_ms,
                "compression.type": self.compression_type,
                "queue.buffering.max.messages": self.max_buffered_messages,
                # Keep retrying inside librdkafka while Kafka is away; our own in-flight
                # bound turns a long outage into backpressure instead of lost records.
                "delivery.timeout.ms": 2_147_483_647,
            }
        )
        config.update(self.extra)
        return config

    def assigned_consumer_config(self, default_client_id: str, purpose: str) -> dict[str, Any]:
        """A consumer given its partitions (``assign``), never subscribed: it joins no group and
        commits nothing, so it needs no group ACL. librdkafka still requires a ``group.id``;
        ``purpose`` names it, as what the client is for."""
        config = self.client_config(default_client_id)
        config.update({"group.id": f"{self.client_id or default_client_id}-{purpose}", "enable.auto.commit": False})
        config.update(self.extra)
        return config

    def consumer_config(self, group_id: str, default_client_id: str) -> dict[str, Any]:
        """A consumer that commits only when told (after the records are safely handled elsewhere)."""
        config = self.client_config(default_client_id)
        config.update(
            {
                "group.id": group_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                # Only what producers committed: transactional writers never leak aborted records.
                "isolation.level": "read_committed",
            }
        )
        if self.group_instance_id:
            config["group.instance.id"] = self.group_instance_id
        config.update(self.extra)
        return config


def read_secret_file(path: Path, field: str) -> str:
    """The secret in ``path`` (a mounted Secret), without the trailing newline an editor adds;
    ``ValueError`` naming ``field`` when it cannot be read or is empty (pydantic then names the
    variable). Read again at each use, so a rotated Secret is picked up."""
    try:
        secret = path.read_text().rstrip("\r\n")
    except OSError as exc:
        raise ValueError(f"{field}: cannot read {path}: {exc.strerror}") from None
    if not secret:
        raise ValueError(f"{field}: {path} is empty")
    return secret


class RegistrySettings(Group):
    """A Confluent-compatible schema registry (Confluent, Karapace, Apicurio's ccompat API),
    over HTTP or HTTPS, anonymous or with HTTP basic auth."""

    url: str = Field("http://127.0.0.1:8081/apis/ccompat/v7", min_length=1)
    basic_auth_user_info: SecretStr | None = Field(
        None, description="user:password (from a Secret); excludes basic_auth_user_info_file"
    )
    basic_auth_user_info_file: Path | None = Field(
        None,
        description="file holding user:password (a mounted Secret), read whenever a registry client is made; "
        "excludes basic_auth_user_info",
    )
    ca_file: Path | None = Field(
        None, description="CA bundle (PEM) that an https registry's certificate must chain to; default: certifi's"
    )
    compatibility: Compatibility = "BACKWARD"

    @model_validator(mode="after")
    def _usable(self) -> RegistrySettings:
        """Each message starts with the field it is about (see :func:`_describe`), and never
        holds the secret."""
        if self.basic_auth_user_info is not None and self.basic_auth_user_info_file is not None:
            raise ValueError("basic_auth_user_info_file: set either it or basic_auth_user_info, not both")
        if self.basic_auth_user_info is not None and ":" not in self.basic_auth_user_info.get_secret_value():
            raise ValueError("basic_auth_user_info: want user:password (no ':' in it)")
        if self.basic_auth_user_info_file is not None:
            self._read_user_info_file()
        if self.ca_file is not None and not self.ca_file.is_file():
            raise ValueError(f"ca_file: {self.ca_file} is not a file")
        return self

    def _read_user_info_file(self) -> str:
        assert self.basic_auth_user_info_file is not None
        user_info = read_secret_file(self.basic_auth_user_info_file, "basic_auth_user_info_file")
        if ":" not in user_info:
            raise ValueError(f"basic_auth_user_info_file: {self.basic_auth_user_info_file} does not hold user:password")
        return user_info

    def user_info(self) -> str | None:
        """``user:password``, from the secret setting or read from its file now."""
        if self.basic_auth_user_info is not None:
            return self.basic_auth_user_info.get_secret_value()
        return self._read_user_info_file() if self.basic_auth_user_info_file is not None else None

    @property
    def user_info_setting(self) -> str:
        """The setting that holds the credentials: the one to fix when the registry refuses them."""
        return "basic_auth_user_info_file" if self.basic_auth_user_info_file is not None else "basic_auth_user_info"

    def client_config(self) -> dict[str, Any]:
        """confluent-kafka ``SchemaRegistryClient`` settings."""
        config: dict[str, Any] = {"url": self.url}
        user_info = self.user_info()
        if user_info is not None:
            config["basic.auth.user.info"] = user_info
        if self.ca_file is not None:
            config["ssl.ca.location"] = str(self.ca_file)
        return config


class HttpSettings(Group):
    """Where ``/healthz``, ``/readyz`` and ``/metrics`` are served."""

    host: str = "0.0.0.0"  # noqa: S104 - containers must expose it; override with 127.0.0.1 locally
    port: int = Field(9100, ge=0, le=65535, description="0 picks a free port")


def service_defaults(**values: Any) -> BeforeValidator:
    """A group's defaults for one service, e.g. its own HTTP port (:func:`group` puts it on a field).
    In effect when the environment sets none of the group's variables and when it sets
    only some (``..._HTTP__HOST`` alone keeps the service's port)."""

    def fill(given: Any) -> Any:
        if isinstance(given, Mapping):
            return {**values, **given}
        if isinstance(given, BaseModel):  # the default instance: what it was not given
            return given.model_copy(update={k: v for k, v in values.items() if k not in given.model_fields_set})
        return given

    return BeforeValidator(fill)


G = TypeVar("G", bound=Group)


def group(cls: type[G], **defaults: Any) -> G:
    """A settings class's field holding the group ``cls``, with this service's ``defaults``:
    ``http: HttpSettings = group(HttpSettings, port=9101)``, ``log: LogSettings = group(LogSettings)``.
    Typed as the group it gives, like pydantic's ``Field``; each service keeps its own field order."""
    if not defaults:
        return Field(default_factory=cls)
    annotated: Any = Annotated[cls, service_defaults(**defaults)]  # built at run time: not a static type
    field = FieldInfo.from_annotated_attribute(annotated, Field(default_factory=cls, validate_default=True))
    return cast(G, field)


class LogSettings(Group):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    json_output: bool = Field(False, description="JSON lines instead of key=value")


def service_config(env_prefix: str) -> SettingsConfigDict:
    """The settings config every service uses, differing only by prefix."""
    return SettingsConfigDict(
        env_prefix=env_prefix,
        env_nested_delimiter="__",
        frozen=True,
        extra="forbid",
        case_sensitive=False,
    )


S = TypeVar("S", bound=BaseSettings)


def load_settings(cls: type[S], **overrides: Any) -> S:
    """Build ``cls`` from the environment; raise :class:`ConfigError` naming each bad field,
    and each variable under the service's prefix that names no setting (a typo or a renamed
    setting would otherwise be ignored, the default used without a word)."""
    unknown = unknown_variables(cls)
    if unknown:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(unknown))
    try:
        return cls(**overrides)
    except ValidationError as exc:
        prefix = str(cls.model_config.get("env_prefix", ""))
        problems = [_describe(prefix, err, cls) for err in exc.errors()]
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from exc
    except SettingsError as exc:  # a JSON-valued variable (a list, a dict) that is not valid JSON
        prefix = str(cls.model_config.get("env_prefix", ""))
        field = re.search(r'field "([^"]+)"', str(exc))
        env_name = (prefix + field.group(1)).upper() if field else f"{prefix.upper()}*"
        env_name = _unparseable_variable(env_name) or env_name
        raise ConfigError(f"invalid configuration:\n  [env {env_name}]: {exc}: {exc.__cause__}") from exc


def unknown_variables(cls: type[BaseSettings]) -> list[str]:
    """A problem for each environment variable under ``cls``'s prefix whose first part (before
    ``__``) is none of its fields."""
    prefix = str(cls.model_config.get("env_prefix", "")).upper()
    if not prefix:
        return []
    fields = {name.upper() for name in cls.model_fields}
    problems = []
    for name in sorted(os.environ):
        upper = name.upper()
        if upper.startswith(prefix) and upper[len(prefix) :].split("__")[0] not in fields:
            known = ", ".join(prefix + field for field in sorted(fields))
            problems.append(f"[env {name}]: not a setting of this service (its settings: {known})")
    return problems


def _unparseable_variable(env_name: str) -> str | None:
    """For a nested group (``FLUXGATE_AGG_SPARK``), the ``__`` variable under it holding bad JSON."""
    for name, value in sorted(os.environ.items()):
        if name.upper().startswith(env_name.rstrip("*") + "__") and value.lstrip()[:1] in ("{", "["):
            try:
                json.loads(value)
            except ValueError:
                return name
    return None


def _describe(prefix: str, err: Any, cls: type[BaseModel]) -> str:
    path = [str(part) for part in err["loc"]]
    message = str(err["msg"]).removeprefix("Value error, ")
    if not path:  # a check across fields: its message names the variables itself
        return message
    # A group's check across its fields starts its message with the field it is about.
    field, colon, rest = message.partition(": ")
    if err["type"] == "value_error" and colon and field in _fields_at(cls, err["loc"]):
        loc = [*err["loc"], field]
        env_name = (prefix + "__".join(str(part) for part in loc if not isinstance(part, int))).upper()
        return f"{'.'.join(map(str, loc))} [env {env_name}]: {rest}"
    dotted = ".".join(path)
    # A list item (``resources.0.uri``) lives inside one JSON-valued variable: name that one.
    env_path = list(itertools.takewhile(lambda part: not isinstance(part, int), err["loc"]))
    env_name = (prefix + "__".join(map(str, env_path))).upper()
    given = err.get("input")
    # A message over several lines (KCQL's: the line and a caret under the fault) shows the
    # input itself; a secret's input is never shown, whatever refused it.
    hidden = isinstance(given, dict) or given is None or "\n" in err["msg"] or _is_secret(cls, err["loc"])
    shown = "" if hidden else f" (got {given!r})"
    return f"{dotted} [env {env_name}]: {err['msg']}{shown}"


def _is_secret(cls: type[BaseModel], loc: tuple[Any, ...]) -> bool:
    """Whether ``loc`` leads to a secret field (``SecretStr``/``SecretBytes``, optional or not)."""
    model: Any = cls
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) and hasattr(model, "model_fields") else None
        if field is None:
            return False
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
            continue
        kinds = typing.get_args(annotation) or (annotation,)
        return any(kind in (SecretStr, SecretBytes) for kind in kinds)
    return False


def _fields_at(cls: type[BaseModel], loc: tuple[Any, ...]) -> set[str]:
    """The field names of the group that ``loc`` leads to (none when it leads to a value)."""
    model: Any = cls
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return set()
        model = annotation
    return set(model.model_fields)
