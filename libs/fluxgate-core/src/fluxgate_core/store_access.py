"""How a client gets into each store: TLS and credentials, one group per store.

A persister writes to a store and the console reads it, each with its own driver; both
must accept the same settings with the same meaning (the umbrella chart copies the
persister's onto the console), so the groups are defined once here. Each service extends
its store's group with what only it needs (hosts, timeouts, tables). No driver is imported
here: the groups give the standard library's ``ssl`` objects or plain keyword arguments.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, model_validator

from fluxgate_core.errors import SettingRefused
from fluxgate_core.settings import Group, read_secret_file


def _paired(username: str | None, password: SecretStr | None) -> None:
    if bool(username) != bool(password):
        raise ValueError("username and password go together")


def _login(username: str | None, password: SecretStr | None, password_file: Path | None) -> tuple[str, str] | None:
    """``(username, password)``: the password from its setting, or read from its file now."""
    if not username:
        return None
    if password is not None:
        return username, password.get_secret_value()
    return username, read_secret_file(password_file, "password_file") if password_file is not None else ""


class ElasticsearchAccess(Group):
    """TLS and either an API key or basic auth, as ``elasticsearch-py`` takes them."""

    api_key: SecretStr | None = Field(None, description="API key (the base64 'id:key' form); excludes username")
    username: str | None = Field(None, description="basic auth user; needs password or password_file")
    password: SecretStr | None = Field(None, description="basic auth password; excludes password_file")
    password_file: Path | None = Field(
        None,
        description="file holding the basic auth password (a mounted Secret), read at start; excludes password",
    )
    ca_certs: str | None = Field(None, description="CA bundle to verify https nodes (default: system CAs)")
    verify_certs: bool = Field(True, description="false skips certificate verification (tests only)")

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> ElasticsearchAccess:
        if self.password is not None and self.password_file is not None:
            raise ValueError("password_file: set either it or password, not both")
        given = self.password is not None or self.password_file is not None
        if self.api_key is not None and (self.username or given):
            raise ValueError("api_key and username/password are exclusive: set one way to authenticate")
        if bool(self.username) != given:
            raise ValueError("username and password go together")
        if self.password_file is not None:
            self._read_password_file()
        return self

    def _read_password_file(self) -> str:
        assert self.password_file is not None
        return read_secret_file(self.password_file, "password_file")

    def basic_auth(self) -> tuple[str, str] | None:
        """``(username, password)``, the password from its setting or read from its file now; None without."""
        return _login(self.username, self.password, self.password_file)

    @property
    def credential_settings(self) -> tuple[str, ...]:
        """The settings (in this group) a refused login is about, e.g. ``("username", "password_file")``."""
        if self.api_key is not None:
            return ("api_key",)
        return ("username", "password_file" if self.password_file is not None else "password")

    def login_refused(self, group: str, detail: str) -> SettingRefused:
        """The error a service says when Elasticsearch refuses these credentials (401)."""
        who = "the API key" if self.api_key is not None else f"the login of {self.username or 'anonymous'!r}"
        settings = tuple(f"{group}.{name}" for name in self.credential_settings)
        return SettingRefused(f"Elasticsearch refused {who}: {detail}", settings)

    def handshake_refused(self, group: str, detail: str) -> SettingRefused:
        """The error a service says when the TLS handshake fails (the node's certificate is not the CA's)."""
        message = f"the TLS handshake with Elasticsearch failed (is its certificate signed by this CA?): {detail}"
        return SettingRefused(message, (f"{group}.ca_certs",))

    def check_ca_file(self, group: str) -> None:
        """Read ``ca_certs`` now (not at settings load: a chart's path exists only in its pod), so a
        missing or unreadable bundle is a setting to fix, said at start."""
        try:
            self.tls_context()
        except (OSError, ssl.SSLError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise SettingRefused(f"cannot read {self.ca_certs}: {reason}", (f"{group}.ca_certs",)) from exc

    def tls_context(self) -> ssl.SSLContext:
        """For a client other than ``elasticsearch-py`` (which takes ``ca_certs`` and
        ``verify_certs`` itself): the same CA and verification. Reads the CA file (a missing one raises)."""
        context = ssl.create_default_context(cafile=self.ca_certs)
        if not self.verify_certs:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


class ScyllaAccess(Group):
    """PasswordAuthenticator credentials and TLS to the nodes, as ``cassandra-driver`` takes them."""

    username: str | None = Field(None, description="PasswordAuthenticator user; needs password or password_file")
    password: SecretStr | None = Field(None, description="PasswordAuthenticator password; excludes password_file")
    password_file: Path | None = Field(
        None,
        description="file holding the password (a mounted Secret), read at every connection so a rotated "
        "password is picked up; excludes password",
    )
    tls: bool = Field(False, description="connect with TLS (implied by tls_ca_file)")
    tls_ca_file: str | None = Field(None, description="CA bundle to verify the nodes (default: system CAs)")
    tls_check_hostname: bool = Field(True, description="false: verify the chain but not the node's name")

    @model_validator(mode="after")
    def _credentials_go_together(self) -> ScyllaAccess:
        if self.password is not None and self.password_file is not None:
            raise ValueError("password_file: set either it or password, not both")
        if bool(self.username) != (self.password is not None or self.password_file is not None):
            raise ValueError("username and password (or password_file) go together")
        if self.password_file is not None:
            self._read_password_file()
        if not self.tls_check_hostname and not self.uses_tls:
            # Said for a TLS connection that would not be made: the connection would be plain.
            raise ValueError("tls_check_hostname=false needs tls (or tls_ca_file)")
        return self

    def _read_password_file(self) -> str:
        assert self.password_file is not None
        return read_secret_file(self.password_file, "password_file")

    def credentials(self) -> tuple[str, str] | None:
        """``(username, password)``, the password from its setting or read from its file now; None without."""
        return _login(self.username, self.password, self.password_file)

    @property
    def credential_settings(self) -> tuple[str, str]:
        """The settings (in this group) a refused login is about."""
        return ("username", "password_file" if self.password_file is not None else "password")

    def login_refused(self, group: str, where: str, detail: str) -> SettingRefused:
        """What a service says when the nodes at ``where`` refuse its login (or want one)."""
        settings = tuple(f"{group}.{name}" for name in self.credential_settings)
        if not self.username:
            return SettingRefused(f"{where} requires a login: set username and password", settings)
        # The driver's text quotes the server's ("Provided username ... are incorrect"): no secret in it.
        return SettingRefused(f"{where} refused the login of {self.username!r}: {detail}", settings)

    def handshake_refused(self, group: str, where: str, detail: str) -> SettingRefused:
        """What a service says when the nodes' certificate does not verify with ``tls_ca_file``."""
        message = f"{where}: the TLS handshake failed (is the node's certificate signed by this CA?): {detail}"
        return SettingRefused(message, (f"{group}.tls_ca_file",))

    def tls_required(self, group: str, where: str) -> SettingRefused:
        """What a service connecting without TLS says when the nodes speak only TLS."""
        message = f"{where} answers only TLS: set tls, and tls_ca_file to the CA of its certificate"
        return SettingRefused(message, (f"{group}.tls", f"{group}.tls_ca_file"))

    def unreadable_ca(self, group: str, error: OSError | ssl.SSLError) -> SettingRefused:
        """What a service says when ``tls_ca_file`` cannot be read or holds no certificate."""
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        return SettingRefused(f"cannot read {self.tls_ca_file}: {reason}", (f"{group}.tls_ca_file",))

    @property
    def uses_tls(self) -> bool:
        return self.tls or self.tls_ca_file is not None

    def tls_context(self) -> ssl.SSLContext | None:
        """The driver's ``ssl_context``; None without TLS. Reads the CA file (a missing one raises)."""
        if not self.uses_tls:
            return None
        context = ssl.create_default_context(cafile=self.tls_ca_file)
        context.check_hostname = self.tls_check_hostname
        return context


def speaks_tls(host: str, port: int, timeout: float) -> bool:
    """Whether a TLS handshake (any certificate) completes with ``host:port``: a plain client
    was refused there because the server wants TLS, not because it is down."""
    anyone = ssl.create_default_context()
    anyone.check_hostname, anyone.verify_mode = False, ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            anyone.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


_HAZELCAST_TLS_FILES = ("ssl_cafile", "ssl_certfile", "ssl_keyfile")


class HazelcastAccess(Group):
    """Credentials and TLS to the members (both Enterprise), as ``hazelcast-python-client`` takes them."""

    username: str | None = Field(None, description="credentials (Enterprise security); needs password")
    password: SecretStr | None = Field(None, description="password of username")
    ssl_enabled: bool = Field(False, description="TLS to the members (Enterprise)")
    ssl_cafile: str | None = Field(None, description="CA bundle to verify the members (default: system CAs)")
    ssl_certfile: str | None = Field(None, description="client certificate, for mutual TLS")
    ssl_keyfile: str | None = Field(None, description="the client certificate's private key")
    ssl_password: SecretStr | None = Field(None, description="password of ssl_keyfile")

    @model_validator(mode="after")
    def _usable(self) -> HazelcastAccess:
        _paired(self.username, self.password)
        given = [name for name in (*_HAZELCAST_TLS_FILES, "ssl_password") if getattr(self, name) is not None]
        if given and not self.ssl_enabled:
            # The client ignores them without ssl_enabled: the connection would be plain.
            raise ValueError(f"{', '.join(given)} set but ssl_enabled is false")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("ssl_keyfile needs ssl_certfile (the certificate it is the key of)")
        return self

    def access_options(self) -> dict[str, Any]:
        """The client's credential and TLS keyword arguments (``creds_*``, ``ssl_*``)."""
        options: dict[str, Any] = {}
        if self.username and self.password:
            options["creds_username"] = self.username
            options["creds_password"] = self.password.get_secret_value()
        if self.ssl_enabled:
            options["ssl_enabled"] = True
            options.update({name: value for name in _HAZELCAST_TLS_FILES if (value := getattr(self, name))})
            if self.ssl_password is not None:
                options["ssl_password"] = self.ssl_password.get_secret_value()
        return options
