"""Errors of the stack tool; every message names the server it is about."""

from __future__ import annotations


class StackError(Exception):
    """Base of every error the stack tool raises on purpose."""

    retriable: bool = False


class InstallError(StackError):
    """A server's files or packages could not be fetched."""

    retriable = True


class UnknownServer(StackError):
    """A server name that is not in the registry."""


class PortInUse(StackError):
    """Something that is not ours (or not ready) already holds a server's port."""


class ServerNotReady(StackError):
    """A server exited or did not answer its readiness check in time."""

    def __init__(self, server: str, reason: str, log_tail: str) -> None:
        super().__init__(f"{server}: {reason}\n--- last lines of its log ---\n{log_tail}")
        self.server = server
        self.log_tail = log_tail
