from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from clusterscaler.framework.clusteractions import EvictionError
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.interfaces.podfilter import BlockingPodReason
from clusterscaler.loop.decisions import (
    DeletionKind,
    ScaleDownStatus,
    UnremovableReason,
)
from clusterscaler.loop.taints import DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT
from clusterscaler.model import LabelSelector, OwnerRef, Pod, PodDisruptionBudget, Taint
from loopkit import Harness, running_pod

ELEVEN_MINUTES = timedelta(minutes=11)


def ds_owner() -> OwnerRef:
    return OwnerRef("DaemonSet", "agent", "uid-ds-agent", True, "apps/v1")


def two_node_cluster(**options: object) -> Harness:
    """g-1 is busy, g-2 carries one small movable pod (and a DaemonSet pod)."""
    h = Harness(**options)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m", memory="1Gi")])
    h.add_pods([running_pod("small", "g-2", cpu="200m")])
    return h


def unremovable(result, node: str):
    return next(u for u in result.scale_down.unremovable if u.node == node)


def test_empty_node_is_deleted_after_unneeded_time_without_drain() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.add_pods([running_pod("agent-x", "g-2", owner=ds_owner())])
    first = h.run()
    assert [u.node for u in first.scale_down.unneeded] == ["g-2"]
    assert first.scale_down.unneeded[0].empty
    assert unremovable(first, "g-2").reason is UnremovableReason.NOT_UNNEEDED_LONG_ENOUGH
    # Unneeded nodes carry the soft taint.
    assert any(t.key == DELETION_CANDIDATE_TAINT for t in h.cluster.nodes["g-2"].taints)
    second = h.run(ELEVEN_MINUTES)
    assert second.scale_down.status is ScaleDownStatus.NODE_DELETE_STARTED
    (deletion,) = second.scale_down.deletions
    assert (deletion.node, deletion.kind, deletion.ok) == ("g-2", DeletionKind.EMPTY, True)
    assert "g-2" not in h.cluster.nodes
    assert g.target == 1


def test_underutilized_node_is_drained_and_pods_evicted() -> None:
    h = two_node_cluster()
    h.run()
    result = h.run(ELEVEN_MINUTES)
    (deletion,) = result.scale_down.deletions
    assert deletion.kind is DeletionKind.DRAIN and deletion.ok
    assert deletion.evicted_pods == ("default/small",)
    assert h.cluster.evicted == ["default/small"]
    assert "g-2" not in h.cluster.nodes


def test_unneeded_timer_restarts_when_node_becomes_needed() -> None:
    h = two_node_cluster()
    h.run()
    # g-2 fills up: it is no longer unneeded, so its timer is dropped.
    h.add_pods([running_pod("filler", "g-2", cpu="3")])
    assert h.run(timedelta(minutes=5)).scale_down.unneeded == ()
    del h.cluster.pods["default/filler"]
    h.run(timedelta(minutes=1))
    result = h.run(timedelta(minutes=6))
    assert result.scale_down.deletions == ()
    assert unremovable(result, "g-2").reason is UnremovableReason.NOT_UNNEEDED_LONG_ENOUGH


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (
            lambda h: h.cluster.add_node(
                h.cluster.nodes["g-2"].with_(
                    annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
                )
            ),
            UnremovableReason.SCALE_DOWN_DISABLED_ANNOTATION,
        ),
        (
            lambda h: h.add_pods([running_pod("filler", "g-2", cpu="2")]),
            UnremovableReason.NOT_UNDERUTILIZED,
        ),
        (
            lambda h: h.add_pods([running_pod("bare", "g-2", owner=None)]),
            UnremovableReason.BLOCKED_BY_POD,
        ),
        (
            lambda h: h.add_pods([running_pod("wide", "g-2", cpu="1600m")]),
            UnremovableReason.NO_PLACE_TO_MOVE_PODS,
        ),
        (
            lambda h: h.cluster.add_node(
                h.cluster.nodes["g-2"].with_(taints=(Taint(TO_BE_DELETED_TAINT, "1"),))
            ),
            UnremovableReason.CURRENTLY_BEING_DELETED,
        ),
    ],
    ids=["disabled-annotation", "utilized", "blocked-by-pod", "no-place", "being-deleted"],
)
def test_unremovable_reasons(setup, reason) -> None:
    h = two_node_cluster()
    h.autoscaler.upkeep.stale_taint_nodes = set()  # keep the taint set up by the case
    setup(h)
    result = h.run()
    assert unremovable(result, "g-2").reason is reason


