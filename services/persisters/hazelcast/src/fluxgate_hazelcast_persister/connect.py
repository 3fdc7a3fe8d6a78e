"""Connecting to the cluster, and telling a refusal from an outage at once.

A member that refuses the client (a wrong cluster name; wrong credentials on Enterprise)
answers every attempt with ``AuthenticationError``, but ``hazelcast-python-client`` keeps
that to its log and tries again until ``cluster_connect_timeout``; what it raises then is
``IllegalStateError("Unable to connect to any cluster")``, the same as for a member that is
down. So a wrong cluster name looked like an outage and took the whole timeout to say so.
The one place the refusal shows is the warning the client logs with it: :func:`connect`
watches that logger while it starts the client and stops at the first refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from hazelcast import errors as hz
from hazelcast.asyncio import HazelcastClient

from fluxgate_core.errors import SettingRefused
from fluxgate_hazelcast_persister.settings import ConnectionSettings

# The client's logger that reports each failed attempt of the first connection (5.6).
CONNECTION_LOGGER = "hazelcast.internal.asyncio_connection"
REFUSALS = (hz.AuthenticationError, hz.ClientNotAllowedInClusterError)


class _Refusals(logging.Handler):
    """Sets ``seen`` at the first record carrying a refusal (its ``exc_info``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = asyncio.Event()
        self.error: BaseException | None = None
        self._loop = asyncio.get_running_loop()

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, REFUSALS) and self.error is None:
            self.error = error
            self._loop.call_soon_threadsafe(self.seen.set)


@contextlib.contextmanager
def _watching(handler: _Refusals) -> Iterator[None]:
    logger = logging.getLogger(CONNECTION_LOGGER)
    level = logger.level
    if not logger.isEnabledFor(logging.WARNING):  # a quieter logger would drop the record before us
        logger.setLevel(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


async def connect(settings: ConnectionSettings) -> HazelcastClient:
    """A started client; :class:`SettingRefused` naming the settings when a member refuses it."""
    refusals = _Refusals()
    with _watching(refusals):
        starting = asyncio.ensure_future(HazelcastClient.create_and_start(**settings.client_options()))
        refused = asyncio.ensure_future(refusals.seen.wait())
        await asyncio.wait({starting, refused}, return_when=asyncio.FIRST_COMPLETED)
        refused.cancel()
        if not starting.done():
            # Refused: trying again cannot help. The half-started client is dropped with its
            # task (the service stops on this error).
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, hz.HazelcastError):
                await starting
            raise refused_error(settings, refusals.error)
        return starting.result()


def refused_error(settings: ConnectionSettings, error: BaseException | None) -> SettingRefused:
    members = ", ".join(settings.members)
    said = str(error).splitlines()[0] if error is not None and str(error) else type(error).__name__
    if settings.username:
        return SettingRefused(
            f"Hazelcast at {members} refused the cluster name {settings.cluster_name!r} or the credentials of "
            f"{settings.username!r} ({said})",
            ("hazelcast.cluster_name", "hazelcast.username", "hazelcast.password"),
        )
    # The open-source member checks nothing else: a wrong cluster name is the only refusal.
    return SettingRefused(
        f"Hazelcast at {members} refused the cluster name {settings.cluster_name!r}: its members belong "
        f"to another cluster ({said})",
        ("hazelcast.cluster_name",),
    )
