"""Where the removal simulation may move pods: never to nodes already removed, to the node
being removed, or to excluded (unready, being deleted) nodes; a node found unremovable, or
only tried without committing, still receives pods."""

from __future__ import annotations

from datetime import UTC, datetime

from clusterscaler.decisions import UnremovableReason
from clusterscaler.drain import DrainContext, PdbTracker
from clusterscaler.scaledown.removal import RemovalSimulator, simulate_nodes
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
from clusterscaler.simulator.builders import make_node, make_pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _cluster() -> ClusterSnapshot:
    snap = ClusterSnapshot()
    snap.add_node(make_node("n0", "4"), [make_pod("a1", "500m", node_name="n0")])
    snap.add_node(make_node("n1", "4"), [make_pod("b1", "3", node_name="n1")])
    snap.add_node(make_node("n2", "1"), [make_pod("c1", "500m", node_name="n2")])
    # Room for everything, but unready.
    snap.add_node(make_node("n3", "8"))
    return snap


def _simulator(snap: ClusterSnapshot) -> RemovalSimulator:
    context = DrainContext.build(NOW, pdbs=PdbTracker([]))
    return RemovalSimulator(snap, [], context, HintingSimulator(), excluded={"n3"})


def test_removed_and_excluded_nodes_receive_nothing_unremovable_ones_do() -> None:
    snap = _cluster()
    simulator = _simulator(snap)
    results, untried = simulate_nodes(
        simulator, ["n0", "n1", "n2"], max_non_empty=0, timeout_seconds=60
    )
    assert untried == []
    outcome = [(r.node, r.removable, r.reason, r.detail, r.destinations) for r in results]
    assert outcome == [
        ("n0", True, UnremovableReason.NO_REASON, "", {"default/a1": "n1"}),
        # n0 is gone (though empty now), n2 too small, n3 excluded.
        (
            "n1",
            False,
            UnremovableReason.NO_PLACE_TO_MOVE_PODS,
            "no place to move pod default/b1",
            {},
        ),
        ("n2", True, UnremovableReason.NO_REASON, "", {"default/c1": "n1"}),
    ]
    assert simulator.removed == {"n0", "n2"}
    assert {p.key: node for p, node in snap.pods()} == {
        "default/b1": "n1",
        "default/a1": "n1",
        "default/c1": "n1",
    }


def test_a_node_tried_without_commit_still_receives_pods() -> None:
    snap = _cluster()
    simulator = _simulator(snap)
    trial = simulator.try_remove("n0", commit=False)
    assert (trial.removable, trial.destinations) == (True, {"default/a1": "n1"})
    assert snap.pod_node("default/a1") == "n0"
    result = simulator.try_remove("n1")
    assert (result.removable, result.destinations) == (True, {"default/b1": "n0"})
    assert simulator.removed == {"n1"}
