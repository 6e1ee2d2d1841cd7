"""When scale-down may act: unneeded timers, eligibility, minimums and cooldowns.

CA deletes a node only after it has been continuously unneeded for
--scale-down-unneeded-time (--scale-down-unready-time for unready nodes); a node that
becomes needed starts over. Nodes annotated scale-down-disabled, nodes being deleted and
nodes of groups at min size stay; the cluster never goes below --cores-total /
--memory-total minimums; after a scale-up, a deletion or a failed deletion scale-down
waits (--scale-down-delay-after-add / -after-delete / -after-failure).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.framework.options import MinMax
from clusterscaler.interfaces.cloudprovider import NodeGroupOptions
from clusterscaler.loop.decisions import ScaleDownStatus, UnremovableReason
from safetykit import PAST_UNNEEDED, T0, World, pending, pod, reason_of, unneeded_names

MIN = timedelta(minutes=1)
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"


def idle_pair(**options: Any) -> World:
    """g-1 busy; g-2 empty apart from nothing: it is unneeded from the first loop."""
    w = World(**options)
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="2500m"))
    return w


def test_node_goes_only_after_the_full_unneeded_time() -> None:
    """CA: unneeded for 9m59s is not enough; 10m is."""
    w = idle_pair()
    w.run()
    w.run(timedelta(minutes=9, seconds=59))
    assert "g-2" in w.alive()
    w.run(timedelta(seconds=1))
    assert w.deleted() == ["g-2"]


def test_timer_restarts_when_node_becomes_utilized() -> None:
    """CA: a node that is needed for one loop starts its unneeded time over."""
    w = idle_pair()
    w.run()
    w.pods(pod("burst", "g-2", cpu="3"))
    w.run(6 * MIN)
    del w.cluster.pods["default/burst"]
    w.run(MIN)  # unneeded again from here (T0+7m)
    w.run(9 * MIN)
    assert "g-2" in w.alive(), "the timer kept running while the node was needed"
    w.run(2 * MIN)
    assert w.deleted() == ["g-2"]


def test_timer_restarts_when_pods_stop_fitting_elsewhere() -> None:
    """CA: a node whose pods lose their place elsewhere is no longer unneeded, even if its
    utilization never changed; when the place comes back the timer starts over."""
    w = idle_pair()
    w.pods(pod("mover", "g-2", cpu="1"))
    w.run()
    w.cluster.add_pod(
        w.cluster.pods["default/anchor"].with_(
            requests=w.cluster.pods["default/mover"].requests.with_(cpu=3500)
        )
    )
    w.run(6 * MIN)
    assert "g-2" not in unneeded_names(w.run(MIN))
    w.pods(pod("anchor", "g-1", cpu="2500m"))
    back = w.run(5 * MIN)  # past the recheck timeout: unneeded again from T0+12m
    assert "g-2" in unneeded_names(back)
    w.run(9 * MIN)
    assert "g-2" in w.alive(), "the timer kept running while the pods had no place"
    w.run(2 * MIN)
    assert w.deleted() == ["g-2"]


def test_per_group_unneeded_time_is_honoured() -> None:
    """CA: a node group's ScaleDownUnneededTime overrides the flag."""
    w = idle_pair()
    w.cloud.groups["g"].options = NodeGroupOptions(scale_down_unneeded_time=timedelta(hours=1))
    w.run()
    w.run(30 * MIN)
    assert "g-2" in w.alive()
    w.run(31 * MIN)
    assert w.deleted() == ["g-2"]


@pytest.mark.parametrize(
    ("mark", "reason"),
    [
        (
            lambda w: w.set_node("g-2", annotations={SCALE_DOWN_DISABLED: "true"}),
            UnremovableReason.SCALE_DOWN_DISABLED_ANNOTATION,
        ),
        (
            lambda w: w.set_node("g-2", deletion_time=T0 - MIN),
            UnremovableReason.CURRENTLY_BEING_DELETED,
        ),
    ],
    ids=["scale-down-disabled-annotation", "being-deleted"],
)
def test_excluded_nodes_are_never_deleted_by_the_loop(
    mark: Callable[[World], None], reason: UnremovableReason
) -> None:
    """CA skips these nodes before any simulation, however long they stay empty."""
    w = idle_pair()
    mark(w)
    results = w.settle(loops=3)
    assert w.deleted() == []
    assert reason_of(results[-1], "g-2") is reason


