"""Pods bound to a node after the plan are found and evicted with the node's own: the
actuator reads the node's pods afresh through the actions (`read_pods_on_node`), whether or
not the source indexes pods by node (an in-memory cluster answers `pods_on_node`, a source
may offer whole snapshots only)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.framework.clusteractions import NodePodsSource
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT
from clusterscaler.model import Pod, Taint
from loopkit import Harness, running_pod


class BindsLate(InMemoryCluster):
    """Binds `late` pods to the node just before its ToBeDeleted taint lands."""

    late: tuple[Pod, ...] = ()

    def add_taint(self, node_name: str, taint: Taint) -> None:
        if taint.key == TO_BE_DELETED_TAINT:
            for pod in self.late:
                self.add_pod(pod)
            self.late = ()
        super().add_taint(node_name, taint)


class SnapshotOnly(BindsLate):
    """The same cluster seen through whole snapshots only."""

    pods_on_node: Any = None


def test_snapshot_only_source_is_not_a_node_pods_source() -> None:
    assert isinstance(BindsLate(), NodePodsSource)
    assert not isinstance(SnapshotOnly(), NodePodsSource)


@pytest.mark.parametrize("cluster_class", [BindsLate, SnapshotOnly], ids=["indexed", "snapshot"])
def test_late_pods_of_the_deleted_node_only_are_evicted(cluster_class: type[BindsLate]) -> None:
    h = Harness(cluster_class)
    h.provider.add_group("g", 0, 10, nodes=3)
    h.add_pods(
        [
            running_pod("big", "g-1", cpu="2500m"),
            running_pod("keep", "g-3", cpu="2500m"),
            running_pod("small", "g-2"),
        ]
    )
    h.run()
    cluster = h.cluster
    assert isinstance(cluster, BindsLate)
    # Two pods land on the node being deleted, one on a node that stays.
    cluster.late = (
        running_pod("late-b", "g-2"),
        running_pod("late-a", "g-2"),
        running_pod("elsewhere", "g-1"),
    )
    result = h.run(timedelta(minutes=11))
    assert [(d.node, d.ok) for d in result.scale_down.deletions] == [("g-2", True)]
    assert cluster.evicted == ["default/small", "default/late-b", "default/late-a"]
    assert "default/elsewhere" in cluster.pods


def test_empty_node_that_got_a_pod_since_the_plan_is_not_deleted() -> None:
    """A node chosen as empty is read afresh before it goes: a pod bound since (the
    snapshot came from a cache that fell behind, or the scheduler was quick) had no place
    planned, so the deletion is rolled back, not done on a guess."""
    h = Harness(BindsLate)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m")])
    h.run()
    cluster = h.cluster
    assert isinstance(cluster, BindsLate)
    cluster.late = (running_pod("late", "g-2"),)
    result = h.run(timedelta(minutes=11))
    (deletion,) = result.scale_down.deletions
    assert (deletion.node, deletion.ok) == ("g-2", False)
    assert "not empty any more: 1 pod(s) bound since the plan (default/late)" in deletion.error
    assert "g-2" in cluster.nodes and "default/late" in cluster.pods
    assert not any(t.key == TO_BE_DELETED_TAINT for t in cluster.nodes["g-2"].taints)
