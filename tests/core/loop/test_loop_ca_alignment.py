"""Rules where the loop follows Cluster Autoscaler's RunOnce closely, one table each."""

from __future__ import annotations

from datetime import timedelta

import pytest
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.loop.decisions import LoopResult, ScaleDownStatus, ScaleUpStatus
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT
from clusterscaler.model import MIRROR_POD_ANNOTATION, OwnerRef, Pod, Taint
from loopkit import T0, Harness, pending_pod, running_pod

MIN = timedelta(minutes=1)


def _group_status(result: LoopResult, name: str) -> tuple[int, int]:
    s = next(s for s in result.node_groups if s.name == name)
    return s.target_size, s.upcoming


@pytest.mark.parametrize(
    ("ready", "age", "upcoming", "asks_again"),
    [
        (False, timedelta(minutes=2), 1, False),
        (True, timedelta(minutes=2), 0, False),
        # Upcoming after the loop: the one node it asked for again.
        (False, timedelta(minutes=20), 1, True),
    ],
    ids=["registered-not-started", "ready", "unready-past-startup-time"],
)
def test_registered_node_counts_as_upcoming_until_it_starts(
    ready: bool, age: timedelta, upcoming: int, asks_again: bool
) -> None:
    """CA's GetUpcomingNodes: target - ready - unready - long unregistered, so a node that
    registered but is not Ready within --max-node-startup-time is still on its way and the
    pod it was requested for does not ask for another one."""
    h = Harness()
    g = h.provider.add_group("g", 0, 10)
    h.add_pods([pending_pod("p", cpu="3")])
    h.run()
    assert g.target == 1
    (node,) = g.register()
    h.cluster.add_node(node.with_(ready=ready, creation_time=T0 + MIN - age))
    result = h.run(MIN)
    assert _group_status(result, "g") == (1 + int(asks_again), upcoming)
    assert bool(result.scale_up.decisions) is asks_again
    assert [c for c in g.calls if c[0] == "increase_size"] == [("increase_size", 1)] * (
        1 + int(asks_again)
    )


def test_not_started_node_is_counted_once_against_max_nodes_total() -> None:
    """A not-started node stands in the totals as its template, not also as itself: with
    --max-nodes-total=2 and one node starting, one more node may still be added."""
    h = Harness(max_nodes_total=2)
    g = h.provider.add_group("g", 0, 10)
    h.add_pods([pending_pod("p", cpu="3")])
    h.run()
    (node,) = g.register()
    h.cluster.add_node(node.with_(ready=False))
    h.add_pods([pending_pod("q", cpu="3")])
    result = h.run(MIN)
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 1)]
    assert g.target == 2


@pytest.mark.parametrize(
    ("nominated", "scaled_up"),
    [("g-2", False), ("gone-node", True), ("", True)],
    ids=["nominated-to-existing-node", "nominated-to-missing-node", "not-nominated"],
)
def test_preempting_pod_takes_room_on_its_nominated_node(nominated: str, scaled_up: bool) -> None:
    """CA's filterOutExpendable: a pending pod nominated to an existing node is placed there
    in the snapshot (the scheduler is preempting lower-priority pods for it, so it needs no
    new node); a pod nominated to a node that no longer exists is an ordinary unschedulable
    pod."""
    h = Harness(new_pod_scale_up_delay=timedelta(0))
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("a", "g-1", cpu="3"), running_pod("low", "g-2", cpu="3", priority=0)])
    h.add_pods([pending_pod("vip", cpu="3", priority=1000, nominated_node_name=nominated)])
    result = h.run()
    assert [d.delta for d in result.scale_up.decisions] == ([1] if scaled_up else [])


class BindsBeforeTaint(InMemoryCluster):
    """Binds `late` to the node just before its ToBeDeleted taint lands: the scheduler
    acting between the loop's snapshot and the taint."""

    late: Pod | None = None

    def add_taint(self, node_name: str, taint: Taint) -> None:
        if taint.key == TO_BE_DELETED_TAINT and self.late is not None:
            self.add_pod(self.late)
            self.late = None
        super().add_taint(node_name, taint)


_DS = OwnerRef("DaemonSet", "agent", "uid-ds-agent", True, "apps/v1")


