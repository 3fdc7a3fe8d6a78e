"""The console as a process, secured (issue 35): the page over TLS with a certificate made here,
a viewer and an operator, the security headers on the wire, and /metrics open on the health
port with none of the console's secrets in it."""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_process import Console
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fluxgate_testing import unique_topic

pytestmark = pytest.mark.integration

SECRETS = {"PAGE_AUTH__PASSWORD": "look-3c1f9", "REPLAY_AUTH__PASSWORD": "replay-77ad0",
           "ELASTICSEARCH__PASSWORD": "es-5be21"}  # fmt: skip


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own issuer) and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fluxgate console test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_file, key_file = directory / "console.crt", directory / "console.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def test_tls_two_roles_headers_and_open_metrics_without_secrets(
    stack: Any, console: Callable[..., Console], tmp_path: Path
) -> None:
    cert, key = self_signed(tmp_path)
    seen = console(
        [], [], unique_topic("console.replays", stack.bootstrap, partitions=1),
        WEB__TLS_CERTFILE=str(cert), WEB__TLS_KEYFILE=str(key),
        PAGE_AUTH__MODE="basic", PAGE_AUTH__USERNAME="viewer", REPLAY_AUTH__MODE="basic",
        REPLAY_AUTH__USERNAME="operator", ELASTICSEARCH__USERNAME="console", **SECRETS,
    )  # fmt: skip
    url = seen.url.replace("http://", "https://")
    with httpx.Client(base_url=url, verify=str(cert), timeout=10) as https:
        page = https.get("/", auth=("viewer", SECRETS["PAGE_AUTH__PASSWORD"]))
        assert page.status_code == 200 and page.headers["strict-transport-security"].startswith("max-age=")
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert (page.headers["x-frame-options"], page.headers["x-content-type-options"]) == ("DENY", "nosniff")
        token = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
        assert token, "the page carries its CSRF token"
        posting = {"Origin": url, "X-CSRF-Token": token.group(1)}
        asked = {"filter": {"reason": "nothing matches this"}}
        as_viewer = https.post("/api/replay", json=asked, headers=posting,
                               auth=("viewer", SECRETS["PAGE_AUTH__PASSWORD"]))  # fmt: skip
        assert as_viewer.status_code == 403, as_viewer.text
        as_operator = https.post("/api/replay", json=asked, headers=posting,
                                 auth=("operator", SECRETS["REPLAY_AUTH__PASSWORD"]))  # fmt: skip
        assert as_operator.status_code == 200 and as_operator.json()["send"] == [], as_operator.text
    with pytest.raises(httpx.HTTPError):
        httpx.get(seen.url + "/", timeout=5)  # no plain HTTP beside TLS on the page's port
    metrics = httpx.get(f"http://127.0.0.1:{seen.process.health_port}/metrics", timeout=5)
    assert metrics.status_code == 200 and "fluxgate_console_" in metrics.text, "open: no credentials asked"
    leaked = [name for name, secret in SECRETS.items() if secret in metrics.text]
    assert leaked == [] and token.group(1) not in metrics.text
