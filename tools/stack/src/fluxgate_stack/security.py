"""Principals of Kafka's SASL_SSL listener: a SCRAM credential and the ACLs it is held to.

Everything goes through the PLAINTEXT listener, whose clients are the super user
``User:ANONYMOUS`` (see ``servers/kafka.py``): :func:`add_principal` upserts the
credential and makes the principal's ACLs exactly the grants given, then waits until the
broker's authorizer has them and the credential logs in on the SASL_SSL listener (KRaft
applies both asynchronously), so a caller never races them. :data:`SERVICE_GRANTS` is what
each service needs on the stack's default topics, and no more.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from fluxgate_stack.errors import StackError
from fluxgate_stack.pki import Pki
from fluxgate_stack.private_files import write_private
from fluxgate_stack.settings import StackSettings

__all__ = [
    "SERVICE_GRANTS",
    "Grant",
    "Principal",
    "add_principal",
    "new_credentials",
    "remove_principal",
    "renamed",
    "sasl_ssl_config",
]

Resource = Literal["topic", "group", "cluster", "transactional_id"]
CLUSTER = "kafka-cluster"  # the one name of the cluster resource
MECHANISMS = {"SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512, "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256}
ITERATIONS = 4096  # Kafka's minimum for both mechanisms: a login costs the least CPU it can
_RESOURCE_TYPES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "cluster": ResourceType.BROKER,  # librdkafka's name for Kafka's CLUSTER resource
    "transactional_id": ResourceType.TRANSACTIONAL_ID,
}
_OPERATIONS = {name for name in AclOperation.__members__ if name not in ("UNKNOWN", "ANY")}
ADMIN_TIMEOUT = 15.0
LOGIN_PROBE_TIMEOUT = 2.0


@dataclass(frozen=True)
class Grant:
    """ALLOW ``operations`` (Kafka ACL operation names) on one resource, from any host.
    ``prefixed``: every resource whose name starts with ``name`` (a PREFIXED pattern)."""

    resource: Resource
    name: str
    operations: tuple[str, ...]
    prefixed: bool = False

    def __post_init__(self) -> None:
        if self.resource not in _RESOURCE_TYPES:
            raise ValueError(f"unknown resource {self.resource!r}: want one of {', '.join(_RESOURCE_TYPES)}")
        if not self.name:
            raise ValueError("a grant needs a resource name")
        if self.resource == "cluster" and (self.name != CLUSTER or self.prefixed):
            raise ValueError(f"the cluster resource is named {CLUSTER!r} (literal)")
        unknown = sorted(set(self.operations) - _OPERATIONS)
        if unknown or not self.operations:
            raise ValueError(f"bad operations {unknown or '(none)'}: want some of {', '.join(sorted(_OPERATIONS))}")

    def bindings(self, username: str) -> list[AclBinding]:
        pattern = ResourcePatternType.PREFIXED if self.prefixed else ResourcePatternType.LITERAL
        return [
            AclBinding(
                _RESOURCE_TYPES[self.resource],
                self.name,
                pattern,
                f"User:{username}",
                "*",
                AclOperation[operation],
                AclPermissionType.ALLOW,
            )
            for operation in self.operations
        ]


def renamed(grants: Iterable[Grant], names: Mapping[str, str]) -> tuple[Grant, ...]:
    """``grants`` with resource names replaced by ``names`` (others kept): a service's grants
    on a test's own topics and groups, e.g. ``renamed(SERVICE_GRANTS["aggregator"],
    {"sensors.readings": topic_in, ...})``. A prefixed grant's name is its prefix."""
    return tuple(replace(grant, name=names.get(grant.name, grant.name)) for grant in grants)


def _topic(name: str, *operations: str, prefixed: bool = False) -> Grant:
    return Grant("topic", name, operations, prefixed)


def _group(name: str, *operations: str) -> Grant:
    return Grant("group", name, operations)


def _unjoined(name: str) -> Grant:
    """A librdkafka consumer's group that it never joins (it only assigns partitions or asks
    for offsets): librdkafka still looks its coordinator up, which needs DESCRIBE on the
    group, and hands the refusal to ``poll`` as an error (GROUP_AUTHORIZATION_FAILED)."""
    return Grant("group", name, ("DESCRIBE",))