def test_min_size_counts_every_deletion_of_the_loop() -> None:
    """CA: a group of 4 with min size 2 loses 2 nodes, never 3, even with budget for all."""
    w = World(max_scale_down_parallelism=10)
    w.group("g", 2, 10, nodes=4)
    results = w.settle(loops=3)
    assert len(w.deleted()) == 2
    assert w.cloud.groups["g"].target == 2
    assert reason_of(results[-1], "g-3") is UnremovableReason.NODE_GROUP_MIN_SIZE_REACHED


@pytest.mark.parametrize(
    ("options", "survivors"),
    [
        ({"cores_total": MinMax(10, 1000)}, 3),
        ({"memory_total": MinMax(40, 100000)}, 3),
        ({"cores_total": MinMax(0, 1000)}, 0),
    ],
    ids=["cores-minimum", "memory-minimum-GiB", "no-minimum"],
)
def test_cluster_minimum_totals_hold_across_one_loop(
    options: dict[str, Any], survivors: int
) -> None:
    """CA: scale-down keeps the cluster at or above --cores-total and --memory-total
    minimums, counting every node removed in the same loop (4-core 16GiB nodes)."""
    w = World(max_scale_down_parallelism=10, **options)
    w.group("g", 0, 10, nodes=4)
    w.settle(loops=3)
    assert len(w.alive()) == survivors


def test_unready_node_waits_for_the_unready_time() -> None:
    """CA: an unready empty node goes after --scale-down-unready-time (20m), not after
    --scale-down-unneeded-time."""
    w = idle_pair()
    w.set_node("g-2", ready=False)
    w.run()
    w.run(PAST_UNNEEDED)
    assert "g-2" in w.alive()
    w.run(10 * MIN)
    assert w.deleted() == ["g-2"]


def test_unready_node_stays_when_unready_scale_down_is_disabled() -> None:
    """CA: --scale-down-unready-enabled=false keeps unready nodes (ScaleDownUnreadyDisabled)."""
    w = idle_pair(scale_down_unready_enabled=False)
    w.set_node("g-2", ready=False)
    results = w.settle(loops=4)
    assert w.deleted() == []
    assert reason_of(results[-1], "g-2") is UnremovableReason.SCALE_DOWN_UNREADY_DISABLED


def test_no_scale_down_within_delay_after_add() -> None:
    """CA: no deletion for --scale-down-delay-after-add (10m) after a scale-up, although
    nodes were unneeded long enough."""
    w = World()
    w.group("g", 0, 10, nodes=2)
    w.group("h", 0, 10, cpu="8", memory="32Gi")
    w.pods(pod("anchor", "g-1", cpu="2500m"))
    w.run()
    w.run(9 * MIN)
    w.pods(pending("wide", cpu="6"))
    up = w.run(MIN)
    assert up.scale_up.decisions
    assert "g-2" in w.alive()
    w.cloud.groups["h"].register()
    w.run(9 * MIN)
    assert "g-2" in w.alive()
    done = w.run(2 * MIN)
    assert done.scale_down.status is ScaleDownStatus.NODE_DELETE_STARTED
    assert "g-2" in w.deleted()


def test_no_scale_down_within_delay_after_failure() -> None:
    """CA: after a failed node deletion, no deletion for --scale-down-delay-after-failure,
    and the node that failed is untainted so workloads can use it again."""
    w = World(scale_down_delay_after_failure=timedelta(minutes=30))
    g = w.group("g", 0, 10, nodes=3)
    w.pods(pod("anchor", "g-1", cpu="2500m"))
    w.run()
    g.fail_delete = "quota API unavailable"
    failed = w.run(PAST_UNNEEDED)
    assert failed.scale_down.deletions and not any(d.ok for d in failed.scale_down.deletions)
    assert all(
        t.key != "ToBeDeletedByClusterAutoscaler"
        for n in w.cluster.nodes.values()
        for t in n.taints
    )
    g.fail_delete = ""
    later = w.run(20 * MIN)
    assert later.scale_down.status is ScaleDownStatus.IN_COOLDOWN
    assert later.scale_down.cooldown_reason == "--scale-down-delay-after-failure"
    assert w.deleted() == []
    w.run(11 * MIN)
    assert sorted(w.deleted()) == ["g-2", "g-3"]


