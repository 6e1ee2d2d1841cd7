"""Cluster Autoscaler's events for scale-up failures, cluster health, limits and upkeep,
derived from what the real loop returns (over FakeCloud), with CA's objects and words."""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.interfaces.cloudprovider import InstanceErrorClass, InstanceErrorInfo
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT
from clusterscaler.model import Taint
from clusterscaler.report import events as ev
from clusterscaler.report.events import ObjectRef, events_for_result
from loopkit import Harness, pending_pod

STATUS = ObjectRef.config_map("kube-system", "cluster-autoscaler-status")


def _events(result: object) -> list[tuple[str, str, str, str]]:
    return [
        (str(e.involved), e.type, e.reason, e.message)
        for e in events_for_result(result, STATUS)  # type: ignore[arg-type]
    ]


def test_refused_increase_is_announced_then_failed_to_scale_up_group() -> None:
    h = Harness()
    g = h.provider.add_group("g", max_size=5)
    g.fail_increase = "quota exceeded"
    h.add_pods([pending_pod("p1", cpu="3")])
    result = h.run()
    cm = "ConfigMap/kube-system/cluster-autoscaler-status"
    assert (
        cm,
        "Normal",
        ev.SCALED_UP_GROUP,
        "Scale-up: setting group g size to 1 instead of 0 (max: 5)",
    ) in _events(result)
    assert (
        cm,
        "Warning",
        ev.FAILED_TO_SCALE_UP_GROUP,
        "Scale-up failed for group g: node group g: quota exceeded",
    ) in _events(result)
    [failure] = result.scale_up_failures
    assert (failure.reason, failure.nodes) == ("cloudProviderError", 1)


def test_instances_failing_to_create_are_scale_up_failed_once() -> None:
    h = Harness()
    g = h.provider.add_group("g", max_size=5)
    g.create_error = InstanceErrorInfo(InstanceErrorClass.OUT_OF_RESOURCES, "STOCKOUT", "no room")
    h.add_pods([pending_pod("p1", cpu="3"), pending_pod("p2", cpu="3")])
    h.run()
    failed = h.run(timedelta(seconds=10))
    expected = (
        "ConfigMap/kube-system/cluster-autoscaler-status",
        "Warning",
        ev.SCALE_UP_FAILED,
        "Failed adding 2 nodes to group g due to OutOfResources.STOCKOUT; source errors: no room",
    )
    assert expected in _events(failed)
    # The same instances are not reported again.
    later = h.run(timedelta(seconds=10))
    assert all(e[2] != ev.SCALE_UP_FAILED for e in _events(later))


def test_nodes_not_registering_in_time_are_scale_up_timed_out() -> None:
    h = Harness()
    h.provider.add_group("g", max_size=5)
    h.add_pods([pending_pod("p1", cpu="3")])
    h.run()
    timed_out = h.run(timedelta(minutes=15, seconds=1))
    assert (
        "ConfigMap/kube-system/cluster-autoscaler-status",
        "Warning",
        ev.SCALE_UP_TIMED_OUT,
        "Nodes added to group g failed to register within 15m1s",
    ) in _events(timed_out)
    [failure] = timed_out.scale_up_failures
    assert (failure.reason, failure.nodes) == ("timeout", 1)


def test_timed_out_scale_up_whose_target_cannot_be_decreased_is_failed_to_revert() -> None:
    h = Harness()
    g = h.provider.add_group("g", max_size=5)
    # The cloud never starts the instance: the requested capacity stays in the target.
    g.lists_requested = False
    h.add_pods([pending_pod("p1", cpu="3")])
    h.run()
    g.fail_decrease = "the group is being updated"
    timed_out = h.run(timedelta(minutes=15, seconds=1))
    assert ("decrease_target_size", -1) in g.calls
    assert g.target == 1
    events = _events(timed_out)
    expected = (
        "ConfigMap/kube-system/cluster-autoscaler-status",
        "Warning",
        ev.FAILED_TO_REVERT_SCALE_UP,
        "Failed to revert scale-up of group g after it timed out: "
        "node group g: the group is being updated",
    )
    assert expected in events
    # Reported after the timeout it follows.
    reasons = [e[2] for e in events]
    assert reasons.index(ev.SCALE_UP_TIMED_OUT) < reasons.index(ev.FAILED_TO_REVERT_SCALE_UP)
    [revert] = timed_out.failed_reverts
    assert (revert.node_group, revert.delta) == ("g", -1)
    assert timed_out.to_dict()["failed_reverts"][0]["node_group"] == "g"
    # Reported once: the next loop does not repeat it.
    assert all(e[2] != ev.FAILED_TO_REVERT_SCALE_UP for e in _events(h.run(timedelta(seconds=10))))


