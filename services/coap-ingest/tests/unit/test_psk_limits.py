"""A pre-shared key or identity longer than tinydtls takes is refused at start, naming the
variable; it used to be accepted, and every handshake then failed with nothing but timeouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fluxgate_testing.specs import load_with_env

from fluxgate_coap_ingest.settings import CoapIngestSettings
from fluxgate_core.errors import ConfigError

SECURE = "coaps://127.0.0.1:5684/sensors/dev-1/temperature"


def load(monkeypatch: pytest.MonkeyPatch, resource: dict[str, str], **env: str) -> CoapIngestSettings:
    env = {"FLUXGATE_COAP_RESOURCES": json.dumps([{"uri": SECURE, **resource}]), **env}
    return load_with_env(CoapIngestSettings, env, monkeypatch)  # type: ignore[no-any-return]


def test_the_longest_key_and_identity_tinydtls_takes_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load(monkeypatch, {}, FLUXGATE_COAP_DTLS__PSK_IDENTITY="i" * 32, FLUXGATE_COAP_DTLS__PSK_KEY="k" * 18)
    assert settings.dtls.psk_key is not None and len(settings.dtls.psk_key.get_secret_value()) == 18


@pytest.mark.parametrize(
    ("env", "variable", "message"),
    [
        ({"FLUXGATE_COAP_DTLS__PSK_KEY": "k" * 19}, "FLUXGATE_COAP_DTLS__PSK_KEY", "takes at most 18 bytes"),
        # Bytes, not characters: 10 characters of "é" are 20 bytes.
        ({"FLUXGATE_COAP_DTLS__PSK_KEY": "é" * 10}, "FLUXGATE_COAP_DTLS__PSK_KEY", "takes at most 18 bytes"),
        ({"FLUXGATE_COAP_DTLS__PSK_IDENTITY": "i" * 33}, "FLUXGATE_COAP_DTLS__PSK_IDENTITY", "takes at most 32 bytes"),
    ],
)
def test_a_default_key_or_identity_too_long_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], variable: str, message: str
) -> None:
    env = {"FLUXGATE_COAP_DTLS__PSK_IDENTITY": "gw", "FLUXGATE_COAP_DTLS__PSK_KEY": "secret", **env}
    with pytest.raises(ConfigError, match=rf"dtls\.psk_\w+ \[env {variable}\]") as caught:
        load(monkeypatch, {}, **env)
    assert message in str(caught.value)
    assert env["FLUXGATE_COAP_DTLS__PSK_KEY"] not in str(caught.value)


def test_a_resources_own_key_too_long_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"resources\.0\S* \[env FLUXGATE_COAP_RESOURCES\]") as caught:
        load(monkeypatch, {"psk_identity": "gw", "psk_key": "a-key-of-24-characters!!"})
    assert "psk_key: takes at most 18 bytes" in str(caught.value)
    assert "a-key-of-24-characters!!" not in str(caught.value)


def test_the_default_key_can_come_from_a_mounted_secret_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    key_file = tmp_path / "psk"
    key_file.write_text("k" * 18 + "\n")  # an editor's trailing newline is not part of the key
    settings = load(
        monkeypatch, {}, FLUXGATE_COAP_DTLS__PSK_IDENTITY="gw", FLUXGATE_COAP_DTLS__PSK_KEY_FILE=str(key_file)
    )
    key = settings.dtls.key()
    assert key is not None and key.get_secret_value() == "k" * 18


@pytest.mark.parametrize(
    ("content", "message"),
    [("k" * 19, "takes at most 18 bytes"), (None, "cannot read"), ("", "is empty")],
)
def test_a_key_file_too_long_missing_or_empty_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str | None, message: str
) -> None:
    key_file = tmp_path / "psk"
    if content is not None:
        key_file.write_text(content)
    with pytest.raises(ConfigError, match=r"dtls\.psk_key\w* \[env FLUXGATE_COAP_DTLS__PSK_KEY\w*\]") as caught:
        load(monkeypatch, {}, FLUXGATE_COAP_DTLS__PSK_IDENTITY="gw", FLUXGATE_COAP_DTLS__PSK_KEY_FILE=str(key_file))
    assert message in str(caught.value)
    assert "k" * 19 not in str(caught.value)


def test_a_key_and_a_key_file_together_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    key_file = tmp_path / "psk"
    key_file.write_text("secret")
    env = {"FLUXGATE_COAP_DTLS__PSK_IDENTITY": "gw", "FLUXGATE_COAP_DTLS__PSK_KEY": "secret",
           "FLUXGATE_COAP_DTLS__PSK_KEY_FILE": str(key_file)}  # fmt: skip
    with pytest.raises(ConfigError, match=r"FLUXGATE_COAP_DTLS__PSK_KEY_FILE.*not both"):
        load(monkeypatch, {}, **env)