READINGS, DEADLETTER, AGGREGATED, LATE, STATUS = (
    "sensors.readings",
    "sensors.deadletter",
    "temperatures.aggregated",
    "temperatures.late",
    "devices.status",
)
PERSISTERS_DEADLETTER = "persisters.deadletter"  # the persisters' sink runtime creates it at start
DEVICE_STATUS_APP = "fluxgate-device-status"  # faust's app id: its group and its internal topics' prefix
PERSISTERS = ("es-persister", "scylla-persister", "hazelcast-persister")

# A gateway produces readings and dead letters (an idempotent producer: with WRITE on a topic,
# Kafka >= 3.0 needs no IDEMPOTENT_WRITE on the cluster) and reads both topics'
# max.message.bytes at start (DESCRIBE_CONFIGS: fluxgate_core.batches).
_GATEWAY = (
    _topic(READINGS, "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"),
    _topic(DEADLETTER, "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"),
)


def _persister(service: str) -> tuple[Grant, ...]:
    return (
        _topic(AGGREGATED, "READ", "DESCRIBE"),
        _group(f"fluxgate-{service}", "READ"),  # SinkSettings.group_id's default
        # ensure_topics at start (CREATE), then dead letters in (WRITE).
        _topic(PERSISTERS_DEADLETTER, "CREATE", "WRITE", "DESCRIBE"),
    )


SERVICE_GRANTS: dict[str, tuple[Grant, ...]] = {
    "mqtt-proxy": _GATEWAY,
    "coap-ingest": _GATEWAY,
    "aggregator": (
        # Spark's Kafka source: describes and lists offsets with an admin client, reads with
        # assigned consumers that never join or commit (so no group of their own).
        _topic(READINGS, "READ", "DESCRIBE"),
        # Spark's Kafka sink (a Java producer, idempotent by default).
        _topic(AGGREGATED, "WRITE", "DESCRIBE"),
        _topic(LATE, "WRITE", "DESCRIBE"),
        _topic(DEADLETTER, "WRITE", "DESCRIBE"),
        # progress_group: each finished batch's offsets are committed there (offsets.py).
        _group("fluxgate-aggregator", "READ"),
        _unjoined("fluxgate-aggregator-watermarks"),  # losses.py
    ),
    "device-status": (
        _topic(READINGS, "READ", "DESCRIBE"),
        _topic(STATUS, "WRITE", "DESCRIBE"),
        # faust creates, writes and reads back its own topics, all named <app id>-...: the
        # table's changelog, the silence checks, the assignor's leader topic.
        _topic(f"{DEVICE_STATUS_APP}-", "CREATE", "READ", "WRITE", "DESCRIBE", prefixed=True),
        _group(DEVICE_STATUS_APP, "READ"),
        _unjoined("device-status-watermarks"),  # offsets.py: <client id>-watermarks
    ),
    **{service: _persister(service) for service in PERSISTERS},
    # The console's views: every topic's end offsets (DESCRIBE), the dead letters' content
    # (READ, by assigned partitions), and each service's group's members and committed
    # offsets (DESCRIBE on the group). No write anywhere.
    "console": (
        *(_topic(name, "DESCRIBE") for name in (READINGS, AGGREGATED, LATE, STATUS)),
        *(_topic(name, "READ", "DESCRIBE") for name in (DEADLETTER, PERSISTERS_DEADLETTER)),
        *(
            _group(name, "DESCRIBE")
            for name in ("fluxgate-aggregator", DEVICE_STATUS_APP, *(f"fluxgate-{p}" for p in PERSISTERS))
        ),
        _unjoined("console-reader"),  # the dead letters' reader: assigned partitions
    ),
    # What a console that replays dead letters needs besides "console": its audit topic
    # (created on first use, read back, written in the transaction), the replay targets of
    # ReplaySettings.targets' default, and its transactional id.
    "console-replay": (
        _topic("console.replays", "CREATE", "READ", "WRITE", "DESCRIBE"),
        _topic(READINGS, "WRITE", "DESCRIBE"),
        _topic(AGGREGATED, "WRITE", "DESCRIBE"),
        Grant("transactional_id", "fluxgate-console-replay", ("WRITE", "DESCRIBE")),
        _unjoined("console-audit"),  # reads the audit topic back by assigned partitions
    ),
}


