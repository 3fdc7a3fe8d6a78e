"""The baseline of ``coap_ingest.py``: a plain aiocoap client that observes resources and counts.

Run as a process (``python bench/_coap_observer.py RESOURCES STATUS``): observes every ``uri``
of the JSON list in RESOURCES, counts each resource's notifications and does nothing else;
writes the counts to STATUS every 0.2 s (``registered`` once every observation answered).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path

import aiocoap
from _coap_devices import write_atomically


async def observe(context: aiocoap.Context, uri: str, counts: dict[str, int], registered: set[str]) -> None:
    request = context.request(aiocoap.Message(code=aiocoap.GET, uri=uri, observe=0))
    await request.response
    registered.add(uri)
    async for _notification in request.observation:
        counts[uri] += 1


async def run(uris: list[str], status_path: Path) -> None:
    counts = dict.fromkeys(uris, 0)
    registered: set[str] = set()
    context = await aiocoap.Context.create_client_context()
    tasks = [asyncio.create_task(observe(context, uri, counts, registered)) for uri in uris]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    while not stop.is_set():
        status = {"registered": len(registered), "counts": list(counts.values()), "at": time.time()}
        write_atomically(status_path, json.dumps(status))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)
    for task in tasks:
        task.cancel()
    await context.shutdown()


if __name__ == "__main__":
    resources = json.loads(Path(sys.argv[1]).read_text())
    asyncio.run(run([entry["uri"] for entry in resources], Path(sys.argv[2])))