def test_min_size_keeps_nodes() -> None:
    h = Harness()
    h.provider.add_group("g", 2, 10, nodes=2)
    h.run()
    result = h.run(ELEVEN_MINUTES)
    assert result.scale_down.deletions == ()
    assert {u.reason for u in result.scale_down.unremovable} == {
        UnremovableReason.NODE_GROUP_MIN_SIZE_REACHED
    }


def test_min_size_counts_nodes_chosen_in_the_same_loop() -> None:
    h = Harness()
    g = h.provider.add_group("g", 1, 10, nodes=3)
    h.run()
    result = h.run(ELEVEN_MINUTES)
    assert len([d for d in result.scale_down.deletions if d.ok]) == 2
    assert g.target == 1


def test_cores_minimum_blocks_removal() -> None:
    from clusterscaler.framework.options import MinMax

    h = Harness(cores_total=MinMax(8, 100))
    h.provider.add_group("g", 0, 10, nodes=2)
    h.run()
    result = h.run(ELEVEN_MINUTES)
    assert result.scale_down.deletions == ()
    assert UnremovableReason.MINIMAL_RESOURCE_LIMIT_EXCEEDED in {
        u.reason for u in result.scale_down.unremovable
    }


def test_pdb_without_disruptions_blocks() -> None:
    h = two_node_cluster()
    h.cluster.pdbs["default/web"] = PodDisruptionBudget(
        "default", "web", selector=LabelSelector((("app", "web"),)), disruptions_allowed=0
    )
    h.cluster.add_pod(running_pod("small", "g-2", cpu="200m", labels={"app": "web"}))
    result = h.run()
    u = unremovable(result, "g-2")
    assert u.reason is UnremovableReason.BLOCKED_BY_POD
    assert u.blocking_pod is not None
    assert u.blocking_pod.reason is BlockingPodReason.NOT_ENOUGH_PDB


def test_pdb_budget_is_consumed_across_nodes() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=3)
    h.add_pods([running_pod("big", "g-1", cpu="1")])
    h.cluster.pdbs["default/web"] = PodDisruptionBudget(
        "default", "web", selector=LabelSelector((("app", "web"),)), disruptions_allowed=1
    )
    h.add_pods([running_pod("w2", "g-2", labels={"app": "web"})])
    h.add_pods([running_pod("w3", "g-3", labels={"app": "web"})])
    result = h.run()
    # One web pod may move; the other node then has no disruption left to spend.
    assert [u.node for u in result.scale_down.unneeded] == ["g-2"]
    u = unremovable(result, "g-3")
    assert u.blocking_pod is not None
    assert u.blocking_pod.reason is BlockingPodReason.NOT_ENOUGH_PDB


def test_scale_down_waits_after_scale_up() -> None:
    from loopkit import pending_pod

    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=2, cpu="2")
    h.provider.add_group("h", 0, 10, nodes=0, cpu="8")
    h.add_pods([pending_pod("p", cpu="6")])
    first = h.run()
    assert first.scale_up.decisions
    assert first.scale_down.status is ScaleDownStatus.IN_COOLDOWN
    later = h.run(timedelta(minutes=5))
    assert later.scale_down.cooldown_reason == "--scale-down-delay-after-add"
    assert later.scale_down.deletions == ()


