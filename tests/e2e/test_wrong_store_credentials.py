"""Every service given a wrong Elasticsearch password or CA stops at start, naming the settings.

Each service below is started as it is deployed (its console script, settings from the
environment) against the secured Elasticsearch node (``elasticsearch-secured``: HTTPS from
the stack's CA, a user per service), with Kafka on the stack's lab listener: as its own user
with a password that is not its own, or trusting a CA that did not sign the node's
certificate, or a CA file that is not there. Exit 2 is a configuration error (see
``tests/e2e/test_wrong_credentials.py`` for Kafka's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import certifi
import pytest
from fluxgate_testing.startup import console_with_only, run_until_exit

from fluxgate_core.lifecycle import EXIT_CONFIG

pytestmark = pytest.mark.integration

SERVICES = {  # console script: (env prefix, role on the secured node, what else it needs to start)
    "fluxgate-es-persister": ("FLUXGATE_ES_", "es-persister", {}),
    # Only Elasticsearch among the stores: the others are not what is tested here.
    "fluxgate-console": ("FLUXGATE_CONSOLE_", "console", console_with_only("ELASTICSEARCH")),
}


def start(script: str, stack: Any, env: dict[str, str]) -> tuple[int | None, str]:
    """Run ``script`` until it exits (or ``START_TIMEOUT``: then it is stopped, code None)."""
    prefix, _role, needs = SERVICES[script]
    settings = {prefix + name: value for name, value in needs.items()} | env
    exited: tuple[int | None, str] = run_until_exit(script, prefix, stack, settings)
    return exited


@pytest.mark.parametrize("script", sorted(SERVICES))
def test_a_wrong_password_stops_the_service_at_start_naming_the_settings(
    script: str, stack: Any, secured_elasticsearch: Any, tmp_path: Path
) -> None:
    prefix, role, _needs = SERVICES[script]
    username, password = secured_elasticsearch.user(role)
    wrong = tmp_path / "password"
    wrong.write_text(password[::-1])
    env = secured_elasticsearch.env(prefix, role) | {f"{prefix}ELASTICSEARCH__PASSWORD_FILE": str(wrong)}

    code, output = start(script, stack, env)

    assert code == EXIT_CONFIG, output[-3000:]
    group = f"{prefix}ELASTICSEARCH__"
    assert f"[env {group}USERNAME, {group}PASSWORD_FILE]" in output, output[-3000:]
    assert f"refused the login of {username!r}" in output, output[-3000:]
    assert password not in output and password[::-1] not in output


@pytest.mark.parametrize("script", sorted(SERVICES))
def test_a_password_given_inline_is_named_as_such(script: str, stack: Any, secured_elasticsearch: Any) -> None:
    prefix, role, _needs = SERVICES[script]
    _username, password = secured_elasticsearch.user(role)
    env = {key: value for key, value in secured_elasticsearch.env(prefix, role).items() if not key.endswith("_FILE")}
    env[f"{prefix}ELASTICSEARCH__PASSWORD"] = "not-" + password

    code, output = start(script, stack, env)

    assert code == EXIT_CONFIG, output[-3000:]
    assert f"{prefix}ELASTICSEARCH__USERNAME, {prefix}ELASTICSEARCH__PASSWORD]" in output, output[-3000:]
    assert password not in output


@pytest.mark.parametrize("script", sorted(SERVICES))
def test_a_ca_that_did_not_sign_the_node_stops_the_service_naming_the_ca_setting(
    script: str, stack: Any, secured_elasticsearch: Any
) -> None:
    prefix, role, _needs = SERVICES[script]
    env = secured_elasticsearch.env(prefix, role) | {f"{prefix}ELASTICSEARCH__CA_CERTS": certifi.where()}

    code, output = start(script, stack, env)

    assert code == EXIT_CONFIG, output[-3000:]
    assert f"[env {prefix}ELASTICSEARCH__CA_CERTS]" in output, output[-3000:]
    assert "certificate" in output


@pytest.mark.parametrize("script", sorted(SERVICES))
def test_a_missing_ca_file_stops_the_service_naming_the_ca_setting(
    script: str, stack: Any, secured_elasticsearch: Any, tmp_path: Path
) -> None:
    prefix, role, _needs = SERVICES[script]
    missing = tmp_path / "no-such-ca.crt"
    env = secured_elasticsearch.env(prefix, role) | {f"{prefix}ELASTICSEARCH__CA_CERTS": str(missing)}

    code, output = start(script, stack, env)

    assert code == EXIT_CONFIG, output[-3000:]
    assert f"[env {prefix}ELASTICSEARCH__CA_CERTS]" in output, output[-3000:]
    assert str(missing) in output


def test_a_user_whose_role_may_not_write_stops_the_persister_naming_the_user(
    stack: Any, secured_elasticsearch: Any
) -> None:
    """Another service's user (the console's, read-only) logs in, but may not put the index
    templates: a setting to fix (which user), said at start, not a store failure."""
    env = secured_elasticsearch.env("FLUXGATE_ES_", "console")

    code, output = start("fluxgate-es-persister", stack, env)

    assert code == EXIT_CONFIG, output[-3000:]
    assert "elasticsearch.username [env FLUXGATE_ES_ELASTICSEARCH__USERNAME]" in output, output[-3000:]
    assert "'fluxgate-console' may not put the index template temperatures" in output, output[-3000:]
