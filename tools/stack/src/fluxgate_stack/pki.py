"""The stack's own certificate authority and the server certificate it signs for Kafka's
SASL_SSL listener: made once under ``.local/pki/`` and reused, made again when a file is
missing, the certificates expire within a day or the stack's host is not among the names.

Files (``ca.key``, ``server.key`` and ``server.pem`` are mode 0600):

- ``ca.crt``: what clients trust (``ssl.ca.location``);
- ``server.crt``, ``server.key``: the server's certificate and its key (PKCS#8, unencrypted);
- ``server.pem``: the key then the chain (server, CA), the one file a Kafka ``PEM`` key
  store reads (``ssl.keystore.location``).

EC P-256 keys: made in microseconds (an RSA key takes a tenth of a second), read by
Java's and OpenSSL's TLS alike.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fluxgate_stack.private_files import locked, write_private

VALIDITY = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=1)  # made again when it expires sooner than this
BACKDATE = dt.timedelta(hours=1)  # a client whose clock is a little behind still accepts it
CA_NAME = "Fluxgate local stack CA"


@dataclass(frozen=True)
class Pki:
    """Where the stack's CA and server certificate are."""

    folder: Path

    @property
    def ca_cert(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca.key"

    @property
    def server_cert(self) -> Path:
        return self.folder / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.folder / "server.key"

    @property
    def keystore(self) -> Path:
        """The server's key and chain in one PEM file, for Kafka's ``ssl.keystore.location``."""
        return self.folder / "server.pem"

    def files(self) -> list[Path]:
        return [self.ca_cert, self.ca_key, self.server_cert, self.server_key, self.keystore]


def ensure_pki(folder: Path, host: str, now: dt.datetime | None = None) -> Pki:
    """The PKI in ``folder`` for ``host`` (an IP address or a DNS name): reused when it is
    complete, valid for another day and names ``host``; made anew otherwise (CA included, so
    the CA and the server certificate always belong together). Safe across processes."""
    pki = Pki(folder)
    now = now or dt.datetime.now(dt.UTC)
    if _usable(pki, host, now):
        return pki
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / ".lock"):
        if not _usable(pki, host, now):  # another process may have made it meanwhile
            _make(pki, host, now)
    return pki


def san_names(host: str) -> list[x509.GeneralName]:
    """The server certificate's names: ``localhost``, 127.0.0.1 and ``host``."""
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    extra = _general_name(host)
    if extra not in names:
        names.append(extra)
    return names


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _usable(pki: Pki, host: str, now: dt.datetime) -> bool:
    if not all(path.is_file() for path in pki.files()):
        return False
    try:
        ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
        server = x509.load_pem_x509_certificate(pki.server_cert.read_bytes())
        server.verify_directly_issued_by(ca)
        names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return False
    fresh = all(cert.not_valid_after_utc - RENEW_BEFORE > now >= cert.not_valid_before_utc for cert in (ca, server))
    return fresh and _general_name(host) in list(names)


def _make(pki: Pki, host: str, now: dt.datetime) -> None:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (
        _builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]), ca_name, server_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(san_names(host)), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(server_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem, server_pem = _pem(ca), _pem(server)
    server_key_pem = _key_pem(server_key)
    # Keys first, certificates last: a reader never finds new certificates beside an old key.
    write_private(pki.ca_key, _key_pem(ca_key), 0o600)
    write_private(pki.server_key, server_key_pem, 0o600)
    write_private(pki.keystore, server_key_pem + server_pem + ca_pem, 0o600)
    write_private(pki.server_cert, server_pem, 0o644)
    write_private(pki.ca_cert, ca_pem, 0o644)


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey, now: dt.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    pkcs8, unencrypted = serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, pkcs8, unencrypted)


def client_certificate(folder: Path, host: str, name: str, now: dt.datetime | None = None) -> tuple[Path, Path]:
    """A client certificate for ``name`` (its subject's common name; for TLS client
    authentication only) from the stack's CA, and its key: ``clients/<name>.crt`` and ``.key``
    (0600) in ``folder``. Reused while the CA that signed it is the current one and it is valid
    for another day; made anew otherwise."""
    pki = ensure_pki(folder, host, now)
    now = now or dt.datetime.now(dt.UTC)
    cert_path, key_path = folder / "clients" / f"{name}.crt", folder / "clients" / f"{name}.key"
    with locked(folder / ".lock"):
        if not _client_usable(pki, cert_path, key_path, now):
            cert_path.parent.mkdir(exist_ok=True)
            _make_client(pki, name, cert_path, key_path, now)
    return cert_path, key_path


def _client_usable(pki: Pki, cert_path: Path, key_path: Path, now: dt.datetime) -> bool:
    if not (cert_path.is_file() and key_path.is_file()):
        return False
    try:
        ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return cert.not_valid_after_utc - RENEW_BEFORE > now >= cert.not_valid_before_utc


def _make_client(pki: Pki, name: str, cert_path: Path, key_path: Path, now: dt.datetime) -> None:
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        _builder(subject, ca.subject, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    write_private(key_path, _key_pem(key), 0o600)
    write_private(cert_path, _pem(cert), 0o644)
