"""Logging setup, done by the CLI only (library code just asks for loggers)."""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure_logging"]


def _summarise_diagnostics(logger: object, method: str, event: dict) -> dict:
    """On a terminal, a health_diag event shows its health and problems; the snapshots stay in JSON logs
    and metrics.jsonl, where tools read them."""
    if event.get("event") == "health_diag" and "snapshots" in event:
        snapshots = event.pop("snapshots")
        event["monitors"] = len(snapshots)
    return event


def configure_logging(*, debug: bool = False, json_logs: bool | None = None, level: int | None = None) -> None:
    """Console rendering on a terminal, JSON lines otherwise; DEBUG with ``--debug``, else INFO, or ``level``
    (a :mod:`logging` level) when given.

    Logs go to stderr so that ``--json`` output on stdout stays machine-readable.
    """
    if json_logs is None:
        json_logs = not sys.stderr.isatty()
    processors = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json_logs:
        processors.append(structlog.processors.JSONRenderer())
    else:
        processors += [_summarise_diagnostics, structlog.dev.ConsoleRenderer()]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level if level is not None else logging.DEBUG if debug else logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
