"""A service given a wrong registry secret, or a CA its registry's certificate does not chain
to, stops at start naming the setting to fix.

Before, a gateway stopped with "registry refused schema ... 401" (exit 1, as when the registry
is away: an orchestrator restarts it for ever) and a persister started, consumed, and then
retried every record's schema lookup, unready, with nothing naming the setting. Each service
below is started as it is deployed (its console script, settings from the environment)
against the secured registry (server ``registry-secured``: HTTPS from the stack's CA, Keycloak
clients), with Kafka's plain listener: Kafka's own credentials are test_wrong_credentials.py's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import certifi
import pytest
from fluxgate_testing import ServiceProcess, free_port

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
SERVICES = {  # console script: (env prefix, registry client)
    "fluxgate-mqtt-proxy": ("FLUXGATE_MQTT_", "mqtt-proxy"),
    "fluxgate-coap-ingest": ("FLUXGATE_COAP_", "coap-ingest"),
    "fluxgate-hazelcast-persister": ("FLUXGATE_HZ_", "hazelcast-persister"),
    "fluxgate-scylla-persister": ("FLUXGATE_SCYLLA_", "scylla-persister"),
    "fluxgate-device-status": ("FLUXGATE_STATUS_", "device-status"),
    "fluxgate-aggregator": ("FLUXGATE_AGG_", "aggregator"),
    "fluxgate-console": ("FLUXGATE_CONSOLE_", "console"),
}
COMMANDS = {"fluxgate-aggregator": ["run"]}  # its console script's command for the job
NEEDS = {"fluxgate-console": {"PAGE_AUTH__MODE": "none", "REPLAY_AUTH__MODE": "none", "WEB__PORT": "0"}}
EXIT_CONFIG = 2


def start(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    prefix = SERVICES[script][0]
    environment = {name: value for name, value in os.environ.items() if not name.startswith("FLUXGATE_")}
    environment |= env | {f"{prefix}HTTP__PORT": str(free_port()), f"{prefix}HTTP__HOST": "127.0.0.1"}
    environment |= {prefix + name: value for name, value in NEEDS.get(script, {}).items()}
    argv = [str(BIN / script), *COMMANDS.get(script, [])]
    return subprocess.run(argv, env=environment, capture_output=True, text=True, timeout=90, check=False)


@pytest.mark.parametrize("script", sorted(SERVICES))
def test_a_wrong_registry_secret_stops_the_service_at_start_naming_the_setting(
    script: str, secured_registry: Any, tmp_path: Path
) -> None:
    prefix, client = SERVICES[script]
    env = secured_registry.env(prefix, client)
    identity, secret = secured_registry.client(client)
    wrong = tmp_path / "user-info"
    wrong.write_text(f"{identity}:{secret[::-1]}\n")
    del env[f"{prefix}REGISTRY__BASIC_AUTH_USER_INFO"]
    env[f"{prefix}REGISTRY__BASIC_AUTH_USER_INFO_FILE"] = str(wrong)

    done = start(script, env)

    output = done.stdout + done.stderr
    assert done.returncode == EXIT_CONFIG, output[-3000:]
    assert f"[env {prefix}REGISTRY__BASIC_AUTH_USER_INFO_FILE]" in output, output[-3000:]
    assert f"refused the credentials of '{identity}' (401)" in output, output[-3000:]
    assert secret not in output and secret[::-1] not in output


@pytest.mark.parametrize("script", ["fluxgate-mqtt-proxy", "fluxgate-hazelcast-persister"])
def test_a_ca_the_registry_certificate_does_not_chain_to_stops_the_service_naming_the_setting(
    script: str, secured_registry: Any
) -> None:
    prefix, client = SERVICES[script]
    env = secured_registry.env(prefix, client) | {f"{prefix}REGISTRY__CA_FILE": certifi.where()}

    done = start(script, env)

    output = done.stdout + done.stderr
    assert done.returncode == EXIT_CONFIG, output[-3000:]
    assert f"[env {prefix}REGISTRY__CA_FILE]" in output, output[-3000:]
    assert "does not verify" in output
    assert secured_registry.client(client)[1] not in output


@pytest.mark.parametrize("script", ["fluxgate-mqtt-proxy", "fluxgate-hazelcast-persister"])
def test_with_its_own_client_and_the_stack_ca_the_service_starts_ready(
    script: str, secured_registry: Any, stack: Any, hazelcast: Any, tmp_path: Path
) -> None:
    """The other side of the two tests above: the same start, right secret and CA, is ready
    (a writer registers its schema, a readonly persister lists subjects), and says no secret."""
    prefix, client = SERVICES[script]
    port = free_port()
    env = secured_registry.env(prefix, client) | {f"{prefix}HTTP__PORT": str(port), f"{prefix}HTTP__HOST": "127.0.0.1"}
    service = ServiceProcess([BIN / script], env, health_port=port, log_path=tmp_path / "service.log",
                             isolate_prefix="FLUXGATE_")  # fmt: skip
    with service.start(timeout=60):
        assert service.ready()
    assert "registry.verified" in service.log_text()
    assert secured_registry.client(client)[1] not in service.log_text()


@pytest.mark.parametrize("script", ["fluxgate-mqtt-proxy", "fluxgate-device-status", "fluxgate-aggregator"])
def test_a_client_that_may_only_read_stops_a_service_that_registers_naming_the_setting(
    script: str, secured_registry: Any
) -> None:
    """The start check only reads; the registration right after it is refused (403) to a
    readonly client, which is the credentials' fault too, not an outage to retry."""
    prefix = SERVICES[script][0]
    env = secured_registry.env(prefix, "es-persister")  # sr-readonly

    done = start(script, env)

    output = done.stdout + done.stderr
    assert done.returncode == EXIT_CONFIG, output[-3000:]
    assert f"[env {prefix}REGISTRY__BASIC_AUTH_USER_INFO]" in output, output[-3000:]
    assert "does not let 'registry-es-persister' register (403" in output
    assert secured_registry.client("es-persister")[1] not in output
