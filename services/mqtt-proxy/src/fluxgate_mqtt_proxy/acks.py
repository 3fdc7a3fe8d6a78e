"""When, and in which order, QoS 1/2 messages are acknowledged.

gmqtt sends PUBACK/PUBREC from each message task's done-callback, and tasks finish in
whatever order Kafka confirms (partitions differ). MQTT wants acknowledgements in the
order the messages arrived (MQTT 5 section 4.6, MQTT-4.6.0-2/3), so each message waits
for its predecessor's acknowledgement before returning. A message received on an
earlier connection is never acknowledged on a later one: its packet id may by then name
another message, which that acknowledgement would wrongly confirm. The broker redelivers
it instead (a duplicate in Kafka, never a loss).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class NotAcknowledged(Exception):
    """Raised by the message handler so that gmqtt sends no acknowledgement."""


@dataclass(frozen=True, slots=True)
class Ticket:
    """A message's place in the acknowledgement order of one connection."""

    connection: int
    previous: asyncio.Future[None] | None


class AckSequencer:
    """Orders acknowledgements per connection; :meth:`new_connection` starts a fresh order."""

    def __init__(self) -> None:
        self.connection = 0
        self._tail: asyncio.Future[None] | None = None

    def new_connection(self) -> None:
        self.connection += 1
        self._tail = None

    def ticket(self) -> Ticket:
        """Take the next place; call first thing in the message task (tasks start in arrival order)."""
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ticket = Ticket(self.connection, self._tail)
        self._tail = mine
        task = asyncio.current_task()
        assert task is not None, "ticket() runs inside gmqtt's message task"
        # Added after gmqtt's own done-callback, so it runs after the acknowledgement is written.
        task.add_done_callback(lambda _: _release(mine))
        return ticket

    async def turn(self, ticket: Ticket) -> None:
        """Wait until every earlier message of the connection is acknowledged (or given up)."""
        if ticket.previous is not None:
            await asyncio.shield(ticket.previous)
        if ticket.connection != self.connection:
            raise NotAcknowledged("connection lost")  # the broker redelivers it


def _release(turn: asyncio.Future[None]) -> None:
    if not turn.done():
        turn.set_result(None)


def quiet_unacknowledged(loop: asyncio.AbstractEventLoop) -> None:
    """Keep the event loop from reporting a deliberate :class:`NotAcknowledged` as a crash.

    gmqtt's done-callback calls ``task.result()``, which re-raises it inside the callback.
    """
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), NotAcknowledged):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
