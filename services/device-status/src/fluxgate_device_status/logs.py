"""faust's, mode's and aiokafka's stdlib logs in ``fluxgate_core``'s one format.

``fluxgate_core.logs`` renders structlog events as logfmt (or JSON) and leaves the stdlib
root handler plain; here that handler renders stdlib records through the same
structlog processors, so one process writes one format.
"""

from __future__ import annotations

import logging

import structlog

from fluxgate_core.settings import LogSettings


def route_stdlib_logs(settings: LogSettings) -> None:
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if settings.json_output
        else structlog.processors.LogfmtRenderer(key_order=["timestamp", "level", "event"])
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        processor=renderer,
        foreign_pre_chain=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
        ],
    )
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
