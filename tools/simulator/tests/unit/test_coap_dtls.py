"""The simulated CoAP devices over DTLS with a pre-shared key, on loopback, against aiocoap's
own DTLS client (the one coap-ingest uses): the right key gets the states, a wrong one nothing,
and plain CoAP is not served beside it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiocoap
import pytest
from typer.testing import CliRunner

from fluxgate_sim.cli import app
from fluxgate_sim.coap import CoapDeviceServer, CoapPsk

PSK = CoapPsk("gateway", b"run-secret")


async def observer(server: CoapDeviceServer, identity: bytes, key: bytes) -> aiocoap.Context:
    client = await aiocoap.Context.create_client_context(transports=["tinydtls"])
    dtls = {"psk": key, "client-identity": identity}
    client.client_credentials.load_from_dict({f"coaps://{server.host}:{server.port}/*": {"dtls": dtls}})
    return client


async def test_the_right_key_gets_the_state_and_every_notification() -> None:
    async with CoapDeviceServer("127.0.0.1", 0, "json", PSK) as server:
        server.publish("d1", "temperature", b'{"value": 1}')
        client = await observer(server, b"gateway", b"run-secret")
        try:
            uri = server.uri("d1", "temperature")
            request = client.request(aiocoap.Message(code=aiocoap.GET, uri=uri, observe=0))
            first = await asyncio.wait_for(request.response, 10)
            notifications, updates = [], aiter(request.observation)
            for value in (2, 3):
                server.publish("d1", "temperature", b'{"value": %d}' % value)
                notifications.append(await asyncio.wait_for(anext(updates), 10))
            request.observation.cancel()
        finally:
            await client.shutdown()
    assert uri.startswith(f"coaps://127.0.0.1:{server.port}/")
    assert first.payload == b'{"value": 1}'
    assert [n.payload for n in notifications] == [b'{"value": 2}', b'{"value": 3}']


@pytest.mark.parametrize(("identity", "key"), [(b"gateway", b"wrong"), (b"someone", b"run-secret")])
async def test_a_wrong_key_or_identity_gets_nothing(identity: bytes, key: bytes) -> None:
    async with CoapDeviceServer("127.0.0.1", 0, "json", PSK) as server:
        server.publish("d1", "temperature", b'{"value": 1}')
        client = await observer(server, identity, key)
        try:
            request = client.request(aiocoap.Message(code=aiocoap.GET, uri=server.uri("d1", "temperature")))
            with pytest.raises((TimeoutError, aiocoap.error.Error)):
                await asyncio.wait_for(request.response, 3)
        finally:
            await client.shutdown()


async def test_plain_coap_is_not_served_beside_it() -> None:
    async with CoapDeviceServer("127.0.0.1", 0, "json", PSK) as server:
        server.publish("d1", "temperature", b'{"value": 1}')
        client = await aiocoap.Context.create_client_context(transports=["udp6"])
        try:
            uri = server.uri("d1", "temperature", scheme="coap")
            with pytest.raises((TimeoutError, aiocoap.error.Error)):
                await asyncio.wait_for(client.request(aiocoap.Message(code=aiocoap.GET, uri=uri)).response, 3)
        finally:
            await client.shutdown()


def test_the_key_comes_from_a_file_and_stays_out_of_repr(tmp_path: Path) -> None:
    key_file = tmp_path / "coap.psk"
    key_file.write_text("run-secret\n")
    psk = CoapPsk.from_file("gateway", key_file)
    assert psk.key == b"run-secret"
    assert "run-secret" not in repr(psk)
    with pytest.raises(ValueError, match="cannot read --coap-psk-file"):
        CoapPsk.from_file("gateway", tmp_path / "missing")
    key_file.write_text("\n")
    with pytest.raises(ValueError, match=r"pre-shared key .* must be 1 to 18 bytes, not 0"):
        CoapPsk.from_file("gateway", key_file)
    with pytest.raises(ValueError, match="must be 1 to 18 bytes, not 24"):
        CoapPsk("gateway", b"x" * 24)  # tinydtls's limit: every handshake would fail
    with pytest.raises(ValueError, match="--coap-psk-identity must be 1 to 32 bytes"):
        CoapPsk("i" * 33, b"run-secret")


def test_the_cli_takes_the_identity_and_the_file_together(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--coap-devices", "1", "--count", "1", "--coap-psk-identity", "gateway"])
    assert result.exit_code == 2
    assert "--coap-psk-identity and --coap-psk-file go together" in result.output
    missing = tmp_path / "nothing-here"
    args = ["run", "--coap-devices", "1", "--count", "1", "--coap-psk-identity", "gw", "--coap-psk-file", str(missing)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "cannot read --coap-psk-file" in result.output


def test_coap_resources_names_coaps_uris() -> None:
    result = CliRunner().invoke(
        app, ["coap-resources", "--coap-devices", "1", "--metrics", "temperature", "--coap-port", "5999", "--coaps"]
    )
    assert result.exit_code == 0, result.output
    assert [r["uri"] for r in json.loads(result.stdout)] == ["coaps://127.0.0.1:5999/sensors/coap-0001/temperature"]
