"""Abandoning a snapshot's simulation: for the last reader, who need not undo it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from clusterscaler.simulator import ClusterSnapshot, SnapshotError
from clusterscaler.simulator.builders import make_node, make_pod


def simulated() -> ClusterSnapshot:
    snap = ClusterSnapshot()
    snap.add_node(make_node("n1", "2", "4Gi"), [make_pod("a", "500m", "1Gi")])
    snap.add_node(make_node("n2", "2", "4Gi"))
    snap.fork()
    snap.remove_pod("default/a")
    snap.add_pod(make_pod("a", "500m", "1Gi"), "n2")
    snap.fork()
    snap.remove_node("n1")
    return snap


@pytest.mark.parametrize(
    "read",
    [
        lambda s: s.node_infos(),
        lambda s: s.node_names(),
        lambda s: list(s),
        lambda s: s.fork(),
        lambda s: s.revert(),
        lambda s: s.commit(),
    ],
    ids=["node_infos", "node_names", "iterate", "fork", "revert", "commit"],
)
def test_an_abandoned_snapshot_refuses_to_be_read_as_the_cluster(
    read: Callable[[ClusterSnapshot], object],
) -> None:
    snap = simulated()
    snap.abandon()
    with pytest.raises(SnapshotError, match="abandoned with simulated changes"):
        read(snap)


def test_abandon_closes_every_fork_and_keeps_the_changes() -> None:
    snap = simulated()
    snap.abandon()
    assert snap.depth == 0
    # Nothing was undone: the moved pod is where the simulation put it.
    assert snap.pod_node("default/a") == "n2"
    assert "n1" not in snap


def test_abandon_without_a_fork_is_an_error() -> None:
    snap = ClusterSnapshot()
    snap.add_node(make_node("n1", "2", "4Gi"))
    with pytest.raises(SnapshotError, match="abandon\\(\\) without a matching fork\\(\\)"):
        snap.abandon()
    # The snapshot still describes the cluster.
    assert snap.node_names() == ["n1"]
