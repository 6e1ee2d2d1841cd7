"""PodDisruptionBudgets are never violated by scale-down.

CA reads `status.disruptionsAllowed` (the disruption controller turns minAvailable,
maxUnavailable and percentages into it), blocks a node whose pods need more disruptions
than are left (NotEnoughPdb), and consumes the budget node by node within one loop, so
several nodes drained in parallel never evict more pods of one budget than it allows.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.interfaces.podfilter import BlockingPodReason
from clusterscaler.loop.decisions import UnremovableReason
from safetykit import DS, PAST_UNNEEDED, World, pod, unremovable

WEB = {"app": "web"}


def spread_world(
    allowed: int,
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> World:
    """A busy 16-core node that can take everything, and three small nodes with one pod of
    the budget each; drains may run three at a time."""
    w = World(max_drain_parallelism=3, max_scale_down_parallelism=3)
    w.group("big", 0, 10, nodes=1, cpu="16", memory="64Gi")
    w.group("g", 0, 10, nodes=3)
    w.pods(pod("anchor", "big-1", cpu="9"))
    w.pods(*(pod(f"w{i}", f"g-{i}", labels=WEB) for i in (1, 2, 3)))
    w.pdb(
        "web",
        WEB,
        allowed,
        min_available=min_available,
        max_unavailable=max_unavailable,
        expected_pods=3,
    )
    return w


@pytest.mark.parametrize(
    ("allowed", "spec"),
    [
        (0, {"min_available": 3}),
        (1, {"max_unavailable": 1}),
        (1, {"min_available": "60%"}),
        (2, {"max_unavailable": "67%"}),
        (3, {"max_unavailable": "100%"}),
    ],
    ids=[
        "minAvailable-all",
        "maxUnavailable-1",
        "minAvailable-60pct",
        "maxUnavailable-67pct",
        "unlimited",
    ],
)
def test_parallel_drains_never_exceed_the_budget(allowed: int, spec: dict[str, Any]) -> None:
    """CA: one loop drains at most `disruptionsAllowed` nodes holding pods of the budget,
    and no eviction is refused by the API server."""
    w = spread_world(allowed, **spec)
    w.run()
    result = w.run(PAST_UNNEEDED)
    drained = [d for d in result.scale_down.deletions if d.ok]
    assert len(drained) == allowed
    assert all(d.ok for d in result.scale_down.deletions)
    assert len(w.cluster.evicted) == allowed
    assert w.cluster.pdbs["default/web"].disruptions_allowed == 0
    if allowed < 3:
        blocked = [
            u
            for u in result.scale_down.unremovable
            if u.blocking_pod is not None
            and u.blocking_pod.reason is BlockingPodReason.NOT_ENOUGH_PDB
        ]
        assert len(blocked) == 3 - allowed


def test_two_pods_of_one_budget_on_a_node_need_two_disruptions() -> None:
    """CA: a node is drainable only if the budget covers all its pods together."""
    w = World()
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="2"))
    w.pods(pod("w1", "g-2", labels=WEB), pod("w2", "g-2", labels=WEB))
    w.pdb("web", WEB, 1)
    results = w.settle(loops=3)
    assert "g-2" in w.alive() and w.cluster.evicted == []
    u = unremovable(results[-1], "g-2")
    assert u is not None
    assert u.reason in (UnremovableReason.BLOCKED_BY_POD, UnremovableReason.RECENTLY_UNREMOVABLE)
    first = unremovable(results[0], "g-2")
    assert first is not None and first.blocking_pod is not None
    assert first.blocking_pod.reason is BlockingPodReason.NOT_ENOUGH_PDB


def test_kube_system_pod_with_exhausted_pdb_blocks() -> None:
    """CA: a PDB lets a kube-system pod move only while it allows a disruption."""
    w = World()
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="2500m"))
    w.pods(pod("dns", "g-2", namespace="kube-system", labels={"k8s-app": "dns"}))
    w.pdb("dns", {"k8s-app": "dns"}, 0, namespace="kube-system")
    w.settle(loops=3)
    assert "g-2" in w.alive() and w.cluster.evicted == []


def test_budget_restored_lets_the_node_go_later() -> None:
    """Once the budget allows a disruption again, the blocked node is reconsidered (CA
    rechecks unremovable nodes after --unremovable-node-recheck-timeout)."""
    w = World()
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="2"), pod("w1", "g-2", labels=WEB))
    w.pdb("web", WEB, 0)
    w.settle(loops=2)
    assert "g-2" in w.alive()
    w.pdb("web", WEB, 1)
    for _ in range(3):
        w.run(timedelta(minutes=6))
    assert w.deleted() == ["g-2"]
    assert w.cluster.evicted == ["default/w1"]


def test_daemonset_pods_take_only_what_the_pods_to_move_leave_of_a_budget() -> None:
    """A budget of 1 covers an agent DaemonSet pod on g-1 and the workload pod of g-2 (the
    agent's DaemonSet pods are evicted from drained nodes). The workload pod's eviction
    makes g-2 removable, as in CA, whatever order the nodes are tried in; the agent pod of
    g-1, with no disruption left for it, is not evicted (it goes with its node), so the API
    server refuses nothing and the budget is not overspent."""
    w = World(max_drain_parallelism=3, max_scale_down_parallelism=3)
    w.group("big", 0, 10, nodes=1, cpu="16", memory="64Gi")
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "big-1", cpu="9"))
    w.pods(pod("w1", "g-1"), pod("agent-1", "g-1", owner=DS, labels={"team": "obs"}))
    w.pods(pod("ksm", "g-2", labels={"team": "obs"}))
    w.pdb("obs", {"team": "obs"}, 1)
    w.run()
    result = w.run(PAST_UNNEEDED)
    removed = sorted(d.node for d in result.scale_down.deletions if d.ok)
    assert removed == ["g-1", "g-2"]
    evicted = set(w.cluster.evicted_objects)
    assert "default/ksm" in evicted and "default/agent-1" not in evicted
