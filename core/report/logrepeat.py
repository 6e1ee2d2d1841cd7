"""Repeated identical warnings and errors, written once per burst with a count.

An API server that cannot be reached makes every informer, the leader election and every
HTTP retry say the same thing again, several times a second. The first line of a burst is
written at once; identical lines in the `window` seconds after it are only counted; when
the window ends, a line that was repeated is written once more with `repeated=N` (how many
times it came again in that window) and a new window starts, so a lasting failure shows
once per window and its end shows at most a window late. A line that did not come again in
its window is forgotten: its next occurrence is written at once.

"Identical" means the same severity, caller, message and fields, numbers aside: the same
warning about two resources is two warnings, while a warning that differs only in a delay,
an attempt or a count is a repetition (its `repeated=` line shows the last one's numbers).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from clusterscaler.report.logformat import LogLine, klog_value

REPEAT_WINDOW_SECONDS = 30.0


def identity(line: LogLine) -> Hashable:
    """What makes two lines the same line, for `RepeatLimiter.admit`."""
    words = tuple(
        (key, klog_value(value))
        for key, value in line.fields
        if isinstance(value, bool) or not isinstance(value, int | float)
    )
    return (line.severity, line.path, line.line, line.logger, line.msg, line.err, words)


@dataclass
class _Burst:
    line: LogLine
    ends: float
    repeated: int = 0


class RepeatLimiter:
    """Admits the first line of each burst and writes, through `emit`, one line with
    `repeated=N` per window in which the burst went on. Thread-safe."""

    def __init__(
        self,
        emit: Callable[[LogLine], None],
        window: float = REPEAT_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emit = emit
        self.window = window
        self.clock = clock
        self._bursts: dict[Hashable, _Burst] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._exit_registered = False

    def admit(self, key: Hashable, line: LogLine) -> bool:
        """True when `line` (identified by `key`) is to be written now; False when it is
        a repetition, counted for the burst's next `repeated=` line."""
        now = self.clock()
        due: list[LogLine] = []
        with self._lock:
            burst = self._bursts.get(key)
            if burst is not None and now >= burst.ends:
                due.extend(self._close(key, burst, now))
                burst = self._bursts.get(key)
            if burst is None:
                self._bursts[key] = _Burst(line, now + self.window)
                admitted = True
            else:
                burst.repeated += 1
                burst.line = line
                admitted = False
            # The sweeper also forgets the bursts that ended, so that many different
            # lines do not pile up.
            self._start_sweeper()
        for summary in due:
            self.emit(summary)
        return admitted

    def followed(self) -> int:
        """How many bursts are followed (those still in their window)."""
        with self._lock:
            return len(self._bursts)

    def sweep(self) -> None:
        """Write the count of every burst whose window has ended."""
        now = self.clock()
        due: list[LogLine] = []
        with self._lock:
            for key, burst in list(self._bursts.items()):
                if now >= burst.ends:
                    due.extend(self._close(key, burst, now))
        for summary in due:
            self.emit(summary)

    def flush(self) -> None:
        """Write the count of every burst now, ended or not (at exit, when reconfigured)."""
        with self._lock:
            due = [
                burst.line.with_fields(repeated=burst.repeated)
                for burst in self._bursts.values()
                if burst.repeated
            ]
            self._bursts.clear()
        for summary in due:
            self.emit(summary)

    def stop(self) -> None:
        """Flush and end the sweeping thread (a later repetition starts another)."""
        with self._lock:
            self._stopped.set()
            self._stopped = threading.Event()
            self._sweeper = None
        self.flush()

    def _close(self, key: Hashable, burst: _Burst, now: float) -> list[LogLine]:
        if not burst.repeated:
            del self._bursts[key]
            return []
        summary = burst.line.with_fields(repeated=burst.repeated)
        burst.repeated = 0
        burst.ends = now + self.window
        return [summary]

    def _start_sweeper(self) -> None:
        if self._sweeper is not None:
            return
        self._sweeper = threading.Thread(
            target=self._sweep_until_stopped, args=(self._stopped,), name="log-repeats", daemon=True
        )
        self._sweeper.start()
        if not self._exit_registered:
            atexit.register(self.stop)
            self._exit_registered = True

    def _sweep_until_stopped(self, stopped: threading.Event) -> None:
        tick = min(1.0, self.window / 4)
        while not stopped.wait(tick):
            self.sweep()
