"""structlog configuration from the logging flags (`--v`, `--logging-format`, `--log-file`, ...).

Verbosity follows Cluster Autoscaler's guidance: `--v=0`/`--v=1` show decisions (scale-up,
scale-down, errors and warnings), `--v=4` adds the reasoning behind them (per node group,
per node), `--v=9` also logs every HTTP call to the API server and the cloud. `--vmodule`
raises or lowers that per module (`planner=4`, `scale*=5`: globs on the file name of the
module that logs, without `.py`, as klog matches Go files).

Events are key=value (`text`) or one JSON object per line (`json`). Where they go follows
upstream's logging set-up: stderr by default; `--log-file` with `--logtostderr=false`
appends to that file instead (and to stderr too with `--alsologtostderr`). With
`--log-text-split-stream` or `--log-json-split-stream` (behind the LoggingAlphaOptions
feature gate), info and debug lines go to stdout and warnings and errors to stderr, the
info stream buffered up to `--log-*-info-buffer-size` and flushed at least every
`--log-flush-frequency`. Every other line is written and flushed at once.
"""

from __future__ import annotations

import atexit
import fnmatch
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TextIO

import structlog

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

DEBUG_VERBOSITY = 4
HTTP_VERBOSITY = 9
_ERROR_LEVELS = frozenset({"warning", "error", "critical", "exception"})


def level_for(verbosity: int) -> int:
    """The stdlib logging level for a `--v` value."""
    if verbosity >= DEBUG_VERBOSITY:
        return logging.DEBUG
    return logging.INFO


@dataclass
class LogSettings:
    """What the logging flags ask for, in one value (see `settings_from_options`)."""

    verbosity: int = 0
    fmt: str = "text"
    vmodule: dict[str, int] = field(default_factory=dict)
    log_file: str = ""  # "" or when --logtostderr: stderr only
    also_to_stderr: bool = False
    split_stream: bool = False
    info_buffer_size: int = 0
    flush_seconds: float = 5.0
    skip_headers: bool = False
    backtrace_at: str = ""  # <file>:<line>


def settings_from_options(options: AutoscalingOptions) -> LogSettings:
    json = options.logging_format == "json"
    return LogSettings(
        verbosity=options.v,
        fmt=options.logging_format,
        vmodule=dict(options.vmodule),
        # Upstream: --log-file is used only with --logtostderr=false.
        log_file="" if options.logtostderr else options.log_file,
        also_to_stderr=options.alsologtostderr,
        split_stream=options.log_json_split_stream if json else options.log_text_split_stream,
        info_buffer_size=(
            options.log_json_info_buffer_size if json else options.log_text_info_buffer_size
        ),
        flush_seconds=options.log_flush_frequency.total_seconds(),
        skip_headers=options.skip_headers,
        backtrace_at=options.log_backtrace_at,
    )


class _Stream(Protocol):
    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class _Tee:
    """Writes to several streams; flushes each line unless a stream buffers on purpose."""

    def __init__(self, streams: list[_Stream]) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


class _BufferedInfo:
    """The info stream of split output, buffered up to `size` characters, flushed when full
    and at least every `every` seconds by a daemon thread (and at exit)."""

    def __init__(self, stream: _Stream, size: int, every: float) -> None:
        self.stream = stream
        self.size = size
        self.parts: list[str] = []
        self.length = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        thread = threading.Thread(target=self._flush_every, args=(max(every, 0.01),), daemon=True)
        thread.start()
        atexit.register(self.flush)

    def write(self, text: str) -> int:
        with self.lock:
            self.parts.append(text)
            self.length += len(text)
            if self.length >= self.size:
                self._drain()
        return len(text)

    def flush(self) -> None:
        with self.lock:
            self._drain()

    def _drain(self) -> None:
        if self.parts:
            self.stream.write("".join(self.parts))
            self.parts.clear()
            self.length = 0
        self.stream.flush()

    def _flush_every(self, seconds: float) -> None:
        while not self.stopped.wait(seconds):
            self.flush()


