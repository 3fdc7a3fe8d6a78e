"""When, and in which order, QoS 1/2 messages are acknowledged.

Messages are handled in batches (every PUBLISH read in one event-loop turn), and batches
finish in whatever order Kafka confirms them (partitions differ). MQTT wants
acknowledgements in the order the messages arrived (MQTT 5 section 4.6,
MQTT-4.6.0-2/3), so each batch waits for its predecessor's acknowledgements before
sending its own, in arrival order. A message received on an earlier connection is never
acknowledged on a later one: its packet id may by then name another message, which that
acknowledgement would wrongly confirm. The broker redelivers it instead (a duplicate in
Kafka, never a loss).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class NotAcknowledged(Exception):
    """A message the proxy deliberately leaves for the broker to redeliver."""


@dataclass(frozen=True, slots=True)
class Ticket:
    """A batch's place in the acknowledgement order of one connection."""

    connection: int
    previous: asyncio.Future[None] | None
    mine: asyncio.Future[None]


class AckSequencer:
    """Orders acknowledgements per connection; :meth:`new_connection` starts a fresh order."""

    def __init__(self) -> None:
        self.connection = 0
        self._tail: asyncio.Future[None] | None = None

    def new_connection(self) -> None:
        self.connection += 1
        self._tail = None

    def ticket(self) -> Ticket:
        """Take the next place; batches take theirs in arrival order."""
        ticket = Ticket(self.connection, self._tail, asyncio.get_running_loop().create_future())
        self._tail = ticket.mine
        return ticket

    async def turn(self, ticket: Ticket) -> None:
        """Wait until every earlier batch of the connection is acknowledged (or given up)."""
        if ticket.previous is not None and not ticket.previous.done():
            await asyncio.shield(ticket.previous)

    def current(self, connection: int) -> bool:
        """Whether a message received on ``connection`` may still be acknowledged."""
        return connection == self.connection

    @staticmethod
    def done(ticket: Ticket) -> None:
        """The batch's acknowledgements are written (or given up): the next batch may go."""
        if not ticket.mine.done():
            ticket.mine.set_result(None)


def quiet_unacknowledged(loop: asyncio.AbstractEventLoop) -> None:
    """Keep the event loop from reporting a deliberate :class:`NotAcknowledged` as a crash."""
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), NotAcknowledged):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
