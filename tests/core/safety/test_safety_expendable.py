"""Expendable pods (priority below --expendable-pods-priority-cutoff) take no room.

CA builds its cluster snapshot from the non-expendable scheduled pods only
(`FilterOutExpendablePods` before `initializeClusterSnapshot`): expendable pods count for
no node's utilization, never block a placement, and are killed with their node. So a node
holding only expendable pods is empty for scale-down, and a pending pod that fits once the
expendable pods are preempted causes no scale-up.
"""

from __future__ import annotations

from safetykit import PAST_UNNEEDED, World, pending, pod, scaled, unneeded_names


def test_pending_pod_that_can_preempt_expendable_pods_causes_no_scale_up() -> None:
    """CA: room held by expendable pods is free for scale-up purposes; the scheduler
    preempts them, so no node is bought."""
    w = World()
    g = w.group("g", 0, 10, nodes=1)
    w.pods(pod("placeholder", "g-1", cpu="3", priority=-100))
    w.pods(pending("real", cpu="2"))
    result = w.run()
    assert scaled(result) == {}
    assert g.increases == []


def test_node_holding_only_expendable_pods_is_the_one_removed() -> None:
    """CA: a node whose only pods are expendable is empty; it is removed before a node
    whose real pod would have to be evicted."""
    w = World()
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="1"), pod("placeholder", "g-2", cpu="3", priority=-100))
    first = w.run()
    assert "g-2" in unneeded_names(first)
    w.run(PAST_UNNEEDED)
    assert w.deleted() == ["g-2"]
    assert "default/anchor" not in w.cluster.evicted


def test_expendable_pods_neither_block_nor_move() -> None:
    """The part that already holds: expendable pods neither block the drain nor are
    moved; the node goes once unneeded long enough (here nothing else could take them)."""
    w = World()
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="3500m"), pod("placeholder", "g-2", cpu="1", priority=-100))
    w.settle(loops=2)
    assert w.deleted() == ["g-2"]
    assert w.cluster.evicted == []


def test_finished_pods_take_no_room_next_to_expendable_and_running_ones() -> None:
    """A Succeeded or Failed pod still bound to its node runs nothing: its requests are
    free for pending pods, whatever else the node holds (the snapshot keeps only the
    running, non-expendable pods)."""
    w = World()
    g = w.group("g", 0, 10, nodes=1)
    w.pods(
        pod("done", "g-1", cpu="2", phase="Succeeded"),
        pod("failed", "g-1", cpu="1", phase="Failed"),
        pod("placeholder", "g-1", cpu="500m", priority=-100),
        pod("anchor", "g-1", cpu="500m"),
    )
    w.pods(pending("real", cpu="3"))
    result = w.run()
    assert scaled(result) == {}
    assert g.increases == []