def test_drain_parallelism_budget() -> None:
    h = Harness(max_drain_parallelism=1)
    h.provider.add_group("g", 0, 10, nodes=4)
    h.add_pods([running_pod("big", "g-1", cpu="1")])
    for i in (2, 3, 4):
        h.add_pods([running_pod(f"s{i}", f"g-{i}")])
    h.run()
    result = h.run(ELEVEN_MINUTES)
    drained = [d for d in result.scale_down.deletions if d.kind is DeletionKind.DRAIN]
    assert len(drained) == 1


def test_scale_down_parallelism_budget_counts_empty_nodes() -> None:
    h = Harness(max_scale_down_parallelism=2)
    h.provider.add_group("g", 0, 10, nodes=5)
    h.run()
    result = h.run(ELEVEN_MINUTES)
    assert len(result.scale_down.deletions) == 2


def test_failed_deletion_rolls_back_and_delays_node() -> None:
    h = two_node_cluster()
    h.provider.groups["g"].fail_delete = "API error"
    h.run()
    result = h.run(ELEVEN_MINUTES)
    (deletion,) = result.scale_down.deletions
    assert not deletion.ok and "API error" in deletion.error
    node = h.cluster.nodes["g-2"]
    assert not any(t.key == TO_BE_DELETED_TAINT for t in node.taints)
    assert not node.unschedulable
    assert result.scale_down.status is ScaleDownStatus.ERROR
    nxt = h.run(timedelta(seconds=10))
    assert nxt.scale_down.cooldown_reason == "--scale-down-delay-after-failure"
    assert unremovable(nxt, "g-2").reason is UnremovableReason.RECENTLY_UNREMOVABLE


class RefusingCluster(InMemoryCluster):
    """An API server that answers 429 to evictions once `refuse` is set, as it does when
    another disruption spent the PDB between planning and eviction."""

    refuse = False

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        if self.refuse:
            raise EvictionError(pod.key, "would violate the disruption budget", retryable=True)
        super().evict(pod, grace_period_seconds)


def test_eviction_refused_fails_after_max_pod_eviction_time_and_rolls_back() -> None:
    h = Harness(cluster_class=RefusingCluster)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m", memory="1Gi")])
    h.add_pods([running_pod("small", "g-2", cpu="200m")])
    h.run()
    assert isinstance(h.cluster, RefusingCluster)
    h.cluster.refuse = True
    h.clock.advance(ELEVEN_MINUTES)
    started = h.clock.now()
    result = h.autoscaler.run_once(started)
    (deletion,) = result.scale_down.deletions
    assert not deletion.ok
    assert "--max-pod-eviction-time" in deletion.error
    # What CA's events name: the step, the pod still there, and that it was a drain.
    assert (deletion.failed_step, deletion.failed_pods, deletion.drain) == (
        "evict",
        ("default/small",),
        True,
    )
    # Retried every 10s for up to --max-pod-eviction-time (2m) on the virtual clock.
    assert timedelta(minutes=1, seconds=50) <= h.clock.now() - started <= timedelta(minutes=2)
    node = h.cluster.nodes["g-2"]
    assert not any(t.key == TO_BE_DELETED_TAINT for t in node.taints)
    assert not node.unschedulable
    assert h.autoscaler.planner.recheck.recently_unremovable("g-2", h.clock.now())


def test_stale_deletion_taints_are_removed_on_start() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=1)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.cluster.add_node(
        h.cluster.nodes["g-1"].with_(
            taints=(Taint(TO_BE_DELETED_TAINT, "123"),), unschedulable=True
        )
    )
    h.run()
    node = h.cluster.nodes["g-1"]
    assert node.taints == () and not node.unschedulable


