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
    ("history", "frequent", "at_once"),
    [
        ([IDLE], True, False),
        ([SCALED_UP], True, True),
        ([DELETING], True, True),
        # Only the loop that just ended counts (CA compares with its start time).
        ([SCALED_UP, IDLE], True, False),
        ([SCALED_UP, None], True, False),
        ([IDLE, SCALED_UP], True, True),
        ([None], True, False),
        ([SCALED_UP], False, False),
        ([DELETING], False, False),
    ],
    ids=["idle", "scale-up", "scale-down", "then-interval", "failed-loop", "latest",
         "failed-only", "disabled-scale-up", "disabled-scale-down"],
)
def test_next_loop_starts_at_once_only_after_a_productive_loop(
    history: list[LoopResult | None], frequent: bool, at_once: bool
) -> None:
    trigger = LoopTrigger(timedelta(seconds=10), frequent_loops_enabled=frequent)
    for result in history:
        trigger.record(result)
    assert trigger.immediate() is at_once


@pytest.mark.parametrize(
    ("idle", "delay"),
    [
        (0.1, 0.9),  # the pod appeared right after the loop: 1 s after its end
        (3.0, 0.0),  # idle long enough already
        (1.0, 0.0),
    ],
    ids=["just-ended", "idle", "exactly"],
)
def test_a_pod_triggered_loop_starts_a_second_after_the_last_ended(
    idle: float, delay: float
) -> None:
    trigger = LoopTrigger(timedelta(seconds=10), frequent_loops_enabled=True)
    trigger.record(IDLE)
    assert trigger.pod_trigger_delay(idle) == pytest.approx(delay)


def test_a_pod_triggered_loop_never_waits_past_a_short_interval() -> None:
    trigger = LoopTrigger(timedelta(milliseconds=500), frequent_loops_enabled=True)
    trigger.record(IDLE)
    assert trigger.pod_trigger_delay(0.2) == pytest.approx(0.3)


@pytest.mark.parametrize("frequent", [True, False])
def test_unschedulable_pods_start_loops_only_with_frequent_loops(frequent: bool) -> None:
    trigger = LoopTrigger(timedelta(minutes=10), frequent_loops_enabled=frequent)
    trigger.record(SCALED_UP)
    assert trigger.pod_triggered is frequent
    assert trigger.immediate() is frequent
    # Logged as CA words it: "Autoscaler loop triggered by a 10m0s timer".
    assert trigger.timer_reason == "by a 10m0s timer"
