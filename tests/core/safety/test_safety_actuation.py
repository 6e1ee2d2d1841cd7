"""What happens between the decision and the deletion.

The cluster keeps moving while a node is being removed: the scheduler may bind a pod to
it before the ToBeDeleted taint lands, and another actor may spend a PodDisruptionBudget.
CA's actuator taints first, then lists the node's pods afresh and evicts every one of them
through the Eviction API (which honours PDBs); if an eviction cannot succeed within
--max-pod-eviction-time the node is untainted and kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT
from clusterscaler.model import Taint
from safetykit import PAST_UNNEEDED, StorageCluster, World, ds_pod, pod

WEB = {"app": "web"}


class RacingCluster(StorageCluster):
    """Runs `on_delete_taint(node)` just before a ToBeDeleted taint is applied: what the
    scheduler or another controller did while the loop was deciding."""

    on_delete_taint: Callable[[str], None] | None = None

    def add_taint(self, node_name: str, taint: Taint) -> None:
        hook = self.on_delete_taint
        if taint.key == TO_BE_DELETED_TAINT and hook is not None:
            hook(node_name)
        super().add_taint(node_name, taint)


def racing_world() -> tuple[World, RacingCluster]:
    w = World(cluster_class=RacingCluster)
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="2500m"), pod("mover", "g-2", labels=WEB))
    cluster = w.cluster
    assert isinstance(cluster, RacingCluster)
    return w, cluster


def test_pod_bound_after_the_decision_is_evicted_not_killed() -> None:
    """CA: every pod on a drained node at drain time goes through the Eviction API."""
    w, cluster = racing_world()
    w.run()

    def bind_late(node: str) -> None:
        if node == "g-2":
            cluster.add_pod(pod("late", "g-2", creation_time=w.clock.now()))

    cluster.on_delete_taint = bind_late
    w.run(PAST_UNNEEDED)
    assert "g-2" in w.deleted()
    assert sorted(cluster.evicted) == ["default/late", "default/mover"]


def test_budget_spent_meanwhile_keeps_the_node_and_untaints_it() -> None:
    """CA: when the PDB no longer allows the eviction, the drain gives up after
    --max-pod-eviction-time, the node is untainted and kept with its pod, and the failure
    is reported."""
    w, cluster = racing_world()
    w.pdb("web", WEB, 1)
    w.run()

    def spend_budget(node: str) -> None:
        cluster.pdbs["default/web"] = dataclasses.replace(
            cluster.pdbs["default/web"], disruptions_allowed=0
        )

    cluster.on_delete_taint = spend_budget
    result = w.run(PAST_UNNEEDED)
    (deletion,) = result.scale_down.deletions
    assert not deletion.ok and deletion.node == "g-2"
    assert "g-2" in w.alive() and w.deleted() == []
    assert cluster.evicted == []
    assert [p.name for p in cluster.pods.values() if p.node_name == "g-2"] == ["mover"]
    assert all(t.key != TO_BE_DELETED_TAINT for t in cluster.nodes["g-2"].taints)
    assert not cluster.nodes["g-2"].unschedulable


@pytest.mark.parametrize(
    ("with_workload", "options", "ds_evicted"),
    [
        (True, {}, True),
        (False, {}, False),
        (True, {"daemonset_eviction_for_occupied_nodes": False}, False),
        (False, {"daemonset_eviction_for_empty_nodes": True}, True),
    ],
    ids=["drained-default", "empty-default", "drained-flag-off", "empty-flag-on"],
)
def test_daemonset_pods_are_evicted_per_flags(
    with_workload: bool, options: dict[str, Any], ds_evicted: bool
) -> None:
    """CA: DaemonSet pods are evicted from drained nodes (--daemonset-eviction-for-
    occupied-nodes, default true) and left on empty ones (--daemonset-eviction-for-empty-
    nodes, default false); they never hold the node back."""
    w = World(**options)
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="2500m"), ds_pod("agent-g2", "g-2"))
    if with_workload:
        w.pods(pod("mover", "g-2"))
    w.settle(loops=2)
    assert w.deleted() == ["g-2"]
    assert ("default/agent-g2" in w.cluster.evicted) is ds_evicted
    assert ("default/mover" in w.cluster.evicted) is with_workload