def test_no_scale_down_in_a_loop_whose_scale_up_failed() -> None:
    """CA: a loop whose scale-up failed ends there; scale-down waits for the next loop."""
    w = idle_pair()
    wide = w.group("h", 0, 10, cpu="8", memory="32Gi")
    wide.fail_increase = "QUOTA_EXCEEDED"
    w.run()
    w.pods(pending("wide", cpu="6"))
    failed = w.run(PAST_UNNEEDED)
    assert wide.increases == [1]
    assert failed.scale_down.deletions == ()
    assert "g-2" in w.alive()


def test_soft_taint_follows_the_unneeded_state() -> None:
    """CA: unneeded nodes carry DeletionCandidateOfClusterAutoscaler (PreferNoSchedule);
    the taint goes when the node is needed again."""
    w = idle_pair()
    w.run()
    taints = w.cluster.nodes["g-2"].taints
    assert [(t.key, t.effect) for t in taints] == [
        ("DeletionCandidateOfClusterAutoscaler", "PreferNoSchedule")
    ]
    w.pods(pod("burst", "g-2", cpu="3"))
    w.run(MIN)
    assert w.cluster.nodes["g-2"].taints == ()


def test_soft_taint_is_kept_up_in_cooldown_too() -> None:
    """CA's RunOnce updates the soft taints in cooldown as well (`updateSoftDeletionTaints`
    in the cooldown branch): new pods are steered off a node unneeded after a scale-up,
    though it cannot be removed yet."""
    w = idle_pair()
    w.autoscaler.last_scale_up = w.clock.now()
    result = w.run()
    assert result.scale_down.cooldown_reason == "--scale-down-delay-after-add"
    assert [(t.key, t.effect) for t in w.cluster.nodes["g-2"].taints] == [
        ("DeletionCandidateOfClusterAutoscaler", "PreferNoSchedule")
    ]


def test_nodes_outside_node_groups_are_never_removed() -> None:
    """CA: a node no node group owns is NotAutoscaled and stays, however idle."""
    from clusterscaler.simulator.builders import make_node

    w = idle_pair()
    w.cluster.add_node(make_node("static-1").with_(creation_time=T0 - timedelta(days=1)))
    results = w.settle(loops=3)
    assert "static-1" in w.alive()
    assert reason_of(results[-1], "static-1") is UnremovableReason.NOT_AUTOSCALED


def test_booting_node_is_not_a_scale_down_candidate() -> None:
    """CA: a node that registered but has not become Ready within --max-node-startup-time
    is upcoming capacity, not an unneeded node; it can only become unneeded as an unready
    node once the startup time has passed."""
    w = idle_pair()
    g = w.cloud.groups["g"]
    w.run()
    w.run(PAST_UNNEEDED)  # g-2 (empty) goes
    g.increase_size(1)
    (booting,) = g.register()
    w.set_node(booting.name, ready=False)
    for _ in range(3):
        result = w.run(5 * MIN)
        assert booting.name not in unneeded_names(result)
    w.run(10 * MIN)  # 25 minutes after registering
    assert booting.name in w.alive()


def test_nodes_being_deleted_do_not_count_towards_the_minimums() -> None:
    """CA: with --cores-total=8:..., three 4-core nodes of which one is already being
    deleted leave 8 cores: no further node may go."""
    from clusterscaler.model import Taint

    w = World(cores_total=MinMax(8, 1000))
    w.group("g", 0, 10, nodes=3)
    w.run()
    stamp = str(int(w.clock.now().timestamp()))
    w.set_node("g-3", taints=(Taint("ToBeDeletedByClusterAutoscaler", stamp),))
    result = w.run(PAST_UNNEEDED)
    assert w.deleted() == []
    assert reason_of(result, "g-1") is UnremovableReason.MINIMAL_RESOURCE_LIMIT_EXCEEDED


def test_parallelism_budget_spreads_deletions_over_loops() -> None:
    """CA: --max-scale-down-parallelism caps the deletions started in one loop; the rest
    wait for a later loop."""
    w = World(max_scale_down_parallelism=2)
    w.group("g", 0, 10, nodes=5)
    w.run()
    w.run(PAST_UNNEEDED)
    assert len(w.deleted()) == 2
    w.run(MIN)
    assert len(w.deleted()) == 4