def test_unready_node_removed_after_unready_time() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.cluster.add_node(h.cluster.nodes["g-2"].with_(ready=False))
    h.run()
    assert h.run(ELEVEN_MINUTES).scale_down.deletions == ()
    result = h.run(timedelta(minutes=10))
    (deletion,) = result.scale_down.deletions
    assert deletion.kind is DeletionKind.UNREADY and deletion.ok


def test_unready_scale_down_disabled() -> None:
    h = Harness(scale_down_unready_enabled=False)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.cluster.add_node(h.cluster.nodes["g-2"].with_(ready=False))
    result = h.run()
    assert unremovable(result, "g-2").reason is UnremovableReason.SCALE_DOWN_UNREADY_DISABLED


def test_capacity_awaited_by_pending_pods_is_not_scaled_down() -> None:
    from loopkit import pending_pod

    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="3500m")])
    h.add_pods([pending_pod("soon", cpu="3")])
    result = h.run()
    assert result.scale_up.decisions == ()
    assert result.scale_down.unneeded == ()
    assert unremovable(result, "g-2").reason is UnremovableReason.NOT_UNDERUTILIZED


def test_loop_result_is_json_ready() -> None:
    import json

    h = two_node_cluster()
    h.run()
    doc = h.run(ELEVEN_MINUTES).to_dict()
    text = json.dumps(doc)
    assert doc["scale_down"]["deletions"][0]["kind"] == "drain"
    assert doc["scale_down"]["status"] == "NodeDeleteStarted"
    assert "NotUnneededLongEnough" not in text or doc["scale_down"]["unremovable"]


def test_unremovable_node_is_rechecked_at_once_when_its_pods_change() -> None:
    h = two_node_cluster()
    h.add_pods([running_pod("wide", "g-2", cpu="1600m")])
    assert unremovable(h.run(), "g-2").reason is UnremovableReason.NO_PLACE_TO_MOVE_PODS
    assert unremovable(h.run(timedelta(seconds=10)), "g-2").reason is (
        UnremovableReason.RECENTLY_UNREMOVABLE
    )
    del h.cluster.pods["default/wide"]
    assert [u.node for u in h.run(timedelta(seconds=10)).scale_down.unneeded] == ["g-2"]


def test_empty_nodes_wait_delete_delay_after_taint() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.run()
    h.clock.advance(ELEVEN_MINUTES)
    started = h.clock.now()
    result = h.autoscaler.run_once(started)
    assert [d.node for d in result.scale_down.deletions if d.ok] == ["g-2"]
    assert h.clock.now() - started == timedelta(seconds=5)


class AnnotationDroppingCluster(InMemoryCluster):
    """Another controller removes its delay-deletion annotation from g-2 at `remove_at`."""

    clock: Any = None
    remove_at: datetime | None = None

    def snapshot(self):  # type: ignore[no-untyped-def]
        node = self.nodes.get("g-2")
        if node is not None and self.remove_at is not None and self.clock.now() >= self.remove_at:
            self.nodes["g-2"] = node.with_(annotations={})
        return super().snapshot()


@pytest.mark.parametrize(
    ("cluster_class", "waited"),
    [
        # 5s delay after taint, then polls every 5s: removed at 12s, seen at 15s.
        (AnnotationDroppingCluster, timedelta(seconds=15)),
        # Never removed: deleted anyway after --node-deletion-delay-timeout (2m).
        (InMemoryCluster, timedelta(minutes=2, seconds=5)),
    ],
    ids=["annotation-removed", "timeout"],
)
def test_delay_deletion_annotation_holds_the_deletion(cluster_class, waited) -> None:
    h = Harness(cluster_class=cluster_class)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.cluster.add_node(
        h.cluster.nodes["g-2"].with_(
            annotations={"delay-deletion.cluster-autoscaler.kubernetes.io/backup": "true"}
        )
    )
    h.run()
    h.clock.advance(ELEVEN_MINUTES)
    started = h.clock.now()
    if isinstance(h.cluster, AnnotationDroppingCluster):
        h.cluster.clock = h.clock
        h.cluster.remove_at = started + timedelta(seconds=12)
    result = h.autoscaler.run_once(started)
    assert [d.node for d in result.scale_down.deletions if d.ok] == ["g-2"]
    assert h.clock.now() - started == waited


