"""structlog configuration from `--v` and `--logging-format`.

Verbosity follows Cluster Autoscaler's guidance: `--v=0`/`--v=1` show decisions (scale-up,
scale-down, errors and warnings), `--v=4` adds the reasoning behind them (per node group,
per node), `--v=9` also logs every HTTP call to the API server and the cloud.
Events are key=value (`text`) or one JSON object per line (`json`), written to stderr.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

DEBUG_VERBOSITY = 4
HTTP_VERBOSITY = 9


def level_for(verbosity: int) -> int:
    """The stdlib logging level for a `--v` value."""
    if verbosity >= DEBUG_VERBOSITY:
        return logging.DEBUG
    return logging.INFO


class _StreamLoggerFactory:
    """Print loggers on `stream`, or on whatever `sys.stderr` is when a message is logged.

    Resolving stderr late keeps logging working when stderr is replaced (test capture,
    daemonisation) after logging was configured.
    """

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream

    def __call__(self, *args: Any) -> structlog.PrintLogger:
        return structlog.PrintLogger(file=self.stream or sys.stderr)


def configure_logging(verbosity: int = 0, fmt: str = "text", stream: TextIO | None = None) -> None:
    """Configure structlog (and the stdlib loggers of libraries) once per process."""
    level = level_for(verbosity)
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
    else:
        renderer = structlog.processors.KeyValueRenderer(
            key_order=["timestamp", "level", "event"], drop_missing=True
        )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_StreamLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    # Libraries log through the stdlib: keep them quiet unless asked for wire-level detail.
    library_level = logging.DEBUG if verbosity >= HTTP_VERBOSITY else logging.WARNING
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(library_level)
    for name in ("urllib3", "kubernetes", "botocore", "azure", "google"):
        logging.getLogger(name).setLevel(library_level)
