"""Where the removal simulation may move pods: never to nodes already removed, to the node
being removed, or to excluded (unready, being deleted) nodes; a node found unremovable, or
only tried without committing, still receives pods."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from clusterscaler.framework.schedulerconfig import SchedulerConfig
from clusterscaler.interfaces.podfilter import DrainContext
from clusterscaler.loop.decisions import UnremovableReason
from clusterscaler.loop.scaledown.removal import RemovalSimulator, simulate_nodes
from clusterscaler.model import Resources
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.simulator.drain import PdbTracker
from clusterscaler.simulator.profile import configured_filters
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_candidate_whose_pods_find_no_free_slot_fails_without_changing_the_snapshot() -> None:
    snap = ClusterSnapshot()
    for name in ("n0", "n1", "n2"):
        snap.add_node(make_node(name, "8", pods=1), [make_pod(f"on-{name}", node_name=name)])
    simulator = _simulator(snap)
    generation = snap.generation
    for name in ("n1", "n2", "n0"):
        result = simulator.try_remove(name)
        assert (result.removable, result.reason, result.detail) == (
            False,
            UnremovableReason.NO_PLACE_TO_MOVE_PODS,
            f"no place to move pod default/on-{name}",
        )
    assert (snap.generation, snap.depth, simulator.removed) == (generation, 0, set())


def test_pod_without_a_slot_request_may_go_to_a_node_with_no_slot_left() -> None:
    snap = ClusterSnapshot()
    slotless = dataclasses.replace(
        make_pod("slotless", node_name="n0"), requests=Resources(cpu=100)
    )
    snap.add_node(make_node("n0", "4"), [slotless])
    snap.add_node(make_node("n1", "4", pods=1), [make_pod("b", "1", node_name="n1")])
    simulator = _simulator(snap)
    assert simulator.try_remove("n0").destinations == {"default/slotless": "n1"}


@dataclasses.dataclass
class Cluster:
    nodes: list[tuple[int, int, bool]]  # cpu, pod slots, excluded
    pods: list[tuple[int, int, bool]]  # node, cpu milli, needs a slot
    order: list[int]


clusters = st.builds(
    Cluster,
    nodes=st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 4), st.booleans()), min_size=1, max_size=7
    ),
    pods=st.lists(
        st.tuples(
            st.integers(0, 6),
            st.sampled_from([0, 200, 500, 1000, 1500]),
            st.sampled_from([True, True, True, False]),
        ),
        max_size=16,
    ),
    order=st.permutations(list(range(7))),
)


def _cluster_from(case: Cluster) -> tuple[ClusterSnapshot, set[str]]:
    snap = ClusterSnapshot()
    for i, (cpu, slots, _) in enumerate(case.nodes):
        snap.add_node(make_node(f"n{i}", str(cpu), pods=slots))
    for j, (node, milli, slot) in enumerate(case.pods):
        name = f"n{node % len(case.nodes)}"
        pod = make_pod(f"p{j}", f"{milli}m", node_name=name)
        if not slot:
            pod = dataclasses.replace(pod, requests=Resources(cpu=milli))
        snap.add_pod(pod, name)  # may overcommit: the snapshot takes it as it is
    excluded = {f"n{i}" for i, (_, _, out) in enumerate(case.nodes) if out}
    return snap, excluded


Outcome = tuple[str, bool, str, dict[str, str]]


def _reference(snap: ClusterSnapshot, order: list[str], excluded: set[str]) -> list[Outcome]:
    """Every candidate's pods placed by the plain scheduler, filtering every node."""
    scheduler = HintingSimulator()
    removed: set[str] = set()
    out: list[Outcome] = []
    for node in order:
        pods = list(snap.get(node).pods.values())
        if not pods:
            removed.add(node)
            out.append((node, True, "", {}))
            continue
        snap.fork()
        removed.add(node)
        for pod in pods:
            snap.remove_pod(pod.key)
        result = scheduler.try_schedule_pods(
            snap,
            [dataclasses.replace(p, node_name="") for p in pods],
            node_filter=lambda ni: ni.node.name not in removed and ni.node.name not in excluded,
            break_on_failure=True,
        )
        if result.unschedulable:
            removed.discard(node)
            snap.revert()
            out.append((node, False, f"no place to move pod {result.unschedulable[0].key}", {}))
            continue
        snap.commit()
        out.append((node, True, "", {p.pod.key: p.node_name for p in result.scheduled}))
    return out


@settings(max_examples=300, deadline=None)
@given(case=clusters)
def test_removal_simulation_matches_plain_first_fit(case: Cluster) -> None:
    order = [f"n{i}" for i in case.order if i < len(case.nodes)]
    expected_snap, excluded = _cluster_from(case)
    expected = _reference(expected_snap, order, excluded)
    snap, _ = _cluster_from(case)
    context = DrainContext.build(NOW, pdbs=PdbTracker([]))
    simulator = RemovalSimulator(snap, [], context, HintingSimulator(), excluded=excluded)
    results, _ = simulate_nodes(simulator, order, max_non_empty=0, timeout_seconds=60)
    got = [(r.node, r.removable, r.detail, r.destinations) for r in results]
    assert got == expected
    assert sorted((p.key, n) for p, n in snap.pods()) == sorted(
        (p.key, n) for p, n in expected_snap.pods()
    )


def test_without_node_resources_fit_a_node_with_no_pod_slot_left_still_receives_pods() -> None:
    """A scheduler configuration that disables NodeResourcesFit: kube-scheduler would put
    the pods of a removed node on a node whose pod slots are all taken, so the removal
    simulation does too (it only passes over full nodes for that filter)."""
    without = configured_filters(SchedulerConfig(disabled_filters=frozenset({"NodeResourcesFit"})))
    for filters, removable in ((None, False), (without, True)):
        snap = ClusterSnapshot(filters=filters)
        snap.add_node(make_node("full", "4", pods=1), [make_pod("a", "100m", node_name="full")])
        snap.add_node(make_node("gone", "4"), [make_pod("b", "100m", node_name="gone")])
        context = DrainContext.build(NOW, pdbs=PdbTracker([]))
        simulator = RemovalSimulator(snap, [], context, HintingSimulator())
        result = simulator.try_remove("gone")
        assert result.removable is removable
        if removable:
            assert result.destinations == {"default/b": "full"}
