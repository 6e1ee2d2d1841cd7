"""Events are written from a worker thread: the loop never waits on the API server."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from clusterscaler.kube.eventwriter import BackgroundEventSink
from clusterscaler.report.events import NORMAL, Event, ObjectRef
from structlog.testing import capture_logs


class SlowSink:
    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.written: list[Event] = []

    def write(self, event: Event, timestamp: datetime) -> None:
        self.gate.wait(5)
        self.written.append(event)


def event(name: str) -> Event:
    return Event(ObjectRef.pod("default", name), NORMAL, "TriggeredScaleUp", "m")


def test_writes_do_not_wait_and_flush_waits_for_them() -> None:
    gate = threading.Event()
    slow = SlowSink(gate)
    sink = BackgroundEventSink(slow, max_queued=10)
    started = time.monotonic()
    for i in range(5):
        sink.write(event(f"p{i}"), datetime.now(UTC))
    assert time.monotonic() - started < 0.5
    assert not sink.flush(0.2)  # the API server is still answering the first one
    gate.set()
    assert sink.flush(5)
    assert [e.involved.name for e in slow.written] == [f"p{i}" for i in range(5)]
    sink.close()


def test_a_full_queue_drops_and_counts_instead_of_blocking() -> None:
    gate = threading.Event()
    sink = BackgroundEventSink(SlowSink(gate), max_queued=2)
    for i in range(6):
        sink.write(event(f"p{i}"), datetime.now(UTC))
    assert sink.dropped >= 3
    gate.set()
    sink.close()


def test_drops_are_logged_with_their_count_not_a_line_each() -> None:
    """client-go drops silently past its queue; a line per dropped event would flood the
    log in a scale-up of thousands of pods. One line when drops begin, one with the count of
    the others once the queue has room again."""
    gate = threading.Event()
    with capture_logs() as logs:
        sink = BackgroundEventSink(SlowSink(gate), max_queued=2)
        for i in range(50):
            sink.write(event(f"p{i}"), datetime.now(UTC))
        # One in the sink's hands, two queued: at least 47 dropped.
        assert sink.dropped >= 47
        gate.set()
        assert sink.flush(5)
        sink.close()
    lines = [entry for entry in logs if entry["event"] == "events_dropped"]
    assert len(lines) == 2, lines
    assert lines[0]["count"] == 1
    assert lines[0]["first_object"] == f"Pod/default/p{50 - sink.dropped}"
    assert lines[0]["count"] + lines[1]["count"] == sink.dropped == lines[1]["total"]
