"""Pods bound to a node after the plan are found whether or not the source indexes pods by
node: an in-memory cluster answers `pods_on_node`, a source that only offers whole
snapshots (as the Kubernetes informers do) is read through `snapshot()`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.framework.cluster import InMemoryCluster, NodePodsSource
from clusterscaler.loop.clusterstate import TO_BE_DELETED_TAINT
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
