"""device-status over the stack's SASL_SSL listener (issue 35 §3): a least-privilege SCRAM
principal reads readings and writes statuses, its password in a file and never in the
service's output or /metrics; wrong credentials fail the start naming the setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fluxgate_stack import Grant

from .conftest import THRESHOLD_S, Fleet, bulk_loads, device

pytestmark = pytest.mark.integration
PREFIX = "FLUXGATE_STATUS_"


def least_privilege(fleet: Fleet) -> tuple[Grant, ...]:
    """What device-status needs, and nothing more (the README's list). DESCRIBE comes with
    READ and WRITE; the end-offsets client (end_offsets.py) never joins its group, and asks
    for nothing a READ on the input does not allow."""
    return (
        Grant("topic", fleet.readings_topic, ("READ",)),
        Grant("topic", fleet.status_topic, ("WRITE",)),
        # faust creates (at every start), writes and reads back its own topics, all named
        # <app id>-...: the table's changelog, the silence checks, the assignor's leader topic.
        Grant("topic", f"{fleet.app_id}-", ("CREATE", "READ", "WRITE"), prefixed=True),
        Grant("group", fleet.app_id, ("READ",)),
    )


def secured_env(principal: Any) -> dict[str, str]:
    """The service's KAFKA__* settings for ``principal`` (without the prefix Fleet adds)."""
    return {name.removeprefix(PREFIX): value for name, value in principal.kafka_env(PREFIX).items()}


def test_reads_and_writes_over_sasl_ssl_with_least_privilege_and_never_shows_the_password(
    fleet: Fleet, secured_kafka: Any
) -> None:
    principal = secured_kafka.principal("device-status", least_privilege(fleet))
    # DEBUG: faust's, mode's and our own most talkative lines are searched for the password too.
    with fleet.service(**secured_env(principal), LOG__LEVEL="DEBUG") as service:
        service.start()
        fleet.send("dev-s")
        service.wait_until(lambda: device(service, "dev-s")[1].get("status") == "ONLINE", "dev-s ONLINE")
        # The silence check goes through faust's internal topic, the transition into the changelog.
        service.wait_until(
            lambda: device(service, "dev-s")[1]["status"] == "OFFLINE", "dev-s OFFLINE", 10 * THRESHOLD_S
        )
        online, offline = fleet.transitions(expected=2)
        assert (online["status"], offline["status"]) == ("ONLINE", "OFFLINE")
        assert fleet.changelog_records() >= 2
        metrics = service.metrics()
        assert "fluxgate_status_transitions_total" in metrics
        assert service.terminate() == 0
    # Restarted, it reads its table's changelog in bulk with the same login (store.py).
    with fleet.service(**secured_env(principal), LOG__LEVEL="DEBUG") as restarted:
        restarted.start()
        restarted.wait_until(lambda: device(restarted, "dev-s")[1].get("status") == "OFFLINE", "dev-s restored")
        assert restarted.terminate() == 0
    assert bulk_loads(restarted)[0] >= 2
    output = service.log_text() + restarted.log_text()
    assert f"sasl_username={principal.username}" in output  # kafka.login_checked: the user, the mechanism
    assert principal.password not in output
    assert principal.password not in metrics


@pytest.mark.parametrize("wrong", ["password_file", "password", "username", "ca"])
def test_wrong_credentials_fail_the_start_with_one_line_naming_the_setting(
    fleet: Fleet, secured_kafka: Any, tmp_path: Path, wrong: str
) -> None:
    principal = secured_kafka.principal("device-status", least_privilege(fleet))
    env = secured_env(principal)
    named = {
        "password_file": "FLUXGATE_STATUS_KAFKA__SASL_PASSWORD_FILE",
        "password": "FLUXGATE_STATUS_KAFKA__SASL_PASSWORD",
        "username": "FLUXGATE_STATUS_KAFKA__SASL_USERNAME",
        "ca": "FLUXGATE_STATUS_KAFKA__SSL_CA_LOCATION",
    }[wrong]
    if wrong == "password_file":
        (tmp_path / "password").write_text("not-" + principal.password)
        env["KAFKA__SASL_PASSWORD_FILE"] = str(tmp_path / "password")
    elif wrong == "password":
        del env["KAFKA__SASL_PASSWORD_FILE"]
        env["KAFKA__SASL_PASSWORD"] = "not-" + principal.password
    elif wrong == "username":
        env["KAFKA__SASL_USERNAME"] = "nobody-" + principal.username
    else:  # the system's CAs, which did not sign the stack's broker certificate
        del env["KAFKA__SSL_CA_LOCATION"]
    with fleet.service(**env) as service:
        service.start(wait_ready=False)
        code = service.wait(30)
    output = service.log_text()
    assert code == 2, output
    [line] = [line for line in output.splitlines() if line.strip()]  # nothing else, librdkafka's lines neither
    assert line.startswith("device-status: ") and named in line, line
    assert principal.password not in output


def test_a_principal_not_allowed_to_read_the_input_fails_the_start_naming_the_topic(
    fleet: Fleet, secured_kafka: Any
) -> None:
    grants = [grant for grant in least_privilege(fleet) if grant.name != fleet.readings_topic]
    principal = secured_kafka.principal("device-status", grants)
    with fleet.service(**secured_env(principal)) as service:
        service.start(wait_ready=False)
        code = service.wait(30)
    output = service.log_text()
    assert code == 2, output
    line = output.splitlines()[-1]  # after kafka.verified
    assert (
        line.startswith("device-status: ") and "status.input_topic [env FLUXGATE_STATUS_STATUS__INPUT_TOPIC]: " in line
    )
    assert f"{fleet.readings_topic}: {principal.username} may not use it" in line