def test_gpu_minimum_total_keeps_gpu_nodes() -> None:
    """CA: --gpu-total=<type>:<min>:<max> keeps at least <min> GPUs of that type."""
    from clusterscaler.framework.options import GpuLimit
    from safetykit import GPU_LABEL

    w = World(gpu_total=[GpuLimit("a100", 2, 10)])
    w.group("gpu", 0, 10, nodes=3, gpus=1, labels={GPU_LABEL: "a100"})
    w.settle(loops=3)
    assert len(w.deleted()) == 1


def test_gpu_node_is_judged_by_gpu_utilization() -> None:
    """CA: a GPU node's utilization is its GPU utilization: busy CPUs do not keep an idle
    GPU node, whose pods go to a CPU node with room."""
    from safetykit import GPU_LABEL

    w = World()
    w.group("cpu", 0, 10, nodes=1, cpu="8", memory="32Gi")
    w.group("gpu", 0, 10, nodes=1, gpus=2, labels={GPU_LABEL: "a100"})
    w.pods(pod("cpuhog", "gpu-1", cpu="3"), pod("anchor", "cpu-1", cpu="4500m"))
    first = w.run()
    assert "gpu-1" in unneeded_names(first)
    w.run(PAST_UNNEEDED)
    assert w.deleted() == ["gpu-1"]
    assert w.cluster.evicted == ["default/cpuhog"]


def test_unregistered_cleanup_and_scale_down_never_undercut_min_size() -> None:
    """CA: removing an instance that never registered and removing unneeded nodes in the
    same loop both count against the group's min size (CA reads the target size after the
    cleanup)."""
    w = World()
    g = w.group("g", 2, 10, nodes=2)
    g.increase_size(1)  # requested before this autoscaler started; it never registers
    w.run()
    result = w.run(16 * MIN)
    assert [c.node for c in result.cleanups] == ["safety://g-3"]
    assert result.scale_down.deletions == ()
    assert g.target == 2 and len(w.alive()) == 2


def test_pending_pod_claims_an_unneeded_node_which_then_stays() -> None:
    """CA: an unneeded node still takes pending pods (its DeletionCandidate taint is only
    PreferNoSchedule): no scale-up is made for them, and the node they need is kept."""
    w = idle_pair()
    w.run()
    w.run(9 * MIN)
    w.pods(pending("soon", cpu="1600m"))
    result = w.run(2 * MIN)
    assert result.scale_up.decisions == ()
    assert w.deleted() == []
    assert reason_of(result, "g-2") is UnremovableReason.NO_PLACE_TO_MOVE_PODS


def test_delay_after_delete_spaces_deletions() -> None:
    """CA: after a deletion, scale-down waits --scale-down-delay-after-delete."""
    w = World(scale_down_delay_after_delete=timedelta(minutes=5), max_scale_down_parallelism=1)
    w.group("g", 0, 10, nodes=3)
    w.run()
    w.run(PAST_UNNEEDED)
    assert len(w.deleted()) == 1
    waiting = w.run(4 * MIN)
    assert waiting.scale_down.cooldown_reason == "--scale-down-delay-after-delete"
    assert len(w.deleted()) == 1
    w.run(2 * MIN)
    assert len(w.deleted()) == 2


@pytest.mark.parametrize(
    ("cpu", "threshold", "unneeded"),
    [("2", None, False), ("1990m", None, True), ("2", 0.6, True), ("1", 0.2, False)],
    ids=["exactly-at-threshold", "just-below", "group-threshold-raised", "group-threshold-lowered"],
)
def test_utilization_threshold_boundary(cpu: str, threshold: float | None, unneeded: bool) -> None:
    """CA: a node is underutilized only when max(cpu, memory) requests / allocatable is
    strictly below --scale-down-utilization-threshold (0.5) or the group's own value."""
    w = World()
    w.group("big", 0, 10, nodes=1, cpu="16", memory="64Gi")
    g = w.group("g", 0, 10, nodes=1)
    g.options = NodeGroupOptions(scale_down_utilization_threshold=threshold)
    w.pods(pod("anchor", "big-1", cpu="9"), pod("load", "g-1", cpu=cpu, memory="1Mi"))
    result = w.run()
    assert ("g-1" in unneeded_names(result)) is unneeded
    if not unneeded:
        assert reason_of(result, "g-1") is UnremovableReason.NOT_UNDERUTILIZED
