"""Structured logs: one line per event, ``key=value`` for people or JSON for collectors."""

from __future__ import annotations

import logging
import sys

import structlog

from fluxgate_core.settings import LogSettings


def configure_logging(service: str, settings: LogSettings) -> None:
    """structlog's events and the standard library's records (aiokafka, faust, gmqtt, aiocoap,
    the drivers) in one format: a process writes one kind of line."""
    level = getattr(logging, settings.level)
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if settings.json_output
        else structlog.processors.LogfmtRenderer(key_order=["timestamp", "level", "event"])
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)
    logging.basicConfig(level=level, stream=sys.stderr)
    formatter = structlog.stdlib.ProcessorFormatter(
        processor=renderer, foreign_pre_chain=[*shared[:2], structlog.stdlib.add_logger_name, *shared[2:]]
    )
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
