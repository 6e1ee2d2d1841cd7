"""Zero-or-max (atomic) node groups, `NodeGroupOptions.zero_or_max_node_scaling`: such a
group grows from its size straight to its max size or not at all, is never balanced with
similar groups, and shrinks by all of its nodes at once or not at all (CA's
ZeroOrMaxNodeScaling: the scale-up orchestrator, the atomic scale-down filters and budgets,
the group deletion scheduler)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.commands.explain import explain, render
from clusterscaler.framework.clusteractions import EvictionError
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import GpuLimit, MinMax
from clusterscaler.interfaces.cloudprovider import NodeGroupOptions
from clusterscaler.interfaces.podfilter import DrainContext
from clusterscaler.loop.decisions import NoScaleUpReason, ScaleUpStatus, UnremovableReason
from clusterscaler.loop.scaledown.executor import ThreadedExecutor
from clusterscaler.loop.scaledown.removal import RemovalSimulator, simulate_nodes
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT
from clusterscaler.model import LabelSelector, Pod, PodDisruptionBudget, Taint
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.simulator.drain import PdbTracker
from clusterscaler.simulator.utilization import GPU_RESOURCE
from loopkit import GPU_LABEL, GROUP_LABEL, T0, GatedClock, Harness, pending_pod, running_pod

ATOMIC = NodeGroupOptions(zero_or_max_node_scaling=True)
ZONE = "topology.kubernetes.io/zone"
# Balancing, with the fake cloud's groups told apart by their group label only.
BALANCING: dict[str, Any] = {
    "balance_similar_node_groups": True,
    "balancing_ignore_label": [GROUP_LABEL],
}


# ---------------------------------------------------------------------------- scale-up


@dataclass(frozen=True)
class GroupSpec:
    name: str
    max_size: int
    atomic: bool = False
    nodes: int = 0
    cpu: str = "4"
    memory: str = "16Gi"
    gpus: int = 0
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ScaleUpCase:
    groups: tuple[GroupSpec, ...]
    # Pending pods: (count, cpu) each, optionally asking for GPUs.
    pods: tuple[tuple[int, str], ...]
    # The increase of each group that grows.
    expected: dict[str, int]
    flags: dict[str, Any] = field(default_factory=dict)
    pod_gpus: int = 0
    # The reason each pending pod gives for the atomic group when it is no option.
    rejected: NoScaleUpReason | None = None
    # The pods' node selector: which groups can hold them at all.
    selector: dict[str, str] = field(default_factory=dict)


SCALE_UP_CASES = {
    "one-pod-grows-the-group-to-max": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={"slice": 4},
    ),
    "pods-needing-more-than-max-still-max": ScaleUpCase(
        groups=(GroupSpec("slice", 3, atomic=True),),
        pods=((5, "3"),),
        expected={"slice": 3},
    ),
    "partly-scaled-group-grows-to-max": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True, nodes=1),),
        pods=((1, "3500m"),),
        expected={"slice": 3},
    ),
    "plain-group-grows-by-what-the-pods-need": ScaleUpCase(
        groups=(GroupSpec("plain", 4),),
        pods=((1, "1"),),
        expected={"plain": 1},
    ),
    "max-nodes-total-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={},
        flags={"max_nodes_total": 3},
        rejected=NoScaleUpReason.ATOMIC_MAX_NODES_TOTAL,
    ),
    "max-nodes-total-allows-exactly-the-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={"slice": 4},
        flags={"max_nodes_total": 4},
    ),
    "cores-total-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={},
        flags={"cores_total": MinMax(0, 12)},
        rejected=NoScaleUpReason.CPU_LIMIT_REACHED,
    ),
    "memory-total-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={},
        flags={"memory_total": MinMax(0, 48)},
        rejected=NoScaleUpReason.MEMORY_LIMIT_REACHED,
    ),
    "gpu-total-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True, gpus=2, labels={GPU_LABEL: "a100"}),),
        pods=((1, "1"),),
        pod_gpus=1,
        expected={},
        flags={"gpu_total": [GpuLimit("a100", 0, 6)]},
        rejected=NoScaleUpReason.GPU_LIMIT_REACHED,
    ),
    "max-nodes-per-scaleup-forbids-the-whole-group": ScaleUpCase(
        groups=(GroupSpec("slice", 4, atomic=True),),
        pods=((1, "1"),),
        expected={},
        flags={"max_nodes_per_scaleup": 3},
        rejected=NoScaleUpReason.ATOMIC_MAX_NODES_PER_SCALE_UP,
    ),
    "refused-atomic-group-leaves-the-plain-one": ScaleUpCase(
        groups=(GroupSpec("plain", 10, cpu="2"), GroupSpec("slice", 4, atomic=True)),
        pods=((1, "1"),),
        expected={"plain": 1},
        flags={"max_nodes_total": 3},
        rejected=NoScaleUpReason.ATOMIC_MAX_NODES_TOTAL,
    ),
    # The pods fit only zone a; balancing spreads the count over the groups similar to the
    # chosen one (zones do not count), except atomic ones.
    "atomic-group-is-not-balanced-with-similar-ones": ScaleUpCase(
        groups=(
            GroupSpec("slice-a", 4, atomic=True, labels={ZONE: "a"}),
            GroupSpec("plain-b", 4, labels={ZONE: "b"}),
        ),
        pods=((3, "3"),),
        selector={ZONE: "a"},
        expected={"slice-a": 4},
        flags=BALANCING,
    ),
    "plain-group-gives-no-share-to-a-similar-atomic-one": ScaleUpCase(
        groups=(
            GroupSpec("plain-a", 4, labels={ZONE: "a"}),
            GroupSpec("slice-b", 4, atomic=True, labels={ZONE: "b"}),
            GroupSpec("plain-c", 4, labels={ZONE: "c"}),
        ),
        pods=((4, "3"),),
        selector={ZONE: "a"},
        expected={"plain-a": 2, "plain-c": 2},
        flags=BALANCING,
    ),
}


def _harness(case: ScaleUpCase) -> Harness:
    h = Harness(**case.flags)
    for spec in case.groups:
        h.provider.add_group(
            spec.name,
            0,
            spec.max_size,
            nodes=spec.nodes,
            cpu=spec.cpu,
            memory=spec.memory,
            gpus=spec.gpus,
            labels=spec.labels,
            options=ATOMIC if spec.atomic else None,
        )
        for i in range(spec.nodes):
            # Running nodes are busy: the pending pods need new ones.
            h.add_pods([running_pod(f"{spec.name}-busy-{i}", f"{spec.name}-{i + 1}", cpu="3900m")])
    n = 0
    for count, cpu in case.pods:
        extended = {GPU_RESOURCE: case.pod_gpus} if case.pod_gpus else None
        for _ in range(count):
            pod = pending_pod(
                f"p{n}", cpu=cpu, memory="1Gi", extended=extended, node_selector=case.selector
            )
            h.add_pods([pod])
            n += 1
    return h


@pytest.mark.parametrize("case", SCALE_UP_CASES.values(), ids=SCALE_UP_CASES.keys())
def test_zero_or_max_scale_up(case: ScaleUpCase) -> None:
    h = _harness(case)
    before = {gid: g.target for gid, g in h.provider.groups.items()}
    result = h.run()
    grown = {gid: g.target - before[gid] for gid, g in h.provider.groups.items()}
    assert {gid: d for gid, d in grown.items() if d} == case.expected
    assert {d.node_group: d.delta for d in result.scale_up.decisions} == case.expected
    if not case.expected:
        assert result.scale_up.status is ScaleUpStatus.NO_OPTIONS_AVAILABLE
    atomic = [s for s in case.groups if s.atomic]
    for spec in atomic:
        # Never a partial increase: nothing, or all the way to the max.
        target = h.provider.groups[spec.name].target
        assert target in (spec.nodes, spec.max_size)
    if case.rejected is not None:
        (spec,) = atomic
        for pod, rejections in result.scale_up.pods_remaining.items():
            mine = [r for r in rejections if r.node_group == spec.name]
            assert [r.reason for r in mine] == [case.rejected], pod
            assert f"needs {spec.max_size - spec.nodes} nodes" in mine[0].detail
        assert result.scale_up.pods_remaining or case.expected


def test_atomic_option_asks_for_the_whole_group_and_says_why() -> None:
    h = Harness()
    h.provider.add_group("slice", 0, 4, options=ATOMIC)
    h.add_pods([pending_pod("p", cpu="1")])
    result = h.run()
    (option,) = result.scale_up.options
    assert option.node_count == 4
    assert "the pods need 1 nodes" in option.debug
    assert "max size 4" in option.debug


def test_pending_pods_after_an_atomic_scale_up_wait_for_the_group() -> None:
    h = Harness()
    g = h.provider.add_group("slice", 0, 3, options=ATOMIC)
    h.add_pods([pending_pod("p", cpu="1")])
    h.run()
    assert g.target == 3
    # The group is at its max size: nothing more is asked while its nodes come.
    h.add_pods([pending_pod("q", cpu="1")])
    result = h.run(timedelta(seconds=10))
    assert result.scale_up.decisions == ()
    assert g.increases == [3]


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({}, 4),
        ({"max_nodes_total": 3}, 0),
        ({"cores_total": MinMax(0, 8)}, 0),
    ],
    ids=["grows-to-max", "node-limit-leaves-it", "core-limit-leaves-it"],
)
def test_min_size_enforcement_of_an_atomic_group(limits: dict[str, Any], expected: int) -> None:
    h = Harness(enforce_node_group_min_size=True, **limits)
    g = h.provider.add_group("slice", 2, 4, options=ATOMIC)
    h.run()
    assert g.target == expected
    assert g.increases == ([expected] if expected else [])


# ---------------------------------------------------------------------------- scale-down

ELEVEN_MINUTES = timedelta(minutes=11)
WHOLE = UnremovableReason.ATOMIC_SCALE_DOWN_FAILED


@dataclass(frozen=True)
class ScaleDownCase:
    # Per node of the atomic group "slice" (slice-1, slice-2, ...): the CPU of the pod it
    # runs ("" for none), or "orphan" for a pod no controller recreates.
    slice_pods: tuple[str, ...]
    # The nodes deleted after the unneeded time, and the reason each other node of the
    # slice is kept.
    deleted: tuple[str, ...]
    kept: dict[str, UnremovableReason] = field(default_factory=dict)
    slice_min: int = 0
    flags: dict[str, Any] = field(default_factory=dict)
    # A second atomic group "twin" of this many empty nodes.
    twin: int = 0
    # Nodes unneeded (timers running) after the deletions.
    unneeded: tuple[str, ...] = ()


SCALE_DOWN_CASES = {
    "empty-group-goes-whole": ScaleDownCase(
        slice_pods=("", "", ""),
        deleted=("slice-1", "slice-2", "slice-3"),
    ),
    "pods-moved-and-group-goes-whole": ScaleDownCase(
        slice_pods=("500m", "500m"),
        deleted=("slice-1", "slice-2"),
    ),
    "a-busy-node-keeps-the-group": ScaleDownCase(
        slice_pods=("", "3", ""),
        deleted=(),
        kept={
            "slice-1": WHOLE,
            "slice-2": UnremovableReason.NOT_UNDERUTILIZED,
            "slice-3": WHOLE,
        },
    ),
    "a-blocked-node-keeps-the-group": ScaleDownCase(
        slice_pods=("orphan", ""),
        deleted=(),
        kept={"slice-1": UnremovableReason.BLOCKED_BY_POD, "slice-2": WHOLE},
    ),
    # Room for one of the two pods only.
    "no-room-for-every-pod-keeps-the-group": ScaleDownCase(
        slice_pods=("1", "1"),
        deleted=(),
        kept={"slice-1": WHOLE, "slice-2": UnremovableReason.NO_PLACE_TO_MOVE_PODS},
    ),
    "min-size-applies-to-the-whole-group": ScaleDownCase(
        slice_pods=("", "", ""),
        slice_min=1,
        deleted=(),
        kept=dict.fromkeys(
            ("slice-1", "slice-2", "slice-3"), UnremovableReason.NODE_GROUP_MIN_SIZE_REACHED
        ),
    ),
    "resource-minimum-applies-to-the-whole-group": ScaleDownCase(
        slice_pods=("", "", ""),
        flags={"cores_total": MinMax(10, 1000)},
        deleted=(),
        kept=dict.fromkeys(
            ("slice-1", "slice-2", "slice-3"),
            UnremovableReason.MINIMAL_RESOURCE_LIMIT_EXCEEDED,
        ),
    ),
    "first-group-may-go-beyond-the-budget": ScaleDownCase(
        slice_pods=("", "", ""),
        flags={"max_scale_down_parallelism": 2},
        deleted=("slice-1", "slice-2", "slice-3"),
    ),
    "next-group-waits-for-the-budget": ScaleDownCase(
        slice_pods=("", ""),
        twin=2,
        flags={"max_scale_down_parallelism": 3},
        deleted=("slice-1", "slice-2"),
        unneeded=("twin-1", "twin-2"),
    ),
    "two-groups-within-the-budget-both-go": ScaleDownCase(
        slice_pods=("", ""),
        twin=2,
        flags={"max_scale_down_parallelism": 4},
        deleted=("slice-1", "slice-2", "twin-1", "twin-2"),
    ),
}


def _scale_down_harness(case: ScaleDownCase) -> Harness:
    h = Harness(**case.flags)
    # A busy node that takes the moved pods (1500m free), never removable itself.
    h.provider.add_group("base", 0, 10, nodes=1)
    h.add_pods([running_pod("base-busy", "base-1", cpu="2500m")])
    h.provider.add_group("slice", case.slice_min, 4, nodes=len(case.slice_pods), options=ATOMIC)
    for i, cpu in enumerate(case.slice_pods, start=1):
        if cpu == "orphan":
            h.add_pods([running_pod(f"orphan-{i}", f"slice-{i}", owner=None)])
        elif cpu:
            h.add_pods([running_pod(f"pod-{i}", f"slice-{i}", cpu=cpu)])
    if case.twin:
        h.provider.add_group("twin", 0, 4, nodes=case.twin, options=ATOMIC)
    return h


@pytest.mark.parametrize("case", SCALE_DOWN_CASES.values(), ids=SCALE_DOWN_CASES.keys())
def test_zero_or_max_scale_down(case: ScaleDownCase) -> None:
    h = _scale_down_harness(case)
    h.run()
    result = h.run(ELEVEN_MINUTES)
    deleted = sorted(d.node for d in result.scale_down.deletions if d.ok)
    assert deleted == sorted(case.deleted)
    assert all(d.ok for d in result.scale_down.deletions)
    reasons = {u.node: u.reason for u in result.scale_down.unremovable}
    assert {n: reasons.get(n) for n in case.kept} == case.kept
    for node, reason in case.kept.items():
        if reason in (WHOLE, UnremovableReason.NODE_GROUP_MIN_SIZE_REACHED):
            detail = next(u.detail for u in result.scale_down.unremovable if u.node == node)
            assert "node group slice scales down all at once" in detail
    # Kept nodes of an atomic group are not unneeded: no timer runs for a part of it.
    unneeded = {u.node for u in result.scale_down.unneeded}
    assert not unneeded & {n for n, r in case.kept.items() if r is WHOLE}
    assert unneeded >= set(case.unneeded)
    for gid in ("slice", "twin"):
        group = h.provider.groups.get(gid)
        if group is None:
            continue
        # All of the group's nodes in one call, or none.
        deletes = [names for call, names in group.calls if call == "delete_nodes"]
        gone = sorted(n for n in case.deleted if n.startswith(f"{gid}-"))
        assert deletes == ([gone] if gone else [])
        assert group.target in (0, len(group.instances))


def _removal_simulator(snap: ClusterSnapshot, pdbs: list[PodDisruptionBudget]) -> RemovalSimulator:
    context = DrainContext.build(T0, pdbs=PdbTracker(pdbs))
    return RemovalSimulator(snap, [], context, HintingSimulator())


def test_a_group_that_cannot_go_gives_back_what_its_simulation_took() -> None:
    """The first node of the group finds room for its pod, the second does not: the first
    one's move is undone, in the snapshot and in the PDB budget, so the next candidate can
    have that room and that disruption."""
    snap = ClusterSnapshot()
    app = {"app": "x"}
    snap.add_node(make_node("dest", "4"), [make_pod("busy", "2500m", node_name="dest")])
    snap.add_node(make_node("s1", "1"), [make_pod("p1", "1", node_name="s1", labels=app)])
    snap.add_node(make_node("s2", "1"), [make_pod("p2", "1", node_name="s2")])
    snap.add_node(make_node("spare", "1"), [make_pod("p3", "900m", node_name="spare", labels=app)])
    pdb = PodDisruptionBudget(
        "default", "x", selector=LabelSelector(match_labels=(("app", "x"),)), disruptions_allowed=1
    )
    simulator = _removal_simulator(snap, [pdb])
    group = ("slice", ("s1", "s2"))
    results, untried = simulate_nodes(
        simulator,
        ["s1", "s2", "spare"],
        max_non_empty=0,
        timeout_seconds=60,
        together={"s1": group, "s2": group},
    )
    assert untried == []
    outcome = {r.node: (r.removable, r.reason) for r in results}
    assert outcome == {
        "s1": (False, UnremovableReason.ATOMIC_SCALE_DOWN_FAILED),
        "s2": (False, UnremovableReason.NO_PLACE_TO_MOVE_PODS),
        "spare": (True, UnremovableReason.NO_REASON),
    }
    assert "node s2 cannot go (NoPlaceToMovePods)" in results[0].detail
    assert results[2].destinations == {"default/p3": "dest"}
    assert simulator.removed == {"spare"}
    assert {p.key: node for p, node in snap.pods()} == {
        "default/busy": "dest",
        "default/p1": "s1",
        "default/p2": "s2",
        "default/p3": "dest",
    }


def test_a_group_is_not_cut_by_the_non_empty_candidate_count() -> None:
    snap = ClusterSnapshot()
    snap.add_node(make_node("dest", "8"))
    for name in ("a", "s1", "s2", "s3", "b"):
        snap.add_node(make_node(name, "1"), [make_pod(f"p-{name}", "500m", node_name=name)])
    simulator = _removal_simulator(snap, [])
    group = ("slice", ("s1", "s2", "s3"))
    results, untried = simulate_nodes(
        simulator,
        ["a", "s1", "s2", "s3", "b"],
        max_non_empty=1,
        timeout_seconds=60,
        together=dict.fromkeys(group[1], group),
    )
    assert untried == []
    assert [(r.node, r.removable) for r in results] == [
        ("a", True),
        ("s1", True),
        ("s2", True),
        ("s3", True),
        ("b", False),
    ]
    assert results[-1].detail == "non-empty candidate limit reached"


# ---------------------------------------------------------------------------- actuation


class FaultyCluster(InMemoryCluster):
    """Refuses, for good, to evict the pods in `refused` and to taint the nodes in
    `untaintable`."""

    refused: frozenset[str] = frozenset()
    untaintable: frozenset[str] = frozenset()

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        if pod.key in self.refused:
            raise EvictionError(pod.key, "forbidden by a webhook", retryable=False)
        super().evict(pod, grace_period_seconds)

    def add_taint(self, node_name: str, taint: Taint) -> None:
        if node_name in self.untaintable:
            raise RuntimeError(f"node {node_name}: API server unavailable")
        super().add_taint(node_name, taint)


@dataclass(frozen=True)
class FailureCase:
    refused: frozenset[str] = frozenset()
    untaintable: frozenset[str] = frozenset()
    cloud_error: str = ""
    # The error of each node, in part.
    errors: dict[str, str] = field(default_factory=dict)
    evicted: tuple[str, ...] = ()
    delete_calls: int = 0


AS_A_WHOLE = "scale down failed for node group slice as a whole"
FAILURE_CASES = {
    # The first node fails: the second is not even drained.
    "first-node-cannot-be-drained": FailureCase(
        refused=frozenset({"default/pod-1"}),
        errors={"slice-1": "evicting pod default/pod-1", "slice-2": AS_A_WHOLE},
    ),
    # The last node fails: the first, drained and waiting, is rolled back with it.
    "last-node-cannot-be-drained": FailureCase(
        refused=frozenset({"default/pod-2"}),
        errors={"slice-1": AS_A_WHOLE, "slice-2": "evicting pod default/pod-2"},
        evicted=("default/pod-1",),
    ),
    "cloud-refuses-to-delete-the-group": FailureCase(
        cloud_error="quota check failed",
        errors=dict.fromkeys(
            ("slice-1", "slice-2"), "deleting the 2 nodes of node group slice at once"
        ),
        evicted=("default/pod-1", "default/pod-2"),
        delete_calls=1,
    ),
    "a-node-cannot-be-tainted": FailureCase(
        untaintable=frozenset({"slice-2"}),
        errors={"slice-1": AS_A_WHOLE, "slice-2": "tainting failed"},
    ),
}


@pytest.mark.parametrize("case", FAILURE_CASES.values(), ids=FAILURE_CASES.keys())
def test_a_failed_node_fails_the_whole_group(case: FailureCase) -> None:
    h = Harness(cluster_class=FaultyCluster, cordon_node_before_terminating=True)
    h.provider.add_group("base", 0, 10, nodes=1)
    h.add_pods([running_pod("base-busy", "base-1", cpu="2500m")])
    slice_ = h.provider.add_group("slice", 0, 4, nodes=2, options=ATOMIC)
    h.add_pods([running_pod(f"pod-{i}", f"slice-{i}", cpu="500m") for i in (1, 2)])
    h.run()
    assert isinstance(h.cluster, FaultyCluster)
    h.cluster.refused = case.refused
    h.cluster.untaintable = case.untaintable
    slice_.fail_delete = case.cloud_error
    result = h.run(ELEVEN_MINUTES)
    outcome = {d.node: d for d in result.scale_down.deletions}
    assert sorted(outcome) == ["slice-1", "slice-2"]
    for node, error in case.errors.items():
        assert not outcome[node].ok
        assert error in outcome[node].error, outcome[node].error
    assert tuple(sorted(p for d in outcome.values() for p in d.evicted_pods)) == case.evicted
    assert sorted(h.cluster.evicted) == sorted(case.evicted)
    # Nothing deleted, nothing left tainted or cordoned, nothing left in flight.
    assert slice_.target == 2
    assert sorted(slice_.deleted) == []
    assert len([c for c in slice_.calls if c[0] == "delete_nodes"]) == case.delete_calls
    for name in ("slice-1", "slice-2"):
        node = h.cluster.nodes[name]
        assert not any(t.key == TO_BE_DELETED_TAINT for t in node.taints)
        assert not node.unschedulable
    assert result.scale_down.in_flight == ()


class RetryingCluster(InMemoryCluster):
    """Answers 429 to evictions of the pods in `refused`, as while their PDB is spent."""

    refused: frozenset[str] = frozenset()

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        if pod.key in self.refused:
            raise EvictionError(pod.key, "would violate the disruption budget", retryable=True)
        super().evict(pod, grace_period_seconds)


def test_drained_nodes_wait_in_the_background_for_the_rest_of_their_group() -> None:
    clock = GatedClock()
    executor = ThreadedExecutor()
    h = Harness(RetryingCluster, clock=clock, executor=executor)
    h.provider.add_group("base", 0, 10, nodes=1)
    h.add_pods([running_pod("base-busy", "base-1", cpu="2500m")])
    slice_ = h.provider.add_group("slice", 0, 4, nodes=3, options=ATOMIC)
    h.add_pods([running_pod(f"pod-{i}", f"slice-{i}", cpu="200m") for i in (1, 2, 3)])
    assert isinstance(h.cluster, RetryingCluster)
    cluster = h.cluster

    def run(advance: timedelta = timedelta(0)) -> Any:
        if advance:
            clock.advance(advance)
        clock.settle(executor.running)
        result = h.autoscaler.run_once(clock.now())
        clock.settle(executor.running)
        return result

    try:
        run()
        cluster.refused = frozenset({"default/pod-3"})
        started = run(ELEVEN_MINUTES)
        assert sorted(d.node for d in started.scale_down.started) == [
            "slice-1",
            "slice-2",
            "slice-3",
        ]
        # Two nodes are drained and wait; the third keeps retrying its eviction.
        assert sorted(cluster.evicted) == ["default/pod-1", "default/pod-2"]
        assert started.scale_down.in_flight == ("slice-1", "slice-2", "slice-3")
        during = run(timedelta(seconds=10))
        assert during.scale_down.deletions == ()
        assert [c for c in slice_.calls if c[0] == "delete_nodes"] == []
        cluster.refused = frozenset()
        clock.advance(timedelta(seconds=10))
        clock.settle(executor.running)
        assert executor.wait(5)
        assert [c for c in slice_.calls if c[0] == "delete_nodes"] == [
            ("delete_nodes", ["slice-1", "slice-2", "slice-3"])
        ]
        done = run(timedelta(seconds=10))
        assert sorted((d.node, d.ok) for d in done.scale_down.deletions) == [
            ("slice-1", True),
            ("slice-2", True),
            ("slice-3", True),
        ]
        assert slice_.target == 0
    finally:
        cluster.refused = frozenset()
        for _ in range(100):
            if executor.running() == 0:
                break
            clock.advance(timedelta(seconds=10))
            clock.settle(executor.running)
        assert executor.wait(5)


# ---------------------------------------------------------------------------- explain


def test_explain_names_why_a_zero_or_max_group_does_not_help_or_go() -> None:
    h = Harness(max_nodes_total=5)
    h.provider.add_group("base", 0, 10, nodes=1)
    h.add_pods([running_pod("base-busy", "base-1", cpu="3")])
    h.provider.add_group("slice", 0, 4, nodes=2, options=ATOMIC)
    h.add_pods([running_pod("pod-2", "slice-2", cpu="3")])
    # Only the big group's nodes hold the pod.
    h.provider.add_group("big", 0, 8, cpu="8", memory="32Gi", options=ATOMIC)
    h.add_pods([pending_pod("train", cpu="6")])
    result = h.run()
    report = explain(result, h.cluster.snapshot(), h.options, result.time, h.provider)
    (pod,) = [p for p in report.pods if p.pod == "default/train"]
    big = next(v for v in pod.verdicts if v.node_group == "big")
    assert not big.helps
    assert big.why == (
        "atomic scale-up exceeds cluster node count limit: atomic scale-up 0 -> 8 needs 8 "
        "nodes; the limit on nodes leaves room for 2"
    )
    slice_1 = next(n for n in report.nodes if n.node == "slice-1")
    assert (slice_1.removable, slice_1.reason) == (False, "AtomicScaleDownFailed")
    assert "only 1 of its 2 nodes may go" in slice_1.detail
    text = render(report)
    assert "atomic scale-up exceeds cluster node count limit" in text
    assert "AtomicScaleDownFailed" in text
