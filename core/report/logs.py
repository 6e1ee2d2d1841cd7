"""Logging from the logging flags (`--v`, `--logging-format`, `--log-file`, ...), in the
formats Cluster Autoscaler's users read: klog's text lines and component-base's JSON lines
(`clusterscaler.report.logformat` writes them).

Our own lines are structlog events: the event name is the message, the keywords are the
fields. The lines of libraries (the stdlib `logging` of urllib3, the Kubernetes client,
asyncio, the cloud SDKs), `warnings` and uncaught exceptions go through the same writer, so
that every line of the output has one format.

Verbosity follows Cluster Autoscaler's klog levels: `--v=0` shows decisions (scale-up,
scale-down), warnings and errors; an info event that Cluster Autoscaler logs at a higher
`V` level has that level here (`VERBOSITY`); debug events (the reasoning behind decisions,
per node group, per node) are `V(4)` unless listed; libraries' own info and debug lines,
every HTTP call to the API server and the cloud, are `V(9)`. `--vmodule` raises or lowers
that per module (`planner=4`, `scale*=5`: globs on the file name of the module that logs,
without `.py`, as klog matches Go files). JSON lines carry the level as `v`.

Repeated identical warnings and errors are written once per burst and then counted
(`clusterscaler.report.logrepeat`), except while a simulated clock stamps the lines
(`stamped_by`): a simulation's lines are its timeline.

Where lines go follows upstream's logging set-up (`clusterscaler.report.logoutput`):
stderr by default; `--log-file` with `--logtostderr=false`, `--alsologtostderr`, and the
split streams behind the LoggingAlphaOptions feature gate.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, TextIO

import structlog
from clusterscaler.report.logformat import LogLine, render_json, render_text
from clusterscaler.report.logoutput import Output
from clusterscaler.report.logrepeat import REPEAT_WINDOW_SECONDS, RepeatLimiter, identity

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

DEBUG_VERBOSITY = 4
HTTP_VERBOSITY = 9

# Info and debug events whose Cluster Autoscaler counterpart logs at another klog level
# than the default (info: V(0), debug: V(4)); the counterpart's message in the comment.
VERBOSITY: dict[str, int] = {
    "kube_client_configured": 1,  # "Using kubeconfig file: %s" (V(1))
    "node_updated": 1,  # "Successfully added %v on node %v" (V(1))
    "stale_taint_removed": 1,  # "Releasing taint %+v on node %v" (V(1))
    "waiting_for_delay_deletion": 1,  # "Wait for removing %s annotations on node %v" (V(1))
    "scale_down_on_completion_pods": 2,  # "Node %s has active on-completion pods" (V(2))
    "node_has_startup_taint": 3,  # "Overriding status of node %v, which seems to have startup taint" (V(3))
    "event": 4,  # "Event(%#v): type: '%v' reason: '%v' %v" (V(4))
}

# Warnings and errors written every time, never counted as repetitions: the outcome of each
# loop is one line per loop, paced by the loop itself, whether it is `loop_done` (info, so
# never held back) or this.
EVERY_TIME = frozenset({"loop_failed"})

_SEVERITY = {
    "debug": "I",
    "info": "I",
    "warning": "W",
    "warn": "W",
    "error": "E",
    "exception": "E",
    "critical": "E",
}
_LEVEL_OF = {"I": "info", "W": "warning", "E": "error", "F": "error"}


def level_for(verbosity: int) -> int:
    """The stdlib logging level for a `--v` value: DEBUG once any debug event can show."""
    if verbosity >= min([DEBUG_VERBOSITY, *VERBOSITY.values()]):
        return logging.DEBUG
    return logging.INFO


def event_verbosity(event: str, method: str) -> int:
    """The klog `V` level of an info (or debug) event."""
    return VERBOSITY.get(event, DEBUG_VERBOSITY if method == "debug" else 0)


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
    dir_header: bool = False
    backtrace_at: str = ""  # <file>:<line>
    repeat_window: float = REPEAT_WINDOW_SECONDS  # 0: every line is written


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
        dir_header=options.add_dir_header,
        backtrace_at=options.log_backtrace_at,
    )


class _Logger:
    """structlog's logger: writes the rendered line (None: already written or dropped)."""

    def __init__(self, output: Output) -> None:
        self.output = output

    def _write(self, level: str, message: str | None) -> None:
        if message is not None:
            self.output.write(level, message)

    def __getattr__(self, level: str) -> Callable[[str | None], None]:
        return lambda message: self._write(level, message)


