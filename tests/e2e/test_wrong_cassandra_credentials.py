"""Every service that uses Cassandra, given a wrong password, no TLS, or a CA that did not
sign the node, stops at start (exit 2), naming the settings to fix.

Before, the scylla-persister said "Scylla/Cassandra ... does not answer" and exited 1, as if
the node were down; the console started and showed the refusal on its page only (a missing
CA file crashed it with a traceback). Each service is started as it is deployed (its console
script, settings from the environment) against the secured Cassandra node
(``cassandra-secured``: TLS only, a role per service), with Kafka on the stack's lab
listener.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import certifi
import pytest
from fluxgate_testing.startup import START_TIMEOUT, console_with_only, run_until_exit

from fluxgate_core.lifecycle import EXIT_CONFIG

pytestmark = pytest.mark.integration

SERVICES = {  # console script: (env prefix, role on the secured node, what else it needs to start)
    "fluxgate-scylla-persister": ("FLUXGATE_SCYLLA_", "scylla-persister", {}),
    # Only Cassandra among the stores: the others are not what is tested here.
    "fluxgate-console": ("FLUXGATE_CONSOLE_", "console", console_with_only("SCYLLA")),
}


@pytest.fixture(params=sorted(SERVICES))
def service(request: pytest.FixtureRequest, secured_cassandra: Any) -> tuple[str, str, str, dict[str, str]]:
    """``(script, its SCYLLA__ prefix, its env for its own role, its password)``."""
    script = request.param
    prefix, role, _needs = SERVICES[script]
    return script, f"{prefix}SCYLLA__", secured_cassandra.env(prefix, role), secured_cassandra.user(role)


def start(stack: Any, script: str, env: dict[str, str], timeout: float = START_TIMEOUT) -> tuple[int | None, str]:
    """Run ``script`` until it exits (or ``timeout``: then it is stopped, code None)."""
    prefix, _role, needs = SERVICES[script]
    settings = {prefix + name: value for name, value in needs.items()} | env
    exited: tuple[int | None, str] = run_until_exit(script, prefix, stack, settings, timeout)
    return exited


Service = tuple[str, str, dict[str, str], tuple[str, str]]


def test_a_wrong_password_stops_the_service_naming_the_settings(stack: Any, service: Service) -> None:
    script, group, env, (username, password) = service

    code, output = start(stack, script, env | {f"{group}PASSWORD": password[::-1]})

    assert code == EXIT_CONFIG, output[-3000:]
    assert f"[env {group}USERNAME, {group}PASSWORD]" in output, output[-3000:]
    assert f"refused the login of {username!r}" in output, output[-3000:]
    assert password not in output and password[::-1] not in output


def test_a_wrong_password_file_is_named_as_such(stack: Any, service: Service, tmp_path: Path) -> None:
    script, group, env, (_username, password) = service
    wrong = tmp_path / "password"
    wrong.write_text(password[::-1] + "\n")
    env = {k: v for k, v in env.items() if k != f"{group}PASSWORD"} | {f"{group}PASSWORD_FILE": str(wrong)}

    code, output = start(stack, script, env)

    assert code == EXIT_CONFIG, output[-3000:]
    assert f"[env {group}USERNAME, {group}PASSWORD_FILE]" in output, output[-3000:]
    assert password not in output and password[::-1] not in output


def test_no_credentials_for_a_node_that_needs_them_names_the_settings(stack: Any, service: Service) -> None:
    script, group, env, _user = service
    env = {k: v for k, v in env.items() if k not in (f"{group}USERNAME", f"{group}PASSWORD")}

    code, output = start(stack, script, env)

    assert code == EXIT_CONFIG, output[-3000:]
    assert f"[env {group}USERNAME, {group}PASSWORD]" in output, output[-3000:]
    assert "requires a login" in output, output[-3000:]


def test_a_node_that_requires_tls_reached_without_it_names_the_tls_settings(stack: Any, service: Service) -> None:
    script, group, env, _user = service
    env = {k: v for k, v in env.items() if k != f"{group}TLS_CA_FILE"}

    code, output = start(stack, script, env)

    assert code == EXIT_CONFIG, output[-3000:]
    assert f"[env {group}TLS, {group}TLS_CA_FILE]" in output, output[-3000:]
    assert "answers only TLS" in output, output[-3000:]


def test_a_ca_that_did_not_sign_the_node_names_the_ca_setting(stack: Any, service: Service) -> None:
    script, group, env, _user = service

    code, output = start(stack, script, env | {f"{group}TLS_CA_FILE": certifi.where()})

    assert code == EXIT_CONFIG, output[-3000:]
    assert f"[env {group}TLS_CA_FILE]" in output, output[-3000:]
    assert "CERTIFICATE_VERIFY_FAILED" in output, output[-3000:]


def test_a_missing_ca_file_names_the_ca_setting(stack: Any, service: Service, tmp_path: Path) -> None:
    script, group, env, _user = service
    missing = tmp_path / "no-such-ca.crt"

    code, output = start(stack, script, env | {f"{group}TLS_CA_FILE": str(missing)})

    assert code == EXIT_CONFIG, output[-3000:]
    assert f"[env {group}TLS_CA_FILE]" in output, output[-3000:]
    assert str(missing) in output, output[-3000:]


def test_the_right_settings_start_the_service(stack: Any, service: Service) -> None:
    """The control: with its own role's settings the service does not stop (it is stopped)."""
    script, _group, env, _user = service

    code, output = start(stack, script, env, timeout=8.0)

    assert code is None, output[-3000:]
