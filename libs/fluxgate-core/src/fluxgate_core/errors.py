"""Error hierarchy shared by all services.

Driver exceptions are converted at the boundary (``raise X from exc``) so callers
only ever decide on one flag: can this be retried, or must it be dead-lettered.
"""

from __future__ import annotations


class FluxgateError(Exception):
    """Base of every error Fluxgate raises on purpose."""

    retriable: bool = False

    def __init__(self, message: str, *, retriable: bool | None = None) -> None:
        super().__init__(message)
        if retriable is not None:
            self.retriable = retriable


class ConfigError(FluxgateError):
    """A setting is missing or invalid; raised at start, names the field."""


class SettingRefused(ConfigError):
    """A server refused what some settings say (a password, a cluster name, a CA), found by
    code that does not know the service's environment prefix (a sink, a store client).
    ``settings`` are dotted paths (``hazelcast.cluster_name``); :meth:`named` is the error
    the service says, naming the variables to fix."""

    def __init__(self, message: str, settings: tuple[str, ...]) -> None:
        super().__init__(message)
        self.settings = settings

    def named(self, env_prefix: str) -> ConfigError:
        """``hazelcast.cluster_name [env FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME]: <message>``."""
        variables = ", ".join(env_variable(env_prefix, setting) for setting in self.settings)
        return ConfigError(f"{' / '.join(self.settings)} [env {variables}]: {self}")


def env_variable(env_prefix: str, setting: str) -> str:
    """The variable of a dotted setting: ``("FLUXGATE_HZ_", "hazelcast.cluster_name")`` ->
    ``FLUXGATE_HZ_HAZELCAST__CLUSTER_NAME`` (nested groups are joined with ``__``)."""
    return env_prefix.upper() + setting.upper().replace(".", "__")


class PayloadError(FluxgateError):
    """Input bytes could not be parsed into measurements (never retriable)."""


class InvalidReading(FluxgateError):
    """A parsed reading failed validation (missing device id, non-finite value...)."""


class SerializationError(FluxgateError):
    """A record could not be encoded to, or decoded from, Avro wire format."""


class RegistryError(FluxgateError):
    """The schema registry refused or could not be reached."""

    retriable = True


class DeliveryError(FluxgateError):
    """Kafka did not accept a record."""


class ConsumeError(FluxgateError):
    """Kafka could not hand records to a consumer (or it could not seek, pause, subscribe)."""


class CommitError(FluxgateError):
    """Offsets were not committed.

    ``rebalanced`` is True (and ``retriable`` False) when the partition is no longer this
    consumer's: it was revoked or lost, a rebalance is in progress, or the group moved to a
    new generation (Kafka's ``ILLEGAL_GENERATION``, ``UNKNOWN_MEMBER_ID``,
    ``REBALANCE_IN_PROGRESS``, ``FENCED_INSTANCE_ID``, librdkafka's ``_STATE`` and
    ``_ASSIGNMENT_LOST``, or a partition the consumer does not hold). Its records will be
    read again by the new owner from the last committed offset: drop them, do not retry.
    """

    def __init__(self, message: str, *, retriable: bool | None = None, rebalanced: bool = False) -> None:
        super().__init__(message, retriable=False if rebalanced else retriable)
        self.rebalanced = rebalanced


class Retry(FluxgateError):
    """Raised by a loop that wants the runner to wait and call it again."""

    retriable = True

    def __init__(self, message: str, *, after: float) -> None:
        super().__init__(message)
        self.after = after
