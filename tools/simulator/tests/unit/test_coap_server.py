"""The simulated CoAP devices on loopback: UDP only, so a busy TCP port of the same number is no obstacle."""

from __future__ import annotations

import asyncio
import socket

import aiocoap

from fluxgate_sim.coap import CoapDeviceServer


async def test_serves_on_a_port_whose_tcp_twin_is_taken() -> None:
    # Any process's outgoing TCP connection can hold the number we picked as a free UDP
    # port; aiocoap's default server transports would listen there for CoAP over TCP too.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        port = tcp.getsockname()[1]
        async with CoapDeviceServer("127.0.0.1", port, "json") as server:
            server.publish("d1", "temperature", b'{"value": 21.5}')
            client = await aiocoap.Context.create_client_context()
            try:
                request = aiocoap.Message(code=aiocoap.GET, uri=server.uri("d1", "temperature"))
                response = await client.request(request).response
            finally:
                await client.shutdown()
    assert response.code == aiocoap.CONTENT
    assert response.payload == b'{"value": 21.5}'


async def test_a_large_state_reaches_an_observer_whole_block_wise() -> None:
    # aiocoap sends notifications whole; a datagram over the observer's receive buffer (4 KiB)
    # arrived cut short, and one over 64 KiB could not be sent at all.
    large = bytes(range(256)) * 300  # 75 blocks
    async with CoapDeviceServer("127.0.0.1", 0, "json") as server:
        server.publish("d1", "temperature", large[:5000])
        client = await aiocoap.Context.create_client_context()
        try:
            request = client.request(aiocoap.Message(code=aiocoap.GET, uri=server.uri("d1", "temperature"), observe=0))
            first = await request.response
            server.publish("d1", "temperature", large)
            notification = await anext(aiter(request.observation))
            request.observation.cancel()
        finally:
            await client.shutdown()
    assert first.payload == large[:5000]
    assert (notification.payload, notification.opt.observe) == (large, 1)


async def test_an_observer_gets_the_last_state_published_right_before_the_devices_stop() -> None:
    # A soak run stops the simulator right after its last readings: a device's server that
    # closed at once lost the notification of its last state (its observer's acknowledgement
    # met a closed port, and the observation ended without it).
    client = await aiocoap.Context.create_client_context()
    try:
        server = await CoapDeviceServer("127.0.0.1", 0, "json").start()
        server.publish("d1", "temperature", b'{"value": 1}')
        request = client.request(aiocoap.Message(code=aiocoap.GET, uri=server.uri("d1", "temperature"), observe=0))
        await request.response
        notifications = aiter(request.observation)
        server.publish("d1", "temperature", b'{"value": 2}')
        await server.stop()
        last = await asyncio.wait_for(anext(notifications), timeout=10)
        request.observation.cancel()
    finally:
        await client.shutdown()
    assert last.payload == b'{"value": 2}'
