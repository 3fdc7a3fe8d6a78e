"""``--print-values``: the Helm values of the service's chart (deploy/charts/<service>) that run
what the connector config describes. The chart takes every setting as the service's own
environment variable under ``config`` (fluxgate-lib's ``fluxgate.settings``); secrets never go
there (a ConfigMap): they come from the Secret the chart reads (``secrets.existingSecret``)."""

from __future__ import annotations

from typing import Any

import yaml

from fluxgate_connect.translate import Translation


def values(translation: Translation) -> dict[str, Any]:
    """The chart values: replicas from tasks.max, every non-secret setting under ``config``."""
    env, secret = translation.env, translation.secret_names
    out: dict[str, Any] = {
        "replicaCount": translation.replicas,
        "config": {name: value for name, value in sorted(env.items()) if name not in secret},
    }
    if translation.topics:  # what the KEDA scaler watches, when autoscaling is switched on
        out["kafka"] = {"topic": translation.topics[0]}
    return out


def dumps(translation: Translation) -> str:
    """The values as YAML, headed by what the Secret must hold."""
    service = translation.connector.service
    header = [f"# {service}: helm install <release> deploy/charts/{service} -f <this file>"]
    header += [
        f"# {name} is secret: it goes in the Secret of secrets.existingSecret (the chart's secrets.keys)"
        for name in sorted(translation.secret_names)
    ]
    body: str = yaml.safe_dump(values(translation), sort_keys=False, width=1000)
    return "\n".join(header) + "\n" + body
