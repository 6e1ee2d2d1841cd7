"""--frequent-loops-enabled: when the next loop starts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clusterscaler.loop.decisions import (
    ClusterHealth,
    LoopResult,
    NodeCounts,
    ScaleDownResult,
    ScaleDownStatus,
    ScaleUpResult,
    ScaleUpStatus,
)
from clusterscaler.loop.trigger import LoopTrigger

NOW = datetime(2026, 1, 1, tzinfo=UTC)
HEALTH = ClusterHealth(True, NodeCounts())
IDLE = LoopResult(time=NOW, health=HEALTH)
SCALED_UP = LoopResult(
    time=NOW, health=HEALTH, scale_up=ScaleUpResult(status=ScaleUpStatus.SUCCESSFUL)
)
DELETING = LoopResult(
    time=NOW,
    health=HEALTH,
    scale_down=ScaleDownResult(status=ScaleDownStatus.NODE_DELETE_STARTED),
)


@pytest.mark.parametrize(
    ("history", "frequent", "wait"),
    [
        ([IDLE], True, 7.0),
        ([SCALED_UP], True, 0.0),
        ([DELETING], True, 0.0),
        # The loop after a productive one is followed at once too, then the interval.
        ([SCALED_UP, IDLE], True, 0.0),
        ([SCALED_UP, IDLE, IDLE], True, 7.0),
        ([SCALED_UP, None], True, 0.0),
        ([None], True, 7.0),
        ([SCALED_UP], False, 7.0),
        ([DELETING], False, 7.0),
    ],
    ids=["idle", "scale-up", "scale-down", "after-next", "then-interval", "failed-loop",
         "failed-only", "disabled-scale-up", "disabled-scale-down"],
)
def test_next_loop_starts_at_once_after_productive_loops(
    history: list[LoopResult | None], frequent: bool, wait: float
) -> None:
    trigger = LoopTrigger(timedelta(seconds=10), frequent_loops_enabled=frequent)
    for result in history:
        trigger.record(result)
    assert trigger.wait_seconds(3.0) == wait


def test_a_loop_longer_than_the_interval_is_followed_at_once() -> None:
    trigger = LoopTrigger(timedelta(seconds=10), frequent_loops_enabled=False)
    trigger.record(IDLE)
    assert trigger.wait_seconds(12.5) == 0.0


@pytest.mark.parametrize(
    ("elapsed", "idle", "delay"),
    [
        (0.2, 0.1, 0.9),  # the pod appeared right after a short loop: 1 s after its end
        (5.0, 3.0, 0.0),  # idle long enough already
        (9.8, 0.2, 0.2),  # never past the interval
        (12.0, 0.5, 0.0),
    ],
    ids=["short-loop", "idle", "interval-first", "late"],
)
def test_a_pod_triggered_loop_starts_a_second_after_the_last_ended(
    elapsed: float, idle: float, delay: float
) -> None:
    trigger = LoopTrigger(timedelta(seconds=10), frequent_loops_enabled=True)
    trigger.record(IDLE)
    assert trigger.pod_trigger_delay(elapsed, idle) == pytest.approx(delay)


@pytest.mark.parametrize("frequent", [True, False])
def test_unschedulable_pods_start_loops_only_with_frequent_loops(frequent: bool) -> None:
    trigger = LoopTrigger(timedelta(minutes=10), frequent_loops_enabled=frequent)
    trigger.record(SCALED_UP)
    assert trigger.pod_triggered is frequent
    assert trigger.immediate() is frequent
    # Logged as CA words it: "Autoscaler loop triggered by a 10m0s timer".
    assert trigger.timer_reason == "by a 10m0s timer"
