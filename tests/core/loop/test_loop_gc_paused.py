"""The loop runs with the cyclic garbage collector held off and gives it back after,
also when the loop fails."""

from __future__ import annotations

import gc

import pytest
from loopkit import Harness, pending_pod


def test_collector_off_during_the_loop_and_back_after() -> None:
    h = Harness()
    h.add_pods([pending_pod("p1")])
    seen: list[bool] = []
    refresh = h.provider.refresh

    def watching_refresh() -> None:
        seen.append(gc.isenabled())
        refresh()

    h.provider.refresh = watching_refresh  # type: ignore[method-assign]
    assert gc.isenabled()
    result = h.run()
    assert seen == [False]
    assert gc.isenabled()
    assert not result.halted


def test_collector_back_after_a_failing_loop() -> None:
    h = Harness()

    def failing_snapshot() -> None:
        raise RuntimeError("source failed")

    h.cluster.snapshot = failing_snapshot  # type: ignore[method-assign, assignment]
    with pytest.raises(RuntimeError, match="source failed"):
        h.run()
    assert gc.isenabled()
