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


class _DroppingPrintLogger(structlog.PrintLogger):
    """A PrintLogger whose failed writes are dropped instead of raised.

    A log line must never break what it reports. With stderr on a full disk (ENOSPC),
    over a file size limit (EFBIG) or on a closed pipe, a raising ``log.info(...)``
    aborted the request or callback that logged: a host whose log file filled its disk
    reset its clients and never answered ``host.stop`` (tests/reliability/
    test_rel_faults.py). The process keeps working without its log instead.
    """

    def msg(self, message: str) -> None:
        try:
            super().msg(message)
        except (OSError, ValueError):  # ValueError: the stream was closed
            pass

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


def _dropping_logger_factory(*_args: object) -> _DroppingPrintLogger:
    return _DroppingPrintLogger(sys.stderr)


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
        logger_factory=_dropping_logger_factory,
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(
        level=numeric, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
    )
