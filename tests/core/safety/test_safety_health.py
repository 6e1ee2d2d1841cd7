"""The unhealthy-cluster halt and what survives it.

CA halts autoscaling when unready nodes exceed both --ok-total-unready-count (3) and
--max-total-unready-percentage (45%) of registered nodes: no scale-up, no scale-down, and
the unneeded-node list is cleared (`CleanUpUnneededNodes`) so that no node is deleted on
the strength of a timer that ran while the cluster was broken. A node group whose own
nodes are mostly unready is left out of scale-up while the rest of the cluster goes on.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.loop.decisions import NoScaleUpReason, ScaleDownStatus
from safetykit import World, pending, pod, rejections, scaled, unneeded_names

MIN = timedelta(minutes=1)


def fleet(total: int, **options: Any) -> World:
    """`total` busy nodes in group u, plus g-1 (busy) and g-2 (empty, unneeded)."""
    w = World(**options)
    w.group("g", 0, 10, nodes=2)
    w.group("u", 0, 20, nodes=total)
    w.pods(pod("anchor", "g-1", cpu="2500m"))
    w.pods(*(pod(f"busy{i}", f"u-{i}", cpu="3") for i in range(1, total + 1)))
    return w


def break_nodes(w: World, count: int) -> None:
    for i in range(1, count + 1):
        w.set_node(f"u-{i}", ready=False)


def heal(w: World, count: int) -> None:
    for i in range(1, count + 1):
        w.set_node(f"u-{i}", ready=True)


@pytest.mark.parametrize(
    ("total", "unready", "options", "halted"),
    [
        (6, 3, {}, False),
        (6, 4, {}, True),
        (8, 4, {}, False),
        (20, 4, {}, False),
        (6, 4, {"ok_total_unready_count": 4}, False),
        (20, 4, {"max_total_unready_percentage": 10.0}, True),
    ],
    ids=[
        "3-unready-within-ok-count",
        "4-of-8-registered-over-45pct",
        "4-of-10-registered-under-45pct",
        "4-of-22-registered",
        "ok-count-raised",
        "percentage-lowered",
    ],
)
def test_halt_needs_both_count_and_percentage(
    total: int, unready: int, options: dict[str, Any], halted: bool
) -> None:
    """CA: unhealthy when unready > --ok-total-unready-count AND unready >
    --max-total-unready-percentage of registered nodes."""
    w = fleet(total, **options)
    w.run()
    break_nodes(w, unready)
    result = w.run(MIN)
    assert bool(result.halted) is halted
    assert result.health.healthy is not halted


def test_unhealthy_cluster_neither_scales_up_nor_down() -> None:
    """CA: while halted, pending pods get no new nodes and unneeded nodes are not deleted."""
    w = fleet(6)
    w.run()
    break_nodes(w, 4)
    w.pods(pending("waiting", cpu="3"))
    for _ in range(3):
        result = w.run(6 * MIN)
        assert result.halted
        assert result.scale_up.decisions == () and result.scale_down.deletions == ()
    assert all(g.increases == [] for g in w.cloud.node_groups())
    assert w.deleted() == []


def test_unneeded_timers_restart_after_an_unhealthy_halt() -> None:
    """CA: the halt clears the unneeded list; after recovery a node needs the full
    --scale-down-unneeded-time again before deletion."""
    w = fleet(6)
    w.run()
    assert "g-2" in unneeded_names(w.run(MIN))
    break_nodes(w, 4)
    assert w.run(MIN).halted
    assert w.run(9 * MIN).halted
    heal(w, 4)
    recovered = w.run(MIN)
    assert not recovered.halted
    assert recovered.scale_down.status is not ScaleDownStatus.NODE_DELETE_STARTED
    assert "g-2" in w.alive(), "deleted on a timer that ran while the cluster was unhealthy"
    w.run(9 * MIN)
    assert "g-2" in w.alive()
    w.run(2 * MIN)
    assert w.deleted() == ["g-2"]


def test_mostly_unready_group_is_skipped_but_others_scale() -> None:
    """CA: a node group whose own nodes are mostly unready gets no scale-up (it is
    unhealthy), while the cluster as a whole stays healthy and another group is used."""
    w = World()
    w.group("a-broken", 0, 20, nodes=5)
    w.group("b-good", 0, 20, nodes=12, cpu="2", memory="8Gi")
    w.pods(*(pod(f"x{i}", f"a-broken-{i}", cpu="3") for i in range(1, 6)))
    w.pods(*(pod(f"y{i}", f"b-good-{i}", cpu="1500m") for i in range(1, 13)))
    w.run()
    for i in range(1, 5):
        w.set_node(f"a-broken-{i}", ready=False)
    w.pods(pending("p", cpu="1500m"))
    result = w.run(MIN)
    assert not result.halted
    assert scaled(result) == {"b-good": 1}
    assert w.cloud.groups["a-broken"].increases == []


def test_unhealthy_group_says_why_it_cannot_help() -> None:
    """CA: NotTriggerScaleUp names an unhealthy group as such."""
    w = World()
    w.group("a-broken", 0, 20, nodes=5)
    w.group("b-good", 0, 20, nodes=12, cpu="2", memory="8Gi")
    w.pods(*(pod(f"x{i}", f"a-broken-{i}", cpu="3") for i in range(1, 6)))
    w.pods(*(pod(f"y{i}", f"b-good-{i}", cpu="1500m") for i in range(1, 13)))
    w.run()
    for i in range(1, 5):
        w.set_node(f"a-broken-{i}", ready=False)
    w.pods(pending("p", cpu="3"))
    result = w.run(MIN)
    assert result.scale_up.decisions == ()
    assert NoScaleUpReason.UNHEALTHY in rejections(result, "default/p")
