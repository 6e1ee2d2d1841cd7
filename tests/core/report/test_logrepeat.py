"""Repeated identical warnings: the first line of a burst at once, then one line with the
count per window while the burst goes on, none once it has ended."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import structlog
from clusterscaler.report.logformat import LogLine
from clusterscaler.report.logrepeat import RepeatLimiter, identity
from clusterscaler.report.logs import LogSettings, configure, configure_logging, stamped_by


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def warning(resource: str = "pods", retry: float = 1.0) -> LogLine:
    return LogLine(
        "W", datetime(2026, 1, 1, tzinfo=UTC), "informer.py", 403, "informer_error",
        fields=(("resource", resource), ("retry_in_seconds", retry)),
    )  # fmt: skip


def counts(lines: list[LogLine]) -> list[tuple[str, int]]:
    return [(str(dict(line.fields)["resource"]), int(dict(line.fields)["repeated"])) for line in lines]


def test_a_burst_is_one_line_then_one_count_per_window() -> None:
    clock, emitted = Clock(), []
    limiter = RepeatLimiter(emitted.append, window=30, clock=clock)
    assert limiter.admit(identity(warning()), warning())
    for second in range(1, 30):
        clock.now = second
        assert not limiter.admit(identity(warning(retry=second)), warning(retry=second))
    limiter.sweep()
    assert emitted == []  # the window is still open
    clock.now = 30
    limiter.sweep()
    assert counts(emitted) == [("pods", 29)]
    assert dict(emitted[0].fields)["retry_in_seconds"] == 29  # the last one's numbers
    # The burst goes on into the next window: still held back, counted at its end.
    clock.now = 31
    assert not limiter.admit(identity(warning()), warning())
    clock.now = 60
    limiter.sweep()
    assert counts(emitted) == [("pods", 29), ("pods", 1)]
    # A window without a repetition ends the burst: the next one is written at once.
    clock.now = 90
    limiter.sweep()
    clock.now = 91
    assert limiter.admit(identity(warning()), warning())
    assert len(emitted) == 2


def test_different_warnings_are_not_repetitions() -> None:
    clock, emitted = Clock(), []
    limiter = RepeatLimiter(emitted.append, window=30, clock=clock)
    assert limiter.admit(identity(warning("pods")), warning("pods"))
    assert limiter.admit(identity(warning("nodes")), warning("nodes"))
    assert not limiter.admit(identity(warning("nodes", retry=2.5)), warning("nodes", retry=2.5))
    limiter.flush()
    assert counts(emitted) == [("nodes", 1)]


@pytest.fixture
def restore_logging() -> Iterator[None]:
    yield
    configure_logging()


@pytest.mark.usefixtures("restore_logging")
def test_repeated_warnings_are_counted_when_the_burst_ends() -> None:
    stream = io.StringIO()
    configure(LogSettings(repeat_window=0.3), stream)
    log = structlog.get_logger()
    for attempt in range(50):
        log.warning("api_unreachable", host="https://127.0.0.1:1", attempt=attempt)
    log.warning("api_unreachable", host="https://127.0.0.1:2")
    log.info("decision_event")
    log.info("decision_event")  # info lines are never held back
    deadline = time.monotonic() + 10
    while "repeated=" not in stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = [re.sub(r"^\S+ \S+ +\d+ \S+\] ", "", line) for line in stream.getvalue().splitlines()]
    assert lines == [
        '"api_unreachable" host="https://127.0.0.1:1" attempt=0',
        '"api_unreachable" host="https://127.0.0.1:2"',
        '"decision_event"',
        '"decision_event"',
        '"api_unreachable" host="https://127.0.0.1:1" attempt=49 repeated=49',
    ]


@pytest.mark.usefixtures("restore_logging")
def test_a_simulation_writes_every_line() -> None:
    stream = io.StringIO()
    configure(LogSettings(), stream)
    with stamped_by(lambda: datetime(2024, 1, 1, tzinfo=UTC)):
        for _ in range(3):
            structlog.get_logger().warning("node_group_backoff", node_group="spot")
    assert stream.getvalue().count("node_group_backoff") == 3


@pytest.mark.usefixtures("restore_logging")
def test_each_failed_loop_is_a_line() -> None:
    stream = io.StringIO()
    configure(LogSettings(), stream)
    for _ in range(3):
        structlog.get_logger().error("loop_failed", error_type="apiCallError", reason="Timeout")
    assert stream.getvalue().count("loop_failed") == 3


def test_ended_bursts_are_forgotten() -> None:
    clock, emitted = Clock(), []
    limiter = RepeatLimiter(emitted.append, window=30, clock=clock)
    for index in range(1000):
        limiter.admit(identity(warning(f"pod-{index}")), warning(f"pod-{index}"))
    clock.now = 30
    limiter.sweep()
    assert limiter.admit(identity(warning("pod-0")), warning("pod-0"))  # written again
    assert limiter.followed() == 1
    assert emitted == []
    limiter.stop()
