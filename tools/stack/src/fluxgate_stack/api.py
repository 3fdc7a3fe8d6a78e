"""Functions for pytest fixtures and scripts; each uses the settings from the environment."""

from __future__ import annotations

from fluxgate_stack.stack import Endpoints, Stack


def ensure_up(names: list[str] | None = None) -> Endpoints:
    """Start (or reuse) ``names`` (default: every server but coap-server) and wait until ready."""
    return Stack().up(names)


def endpoints() -> Endpoints:
    """Where the stack is (or would be), without starting anything."""
    return Stack().endpoints()


def stop(names: list[str] | None = None, wipe: bool = False) -> None:
    """Gracefully stop servers we started (default: all); ``wipe`` also deletes their data."""
    Stack().down(names, wipe=wipe)


def start(name: str) -> Endpoints:
    """Start one server (e.g. after :func:`kill`) and wait until it is ready."""
    return Stack().up([name])


def kill(name: str) -> None:
    """SIGKILL one server mid-test, as a crash would; its data stays for :func:`start`."""
    Stack().kill(name)


def restart(name: str) -> Endpoints:
    """Gracefully stop one server, start it again on the same data and wait until it is ready."""
    stack = Stack()
    stack.down([name])
    return stack.up([name])
