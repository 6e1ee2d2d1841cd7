"""Where log lines go, as upstream's logging flags say: standard error; `--log-file`
(appended to) instead, or as well with `--alsologtostderr`; with split streams, info lines
to standard output (buffered up to a size, flushed at least every `--log-flush-frequency`)
and warnings and errors to standard error. Every other line is flushed as it is written.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Protocol, TextIO

_ERROR_LEVELS = frozenset({"warning", "error", "critical", "exception"})


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


class Output:
    """Where lines go, resolved when a line is logged so that a replaced stderr (test capture,
    daemonisation) is followed."""

    def __init__(
        self,
        stream: TextIO | None,
        *,
        log_file: str = "",
        also_to_stderr: bool = False,
        split: bool = False,
        info_buffer_size: int = 0,
        flush_seconds: float = 5.0,
    ) -> None:
        self.stream = stream
        self.file: IO[str] | None = None
        if log_file:
            path = Path(log_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.file = path.open("a", encoding="utf-8")
            atexit.register(self.file.close)
        self.also_to_stderr = also_to_stderr
        self.split = split
        self.info: _BufferedInfo | None = None
        if split and info_buffer_size > 0:
            self.info = _BufferedInfo(
                _LateStream(lambda: self.stream or sys.stdout), info_buffer_size, flush_seconds
            )

    def stderr(self) -> _Stream:
        return self.stream or sys.stderr

    def write(self, level: str, text: str) -> None:
        """One line, flushed unless the info stream buffers on purpose."""
        stream = self.for_level(level)
        stream.write(text + "\n")
        if not isinstance(stream, _BufferedInfo):
            stream.flush()

    def flush(self) -> None:
        """Write what the info buffer holds (when the configuration is replaced)."""
        if self.info is not None:
            self.info.flush()

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