class _LoggerFactory:
    def __init__(self, output: Output) -> None:
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


def _caller() -> FrameType | None:
    """The frame of the code that logs: the first outside structlog and this module."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != __name__ and not module.startswith("structlog"):
            return frame
        frame = frame.f_back
    return None


class _Timestamp:
    """The time of `now`: the wall clock, or while `stamped_by` is in force the virtual
    clock of a simulation (its lines then read in the timeline's time)."""

    def __init__(self) -> None:
        self.now: Callable[[], datetime] | None = None

    def __call__(self) -> datetime:
        return datetime.now(UTC) if self.now is None else self.now().astimezone(UTC)

    @property
    def simulated(self) -> bool:
        return self.now is not None


_TIMESTAMP = _Timestamp()


@contextmanager
def stamped_by(now: Callable[[], datetime]) -> Iterator[None]:
    """Inside the block, log lines carry `now()` as their time (`simulate` and `explain`
    pass their virtual clock), and repeated lines are all written; the wall clock again
    after it."""
    previous = _TIMESTAMP.now
    _TIMESTAMP.now = now
    try:
        yield
    finally:
        _TIMESTAMP.now = previous


ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def _exc_info(value: Any) -> ExcInfo | None:
    """structlog's `exc_info=`: True (the exception being handled), an exception, or a
    `sys.exc_info()` tuple."""
    if isinstance(value, BaseException):
        return type(value), value, value.__traceback__
    if isinstance(value, tuple) and len(value) == 3 and value[1] is not None:
        return value
    if value is True:
        current = sys.exc_info()
        if current[1] is not None:
            return current
    return None


def _error_fields(exc: ExcInfo | None, fields: dict[str, Any]) -> str | None:
    """`err` (the exception's type and message) for the line; its traceback joins the
    fields unless they already carry one."""
    if exc is None:
        return None
    kind, value, tb = exc
    if "traceback" not in fields:
        fields["traceback"] = "".join(traceback.format_exception(kind, value, tb)).rstrip()
    text = str(value)
    return f"{kind.__name__}: {text}" if text else kind.__name__


class _Writer:
    """Renders lines in the configured format, holds back repetitions, and writes them."""

    def __init__(self, settings: LogSettings, output: Output) -> None:
        self.settings = settings
        self.output = output
        self.repeats = (
            RepeatLimiter(self._write_summary, settings.repeat_window)
            if settings.repeat_window > 0
            else None
        )

    def render(self, line: LogLine) -> str:
        if self.settings.fmt == "json":
            return render_json(line)
        return render_text(
            line, headers=not self.settings.skip_headers, dir_header=self.settings.dir_header
        )

    def admit(self, line: LogLine) -> bool:
        """False for a repetition to count rather than write."""
        if self.repeats is None or line.severity == "I" or _TIMESTAMP.simulated:
            return True
        if not line.logger and line.msg in EVERY_TIME:
            return True
        return self.repeats.admit(identity(line), line)

    def write(self, line: LogLine) -> None:
        if self.admit(line):
            self.output.write(_LEVEL_OF[line.severity], self.render(line))

    def _write_summary(self, line: LogLine) -> None:
        self.output.write(_LEVEL_OF[line.severity], self.render(replace(line, when=_TIMESTAMP())))

    def close(self) -> None:
        """Write the counts held back and what the info buffer holds."""
        if self.repeats is not None:
            self.repeats.stop()
        self.output.flush()


Processor = Callable[[Any, str, MutableMapping[str, Any]], Any]


def _line_processor(settings: LogSettings, writer: _Writer) -> Processor:
    """structlog's last processor: the event becomes a `LogLine`, filtered by verbosity
    (`--v`, `--vmodule`), marked for `--log-backtrace-at`, then rendered (None when it is
    a repetition held back)."""
    verbosity = _module_verbosity(settings)
    trace_file, _, trace_line = settings.backtrace_at.rpartition(":")

    def to_line(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        severity = _SEVERITY.get(method, "I")
        msg = str(event.pop("event", ""))
        v = event_verbosity(msg, method) if severity == "I" else None
        if v is not None and not settings.vmodule and v > settings.verbosity:
            raise structlog.DropEvent
        frame = _caller()
        path, line = (frame.f_code.co_filename, frame.f_lineno) if frame else ("???", 1)
        if v is not None and settings.vmodule:
            module = os.path.splitext(os.path.basename(path))[0]
            if v > verbosity(module):
                raise structlog.DropEvent
        fields = dict(event)
        err = _error_fields(_exc_info(fields.pop("exc_info", None)), fields)
        if (
            trace_file
            and str(line) == trace_line
            and (path == trace_file or path.endswith(os.sep + trace_file))
        ):
            fields["stack"] = "".join(traceback.format_stack(frame))
        record = LogLine(
            severity=severity,
            when=_TIMESTAMP(),
            path=path,
            line=line,
            msg=msg,
            v=0 if severity == "W" else v,
            err=err,
            fields=tuple(fields.items()),
        )
        if not writer.admit(record):
            raise structlog.DropEvent
        return writer.render(record)

    return to_line


def _is_retry(record: logging.LogRecord) -> bool:
    return record.name == "urllib3.connectionpool" and str(record.msg).startswith("Retrying")


class _LibraryHandler(logging.Handler):
    """The stdlib `logging` records of libraries, written as our own lines."""

    def __init__(self, writer: _Writer) -> None:
        super().__init__()
        self.writer = writer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.levelno >= logging.ERROR:
                severity, v = "E", None
            elif _is_retry(record):
                # urllib3 warns of each retry of a request, three per failed call; the
                # caller's own line says when the retries are exhausted. HTTP detail: V(9).
                if self.writer.settings.verbosity < HTTP_VERBOSITY:
                    return
                severity, v = "I", HTTP_VERBOSITY
            elif record.levelno >= logging.WARNING:
                severity, v = "W", 0
            else:
                severity, v = "I", HTTP_VERBOSITY
            fields: dict[str, Any] = {}
            err = _error_fields(record.exc_info if record.exc_info else None, fields)  # type: ignore[arg-type]
            if record.stack_info:
                fields["stack"] = record.stack_info
            when = (
                _TIMESTAMP()
                if _TIMESTAMP.simulated
                else datetime.fromtimestamp(record.created, UTC)
            )
            self.writer.write(
                LogLine(
                    severity=severity,
                    when=when,
                    path=record.pathname,
                    line=record.lineno,
                    msg=record.getMessage(),
                    v=v,
                    err=err,
                    logger=record.name,
                    fields=tuple(fields.items()),
                )
            )
        except Exception:
            self.handleError(record)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """`warnings.showwarning`: a warning is a W line from the code that warned."""
    writer = _CURRENT.writer
    if writer is None or file is not None:
        _ORIGINAL_SHOWWARNING(message, category, filename, lineno, file, line)
        return
    writer.write(
        LogLine(
            severity="W",
            when=_TIMESTAMP(),
            path=filename,
            line=lineno,
            msg=str(message),
            logger="py.warnings",
            fields=(("category", category.__name__),),
        )
    )


def _uncaught(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    """`sys.excepthook`: an exception that ends the process is an F line, with its
    traceback as a field."""
    writer = _CURRENT.writer
    if writer is None or issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    frames = traceback.extract_tb(tb)
    path, line = (frames[-1].filename, frames[-1].lineno or 0) if frames else ("???", 1)
    fields: dict[str, Any] = {}
    err = _error_fields((kind, value, tb), fields)
    writer.write(
        LogLine(severity="F", when=_TIMESTAMP(), path=path, line=line, msg="uncaught_exception",
                v=None, err=err, fields=tuple(fields.items()))
    )  # fmt: skip


def _uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    """`threading.excepthook`: an exception that ends a thread is an E line."""
    writer = _CURRENT.writer
    if writer is None or args.exc_value is None:
        threading.__excepthook__(args)
        return
    frames = traceback.extract_tb(args.exc_traceback)
    path, line = (frames[-1].filename, frames[-1].lineno or 0) if frames else ("???", 1)
    fields: dict[str, Any] = {"thread": args.thread.name if args.thread else ""}
    err = _error_fields((args.exc_type, args.exc_value, args.exc_traceback), fields)
    writer.write(
        LogLine(severity="E", when=_TIMESTAMP(), path=path, line=line, msg="uncaught_exception_in_thread",
                v=None, err=err, fields=tuple(fields.items()))
    )  # fmt: skip


_ORIGINAL_SHOWWARNING = warnings.showwarning


class _Current:
    """The configuration in force, for the hooks that outlive one `configure` call."""

    def __init__(self) -> None:
        self.writer: _Writer | None = None


_CURRENT = _Current()


def _install_hooks() -> None:
    """Route `warnings`, and uncaught exceptions where no one else has claimed the hooks
    (a test runner has), through the writer."""
    warnings.showwarning = _show_warning
    if sys.excepthook in (sys.__excepthook__, _uncaught):
        sys.excepthook = _uncaught
    if threading.excepthook in (threading.__excepthook__, _uncaught_in_thread):
        threading.excepthook = _uncaught_in_thread


def configure(settings: LogSettings, stream: TextIO | None = None) -> None:
    """Configure structlog, the stdlib loggers of libraries and `warnings`; called again,
    it replaces the previous configuration (whose held-back repetitions are written)."""
    output = Output(
        stream,
        log_file=settings.log_file,
        also_to_stderr=settings.also_to_stderr,
        split=settings.split_stream,
        info_buffer_size=settings.info_buffer_size,
        flush_seconds=settings.flush_seconds,
    )
    writer = _Writer(settings, output)
    previous = _CURRENT.writer
    _CURRENT.writer = writer
    if previous is not None:
        previous.close()
    finest = max([settings.verbosity, *settings.vmodule.values()])
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.StackInfoRenderer(),
            _line_processor(settings, writer),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level_for(finest)),
        logger_factory=_LoggerFactory(output),
        cache_logger_on_first_use=False,
    )
    # Libraries log through the stdlib: keep them quiet unless asked for wire-level detail.
    library_level = logging.DEBUG if settings.verbosity >= HTTP_VERBOSITY else logging.WARNING
    root = logging.getLogger()
    root.handlers[:] = [_LibraryHandler(writer)]
    root.setLevel(library_level)
    for name in ("urllib3", "kubernetes", "botocore", "azure", "google"):
        logging.getLogger(name).setLevel(library_level)
    _install_hooks()


def configure_logging(verbosity: int = 0, fmt: str = "text", stream: TextIO | None = None) -> None:
    """Log at `verbosity` in `fmt` to `stream` (stderr when None)."""
    configure(LogSettings(verbosity=verbosity, fmt=fmt), stream)


def configure_logging_from_options(
    options: AutoscalingOptions, stream: TextIO | None = None
) -> None:
    """Configure logging from the autoscaler's logging flags. Raises `OSError` when
    `--log-file` cannot be opened."""
    configure(settings_from_options(options), stream)
