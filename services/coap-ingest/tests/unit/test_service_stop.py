"""Stopping waits for cancelled tasks, but never forever."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from fluxgate_coap_ingest.service import _cancel


async def test_cancelled_tasks_are_awaited_and_their_failures_logged() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    tasks = [asyncio.create_task(asyncio.sleep(10), name="quiet"), asyncio.create_task(fails_on_cancel(), name="loud")]
    await asyncio.sleep(0)
    with capture_logs() as logs:
        await _cancel(tasks)
    assert tasks == []
    assert [(e["event"], e["task"]) for e in logs] == [("service.stop.task_failed", "loud")]


async def test_a_task_that_ignores_its_cancel_does_not_hang_the_stop() -> None:
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(stubborn(), name="stubborn")
    await asyncio.sleep(0)
    with capture_logs() as logs:
        await _cancel([task], timeout=0.2)
    assert [(e["event"], e["task"]) for e in logs] == [("service.stop.task_stuck", "stubborn")]
    assert not task.done()
    release.set()
    await task
