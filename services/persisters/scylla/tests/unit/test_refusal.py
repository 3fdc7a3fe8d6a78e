"""Which setting a refused connection blames, from the driver's errors (no server: the errors
are built as the driver raises them, and whether a port speaks TLS is faked; the real
refusals are in tests/e2e/test_wrong_cassandra_credentials.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cassandra import AuthenticationFailed
from cassandra.cluster import NoHostAvailable

from fluxgate_core.errors import SettingRefused
from fluxgate_scylla_persister import driver
from fluxgate_scylla_persister.driver import SettingsAuthProvider, make_cluster, refusal
from fluxgate_scylla_persister.settings import ConnectionSettings

BAD = 'Error from server: code=0100 [Bad credentials] message="Provided username u and/or password are incorrect"'


def unreachable(cause: BaseException, port: int = 9) -> NoHostAvailable:
    return NoHostAvailable("Unable to connect to any servers", {f"127.0.0.1:{port}": cause})


def test_a_refused_login_names_the_credential_settings() -> None:
    settings = ConnectionSettings(username="u", password="secret", port=9)  # type: ignore[arg-type]
    found = refusal(unreachable(AuthenticationFailed(BAD)), settings)
    assert isinstance(found, SettingRefused) and found.settings == ("scylla.username", "scylla.password")
    assert "refused the login of 'u'" in str(found) and "secret" not in str(found)
    named = str(found.named("FLUXGATE_SCYLLA_"))
    assert "[env FLUXGATE_SCYLLA_SCYLLA__USERNAME, FLUXGATE_SCYLLA_SCYLLA__PASSWORD]" in named


def test_no_login_for_a_node_that_wants_one() -> None:
    found = refusal(unreachable(AuthenticationFailed("Remote end requires authentication")), ConnectionSettings())
    assert found is not None and "requires a login" in str(found)
    assert found.settings == ("scylla.username", "scylla.password")


def test_a_certificate_the_ca_did_not_sign_names_the_ca_file() -> None:
    cause = PermissionError(1, "Last error: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    found = refusal(unreachable(cause), ConnectionSettings(tls=True))
    assert found is not None and found.settings == ("scylla.tls_ca_file",)


def test_a_plain_client_refused_by_a_node_that_speaks_only_tls_names_the_tls_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(driver, "speaks_tls", lambda host, port, timeout: True)  # a handshake completes there
    found = refusal(unreachable(ConnectionResetError(104, "Connection reset by peer")), ConnectionSettings())
    assert found is not None and found.settings == ("scylla.tls", "scylla.tls_ca_file")
    assert "answers only TLS" in str(found)


def test_a_node_away_blames_no_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "speaks_tls", lambda host, port, timeout: False)
    assert refusal(unreachable(ConnectionRefusedError(111, "Connection refused")), ConnectionSettings()) is None
    asked: list[str] = []
    monkeypatch.setattr(driver, "speaks_tls", lambda host, port, timeout: asked.append(host))
    assert refusal(unreachable(ConnectionRefusedError(111, "refused")), ConnectionSettings(tls=True)) is None
    assert asked == [], "a client that uses TLS already is never told to"


def test_an_unreadable_ca_file_is_a_setting_to_fix(tmp_path: Path) -> None:
    missing = tmp_path / "ca.crt"
    with pytest.raises(SettingRefused, match=f"cannot read {missing}") as refused:
        make_cluster(ConnectionSettings(tls_ca_file=str(missing)))
    assert refused.value.settings == ("scylla.tls_ca_file",)


def test_the_password_file_is_read_for_each_new_connection(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("one\n")
    provider = SettingsAuthProvider(ConnectionSettings(username="u", password_file=secret))
    assert provider.new_authenticator("h").password == "one"
    secret.write_text("two\n")
    assert provider.new_authenticator("h").password == "two"
    assert isinstance(
        make_cluster(ConnectionSettings(username="u", password_file=secret)).auth_provider, SettingsAuthProvider
    )
