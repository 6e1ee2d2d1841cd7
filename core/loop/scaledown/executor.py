"""Where node deletions run once the loop has started them.

Cluster Autoscaler taints the nodes it removes inside its loop and leaves the rest (the
wait after tainting, evictions, waiting for pods to terminate, deleting the instance, the
rollback on failure) to goroutines, so one slow drain never holds up the next loop.
`ThreadedExecutor` does the same for `clusterscaler run`. `InlineExecutor` runs the work at
once in the caller's thread: the simulator drives the loop on a virtual clock and must get
the same result for the same inputs, which background threads cannot promise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

import structlog
from clusterscaler.framework.errors import describe

log = structlog.get_logger()


class DeletionExecutor(Protocol):
    """Runs the background part of node deletions.

    The work given to `submit` reports its own outcome (through the `DeletionTracker`) and
    never raises; the executor only decides where and when it runs.
    """

    def submit(self, name: str, work: Callable[[], None]) -> None:
        """Run `work`, named `name` for logs and thread names."""
        ...

    def running(self) -> int:
        """How many submitted works have not returned yet."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` seconds (None: without limit) for every submitted work to
        return; True when none is left running."""
        ...


class InlineExecutor:
    """Runs each work at once in the calling thread: deterministic, nothing left running."""

    def submit(self, name: str, work: Callable[[], None]) -> None:
        work()

    def running(self) -> int:
        return 0

    def wait(self, timeout: float | None = None) -> bool:
        return True


class ThreadedExecutor:
    """Runs each work in its own thread.

    The number of works at once is already bounded by --max-scale-down-parallelism, so no
    pool is needed. The threads are daemons: shutdown waits for them through `wait`, bounded
    by the deletion timeouts, and a hung API call must not keep the process alive after that.
    """

    def __init__(self, *, thread_name_prefix: str = "delete") -> None:
        self.prefix = thread_name_prefix
        self._lock = threading.Condition()
        self._running: set[threading.Thread] = set()

    def submit(self, name: str, work: Callable[[], None]) -> None:
        def run() -> None:
            try:
                work()
            except BaseException as exc:
                # Work reports its own failures (this is a bug); this only keeps the count
                # right.
                log.error("deletion_work_failed", work=name, **describe(exc).fields(exc))
            finally:
                with self._lock:
                    self._running.discard(threading.current_thread())
                    self._lock.notify_all()

        thread = threading.Thread(target=run, name=f"{self.prefix}-{name}", daemon=True)
        with self._lock:
            self._running.add(thread)
        thread.start()

    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._running:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._lock.wait(left)
            return True
