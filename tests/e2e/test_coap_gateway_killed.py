"""The long soak run's lost CoAP reading, reproduced: coap-0002's humidity, sent 0.3 s before
coap-ingest was SIGKILLed, never reached the readings topic, and the check called it lost.

A reading the gateway holds when it dies (in its socket buffer, a batch, the producer's
queue) is gone: aiocoap acknowledges a CON notification on receipt, before the gateway sees
it, a device never repeats an acknowledged one, and the restarted observer is sent the
resource's current state, not what it missed. Here the gateway is SIGSTOPped before the
reading is sent, so the reading is surely still in its hands when the SIGKILL comes (in the
soak it was there by chance, for the few hundred milliseconds a reading spends in it). The
check must count it as cut off by the kill (``soak_check.IN_FLIGHT``), not as lost.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiocoap
import pytest
from aiocoap.messagemanager import MessageManager
from fluxgate_testing import consume, free_port, unique_topic
from fluxgate_testing.process import ServiceProcess
from soak_check import Check, CutOff, FaultWindow, Identity, Result, Sent, identity, readings

from fluxgate_core.serde import AvroDecoder
from fluxgate_sim.coap import CoapDeviceServer
from fluxgate_sim.faults import Emission, Reading
from fluxgate_sim.runner import Ledger
from fluxgate_stack import endpoints

pytestmark = pytest.mark.integration
INGEST = Path(sys.executable).with_name("fluxgate-coap-ingest")
DEVICE, METRIC = "coap-0002", "humidity"


class Device:
    """One simulated CoAP resource that writes the simulator's ledger as the simulator does."""

    def __init__(self, server: CoapDeviceServer, ledger: Ledger) -> None:
        self.server, self.ledger, self.seq = server, ledger, 0

    async def send(self, value: float) -> Reading:
        self.seq += 1
        reading = Reading(DEVICE, METRIC, value, int(time.time() * 1000), self.seq)
        self.server.publish_reading(reading)
        self.ledger.write("coap", f"/sensors/{DEVICE}/{METRIC}", Emission(reading))
        self.ledger.flush()
        await asyncio.sleep(0.05)  # the notification leaves in a later loop turn
        return reading


def ingest_process(stack: Any, server: CoapDeviceServer, topics: tuple[str, str], log: Path) -> ServiceProcess:
    port = free_port()
    env = {
        "RESOURCES": json.dumps([{**resource, "topic": topics[0]} for resource in server.resources_config()]),
        "DEADLETTER_TOPIC": topics[1],
        "KAFKA__BOOTSTRAP_SERVERS": stack.bootstrap,
        "REGISTRY__URL": stack.registry_url,
        "HTTP__HOST": "127.0.0.1",
        "HTTP__PORT": str(port),
        "READINESS": "all",
        "OBSERVE__BACKOFF_INITIAL_S": "0.2",
        "OBSERVE__BACKOFF_MAX_S": "1.0",
    }
    return ServiceProcess(
        [str(INGEST)],
        {f"FLUXGATE_COAP_{name}": value for name, value in env.items()},
        health_port=port,
        log_path=log,
        isolate_prefix="FLUXGATE_COAP_",
    )


async def test_a_reading_the_killed_gateway_held_is_gone_and_the_check_counts_it_cut_off(
    stack: Any, registry_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent_types: list[aiocoap.numbers.types.Type] = []
    send = MessageManager._send_via_transport

    def recording(self: MessageManager, message: aiocoap.Message) -> None:
        if message.code.is_response() and message.opt.observe is not None:
            sent_types.append(message.mtype)
        send(self, message)

    monkeypatch.setattr(MessageManager, "_send_via_transport", recording)
    topics = (unique_topic("test.coap.killed", stack.bootstrap), unique_topic("test.coap.killed.dlq", stack.bootstrap))
    ledger = Ledger(tmp_path / "ledger.jsonl")
    async with CoapDeviceServer(port=0) as server:
        device = Device(server, ledger)
        first = await device.send(40.0)  # the state the gateway is sent when it registers
        ingest = ingest_process(stack, server, topics, tmp_path / "coap-ingest.log")
        await asyncio.to_thread(ingest.start)
        delivered = await device.send(41.0)
        await asyncio.to_thread(consume, stack.bootstrap, topics[0], expected=2, idle=0)  # 40 and 41 are in Kafka
        assert ingest.process is not None
        ingest.process.send_signal(signal.SIGSTOP)
        held = await device.send(42.0)  # reaches the gateway's socket; it never reads it
        killed_ms = int(time.time() * 1000)
        await asyncio.to_thread(ingest.kill)
        after_kill = await device.send(43.0)  # the current state when the gateway is back
        await asyncio.to_thread(ingest.start)
        restarted_ms = int(time.time() * 1000)
        resumed = await device.send(44.0)
        await asyncio.to_thread(consume, stack.bootstrap, topics[0], expected=4, idle=0)
        assert await asyncio.to_thread(ingest.terminate) == 0
    ledger.close()

    records = consume(stack.bootstrap, topics[0], expected=4, idle=3, decoder=AvroDecoder(registry_client))
    arrived: Counter[Identity] = Counter(identity(r.record) for r in records if r.record)
    values = sorted(value for (_, _, _, value, _) in arrived)
    # Each registration is answered in the ACK of the gateway's CON GET; what follows is CON.
    assert sent_types.count(aiocoap.ACK) == 2 and set(sent_types) == {aiocoap.ACK, aiocoap.CON}, sent_types
    assert [first.value, delivered.value, after_kill.value, resumed.value] == values, "held must be the one gone"
    assert held.value not in values

    kill = FaultWindow("coap-ingest", "kill", killed_ms, restarted_ms, restarted_ms + 5_000)
    sent = Sent.read(tmp_path / "ledger.jsonl", excluded="")
    result = Result()
    spec = Check(tmp_path / "ledger.jsonl", endpoints(), "", "", "", [kill], 60_000, "")
    readings(spec, sent, arrived, Counter(), CutOff.of([kill], sent, arrived), result)
    assert result.problems == []
    assert result.figures["readings_cut_off"] == {"coap in flight at kill coap-ingest": 1}
