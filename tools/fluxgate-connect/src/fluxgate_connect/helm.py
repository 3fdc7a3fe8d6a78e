"""``--print-values``: the Helm values of the service's chart (deploy/charts/<service>) that run
what the connector config describes. The chart takes every setting as the service's own
environment variable under ``config`` (fluxgate-lib's ``fluxgate.settings``); secrets never go
there (a ConfigMap): they come from the Secret the chart reads (``secrets.existingSecret``)."""

from __future__ import annotations

from typing import Any

import yaml

from fluxgate_connect.connectors import MQTT_SOURCE
from fluxgate_connect.tasks import share_group
from fluxgate_connect.translate import Translation, env_name


def values(translation: Translation) -> dict[str, Any]:
    """The chart values: replicas from tasks.max, every non-secret setting under ``config``."""
    env, left_out = translation.env, translation.secret_names | chart_owned(translation)
    out: dict[str, Any] = {
        "replicaCount": translation.replicas,
        "config": {name: value for name, value in sorted(env.items()) if name not in left_out},
    }
    if translation.secrets:  # read from the Secret named after the connector, under the chart's secrets.keys
        out["secrets"] = {"existingSecret": _secret_name(translation)}
    if translation.topics:  # what the KEDA scaler watches, when autoscaling is switched on
        out["kafka"] = {"topic": translation.topics[0]}
    if translation.connector is MQTT_SOURCE and translation.replicas > 1:  # the $share group of fluxgate connect
        out["shareGroup"] = share_group(translation, {})
    return out


def dumps(translation: Translation) -> str:
    """The values as YAML, headed by what the Secret must hold."""
    service = translation.connector.service
    header = [f"# {service}: helm install <release> deploy/charts/{service} -f <this file>"]
    header += [
        f"# {name} is secret: the chart reads it from the Secret {_secret_name(translation)}"
        " (its key: the chart's secrets.keys)"
        for name in sorted(translation.secret_names)
    ]
    header += [f"# {name}: the chart sets it per pod" for name in sorted(chart_owned(translation))]
    body: str = yaml.safe_dump(values(translation), sort_keys=False, width=1000)
    return "\n".join(header) + "\n" + body


def _secret_name(translation: Translation) -> str:
    return f"{translation.name}-secrets"


def chart_owned(translation: Translation) -> set[str]:
    """The variables of ``translation`` the chart sets itself, per pod."""
    connector = translation.connector
    return {env_name(connector.settings, path) for path in connector.chart_owned if path in translation.values}