@dataclass(frozen=True)
class Principal:
    """A SCRAM user of the SASL_SSL listener and how to connect as it."""

    username: str
    password: str
    password_file: Path  # holds the password, mode 0600
    bootstrap: str  # the SASL_SSL listener's host:port
    ca_file: Path  # the stack's CA certificate (PEM)
    mechanism: str = "SCRAM-SHA-512"

    def kafka_env(self, prefix: str) -> dict[str, str]:
        """A service's Kafka settings for this principal, e.g. for prefix ``FLUXGATE_MQTT_``:
        ``FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS``, ``..._SECURITY_PROTOCOL`` (SASL_SSL),
        ``..._SASL_MECHANISM``, ``..._SASL_USERNAME``, ``..._SASL_PASSWORD_FILE``, ``..._SSL_CA_LOCATION``;
        an empty prefix gives ``KAFKA__...``."""
        separator = "_" if prefix and not prefix.endswith("_") else ""
        group = f"{prefix}{separator}KAFKA__"
        return {
            f"{group}BOOTSTRAP_SERVERS": self.bootstrap,
            f"{group}SECURITY_PROTOCOL": "SASL_SSL",
            f"{group}SASL_MECHANISM": self.mechanism,
            f"{group}SASL_USERNAME": self.username,
            f"{group}SASL_PASSWORD_FILE": str(self.password_file),
            f"{group}SSL_CA_LOCATION": str(self.ca_file),
        }

    def kafka_config(self) -> dict[str, Any]:
        """librdkafka (confluent-kafka) properties for this principal."""
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": self.mechanism,
            "sasl.username": self.username,
            "sasl.password": self.password,
            "ssl.ca.location": str(self.ca_file),
        }


def new_credentials(
    username: str, folder: Path, mechanism: str = "SCRAM-SHA-512", settings: StackSettings | None = None
) -> Principal:
    """``username`` with a new random password, also written to ``<folder>/<username>.password``
    (mode 0600: what a mounted Secret gives a pod). Not on the broker yet: :func:`add_principal`
    puts it there with its grants."""
    settings = settings or StackSettings()
    password = secrets.token_urlsafe(24)
    password_file = folder / f"{username}.password"
    write_private(password_file, password)
    bootstrap = f"{settings.host}:{settings.kafka_secure_port}"
    return Principal(username, password, password_file, bootstrap, Pki(settings.pki_dir).ca_cert, mechanism)


def sasl_ssl_config(
    username: str, password: str, mechanism: str = "SCRAM-SHA-512", settings: StackSettings | None = None
) -> dict[str, Any]:
    """librdkafka properties for ``username`` on the stack's SASL_SSL listener."""
    settings = settings or StackSettings()
    return {
        "bootstrap.servers": f"{settings.host}:{settings.kafka_secure_port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": username,
        "sasl.password": password,
        "ssl.ca.location": str(Pki(settings.pki_dir).ca_cert),
    }