@pytest.mark.parametrize(
    ("late_kw", "evicted"),
    [
        ({}, True),
        ({"owner": _DS}, True),
        ({"annotations": {MIRROR_POD_ANNOTATION: "x"}, "owner": None}, False),
        ({"priority": -100}, False),
    ],
    ids=["workload-pod", "daemonset-pod", "mirror-pod", "expendable-pod"],
)
def test_pod_bound_after_the_decision_is_evicted_with_the_drain(
    late_kw: dict[str, object], evicted: bool
) -> None:
    """CA's actuator re-lists the node's pods after tainting: a pod bound meanwhile goes
    through the Eviction API like the planned ones (DaemonSet pods with
    --daemonset-eviction-for-occupied-nodes); mirror and expendable pods are not evicted."""
    h = Harness(BindsBeforeTaint)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m"), running_pod("small", "g-2")])
    h.run()
    cluster = h.cluster
    assert isinstance(cluster, BindsBeforeTaint)
    cluster.late = running_pod("late", "g-2", **late_kw)
    result = h.run(timedelta(minutes=11))
    assert [(d.node, d.ok) for d in result.scale_down.deletions] == [("g-2", True)]
    assert ("default/late" in cluster.evicted) is evicted
    assert "default/small" in cluster.evicted


@pytest.mark.parametrize(
    ("priority", "cutoff", "scaled_up"),
    [(-100, -10, False), (-10, -10, True), (None, -10, True), (5, 10, False)],
    ids=["below-cutoff", "at-cutoff", "no-priority", "below-raised-cutoff"],
)
def test_expendable_scheduled_pods_take_no_room(
    priority: int | None, cutoff: int, scaled_up: bool
) -> None:
    """CA's FilterOutExpendablePods: scheduled pods below --expendable-pods-priority-cutoff
    are left out of the snapshot, so a pending pod that fits once they are preempted buys no
    node, and their node counts as empty."""
    h = Harness(expendable_pods_priority_cutoff=cutoff, new_pod_scale_up_delay=timedelta(0))
    g = h.provider.add_group("g", 0, 10, nodes=1)
    h.add_pods([running_pod("placeholder", "g-1", cpu="3", priority=priority)])
    h.add_pods([pending_pod("real", cpu="2", priority=100)])
    result = h.run()
    assert bool(result.scale_up.decisions) is scaled_up
    assert g.target == 1 + int(scaled_up)


@pytest.mark.parametrize(
    ("age", "candidate"),
    [
        (timedelta(minutes=2), False),
        (timedelta(minutes=15), False),
        (timedelta(minutes=15, seconds=1), True),
    ],
    ids=["booting", "at-max-node-startup-time", "past-max-node-startup-time"],
)
def test_node_that_has_not_started_is_no_scale_down_candidate(
    age: timedelta, candidate: bool
) -> None:
    """CA: a registered node not Ready within --max-node-startup-time is upcoming capacity,
    neither unneeded nor a destination; past that time it is an unready node, which may be
    removed after --scale-down-unready-time."""
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("a", "g-1", cpu="3")])
    node = h.cluster.nodes["g-2"]
    h.cluster.add_node(node.with_(ready=False, creation_time=T0 - age))
    result = h.run()
    assert ("g-2" in {u.node for u in result.scale_down.unneeded}) is candidate
    if not candidate:
        (why,) = [u for u in result.scale_down.unremovable if u.node == "g-2"]
        assert why.detail.startswith("not started")


@pytest.mark.parametrize(
    ("being_deleted", "min_cores", "deleted"),
    [
        ((), 8, 1),
        (("g-3",), 8, 0),
        (("g-3",), 4, 1),
    ],
    ids=["none-being-deleted", "one-being-deleted-at-minimum", "one-being-deleted-above-minimum"],
)
def test_nodes_being_deleted_leave_the_cores_minimum(
    being_deleted: tuple[str, ...], min_cores: int, deleted: int
) -> None:
    """CA's calculateScaleDownCoresMemoryTotal skips nodes being deleted: three idle 4-core
    nodes, one of them already being deleted, have 8 cores left towards --cores-total."""
    from clusterscaler.framework.options import MinMax

    h = Harness(cores_total=MinMax(min_cores, 1000))
    h.provider.add_group("g", 0, 10, nodes=3)
    # The first loop removes taints left by an earlier run: taint after it.
    h.run()
    stamp = str(int(T0.timestamp()))
    for name in being_deleted:
        node = h.cluster.nodes[name]
        h.cluster.add_node(node.with_(taints=(Taint(TO_BE_DELETED_TAINT, stamp),)))
    result = h.run(timedelta(minutes=11))
    assert len([d for d in result.scale_down.deletions if d.ok]) == deleted


