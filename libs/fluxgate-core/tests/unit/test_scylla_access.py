"""ScyllaAccess's password from a file (a mounted Kubernetes Secret): read when a connection
is made, so a rotated password is picked up; refused at load when it cannot be read."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from fluxgate_core.store_access import ScyllaAccess


def test_the_password_is_read_from_its_file_at_each_ask(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("first\n")  # the newline an editor or `echo` leaves is not part of it
    access = ScyllaAccess(username="scylla_persister", password_file=secret)
    assert access.credentials() == ("scylla_persister", "first")
    secret.write_text("rotated")
    assert access.credentials() == ("scylla_persister", "rotated")
    assert access.credential_settings == ("username", "password_file")


def test_an_inline_password_or_none() -> None:
    access = ScyllaAccess(username="console", password="pw")  # type: ignore[arg-type]
    assert access.credentials() == ("console", "pw")
    assert access.credential_settings == ("username", "password")
    assert ScyllaAccess().credentials() is None


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"username": "u", "password": "p", "password_file": "/etc/hosts"}, "set either it or password"),
        ({"password_file": "/etc/hosts"}, "go together"),
        ({"username": "u", "password_file": "/no/such/file"}, "password_file: cannot read /no/such/file"),
    ],
)
def test_a_password_file_that_cannot_be_used_is_refused_at_load(given: dict[str, str], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        ScyllaAccess.model_validate(given)


def test_an_empty_password_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "password"
    empty.write_text("\n")
    with pytest.raises(ValidationError, match="is empty"):
        ScyllaAccess(username="u", password_file=empty)
