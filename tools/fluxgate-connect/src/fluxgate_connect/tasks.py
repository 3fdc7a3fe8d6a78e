"""``tasks.max`` > 1: the settings in which a connector's members differ, so that together they do
what Kafka Connect's tasks do, set the way the service's chart (``deploy/charts``) sets them per pod:

- a sink: members of the connector's consumer group, each a static member ``<group>-<i>``
  (KIP-345), so a member restarted takes its partitions back at once;
- the MQTT source: one ``$share`` group (the connector's name) so the broker hands each message
  to one member, and a client id ``<client id>-<i>`` each (a broker session per member);
- the CoAP source: ``members``/``member``: each observes every tasks.max-th resource.

Every member also serves health and metrics on its own port: ``http.port`` + i (0 stays 0).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import TypeAdapter
from pydantic_settings import BaseSettings

from fluxgate_connect.connectors import COAP_SOURCE, MQTT_SOURCE
from fluxgate_connect.errors import ConnectError
from fluxgate_connect.translate import Translation, env_name

PerMember = Callable[[int], dict[str, str]]  # member index -> field path -> value


@dataclass(frozen=True)
class Members:
    """What the members add to the translation's environment: ``common`` to all, ``each`` one's own."""

    common: dict[str, str]
    each: list[dict[str, str]]

    def env(self, index: int) -> dict[str, str]:
        """Member ``index``'s variables, beside the translation's own."""
        return {**self.common, **self.each[index]}


def members(translation: Translation, environ: Mapping[str, str]) -> Members:
    """The members ``translation`` runs (one when tasks.max is 1: nothing added), ``environ``
    filling in what the config does not set (the base health port, the MQTT client id)."""
    if translation.replicas == 1:
        return Members({}, [{}])
    connector = translation.connector
    named = _Named(translation, environ)
    if connector.sink:
        common, own = _group_members(named)
    elif connector is MQTT_SOURCE:
        common, own = _shared_subscription(named)
    elif connector is COAP_SOURCE:
        common, own = {"members": str(translation.replicas)}, lambda i: {"member": str(i)}
    else:  # a connector added to the table without saying how its tasks divide the work
        raise ConnectError(f"tasks.max={translation.replicas}: {connector.service} runs one task")
    port = _port(named)
    each = [{**own(i), "http.port": str(port + i if port else 0)} for i in range(translation.replicas)]
    return Members(named.env(common), [named.env(values) for values in each])


class _Named:
    """A field's value for the members: the config's, else the environment's, else its default."""

    def __init__(self, translation: Translation, environ: Mapping[str, str]) -> None:
        self.translation, self.environ = translation, environ
        self.settings: type[BaseSettings] = translation.connector.settings

    def given(self, path: str) -> str | None:
        """Set by the config or the environment; None otherwise."""
        return self.translation.values.get(path, self.environ.get(env_name(self.settings, path)))

    def value(self, path: str) -> str:
        given = self.given(path)
        return str(_default(self.settings, path)) if given is None else given

    def env(self, values: Mapping[str, str]) -> dict[str, str]:
        return {env_name(self.settings, path): value for path, value in values.items()}


def _default(settings: type[BaseSettings], path: str) -> Any:
    """The default of ``path`` (``http.port``), with the service's own group defaults applied
    (each service's health port is its ``group(HttpSettings, port=...)``)."""
    head, *rest = path.split(".")
    field = settings.model_fields[head]
    annotated: Any = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    value = TypeAdapter(annotated).validate_python(field.get_default(call_default_factory=True))
    for part in rest:
        value = getattr(value, part)
    return value


def _group_members(named: _Named) -> tuple[dict[str, str], PerMember]:
    # The sink runner's own default group, when the config has no name to make connect-<name>.
    group = named.given("sink.group_id") or f"fluxgate-{named.translation.connector.service}"
    return {}, lambda i: {"kafka.group_instance_id": f"{group}-{i}"}


def share_group(translation: Translation, environ: Mapping[str, str]) -> str:
    """The MQTT source's ``$share`` group: the environment's, else the connector's name. One group
    per connector: two connectors on the same filters must each get every message."""
    given = _Named(translation, environ).given("mqtt.share_group")
    return given or re.sub(r"[/+#]", "-", translation.name)


def _shared_subscription(named: _Named) -> tuple[dict[str, str], PerMember]:
    share, client = share_group(named.translation, named.environ), named.value("mqtt.client_id")
    return {"mqtt.share_group": share}, lambda i: {"mqtt.client_id": f"{client}-{i}"}


def _port(named: _Named) -> int:
    value = named.value("http.port")
    try:
        return int(value)
    except ValueError as exc:
        raise ConnectError(f"{env_name(named.settings, 'http.port')}={value}: expected a port number") from exc