class _Output:
    """Where lines go, resolved when a line is logged so that a replaced stderr (test capture,
    daemonisation) is followed."""

    def __init__(self, settings: LogSettings, stream: TextIO | None) -> None:
        self.stream = stream
        self.file: IO[str] | None = None
        if settings.log_file:
            path = Path(settings.log_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.file = path.open("a", encoding="utf-8")
            atexit.register(self.file.close)
        self.also_to_stderr = settings.also_to_stderr
        self.split = settings.split_stream
        self.info: _BufferedInfo | None = None
        if self.split and settings.info_buffer_size > 0:
            self.info = _BufferedInfo(
                _LateStream(lambda: self.stream or sys.stdout),
                settings.info_buffer_size,
                settings.flush_seconds,
            )

    def stderr(self) -> _Stream:
        return self.stream or sys.stderr

    def for_level(self, level: str) -> _Stream:
        if self.file is not None:
            return _Tee([self.file, self.stderr()]) if self.also_to_stderr else self.file
        if self.split and level not in _ERROR_LEVELS:
            if self.info is not None:
                return self.info
            return self.stream or sys.stdout
        return self.stderr()


class _LateStream:
    def __init__(self, resolve: Callable[[], _Stream]) -> None:
        self.resolve = resolve

    def write(self, text: str) -> int:
        return self.resolve().write(text)

    def flush(self) -> None:
        self.resolve().flush()


class _Logger:
    """A print logger whose stream depends on the line's level."""

    def __init__(self, output: _Output) -> None:
        self.output = output

    def _write(self, level: str, message: str) -> None:
        stream = self.output.for_level(level)
        stream.write(message + "\n")
        if not isinstance(stream, _BufferedInfo):
            stream.flush()

    def __getattr__(self, level: str) -> Callable[[str], None]:
        return lambda message: self._write(level, message)


class _LoggerFactory:
    def __init__(self, output: _Output) -> None:
        self.output = output

    def __call__(self, *args: Any) -> _Logger:
        return _Logger(self.output)


def _module_verbosity(settings: LogSettings) -> Callable[[str], int]:
    """`--vmodule`: the verbosity of a module (its file name without `.py`), by glob."""
    patterns = list(settings.vmodule.items())
    cache: dict[str, int] = {}

    def verbosity(module: str) -> int:
        found = cache.get(module)
        if found is None:
            found = next(
                (level for pattern, level in patterns if fnmatch.fnmatchcase(module, pattern)),
                settings.verbosity,
            )
            cache[module] = found
        return found

    return verbosity


Processor = Callable[[Any, str, MutableMapping[str, Any]], Any]


def _callsite_processors(settings: LogSettings) -> list[Processor]:
    """`--vmodule` and `--log-backtrace-at` need the caller; found only when asked for."""
    if not settings.vmodule and not settings.backtrace_at:
        return []
    from structlog.processors import CallsiteParameter, CallsiteParameterAdder

    adder = CallsiteParameterAdder(
        [CallsiteParameter.MODULE, CallsiteParameter.PATHNAME, CallsiteParameter.LINENO],
        additional_ignores=[__name__],  # the caller is the one who logs, not this processor
    )
    verbosity = _module_verbosity(settings)
    trace_file, _, trace_line = settings.backtrace_at.rpartition(":")

    def by_caller(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        event = adder(logger, method, event)
        module = str(event.pop("module", ""))
        path = str(event.pop("pathname", ""))
        line = event.pop("lineno", 0)
        if settings.vmodule and method == "debug" and verbosity(module) < DEBUG_VERBOSITY:
            raise structlog.DropEvent
        if trace_file and str(line) == trace_line and (
            path == trace_file or path.endswith(os.sep + trace_file)
        ):
            event["stack"] = "".join(traceback.format_stack()[:-1])
        return event

    return [by_caller]


class _Timestamp:
    """Stamps each line with the time of `now`: the wall clock, or while `stamped_by` is in
    force the virtual clock of a simulation (its lines then read in the timeline's time)."""

    def __init__(self) -> None:
        self.now: Callable[[], datetime] | None = None

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        when = datetime.now(UTC) if self.now is None else self.now().astimezone(UTC)
        event["timestamp"] = when.isoformat().replace("+00:00", "Z")
        return event


_TIMESTAMP = _Timestamp()


@contextmanager
def stamped_by(now: Callable[[], datetime]) -> Iterator[None]:
    """Inside the block, log lines carry `now()` as their timestamp (`simulate` and
    `explain` pass their virtual clock); the wall clock again after it."""
    previous = _TIMESTAMP.now
    _TIMESTAMP.now = now
    try:
        yield
    finally:
        _TIMESTAMP.now = previous


def _drop_headers(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
    event.pop("timestamp", None)
    event.pop("level", None)
    return event


def configure(settings: LogSettings, stream: TextIO | None = None) -> None:
    """Configure structlog (and the stdlib loggers of libraries) once per process."""
    renderer: Any
    if settings.fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
    else:
        renderer = structlog.processors.KeyValueRenderer(
            key_order=["timestamp", "level", "event"], drop_missing=True
        )
    finest = max([settings.verbosity, *settings.vmodule.values()])
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        *_callsite_processors(settings),
        structlog.processors.add_log_level,
        _TIMESTAMP,
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    if settings.skip_headers and settings.fmt == "text":
        processors.append(_drop_headers)
    output = _Output(settings, stream)
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level_for(finest)),
        logger_factory=_LoggerFactory(output),
        cache_logger_on_first_use=False,
    )
    # Libraries log through the stdlib: keep them quiet unless asked for wire-level detail.
    library_level = logging.DEBUG if settings.verbosity >= HTTP_VERBOSITY else logging.WARNING
    handler = logging.StreamHandler(_LateStream(lambda: output.for_level("warning")))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(library_level)
    for name in ("urllib3", "kubernetes", "botocore", "azure", "google"):
        logging.getLogger(name).setLevel(library_level)


def configure_logging(verbosity: int = 0, fmt: str = "text", stream: TextIO | None = None) -> None:
    """Log at `verbosity` in `fmt` to `stream` (stderr when None)."""
    configure(LogSettings(verbosity=verbosity, fmt=fmt), stream)


def configure_logging_from_options(
    options: AutoscalingOptions, stream: TextIO | None = None
) -> None:
    """Configure logging from the autoscaler's logging flags. Raises `OSError` when
    `--log-file` cannot be opened."""
    configure(settings_from_options(options), stream)
