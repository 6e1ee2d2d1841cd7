"""The executors that run node deletions, and the tracker of deletions in flight."""

from __future__ import annotations

import threading

import pytest
from clusterscaler.loop.decisions import DeletionKind, NodeDeletion
from clusterscaler.loop.scaledown.executor import InlineExecutor, ThreadedExecutor
from clusterscaler.loop.scaledown.tracker import DeletionTracker
from loopkit import T0


def test_inline_executor_runs_work_before_returning() -> None:
    done: list[str] = []
    executor = InlineExecutor()
    executor.submit("a", lambda: done.append("a"))
    assert done == ["a"]
    assert executor.running() == 0 and executor.wait(0)


def test_threaded_executor_runs_in_the_background_and_waits() -> None:
    gate = threading.Event()

    def slow() -> None:
        gate.wait(5)

    executor = ThreadedExecutor()
    executor.submit("slow", slow)
    assert executor.running() == 1
    assert not executor.wait(0.05)
    gate.set()
    assert executor.wait(5)
    assert executor.running() == 0


def test_threaded_executor_counts_work_that_raised_as_done() -> None:
    def broken() -> None:
        raise RuntimeError("provider bug")

    executor = ThreadedExecutor()
    executor.submit("broken", broken)
    assert executor.wait(5)
    assert executor.running() == 0


def test_tracker_reports_each_finished_deletion_once() -> None:
    tracker = DeletionTracker()
    tracker.start("n1", "g", drain=True, now=T0)
    tracker.start("n2", "g", drain=False, now=T0)
    assert set(tracker.in_flight()) == {"n1", "n2"}
    assert tracker.in_flight()["n1"].drain and not tracker.in_flight()["n2"].drain
    tracker.finish(NodeDeletion("n2", "g", DeletionKind.EMPTY))
    assert set(tracker.in_flight()) == {"n1"}
    assert [d.node for d in tracker.take_finished()] == ["n2"]
    assert tracker.take_finished() == []


def test_tracker_refuses_a_second_deletion_of_a_node_in_flight() -> None:
    tracker = DeletionTracker()
    tracker.start("n1", "g", drain=True, now=T0)
    with pytest.raises(ValueError, match="node n1: a deletion is already in flight"):
        tracker.start("n1", "g", drain=True, now=T0)
