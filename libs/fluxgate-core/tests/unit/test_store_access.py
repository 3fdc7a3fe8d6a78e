"""The stores' TLS and credential groups: what a bad combination says, and what reaches a driver."""

from __future__ import annotations

import ssl
from pathlib import Path

import certifi
import pytest
from pydantic import ValidationError

from fluxgate_core.store_access import ElasticsearchAccess, HazelcastAccess, ScyllaAccess


@pytest.mark.parametrize(
    ("group", "given", "said"),
    [
        (ElasticsearchAccess, {"api_key": "k", "username": "u", "password": "p"}, "exclusive"),
        (ElasticsearchAccess, {"username": "u"}, "go together"),
        (ScyllaAccess, {"password": "p"}, "go together"),
        (ScyllaAccess, {"tls_check_hostname": False}, "tls_check_hostname=false needs tls"),
        (HazelcastAccess, {"username": "u"}, "go together"),
        (HazelcastAccess, {"ssl_cafile": "/ca.pem", "ssl_password": "p"}, "ssl_cafile, ssl_password set but"),
        (HazelcastAccess, {"ssl_enabled": True, "ssl_keyfile": "/k.pem"}, "ssl_keyfile needs ssl_certfile"),
    ],
)
def test_a_combination_the_driver_would_ignore_or_refuse_is_refused(
    group: type[ElasticsearchAccess | ScyllaAccess | HazelcastAccess], given: dict[str, object], said: str
) -> None:
    with pytest.raises(ValidationError, match=said):
        group.model_validate(given)


def test_scylla_tls_context_verifies_with_the_given_ca() -> None:
    assert ScyllaAccess().tls_context() is None
    context = ScyllaAccess(tls_ca_file=certifi.where(), tls_check_hostname=False).tls_context()
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED and not context.check_hostname
    assert len(context.get_ca_certs()) > 10, "the CA file's certificates are loaded"
    assert ScyllaAccess(tls=True).tls_context().check_hostname  # type: ignore[union-attr]


def test_scylla_tls_context_with_a_missing_ca_fails(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ScyllaAccess(tls_ca_file=str(tmp_path / "missing.pem")).tls_context()


def test_elasticsearch_tls_context_verifies_unless_told_not_to(tmp_path: Path) -> None:
    context = ElasticsearchAccess(ca_certs=certifi.where()).tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    unverified = ElasticsearchAccess(verify_certs=False).tls_context()
    assert unverified.verify_mode == ssl.CERT_NONE and not unverified.check_hostname
    with pytest.raises(OSError):
        ElasticsearchAccess(ca_certs=str(tmp_path / "missing.pem")).tls_context()


def test_hazelcast_options_carry_credentials_and_tls() -> None:
    assert HazelcastAccess().access_options() == {}
    access = HazelcastAccess.model_validate(
        {"username": "u", "password": "p", "ssl_enabled": True, "ssl_cafile": "/ca.pem",
         "ssl_certfile": "/c.pem", "ssl_keyfile": "/k.pem", "ssl_password": "kp"}
    )  # fmt: skip
    assert access.access_options() == {
        "creds_username": "u", "creds_password": "p", "ssl_enabled": True, "ssl_cafile": "/ca.pem",
        "ssl_certfile": "/c.pem", "ssl_keyfile": "/k.pem", "ssl_password": "kp",
    }  # fmt: skip
