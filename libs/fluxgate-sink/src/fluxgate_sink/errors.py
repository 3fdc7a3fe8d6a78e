"""Errors a sink reports; drivers' exceptions are converted to these at the sink's boundary."""

from __future__ import annotations

from fluxgate_core.errors import FluxgateError
from fluxgate_core.kcql import KcqlError

__all__ = [
    "FieldMissing",
    "KcqlError",
    "PolicyStop",
    "SinkError",
    "StoreUnavailable",
    "TransformError",
    "UndecodableKey",
]


class SinkError(FluxgateError):
    """A write failed. ``retriable`` says whether the same write may succeed later as it is
    (store overloaded or away) or never will (a document the store's mapping refuses)."""


class StoreUnavailable(SinkError):
    """The whole store is away or overloaded (connection refused, timeout, 5xx, 429):
    the runner pauses, keeps the batch and writes it again once the store answers."""

    retriable = True


class PolicyStop(SinkError):
    """The error policy (``THROW``, or ``RETRY`` out of retries) stopped the persister."""


class FieldMissing(SinkError, ValueError):
    """A record lacks a field its KCQL statement selects, keys or dates it by (or the field
    has the wrong shape): writing it again can never help, so the runner dead-letters it."""

    retriable = False


class UndecodableKey(SinkError):
    """The record key, which a statement reads (``PK _key``), does not decode in its format: like a
    value that does not decode, the record always goes to the dead letters, whatever the policy."""

    retriable = False


class TransformError(SinkError):
    """A transform of ``SINK__TRANSFORMS`` cannot apply to the record (ExtractField on a text ...):
    like a value that does not decode, the record goes to the dead letters with the reason."""

    retriable = False
