"""The SASL_SSL listener's configuration, the stack's PKI and the grants, without a broker."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from fluxgate_stack.pki import VALIDITY, ensure_pki
from fluxgate_stack.security import SERVICE_GRANTS, Grant, renamed
from fluxgate_stack.servers.kafka import server_properties
from fluxgate_stack.settings import DEFAULT_TOPICS, StackSettings, parse_topics


@pytest.fixture(autouse=True)
def _stack_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("FLUXGATE_STACK_")]:
        monkeypatch.delenv(name)


def as_dict(properties: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in properties.splitlines() if line and not line.startswith("#"))


def certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


# --- the broker's configuration -------------------------------------------------------------


def test_sasl_ssl_listener_with_scram_pem_and_acls(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    props = as_dict(server_properties(settings, tmp_path / "data"))
    assert "SASL_SSL://127.0.0.1:9094" in props["listeners"].split(",")
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512,SCRAM-SHA-256"
    for mechanism in ("scram-sha-512", "scram-sha-256"):
        jaas = props[f"listener.name.sasl_ssl.{mechanism}.sasl.jaas.config"]
        assert jaas == "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    assert props["listener.name.sasl_ssl.ssl.keystore.type"] == "PEM"
    assert props["listener.name.sasl_ssl.ssl.keystore.location"] == str(tmp_path / ".local" / "pki" / "server.pem")
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["super.users"] == "User:ANONYMOUS"
    assert "allow.everyone.if.no.acl.found" not in props  # false: no ACL, no access
    # Nothing about the lab's listener or the controller changes: no SSL or SASL setting unprefixed.
    assert not [key for key in props if key.startswith(("ssl.", "sasl.", "listener.name.plaintext"))]


def test_the_configuration_follows_the_certificate(tmp_path: Path) -> None:
    settings = StackSettings(home=tmp_path)
    pki = ensure_pki(settings.pki_dir, settings.host)
    before = server_properties(settings, tmp_path / "data", pki)
    assert before == server_properties(settings, tmp_path / "data", pki)
    ensure_pki(settings.pki_dir, settings.host, now=dt.datetime.now(dt.UTC) + VALIDITY)  # expired: made anew
    after = server_properties(settings, tmp_path / "data", pki)
    assert before != after  # a new fingerprint: the broker restarts with the new certificate
    assert as_dict(before) == as_dict(after)  # only the comment differs


# --- the PKI -----------------------------------------------------------------------------------


def test_pki_files_modes_and_names(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki", "127.0.0.1")
    assert {path.name for path in (tmp_path / "pki").iterdir() if not path.name.startswith(".")} == {
        "ca.crt",
        "ca.key",
        "server.crt",
        "server.key",
        "server.pem",
    }
    for key in (pki.ca_key, pki.server_key, pki.keystore):
        assert key.stat().st_mode & 0o777 == 0o600, key
    for cert in (pki.ca_cert, pki.server_cert):
        assert cert.stat().st_mode & 0o777 == 0o644, cert
    text = pki.server_key.read_text()
    assert text.startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8, unencrypted
    assert isinstance(load_pem_private_key(text.encode(), password=None), ec.EllipticCurvePrivateKey)
    keystore = pki.keystore.read_text()
    assert keystore.startswith(text) and keystore.count("BEGIN CERTIFICATE") == 2  # key, server, CA

    ca, server = certificate(pki.ca_cert), certificate(pki.server_cert)
    server.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert server.not_valid_after_utc - server.not_valid_before_utc >= dt.timedelta(days=365)


def test_python_ssl_verifies_the_server_against_the_ca(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki", "127.0.0.1")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pki.server_cert, pki.server_key)
    client = ssl.create_default_context(cafile=str(pki.ca_cert))  # strict X.509 checks, host name checks
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    back_in, back_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(back_in, outgoing, server_hostname="127.0.0.1")
    server_side = server.wrap_bio(incoming, back_out, server_side=True)
    for _ in range(10):  # a handshake in memory: each side's output is the other's input
        for side in (client_side, server_side):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        incoming.write(outgoing.read())
        back_in.write(back_out.read())
    assert client_side.version() is not None and server_side.version() is not None


def test_pki_is_made_once_and_reused(tmp_path: Path) -> None:
    first = ensure_pki(tmp_path / "pki", "127.0.0.1")
    contents = {path: path.read_bytes() for path in first.files()}
    second = ensure_pki(tmp_path / "pki", "127.0.0.1")
    assert {path: path.read_bytes() for path in second.files()} == contents


def test_pki_is_made_again_for_another_host(tmp_path: Path) -> None:
    first = ensure_pki(tmp_path / "pki", "127.0.0.1")
    old_ca = first.ca_cert.read_bytes()
    pki = ensure_pki(tmp_path / "pki", "10.1.2.3")
    names = certificate(pki.server_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("10.1.2.3") in names.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert pki.ca_cert.read_bytes() != old_ca
    named = ensure_pki(tmp_path / "pki", "kafka.internal")
    dns = certificate(named.server_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert dns.get_values_for_type(x509.DNSName) == ["localhost", "kafka.internal"]


def test_pki_is_made_again_before_it_expires_or_when_broken(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki", "127.0.0.1")
    old = pki.server_cert.read_bytes()
    later = dt.datetime.now(dt.UTC) + VALIDITY - dt.timedelta(hours=12)  # half a day left
    ensure_pki(tmp_path / "pki", "127.0.0.1", now=later)
    renewed = certificate(pki.server_cert)
    assert pki.server_cert.read_bytes() != old and renewed.not_valid_after_utc > later + dt.timedelta(days=300)
    pki.server_key.unlink()
    ensure_pki(tmp_path / "pki", "127.0.0.1")
    assert pki.server_key.exists()
    pki.ca_cert.write_bytes(b"garbage")
    ensure_pki(tmp_path / "pki", "127.0.0.1")
    certificate(pki.server_cert).verify_directly_issued_by(certificate(pki.ca_cert))


# --- grants ------------------------------------------------------------------------------------


def test_grant_checks_its_resource_and_operations() -> None:
    assert Grant("topic", "t", ("READ", "DESCRIBE")).bindings("u")[0].principal == "User:u"
    with pytest.raises(ValueError, match="operations"):
        Grant("topic", "t", ("READ", "EAT"))
    with pytest.raises(ValueError, match="operations"):
        Grant("topic", "t", ())
    with pytest.raises(ValueError, match="resource"):
        Grant("queue", "t", ("READ",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kafka-cluster"):
        Grant("cluster", "mine", ("DESCRIBE",))
    assert len(Grant("cluster", "kafka-cluster", ("DESCRIBE", "IDEMPOTENT_WRITE")).bindings("u")) == 2


def test_service_grants_name_the_stacks_topics_and_the_services_groups() -> None:
    assert set(SERVICE_GRANTS) == {
        "mqtt-proxy",
        "coap-ingest",
        "aggregator",
        "device-status",
        "es-persister",
        "scylla-persister",
        "hazelcast-persister",
        "console",
        "console-replay",
    }
    known_topics = set(parse_topics(DEFAULT_TOPICS)) | {"persisters.deadletter", "console.replays"}
    for service, grants in SERVICE_GRANTS.items():
        for grant in grants:
            if grant.resource == "topic" and not grant.prefixed:
                assert grant.name in known_topics, (service, grant)
            assert grant.resource != "cluster", (service, grant)  # no service needs the cluster
            assert not {"ALL", "ALTER", "DELETE", "ALTER_CONFIGS"} & set(grant.operations), (service, grant)
    # Only the console's replay writes with a transactional id; only its views describe others' groups.
    assert [g.name for g in SERVICE_GRANTS["console-replay"] if g.resource == "transactional_id"] == [
        "fluxgate-console-replay"
    ]
    assert not [g for g in SERVICE_GRANTS["console"] if {"WRITE", "CREATE"} & set(g.operations)]


def test_renamed_moves_grants_to_other_names() -> None:
    grants = renamed(SERVICE_GRANTS["device-status"], {"sensors.readings": "r1", "fluxgate-device-status-": "app-"})
    by_name = {grant.name: grant for grant in grants}
    assert by_name["r1"].operations == ("READ", "DESCRIBE")
    assert by_name["app-"].prefixed
    assert "devices.status" in by_name  # not in the map: kept


def test_principal_kafka_env(tmp_path: Path) -> None:
    from fluxgate_stack import Principal

    principal = Principal("svc-1234abcd", "pw", tmp_path / "pw", "127.0.0.1:9094", tmp_path / "ca.crt")
    assert principal.kafka_env("FLUXGATE_MQTT_") == {
        "FLUXGATE_MQTT_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:9094",
        "FLUXGATE_MQTT_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
        "FLUXGATE_MQTT_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
        "FLUXGATE_MQTT_KAFKA__SASL_USERNAME": "svc-1234abcd",
        "FLUXGATE_MQTT_KAFKA__SASL_PASSWORD_FILE": str(tmp_path / "pw"),
        "FLUXGATE_MQTT_KAFKA__SSL_CA_LOCATION": str(tmp_path / "ca.crt"),
    }
    assert principal.kafka_env("FLUXGATE_MQTT") == principal.kafka_env("FLUXGATE_MQTT_")
    assert set(principal.kafka_env("")) == {name.removeprefix("X_") for name in principal.kafka_env("X_")}


def test_new_credentials_keep_the_password_in_a_private_file(tmp_path: Path) -> None:
    from fluxgate_stack import StackSettings, new_credentials

    settings = StackSettings(home=tmp_path)
    first = new_credentials("svc", tmp_path, settings=settings)
    again = new_credentials("svc", tmp_path, settings=settings)  # a new run: a new password, same file

    assert again.password_file == first.password_file == tmp_path / "svc.password"
    assert again.password != first.password and again.password_file.read_text() == again.password
    assert again.password_file.stat().st_mode & 0o777 == 0o600
    assert (again.bootstrap, again.ca_file) == ("127.0.0.1:9094", tmp_path / ".local" / "pki" / "ca.crt")
