"""RegistrySettings for a TLS registry with basic auth, and verify_registry's verdicts (the
registry's client faked: the real registry's are tests/e2e/test_wrong_registry_credentials.py
and tools/stack/tests/integration/test_registry_secured.py)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError
from pydantic_settings import BaseSettings

from fluxgate_core import registry_access
from fluxgate_core.errors import ConfigError, RegistryError
from fluxgate_core.registry_access import registrations_named, verify_registry
from fluxgate_core.settings import RegistrySettings, load_settings, service_config

SECRET = "s3cret-not-to-be-shown"
PREFIX = "FLUXGATE_DEMO_"


class DemoSettings(BaseSettings):
    model_config = service_config(PREFIX)
    registry: RegistrySettings = RegistrySettings()


def load(monkeypatch: pytest.MonkeyPatch, **registry: str) -> DemoSettings:
    for name, value in registry.items():
        monkeypatch.setenv(f"{PREFIX}REGISTRY__{name.upper()}", value)
    return load_settings(DemoSettings)


def test_the_client_gets_the_ca_and_the_user_info_read_from_its_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "ca.pem").write_text("a CA")
    (tmp_path / "user-info").write_text(f"registry-demo:{SECRET}\n")
    settings = load(
        monkeypatch, ca_file=str(tmp_path / "ca.pem"), basic_auth_user_info_file=str(tmp_path / "user-info")
    )

    assert settings.registry.client_config() == {
        "url": "http://127.0.0.1:8081/apis/ccompat/v7",
        "ssl.ca.location": str(tmp_path / "ca.pem"),
        "basic.auth.user.info": f"registry-demo:{SECRET}",
    }
    (tmp_path / "user-info").write_text("registry-demo:rotated")  # a rotated Secret: the next client has it
    assert settings.registry.client_config()["basic.auth.user.info"] == "registry-demo:rotated"


def test_no_auth_and_no_ca_by_default() -> None:
    assert RegistrySettings().client_config() == {"url": "http://127.0.0.1:8081/apis/ccompat/v7"}


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"basic_auth_user_info": f"u:{SECRET}", "basic_auth_user_info_file": "/etc/hostname"}, "_FILE]: set either"),
        ({"basic_auth_user_info": SECRET}, "BASIC_AUTH_USER_INFO]: want user:password"),
        ({"basic_auth_user_info_file": "/nonexistent/user-info"}, "BASIC_AUTH_USER_INFO_FILE]: cannot read"),
        ({"ca_file": "/nonexistent/ca.pem"}, "REGISTRY__CA_FILE]: /nonexistent/ca.pem is not a file"),
    ],
)
def test_unusable_settings_fail_at_start_naming_the_variable_without_the_secret(
    monkeypatch: pytest.MonkeyPatch, given: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as failed:
        load(monkeypatch, **given)
    assert f"[env {PREFIX}REGISTRY__" in str(failed.value) and named in str(failed.value)
    assert SECRET not in str(failed.value)


class FakeClient:
    """Answers get_subjects with ``outcome`` (raised when it is an exception)."""

    outcome: Any = []

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def get_subjects(self) -> Any:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def verdict(monkeypatch: pytest.MonkeyPatch, outcome: Any, registry: RegistrySettings, **options: Any) -> None:
    FakeClient.outcome = outcome
    monkeypatch.setattr(registry_access, "SchemaRegistryClient", FakeClient)
    verify_registry(registry, PREFIX, **options)


WITH_SECRET = RegistrySettings(url="https://r:8444/apis/ccompat/v7", basic_auth_user_info=f"registry-demo:{SECRET}")


@pytest.mark.parametrize(("status", "says"), [(401, "refused the credentials of"), (403, "gives no read access to")])
def test_refused_credentials_name_their_setting_and_the_user_not_the_secret(
    monkeypatch: pytest.MonkeyPatch, status: int, says: str
) -> None:
    with pytest.raises(ConfigError) as failed:
        verdict(monkeypatch, SchemaRegistryError(status, -1, "no"), WITH_SECRET)
    message = str(failed.value)
    assert message.startswith(f"registry.basic_auth_user_info [env {PREFIX}REGISTRY__BASIC_AUTH_USER_INFO]: ")
    assert f"{says} 'registry-demo' ({status})" in message and SECRET not in message


def test_an_untrusted_certificate_names_the_ca_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    cause = ssl.SSLCertVerificationError("certificate verify failed: unable to get local issuer certificate")
    error = httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED]")
    error.__cause__ = cause
    with pytest.raises(ConfigError, match=rf"registry.ca_file \[env {PREFIX}REGISTRY__CA_FILE\]: .* does not verify"):
        verdict(monkeypatch, error, WITH_SECRET)


def test_a_wrong_path_names_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=rf"registry.url \[env {PREFIX}REGISTRY__URL\]: .* answered 404"):
        verdict(monkeypatch, SchemaRegistryError(404, 404, "not found"), WITH_SECRET)


def test_a_registry_away_is_retriable_or_only_logged_when_that_is_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RegistryError) as failed:
        verdict(monkeypatch, httpx.ConnectError("connection refused"), WITH_SECRET)
    assert failed.value.retriable and f"[env {PREFIX}REGISTRY__URL]" in str(failed.value)
    verdict(monkeypatch, httpx.ConnectError("connection refused"), WITH_SECRET, away_ok=True)


def test_the_check_uses_the_service_s_own_client_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(
        registry_access, "SchemaRegistryClient", lambda config: made.append(config) or FakeClient(config)
    )
    FakeClient.outcome = []
    verify_registry(WITH_SECRET, PREFIX)
    assert made[0]["basic.auth.user.info"] == f"registry-demo:{SECRET}" and made[0]["url"] == WITH_SECRET.url


def refused_registration(status: int) -> RegistryError:
    error = RegistryError("registry refused schema for subject 'a-value': no")
    error.__cause__ = SchemaRegistryError(status, -1, "no")
    return error


def test_a_registration_refused_to_the_credentials_names_them() -> None:
    with pytest.raises(ConfigError) as failed, registrations_named(WITH_SECRET, PREFIX):
        raise refused_registration(403)
    assert f"[env {PREFIX}REGISTRY__BASIC_AUTH_USER_INFO]" in str(failed.value)
    assert "does not let 'registry-demo' register (403" in str(failed.value) and SECRET not in str(failed.value)


@pytest.mark.parametrize("status", [409, 422, 503])
def test_other_registration_failures_pass_through_unchanged(status: int) -> None:
    error = refused_registration(status)
    with pytest.raises(RegistryError) as failed, registrations_named(WITH_SECRET, PREFIX):
        raise error
    assert failed.value is error
