"""What a persister's tests tell the shared sink suite about their store."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any


class StoreUnderTest(ABC):
    """The store a persister writes to, as the shared suite needs to see it.

    Each suite test asks for a fresh ``target`` (an index family, a table ...), runs the
    persister as a process with :meth:`env` and the KCQL of :meth:`kcql`, and reads back
    with :meth:`documents` and :meth:`count`.
    """

    #: the persister's command, e.g. ``[".venv/bin/fluxgate-es-persister"]``
    argv: Sequence[str]
    #: its settings' environment prefix, e.g. ``FLUXGATE_ES_``
    env_prefix: str
    #: False for a store that keeps data in memory only and restarts empty after a kill
    durable: bool = True

    @abstractmethod
    def env(self) -> dict[str, str]:
        """How the persister reaches the store (without the prefix: ``ELASTICSEARCH__HOSTS`` ...)."""

    @abstractmethod
    def new_target(self) -> str:
        """A target name no other test uses."""

    @abstractmethod
    def kcql(self, topic: str, target: str) -> str:
        """A statement that writes every field of ``topic``'s aggregates to ``target``, keyed by
        device, metric and window start."""

    @abstractmethod
    def documents(self, target: str) -> dict[str, dict[str, Any]]:
        """Everything ``target`` holds: id -> stored fields, in a form two stores can be compared by."""

    @abstractmethod
    def count(self, target: str) -> int:
        """How many entries ``target`` holds (more than the distinct ids if something was doubled)."""

    @abstractmethod
    def refused_value(self, value: dict[str, Any]) -> dict[str, Any]:
        """``value`` changed so that it is still a valid record but the store refuses it for good."""

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL the store."""

    @abstractmethod
    def start(self) -> None:
        """Start the store again and wait until it answers."""

    def drop(self, target: str) -> None:  # noqa: B027 - optional cleanup, nothing by default
        """Remove what a test wrote to ``target``."""
