"""Kafka's client SSL keys (``ssl.truststore.location``, ``ssl.keystore.type``, ...), which
Stream-Reactor's Elastic and Hazelcast sinks take as they are (``ConfigDef.withClientSslSupport()``
in Elastic8ConfigDef's ElasticConfigDef and in HazelCastSinkConfig): the same names, the same
defaults (a store is JKS unless its ``.type`` says PEM), here pointed at one service's TLS settings.

Our services read PEM files. A PEM file named by ``ssl.*.location`` with ``ssl.*.type=PEM`` is
used as it is; a Java key store is refused with the ``keytool`` command that turns it into PEM,
and PEM text pasted into the config is refused with where to put it instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fluxgate_connect.rules import Covered, Rule, Setting, Unsupported, also_true, text, to

STORES = ("truststore", "keystore")
_KEYTOOL = "keytool -exportcert -rfc -alias <alias> -keystore <store> > <file>.pem"
_NOT_CONFIGURABLE = Unsupported(
    "not configurable: the client uses OpenSSL's default ciphers and engine (TLS 1.2+); remove the key"
)
_JAVA_TUNING = Covered(
    "Java TLS tuning: the client negotiates TLS 1.2 or newer with OpenSSL's defaults (Python's ssl module)"
)


@dataclass(frozen=True)
class TlsTargets:
    """The service's settings the SSL keys set (field paths); None where it has no such setting."""

    ca: str
    flag: str | None = None  # the setting that turns TLS on, set with any file
    cert: str | None = None  # a PEM holding the client certificate (and its key)
    key_password: str | None = None
    no_cert: str = "client certificates are not supported"
    # Why the node's name is not checked, where it is not (Kafka's default asks for the check).
    no_hostname_check: str | None = None


def rules(targets: TlsTargets) -> dict[str, Rule]:
    """The rule of every client SSL key of Kafka's ``SslConfigs.addClientSslSupport``."""
    found: dict[str, Rule] = {
        "ssl.truststore.location": _file(targets.ca, targets.flag, "the CA bundle verifying the nodes"),
        "ssl.keystore.location": (
            _file(targets.cert, targets.flag, "the client certificate and its key")
            if targets.cert
            else Unsupported(targets.no_cert)
        ),
        "ssl.key.password": (
            to(targets.key_password, text, secret=True, note="the PEM key's password")
            if targets.key_password
            else Unsupported(targets.no_cert)
        ),
        "ssl.endpoint.identification.algorithm": (
            Covered(targets.no_hostname_check, accept=("",))
            if targets.no_hostname_check
            else Covered("the node's certificate and name are always verified", accept=("https",))
        ),
    }
    for store in STORES:
        found[f"ssl.{store}.type"] = Covered(
            f"only PEM files are read; turn a Java key store into one with `{_KEYTOOL}`", accept=("PEM",)
        )
        found[f"ssl.{store}.password"] = Covered("a PEM file has no store password (ssl.key.password is the key's)")
    found["ssl.truststore.certificates"] = _pasted("truststore")
    found["ssl.keystore.certificate.chain"] = found["ssl.keystore.key"] = _pasted("keystore")
    for option in ("cipher.suites", "engine.factory.class"):
        found[f"ssl.{option}"] = _NOT_CONFIGURABLE
    for option in ("protocol", "enabled.protocols", "provider", "keymanager.algorithm", "trustmanager.algorithm"):
        found[f"ssl.{option}"] = _JAVA_TUNING
    found["ssl.secure.random.implementation"] = _JAVA_TUNING
    return found


def _file(field: str | None, flag: str | None, what: str) -> Setting:
    assert field is not None
    rule = also_true(field, flag) if flag else to(field, text)
    return Setting(rule.fields, rule.convert, note=f"{what}: a PEM file (ssl.*.type=PEM)")


def _pasted(store: str) -> Unsupported:
    return Unsupported(
        f"PEM text in the config is not read: write it to a file and set ssl.{store}.location to it "
        f"with ssl.{store}.type=PEM"
    )


def store_errors(
    config: Mapping[str, str], connector_rules: Mapping[str, Rule], env_name: Callable[[str], str]
) -> list[str]:
    """A ``ssl.*.location`` read as PEM needs ``ssl.*.type=PEM``: Kafka's default type is JKS."""
    errors = []
    for store in STORES:
        location, kind = f"ssl.{store}.location", f"ssl.{store}.type"
        declared = config.get(kind, "JKS").strip().upper()
        rule = connector_rules.get(location)
        if location in config and isinstance(rule, Setting) and declared != "PEM":
            errors.append(
                f"{location}: not supported: a {declared} store is not read ({env_name(rule.fields[0])} takes a "
                f"PEM file): turn it into one with `{_KEYTOOL}` and set {location} to it with {kind}=PEM"
            )
    return errors
