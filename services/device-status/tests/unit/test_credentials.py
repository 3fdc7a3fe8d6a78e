"""faust connects with the Kafka settings: the security ones (issue 35 §3): SASL (PLAIN, SCRAM)
over TLS or not, TLS alone; the password read from its setting or file, never shown; and the
producer's batching and compression; the consumer's session."""

from __future__ import annotations

import inspect
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiokafka
import certifi
import pytest
from faust.auth import SASLCredentials, SSLCredentials
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from fluxgate_core.errors import ConfigError
from fluxgate_device_status import app as app_module
from fluxgate_device_status.credentials import broker_credentials
from fluxgate_device_status.end_offsets import EndOffsets
from fluxgate_device_status.settings import StatusSettings
from fluxgate_device_status.transport import FETCH_MAX_WAIT_MS


def _ca_bundle() -> str:
    """A CA bundle that exists wherever the tests run: certifi's (httpx brings it), never a skip."""
    return certifi.where()


def _settings(tmp_path: Path, **kafka: Any) -> StatusSettings:
    return StatusSettings.model_validate(
        {
            "kafka": {"bootstrap_servers": "127.0.0.1:1", **kafka},
            "status": {"data_dir": str(tmp_path / "data")},
        }
    )


class FakeEncoder:
    def encode(self, record: dict[str, Any]) -> bytes:
        return b""


@pytest.fixture
def no_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """build_app without a registry (the DeviceStatus schema is not registered); its end-offsets
    client (librdkafka, made with the same settings) closed after the test."""
    monkeypatch.setattr(app_module, "registry_client", lambda registry: object())
    monkeypatch.setattr(app_module.AvroEncoder, "registered", staticmethod(lambda *args: FakeEncoder()))
    made: list[EndOffsets] = []

    def end_offsets(*args: Any) -> EndOffsets:
        made.append(EndOffsets(*args))
        return made[-1]

    monkeypatch.setattr(app_module, "EndOffsets", end_offsets)
    yield
    for client in made:
        client._consumer.close()


@pytest.mark.usefixtures("no_registry")
def test_build_app_connects_faust_with_sasl_ssl_and_scram(tmp_path: Path) -> None:
    password_file = tmp_path / "password"
    password_file.write_text("s3cret-1\n")
    settings = _settings(
        tmp_path,
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="device-status",
        sasl_password_file=str(password_file),
        ssl_ca_location=_ca_bundle(),
    )
    app, _ = app_module.build_app(settings)  # refused anything but PLAINTEXT before
    credentials = app.conf.broker_credentials
    assert isinstance(credentials, SASLCredentials)
    auth = credentials_to_aiokafka_auth(credentials, app.conf.ssl_context)
    assert {k: v for k, v in auth.items() if k != "ssl_context"} == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "device-status",
        "sasl_plain_password": "s3cret-1",
    }
    assert isinstance(auth["ssl_context"], ssl.SSLContext)
    assert auth["ssl_context"].verify_mode == ssl.CERT_REQUIRED and auth["ssl_context"].check_hostname
    # Read from the file each time faust makes a client: a rotated password is picked up.
    password_file.write_text("s3cret-2\n")
    assert credentials_to_aiokafka_auth(credentials, None)["sasl_plain_password"] == "s3cret-2"
    assert "s3cret" not in repr(credentials) and "s3cret" not in repr(app.conf.broker_credentials)


@pytest.mark.parametrize(
    ("kafka", "expected"),
    [
        ({}, None),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"},
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "ssl": False},
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256"},
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256", "ssl": True},
        ),
        ({"security_protocol": "SSL"}, {"security_protocol": "SSL", "ssl": True}),
    ],
)
def test_each_protocol_maps_onto_aiokafka(tmp_path: Path, kafka: dict[str, Any], expected: Any) -> None:
    sasl = kafka.get("security_protocol", "").startswith("SASL_")
    secret = {"sasl_username": "u", "sasl_password": "p"} if sasl else {}
    credentials = broker_credentials(_settings(tmp_path, **kafka, **secret).kafka)
    if expected is None:
        assert credentials is None
        return
    auth = credentials_to_aiokafka_auth(credentials, None)
    assert auth["security_protocol"] == expected["security_protocol"]
    assert isinstance(auth.get("ssl_context"), ssl.SSLContext) is expected["ssl"]
    if sasl:
        assert auth["sasl_mechanism"] == expected["sasl_mechanism"]
        assert (auth["sasl_plain_username"], auth["sasl_plain_password"]) == ("u", "p")
    else:
        assert isinstance(credentials, SSLCredentials)