@pytest.mark.parametrize(
    ("node_pods", "options", "evicted"),
    [
        ("empty", {}, []),
        ("empty", {"daemonset_eviction_for_empty_nodes": True}, ["default/agent-2"]),
        ("busy", {}, ["default/small", "default/agent-2"]),
        ("busy", {"daemonset_eviction_for_occupied_nodes": False}, ["default/small"]),
    ],
    ids=["empty-keeps-ds", "empty-evicts-ds", "drain-evicts-ds", "drain-keeps-ds"],
)
def test_daemonset_eviction_flags(node_pods, options, evicted) -> None:
    h = Harness(**options)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m")])
    h.add_pods([running_pod("agent-2", "g-2", owner=ds_owner())])
    if node_pods == "busy":
        h.add_pods([running_pod("small", "g-2", cpu="200m")])
    h.run()
    (deletion,) = h.run(ELEVEN_MINUTES).scale_down.deletions
    assert deletion.ok
    assert list(deletion.evicted_pods) == evicted


def test_without_cordon_flag_nodes_are_only_tainted() -> None:
    class Recording(InMemoryCluster):
        cordoned: list[str] = []

        def set_unschedulable(self, node_name: str, unschedulable: bool) -> None:
            self.cordoned.append(node_name)
            super().set_unschedulable(node_name, unschedulable)

    h = Harness(cluster_class=Recording, cordon_node_before_terminating=False)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.run()
    assert h.run(ELEVEN_MINUTES).scale_down.deletions[0].ok
    assert isinstance(h.cluster, Recording) and h.cluster.cordoned == []


def test_parallel_drains_within_budget() -> None:
    h = Harness(max_drain_parallelism=3, max_scale_down_parallelism=3)
    h.provider.add_group("g", 0, 10, nodes=5)
    h.add_pods([running_pod("big", "g-1", cpu="1")])
    for i in (2, 3, 4, 5):
        h.add_pods([running_pod(f"s{i}", f"g-{i}")])
    h.run()
    result = h.run(ELEVEN_MINUTES)
    drained = [d for d in result.scale_down.deletions if d.kind is DeletionKind.DRAIN and d.ok]
    assert len(drained) == 3
    assert len(h.cluster.nodes) == 2


def test_non_empty_candidates_count_limits_unneeded_nodes() -> None:
    h = Harness(scale_down_non_empty_candidates_count=2)
    h.provider.add_group("g", 0, 10, nodes=6)
    h.add_pods([running_pod("big", "g-1", cpu="1")])
    for i in range(2, 7):
        h.add_pods([running_pod(f"s{i}", f"g-{i}")])
    result = h.run()
    assert len(result.scale_down.unneeded) == 2
    limited = [
        u
        for u in result.scale_down.unremovable
        if u.reason is UnremovableReason.NOT_UNNEEDED_OTHER_REASON
    ]
    assert len(limited) == 4


def test_pending_pods_expected_on_a_drained_node_are_never_evicted() -> None:
    from loopkit import pending_pod

    h = Harness(scale_down_utilization_threshold=0.7)
    h.provider.add_group("a", 0, 10, nodes=1)
    h.provider.add_group("b", 0, 10, nodes=1, cpu="16", memory="64Gi")
    h.add_pods([running_pod("small", "a-1", cpu="200m")])
    h.add_pods([running_pod("big", "b-1", cpu="12")])
    # The scheduler is expected to put this pod on a-1 (first fit), which is then drained.
    h.add_pods([pending_pod("waiting", cpu="2500m")])
    first = h.run()
    assert first.scale_down.unneeded[0].destinations == {
        "default/small": "b-1",
        "default/waiting": "b-1",
    }
    result = h.run(ELEVEN_MINUTES)
    (deletion,) = result.scale_down.deletions
    assert deletion.ok and deletion.evicted_pods == ("default/small",)
    assert "default/waiting" in h.cluster.pods
    assert h.cluster.evicted == ["default/small"]


