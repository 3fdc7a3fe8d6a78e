"""The one error of ``fluxgate connect``: a config it cannot run, with every reason at once."""

from __future__ import annotations


class ConnectError(Exception):
    """The connector config cannot be run as it is; the message names each key and why."""