@pytest.mark.parametrize(
    ("fail_increase", "status", "scale_down"),
    [
        ("QUOTA_EXCEEDED", ScaleUpStatus.ERROR, ScaleDownStatus.NOT_TRIED),
        ("", ScaleUpStatus.SUCCESSFUL, ScaleDownStatus.IN_COOLDOWN),
    ],
    ids=["scale-up-failed", "scale-up-succeeded"],
)
def test_loop_whose_scale_up_failed_deletes_nothing(
    fail_increase: str, status: ScaleUpStatus, scale_down: ScaleDownStatus
) -> None:
    """CA's postScaleUp: a scale-up error ends the loop before scale-down; a successful
    scale-up puts scale-down in cooldown. Either way the unneeded node stays this loop."""
    h = Harness(new_pod_scale_up_delay=timedelta(0))
    h.provider.add_group("g", 0, 10, nodes=2)
    wide = h.provider.add_group("h", 0, 10, cpu="8", memory="32Gi")
    wide.fail_increase = fail_increase
    h.add_pods([running_pod("a", "g-1", cpu="3")])
    h.run()
    h.add_pods([pending_pod("wide", cpu="6")])
    result = h.run(timedelta(minutes=11))
    assert result.scale_up.status is status
    assert result.scale_down.status is scale_down
    assert result.scale_down.deletions == ()
    assert "g-2" in h.cluster.nodes


def test_unhealthy_halt_restarts_the_unneeded_timers() -> None:
    """CA's CleanUpUnneededNodes on an unhealthy cluster: a node unneeded before the halt
    must be unneeded for the full --scale-down-unneeded-time after it."""
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=6)
    h.add_pods([running_pod(f"a{i}", f"g-{i}", cpu="3") for i in range(1, 6)])
    first = h.run()
    assert [u.node for u in first.scale_down.unneeded] == ["g-6"]
    broken = [f"g-{i}" for i in range(1, 5)]
    for name in broken:
        h.cluster.add_node(h.cluster.nodes[name].with_(ready=False))
    assert h.run(timedelta(minutes=9)).halted
    for name in broken:
        h.cluster.add_node(h.cluster.nodes[name].with_(ready=True))
    recovered = h.run(timedelta(minutes=2))
    assert not recovered.halted
    (u,) = recovered.scale_down.unneeded
    assert (u.node, u.since) == ("g-6", recovered.time)
    assert "g-6" in h.cluster.nodes


@pytest.mark.parametrize(
    ("limits", "targets"),
    [
        ({}, (3, 2)),
        ({"max_nodes_total": 4}, (3, 1)),
        ({"max_nodes_total": 2}, (2, 0)),
        ({"max_nodes_total": 1}, (1, 0)),
        ({"cores_total": (0, 12)}, (3, 0)),
        ({"memory_total": (0, 16 * 4)}, (3, 1)),
    ],
    ids=["no-limit", "max-nodes-4", "max-nodes-2", "max-nodes-reached", "cores-12", "memory-64"],
)
def test_min_size_enforcement_is_capped_by_the_cluster_limits(
    limits: dict[str, object], targets: tuple[int, int]
) -> None:
    """CA's ScaleUpToNodeGroupMinSize caps each group's increase by --max-nodes-total and
    the resource maxima, serving groups in order from what the earlier ones left."""
    from clusterscaler.framework.options import MinMax

    opts = {k: MinMax(*v) if isinstance(v, tuple) else v for k, v in limits.items()}
    h = Harness(enforce_node_group_min_size=True, **opts)
    a = h.provider.add_group("a", 3, 10, nodes=1)
    b = h.provider.add_group("b", 2, 10)
    h.run()
    assert (a.target, b.target) == targets


@pytest.mark.parametrize(
    ("labelled", "gpus", "age", "counts"),
    [
        (True, 0, timedelta(minutes=2), (0, 1, 0)),
        (True, 2, timedelta(minutes=2), (1, 0, 0)),
        (False, 0, timedelta(minutes=2), (1, 0, 0)),
        (True, 0, timedelta(hours=1), (0, 0, 1)),
    ],
    ids=["gpus-not-advertised-yet", "gpus-advertised", "not-a-gpu-node", "gpus-never-came"],
)
def test_gpu_node_is_ready_only_once_its_gpus_are_advertised(
    labelled: bool, gpus: int, age: timedelta, counts: tuple[int, int, int]
) -> None:
    """CA's FilterOutNodesWithUnreadyResources: a Ready node with the GPU label and no
    allocatable GPU counts as not Ready: starting (upcoming) while young, unready later."""
    from clusterscaler.simulator.builders import resources
    from clusterscaler.simulator.utilization import GPU_RESOURCE
    from loopkit import GPU_LABEL

    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=1, labels={GPU_LABEL: "a100"} if labelled else {})
    node = h.cluster.nodes["g-1"]
    res = resources("4", "16Gi", 110, extended={GPU_RESOURCE: gpus} if gpus else None)
    h.cluster.add_node(node.with_(allocatable=res, capacity=res, creation_time=T0 - age))
    result = h.run()
    c = result.health.counts
    assert (c.ready, c.not_started, c.unready) == counts