def add_principal(
    username: str,
    password: str,
    grants: Iterable[Grant],
    mechanism: str = "SCRAM-SHA-512",
    *,
    settings: StackSettings | None = None,
    timeout: float = 30.0,
) -> None:
    """Make ``username`` log in with ``password`` (``mechanism``) on the SASL_SSL listener,
    allowed exactly ``grants`` (ACLs it had beyond them are removed); idempotent. Returns
    once the broker enforces the ACLs and the credential logs in."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism {mechanism!r}: want one of {', '.join(MECHANISMS)}")
    if not username or not password:
        raise ValueError("a principal needs a user name and a password")
    settings = settings or StackSettings()
    deadline = time.monotonic() + timeout
    wanted = {binding for grant in grants for binding in grant.bindings(username)}
    admin = _admin(settings)
    stale = _acls(admin, username) - wanted
    if stale:
        _wait_all(admin.delete_acls([_exactly(binding) for binding in stale], request_timeout=ADMIN_TIMEOUT))
    if wanted:
        _wait_all(admin.create_acls(sorted(wanted, key=str), request_timeout=ADMIN_TIMEOUT))  # existing: a no-op
    # One alteration per user and request: the other mechanism's credential goes first.
    others: list[UserScramCredentialAlteration] = [
        UserScramCredentialDeletion(username, m) for m in _mechanisms(admin, username) if m != MECHANISMS[mechanism]
    ]
    if others:
        _wait_all(admin.alter_user_scram_credentials(others, request_timeout=ADMIN_TIMEOUT))
    upsert = UserScramCredentialUpsertion(
        username, ScramCredentialInfo(MECHANISMS[mechanism], ITERATIONS), password.encode()
    )
    _wait_all(admin.alter_user_scram_credentials([upsert], request_timeout=ADMIN_TIMEOUT))
    while _acls(admin, username) != wanted:  # the broker's authorizer, as it is now
        _before(deadline, f"kafka: the ACLs of User:{username} did not reach the authorizer in {timeout:g}s")
        time.sleep(0.05)
    _wait_login(sasl_ssl_config(username, password, mechanism, settings), deadline, timeout)


def remove_principal(username: str, *, settings: StackSettings | None = None) -> None:
    """Delete ``username``'s SCRAM credentials and every ACL naming it; idempotent."""
    admin = _admin(settings or StackSettings())
    _wait_all(admin.delete_acls([_naming(username)], request_timeout=ADMIN_TIMEOUT))
    deletions: list[UserScramCredentialAlteration] = [
        UserScramCredentialDeletion(username, mechanism) for mechanism in _mechanisms(admin, username)
    ]
    if deletions:
        _wait_all(admin.alter_user_scram_credentials(deletions, request_timeout=ADMIN_TIMEOUT))


def _admin(settings: StackSettings) -> AdminClient:
    # log_level 4 (warning): librdkafka would print an info line about its queue on shutdown
    bootstrap = f"{settings.host}:{settings.kafka_port}"
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "fluxgate-stack-security", "log_level": 4})


def _naming(username: str) -> AclBindingFilter:
    """Every ACL of ``User:<username>``."""
    anything: Any = None  # librdkafka's "any name", "any host"
    return AclBindingFilter(
        ResourceType.ANY,
        anything,
        ResourcePatternType.ANY,
        f"User:{username}",
        anything,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def _acls(admin: AdminClient, username: str) -> set[AclBinding]:
    try:
        return set(admin.describe_acls(_naming(username), request_timeout=ADMIN_TIMEOUT).result())
    except KafkaException as exc:
        raise StackError(f"kafka: cannot describe the ACLs of User:{username}: {exc}") from exc


def _exactly(binding: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(
        binding.restype,
        binding.name,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )


def _mechanisms(admin: AdminClient, username: str) -> list[ScramMechanism]:
    """The mechanisms ``username`` has a SCRAM credential for (none: an empty list)."""
    try:
        futures = cast(dict[str, Any], admin.describe_user_scram_credentials([username], request_timeout=ADMIN_TIMEOUT))
        described = futures[username]
        return [info.mechanism for info in described.result().scram_credential_infos]
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.RESOURCE_NOT_FOUND:
            return []
        raise StackError(f"kafka: cannot describe the SCRAM credentials of {username}: {exc}") from exc


def _wait_all(futures: Mapping[Any, Any]) -> None:
    for subject, future in futures.items():
        try:
            future.result()
        except KafkaException as exc:
            raise StackError(f"kafka: {subject}: {exc}") from exc


def _wait_login(config: dict[str, Any], deadline: float, timeout: float) -> None:
    """Until a client with ``config`` gets metadata through the SASL_SSL listener."""
    where = f"{config['sasl.username']} cannot log in on {config['bootstrap.servers']}"
    while True:
        errors: list[KafkaError] = []
        probe: dict[str, Any] = {**config, "client.id": "fluxgate-stack-login-probe", "log_level": 0}
        probe["error_cb"] = errors.append
        admin = AdminClient(probe)
        try:
            admin.list_topics(timeout=LOGIN_PROBE_TIMEOUT)
            return
        except KafkaException as exc:
            errors.append(exc.args[0])
        _before(deadline, f"kafka: {where} after {timeout:g}s: {errors[0].str()}")
        time.sleep(0.1)


def _before(deadline: float, message: str) -> None:
    if time.monotonic() > deadline:
        raise StackError(message)
