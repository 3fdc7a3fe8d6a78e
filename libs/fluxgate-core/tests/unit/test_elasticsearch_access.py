"""Elasticsearch's access group: a password from a file (a mounted Secret), and the refusals a
service says at start, naming its settings and never the password."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from fluxgate_core.errors import ConfigError, SettingRefused
from fluxgate_core.store_access import ElasticsearchAccess


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "es.password"
    path.write_text("s3cret-from-a-secret\n")  # an editor's (or kubectl's) trailing newline
    path.chmod(stat.S_IRUSR | stat.S_IWUSR)
    return path


def test_the_password_is_read_from_its_file(password_file: Path) -> None:
    access = ElasticsearchAccess(username="writer", password_file=password_file)
    assert access.basic_auth() == ("writer", "s3cret-from-a-secret")
    assert "s3cret" not in repr(access)


def test_an_inline_password_still_works_and_no_credentials_means_none() -> None:
    assert ElasticsearchAccess(username="writer", password="p").basic_auth() == ("writer", "p")  # type: ignore[arg-type]
    assert ElasticsearchAccess().basic_auth() is None


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"username": "u", "password": "p", "password_file": "FILE"}, "password_file: set either it or password"),
        ({"password_file": "FILE"}, "go together"),
        ({"api_key": "k", "password_file": "FILE"}, "exclusive"),
        ({"username": "u", "password_file": "/nowhere/es.password"}, "password_file: cannot read /nowhere"),
    ],
)
def test_a_password_file_in_a_wrong_combination_or_missing_is_refused_at_load(
    given: dict[str, str], said: str, password_file: Path
) -> None:
    values = {key: str(password_file) if value == "FILE" else value for key, value in given.items()}
    with pytest.raises(ValidationError, match=said):
        ElasticsearchAccess.model_validate(values)


def test_an_empty_password_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ValidationError, match=r"password_file: .* is empty"):
        ElasticsearchAccess(username="u", password_file=empty)


def test_a_refused_login_names_the_settings_that_hold_the_credentials(password_file: Path) -> None:
    from_file = ElasticsearchAccess(username="writer", password_file=password_file)
    refused = from_file.login_refused("elasticsearch", "status 401")
    named = refused.named("FLUXGATE_ES_")
    assert isinstance(named, ConfigError)
    assert str(named) == (
        "elasticsearch.username / elasticsearch.password_file "
        "[env FLUXGATE_ES_ELASTICSEARCH__USERNAME, FLUXGATE_ES_ELASTICSEARCH__PASSWORD_FILE]: "
        "Elasticsearch refused the login of 'writer': status 401"
    )
    inline = ElasticsearchAccess(username="writer", password="p")  # type: ignore[arg-type]
    assert inline.login_refused("elasticsearch", "").settings == ("elasticsearch.username", "elasticsearch.password")
    keyed = ElasticsearchAccess(api_key="aWQ6a2V5")  # type: ignore[arg-type]
    assert "refused the API key" in str(keyed.login_refused("elasticsearch", ""))
    assert keyed.login_refused("elasticsearch", "").settings == ("elasticsearch.api_key",)


def test_a_failed_handshake_or_a_missing_ca_file_names_ca_certs(tmp_path: Path) -> None:
    handshake = ElasticsearchAccess().handshake_refused("elasticsearch", "unable to get local issuer certificate")
    assert handshake.settings == ("elasticsearch.ca_certs",)
    assert "signed by this CA" in str(handshake)
    missing = str(tmp_path / "ca.crt")
    with pytest.raises(SettingRefused, match=f"cannot read {missing}: No such file") as refused:
        ElasticsearchAccess(ca_certs=missing).check_ca_file("elasticsearch")
    assert refused.value.settings == ("elasticsearch.ca_certs",)
    ElasticsearchAccess().check_ca_file("elasticsearch")  # the system's CAs: nothing to read wrong
