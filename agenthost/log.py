"""Logging setup: structlog to stderr, JSON when stderr is not a terminal.

Event names are logged at INFO; message bodies (what the agent or a user said) only
at DEBUG, so logs are safe to ship by default.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

LEVELS = ("debug", "info", "warning", "error")


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    """Configure structlog (and stdlib logging) once for this process."""
    numeric = getattr(logging, level.upper(), logging.INFO)
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty() and not os.environ.get("NO_COLOR")
        )
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(
        level=numeric, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
    )