def test_timed_out_scale_up_reverted_is_no_failed_to_revert() -> None:
    h = Harness()
    g = h.provider.add_group("g", max_size=5)
    g.lists_requested = False
    h.add_pods([pending_pod("p1", cpu="3")])
    h.run()
    timed_out = h.run(timedelta(minutes=15, seconds=1))
    assert g.target == 0
    assert timed_out.failed_reverts == ()
    assert all(e[2] != ev.FAILED_TO_REVERT_SCALE_UP for e in _events(timed_out))


def test_unhealthy_cluster_is_cluster_unhealthy() -> None:
    h = Harness()
    h.provider.add_group("g", max_size=10, nodes=4, ready=False)
    result = h.run(timedelta(hours=1))
    assert result.halted
    assert (
        "ConfigMap/kube-system/cluster-autoscaler-status",
        "Warning",
        ev.CLUSTER_UNHEALTHY,
        "Cluster is unhealthy",
    ) in _events(result)


def test_pending_pods_at_max_nodes_total_are_max_nodes_total_reached() -> None:
    h = Harness(max_nodes_total=2)
    h.provider.add_group("small", max_size=10, nodes=2, cpu="2")
    h.provider.add_group("big", max_size=10)
    h.add_pods([pending_pod("p1", cpu="3")])
    result = h.run()
    assert not result.scale_up.decisions
    assert (
        "ConfigMap/kube-system/cluster-autoscaler-status",
        "Warning",
        ev.MAX_NODES_TOTAL_REACHED,
        "Max total nodes in cluster reached: 2",
    ) in _events(result)
    # Below the limit, no such event.
    h2 = Harness(max_nodes_total=5)
    h2.provider.add_group("small", max_size=10, nodes=2, cpu="2")
    h2.provider.add_group("big", max_size=10)
    h2.add_pods([pending_pod("p1", cpu="3")])
    assert all(e[2] != ev.MAX_NODES_TOTAL_REACHED for e in _events(h2.run()))


def test_stale_to_be_deleted_taint_removed_is_cluster_autoscaler_cleanup() -> None:
    h = Harness()
    h.provider.add_group("g", max_size=5, nodes=2)
    node_name = sorted(h.cluster.nodes)[0]
    node = h.cluster.nodes[node_name]
    h.cluster.add_node(
        node.with_(taints=(*node.taints, Taint(TO_BE_DELETED_TAINT, "1", "NoSchedule")))
    )
    result = h.run()
    assert (
        f"Node/{node_name}",
        "Normal",
        ev.CLUSTER_AUTOSCALER_CLEANUP,
        f"removed {TO_BE_DELETED_TAINT} taint from node {node_name}",
    ) in _events(result)
    assert all(t.key != TO_BE_DELETED_TAINT for t in h.cluster.nodes[node_name].taints)


def test_long_unregistered_instance_removed_is_delete_unregistered() -> None:
    h = Harness()
    h.provider.add_group("g", max_size=5)
    h.add_pods([pending_pod("p1", cpu="3")])
    h.run()
    # The requested instance never registers: after --max-node-provision-time it is
    # removed as unregistered.
    results = [h.run(timedelta(minutes=8)) for _ in range(3)]
    removed = [r for r in results if r.cleanups]
    assert removed, [r.cleanups for r in results]
    [deletion] = removed[0].cleanups
    assert (
        "ConfigMap/kube-system/cluster-autoscaler-status",
        "Normal",
        ev.DELETE_UNREGISTERED,
        f"Removed unregistered node {deletion.node}",
    ) in _events(removed[0])
