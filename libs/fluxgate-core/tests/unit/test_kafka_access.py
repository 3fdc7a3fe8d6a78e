"""verify_kafka without a broker: no answer, a handshake that fails, a refusal's wording."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from fluxgate_core.errors import ConfigError, DeliveryError
from fluxgate_core.kafka_access import _refusal, _Reports, verify_kafka
from fluxgate_core.settings import KafkaSettings

ENV = "FLUXGATE_STATUS_KAFKA__"


def _kafka(**values: Any) -> KafkaSettings:
    return KafkaSettings.model_validate(values)


def test_no_broker_answering_names_the_bootstrap_servers_and_is_no_configuration_error() -> None:
    kafka = _kafka(
        bootstrap_servers="127.0.0.1:1",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password="p",
    )
    with pytest.raises(DeliveryError, match=rf"{ENV}BOOTSTRAP_SERVERS.*no broker answered") as caught:
        verify_kafka(kafka, "test", "FLUXGATE_STATUS_", timeout=1.5)
    assert not isinstance(caught.value, ConfigError)


def test_a_failed_tls_handshake_names_the_ca_location() -> None:
    """A listener that answers in plain text stands for one whose certificate is not trusted."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = server.accept()
                with client:
                    client.recv(1024)
                    client.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    try:
        kafka = _kafka(bootstrap_servers=f"127.0.0.1:{server.getsockname()[1]}", security_protocol="SSL")
        with pytest.raises(ConfigError, match=rf"{ENV}SSL_CA_LOCATION.*handshake"):
            verify_kafka(kafka, "test", "FLUXGATE_STATUS_", timeout=10)
    finally:
        server.close()


@pytest.mark.parametrize(("password", "variable"), [("sasl_password", "SASL_PASSWORD"), ("file", "SASL_PASSWORD_FILE")])
def test_a_refused_login_names_the_user_and_password_variables_on_one_line(
    tmp_path: Path, password: str, variable: str
) -> None:
    file = tmp_path / "password"
    file.write_text("wrong\n")
    secret = {"sasl_password": "wrong"} if password == "sasl_password" else {"sasl_password_file": file}
    kafka = _kafka(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", sasl_username="ds", **secret)
    reports = _Reports()
    reports(KafkaError(KafkaError._TRANSPORT, "connection reset"))
    assert _refusal(kafka, ENV, reports) is None
    reports(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed"))
    refused = _refusal(kafka, ENV, reports)
    assert refused is not None and "\n" not in str(refused)
    assert f"{ENV}SASL_USERNAME, {ENV}{variable}]" in str(refused)
    assert "'ds'" in str(refused) and "wrong" not in str(refused)