class BrokenApiCluster(InMemoryCluster):
    """An API server that fails evictions with a server error."""

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        raise RuntimeError("500 Internal Server Error")


def test_unexpected_api_error_rolls_back_the_node() -> None:
    h = Harness(cluster_class=BrokenApiCluster)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m", memory="1Gi")])
    h.add_pods([running_pod("small", "g-2", cpu="200m")])
    h.run()
    (deletion,) = h.run(ELEVEN_MINUTES).scale_down.deletions
    assert not deletion.ok and "500 Internal Server Error" in deletion.error
    node = h.cluster.nodes["g-2"]
    assert not any(t.key == TO_BE_DELETED_TAINT for t in node.taints)
    assert not node.unschedulable


def test_scale_down_waits_after_delete() -> None:
    h = Harness(scan_interval=timedelta(seconds=30))
    h.provider.add_group("g", 0, 10, nodes=3)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.run()
    assert h.run(ELEVEN_MINUTES).scale_down.deletions
    # --scale-down-delay-after-delete defaults to the scan interval.
    soon = h.run(timedelta(seconds=5))
    assert soon.scale_down.cooldown_reason == "--scale-down-delay-after-delete"
    assert h.run(timedelta(seconds=30)).scale_down.cooldown_reason == ""


@pytest.mark.parametrize(
    ("threshold", "removable"), [(0.5, False), (0.6, True)], ids=["at-threshold", "below"]
)
def test_gpu_nodes_use_the_gpu_threshold(threshold, removable) -> None:
    from loopkit import GPU_LABEL

    h = Harness(scale_down_gpu_utilization_threshold=threshold)
    h.provider.add_group("cpu", 0, 10, nodes=1, cpu="16", memory="64Gi")
    h.provider.add_group(
        "gpu", 0, 10, nodes=2, labels={GPU_LABEL: "t4"}, extended={"nvidia.com/gpu": 2}
    )
    h.add_pods([running_pod("cuda", "gpu-1", cpu="100m", extended={"nvidia.com/gpu": 1})])
    h.add_pods([running_pod("cuda2", "gpu-2", cpu="100m", extended={"nvidia.com/gpu": 1})])
    h.add_pods([running_pod("busy", "cpu-1", cpu="15")])
    result = h.run()
    reason = unremovable(result, "gpu-1").reason
    if removable:
        assert reason is not UnremovableReason.NOT_UNDERUTILIZED
    else:
        assert reason is UnremovableReason.NOT_UNDERUTILIZED


def test_group_options_override_unneeded_time_and_threshold() -> None:
    from clusterscaler.interfaces.cloudprovider import NodeGroupOptions

    h = Harness()
    h.provider.add_group(
        "g",
        0,
        10,
        nodes=2,
        options=NodeGroupOptions(
            scale_down_unneeded_time=timedelta(minutes=1), scale_down_utilization_threshold=0.7
        ),
    )
    h.add_pods([running_pod("big", "g-1", cpu="3900m")])
    h.add_pods([running_pod("mid", "g-2", cpu="2500m")])
    first = h.run()
    # 0.625 utilization: above the 0.5 flag, below the group's 0.7.
    assert unremovable(first, "g-2").reason is UnremovableReason.NO_PLACE_TO_MOVE_PODS
    h.cluster.pods["default/big"] = running_pod("big", "g-1", cpu="1")
    h.run(timedelta(minutes=6))
    result = h.run(timedelta(minutes=2))
    assert [d.node for d in result.scale_down.deletions if d.ok] == ["g-1"]
