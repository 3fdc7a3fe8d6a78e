"""Every service given a wrong Kafka password stops at start, naming the settings to fix.

Before, librdkafka reported the refused login once in its own log and retried for ever: the
gateways and the persisters sat unready with no error of theirs, and the console showed an
empty page. Each service below is started as it is deployed (its console script, settings
from the environment) against the stack's SASL_SSL listener, as a user that exists with a
password that is not its own. The aggregator's and device-status's tests are in their own
packages (a Spark job and a faust worker start differently).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fluxgate_stack import SERVICE_GRANTS

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
SERVICES = {  # console script: (env prefix, SERVICE_GRANTS key, what else it needs to start)
    "fluxgate-mqtt-proxy": ("FLUXGATE_MQTT_", "mqtt-proxy", {}),
    "fluxgate-coap-ingest": ("FLUXGATE_COAP_", "coap-ingest", {}),
    "fluxgate-es-persister": ("FLUXGATE_ES_", "es-persister", {}),
    "fluxgate-scylla-persister": ("FLUXGATE_SCYLLA_", "scylla-persister", {}),
    "fluxgate-hazelcast-persister": ("FLUXGATE_HZ_", "hazelcast-persister", {}),
    "fluxgate-console": (
        "FLUXGATE_CONSOLE_",
        "console",
        {"PAGE_AUTH__MODE": "none", "REPLAY_AUTH__MODE": "none", "WEB__PORT": "0"},
    ),
}
EXIT_CONFIG = 2


@pytest.mark.parametrize("script", sorted(SERVICES))
def test_a_wrong_password_stops_the_service_at_start_naming_the_setting(
    script: str, secured_kafka: Any, tmp_path: Path
) -> None:
    prefix, role, needs = SERVICES[script]
    principal = secured_kafka.principal(role, SERVICE_GRANTS[role])
    wrong = tmp_path / "password"
    wrong.write_text(principal.password[::-1])
    env = {name: value for name, value in os.environ.items() if not name.startswith("FLUXGATE_")}
    env |= {**principal.kafka_env(prefix), f"{prefix}KAFKA__SASL_PASSWORD_FILE": str(wrong)}
    env |= {f"{prefix}HTTP__PORT": "0", f"{prefix}HTTP__HOST": "127.0.0.1"}
    env |= {prefix + name: value for name, value in needs.items()}

    done = subprocess.run([str(BIN / script)], env=env, capture_output=True, text=True, timeout=90, check=False)

    output = done.stdout + done.stderr
    assert done.returncode == EXIT_CONFIG, output[-3000:]
    assert f"[env {prefix}KAFKA__SASL_USERNAME, {prefix}KAFKA__SASL_PASSWORD_FILE]" in output, output[-3000:]
    assert f"refused the login of '{principal.username}'" in output
    assert principal.password[::-1] not in output and principal.password not in output