def test_the_system_trust_store_without_a_ca_location(tmp_path: Path) -> None:
    settings = _settings(tmp_path, security_protocol="SSL")
    credentials = broker_credentials(settings.kafka)
    assert isinstance(credentials, SSLCredentials)
    assert credentials.context.verify_mode == ssl.CERT_REQUIRED
    assert credentials.context.cert_store_stats()["x509_ca"] > 0 or ssl.get_default_verify_paths().capath


def test_a_ca_location_that_is_no_ca_bundle_names_its_variable(tmp_path: Path) -> None:
    (tmp_path / "not-a-ca.pem").write_text("hello\n")
    for location in (tmp_path / "missing.pem", tmp_path / "not-a-ca.pem"):
        settings = _settings(tmp_path, security_protocol="SSL", ssl_ca_location=str(location))
        with pytest.raises(ConfigError, match="FLUXGATE_STATUS_KAFKA__SSL_CA_LOCATION"):
            broker_credentials(settings.kafka)


@pytest.mark.usefixtures("no_registry")
@pytest.mark.parametrize(
    ("kafka", "linger_ms", "compression"),
    [
        ({}, 20, "lz4"),
        ({"linger_ms": 0, "compression_type": "none"}, 0, None),
        ({"linger_ms": 20, "compression_type": "zstd"}, 20, "zstd"),
    ],
)
def test_the_producer_batches_and_compresses_as_the_kafka_settings_say(
    tmp_path: Path, kafka: dict[str, Any], linger_ms: int, compression: str | None
) -> None:
    # faust's own defaults (no linger, no compression) applied before: each changelog update and
    # transition went out in a request of its own, whatever KAFKA__LINGER_MS said.
    app, _ = app_module.build_app(_settings(tmp_path, **kafka))
    aiokafka_producer = app.producer._settings_default()
    assert aiokafka_producer["linger_ms"] == linger_ms
    assert aiokafka_producer["compression_type"] == compression


@pytest.mark.parametrize(
    ("kafka", "named"),
    [
        ({"max_buffered_messages": 5000}, "max_buffered_messages"),
        ({"extra": {"client.dns.lookup": "use_all_dns_ips"}}, "extra"),
    ],
)
def test_a_setting_only_librdkafka_takes_is_refused_naming_it(
    tmp_path: Path, kafka: dict[str, Any], named: str
) -> None:
    # Taken before and applied nowhere: faust's clients are aiokafka's.
    with pytest.raises(ValueError, match=f"{named}: a librdkafka setting"):
        _settings(tmp_path, **kafka)


def test_an_empty_extra_is_no_setting(tmp_path: Path) -> None:
    assert _settings(tmp_path, extra={}).kafka.extra == {}


@pytest.mark.usefixtures("no_registry")
@pytest.mark.parametrize("session_s", [10.0, 180.0, 1800.0])
async def test_a_long_session_makes_a_consumer(tmp_path: Path, session_s: float) -> None:
    # Static members on Kubernetes want a session longer than a pod's restart. faust refused
    # any session above its 90 s request timeout when it made the consumer, after "starting",
    # naming its own setting and not ours.
    settings = StatusSettings.model_validate(
        {
            "kafka": {"bootstrap_servers": "127.0.0.1:1"},
            "status": {"data_dir": str(tmp_path / "data"), "session_timeout_s": session_s},
        }
    )
    app, _ = app_module.build_app(settings)
    consumer = app.consumer._thread._create_worker_consumer(app.transport)
    assert consumer._session_timeout_ms == session_s * 1000
    assert consumer._request_timeout_ms >= consumer._session_timeout_ms


@pytest.mark.usefixtures("no_registry")
async def test_the_consumer_s_fetches_wait_at_most_100_ms_at_the_broker(tmp_path: Path) -> None:
    # faust fixes 1,500 ms; a broker answers one connection's requests in order, so the
    # recovery's offset requests after a bulk load waited behind it (transport.py).
    settings = StatusSettings.model_validate(
        {"kafka": {"bootstrap_servers": "127.0.0.1:1"}, "status": {"data_dir": str(tmp_path / "data")}}
    )
    app, _ = app_module.build_app(settings)
    consumer = app.consumer._thread._create_worker_consumer(app.transport)
    assert consumer._fetch_max_wait_ms == FETCH_MAX_WAIT_MS == 100
    # ... and aiokafka hands the value it holds to the Fetcher it makes at start().
    assert "fetch_max_wait_ms=self._fetch_max_wait_ms" in inspect.getsource(aiokafka.AIOKafkaConsumer.start)


def test_a_session_longer_than_a_broker_allows_is_refused_naming_it(tmp_path: Path) -> None:
    # Kafka's group.max.session.timeout.ms, 30 minutes unless the broker is told otherwise.
    with pytest.raises(ValueError, match="session_timeout_s"):
        StatusSettings.model_validate({"status": {"session_timeout_s": 1801}})
