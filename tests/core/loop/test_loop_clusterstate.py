from __future__ import annotations

from datetime import timedelta

import pytest
from clusterscaler.interfaces.cloudprovider import InstanceErrorClass, InstanceErrorInfo
from clusterscaler.loop.clusterstate import Backoff
from clusterscaler.loop.decisions import DeletionKind, NoScaleUpReason, ScaleUpStatus
from clusterscaler.model import NodeCondition, Taint
from loopkit import T0, Harness, pending_pod, running_pod


@pytest.mark.parametrize(
    ("total", "unready", "healthy"),
    [(10, 3, True), (10, 4, True), (10, 5, False), (4, 3, True), (100, 44, True), (100, 46, False)],
    ids=["ok-count", "under-percentage", "over-both", "small-cluster", "44pct", "46pct"],
)
def test_unready_nodes_halt_the_loop(total: int, unready: int, healthy: bool) -> None:
    h = Harness()
    h.provider.add_group("g", 0, 200, nodes=total)
    for i in range(1, unready + 1):
        h.cluster.add_node(h.cluster.nodes[f"g-{i}"].with_(ready=False))
    h.add_pods([pending_pod("p", cpu="3500m")])
    result = h.run()
    assert result.health.healthy is healthy
    assert bool(result.halted) is not healthy
    assert (result.scale_up.status is ScaleUpStatus.NOT_TRIED) is not healthy


def test_recently_created_unready_nodes_are_not_started_not_unready() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 20, nodes=6)
    for i in range(1, 6):
        node = h.cluster.nodes[f"g-{i}"]
        h.cluster.add_node(node.with_(ready=False, creation_time=T0 - timedelta(minutes=1)))
    result = h.run()
    assert result.health.healthy
    assert result.health.counts.not_started == 5


def test_group_with_mostly_unready_nodes_is_skipped_for_scale_up() -> None:
    h = Harness()
    h.provider.add_group("bad", 0, 20, nodes=4)
    h.provider.add_group("good", 0, 20, nodes=16)
    for i in range(1, 5):
        h.cluster.add_node(h.cluster.nodes[f"bad-{i}"].with_(ready=False))
    for i in range(1, 17):
        h.add_pods([running_pod(f"fill{i}", f"good-{i}", cpu="3500m")])
    h.add_pods([pending_pod("p", cpu="3")])
    result = h.run()
    assert result.health.healthy
    assert [d.node_group for d in result.scale_up.decisions] == ["good"]
    bad = next(s for s in result.node_groups if s.name == "bad")
    assert not bad.healthy


def test_scale_up_that_never_registers_backs_off_and_removes_instances() -> None:
    h = Harness()
    slow = h.provider.add_group("a-slow", 0, 10)
    other = h.provider.add_group("b-other", 0, 10, cpu="8")
    h.add_pods([pending_pod("p", cpu="3")])
    first = h.run()
    assert [d.node_group for d in first.scale_up.decisions] == ["a-slow"]
    result = h.run(timedelta(minutes=16))
    status = next(s for s in result.node_groups if s.name == "a-slow")
    assert status.backoff is not None and status.backoff.error_code == "timeout"
    assert [(c.kind, c.ok) for c in result.cleanups] == [(DeletionKind.UNREGISTERED, True)]
    assert slow.target == 0 and slow.instances == {}
    # The pod now goes to the other group.
    assert [d.node_group for d in result.scale_up.decisions] == ["b-other"]
    assert other.target == 1


def test_instance_creation_errors_back_off_and_shrink_the_group() -> None:
    h = Harness()
    g = h.provider.add_group("a-stockout", 0, 10)
    g.create_error = InstanceErrorInfo(
        InstanceErrorClass.OUT_OF_RESOURCES, "ZONE_RESOURCE_POOL_EXHAUSTED", "no capacity"
    )
    h.provider.add_group("b-fallback", 0, 10, cpu="8")
    h.add_pods([pending_pod("p", cpu="3")])
    h.run()
    assert g.target == 1
    result = h.run(timedelta(seconds=10))
    status = next(s for s in result.node_groups if s.name == "a-stockout")
    assert status.backoff is not None
    assert status.backoff.error_class == "OutOfResources"
    assert status.backoff.error_code == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert [c.kind for c in result.cleanups] == [DeletionKind.CREATE_ERROR]
    assert g.target == 0
    assert [d.node_group for d in result.scale_up.decisions] == ["b-fallback"]


def test_backoff_is_exponential_capped_and_resets() -> None:
    b = Backoff(timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=3))
    durations = []
    now = T0
    for _ in range(5):
        info = b.fail("g", now, error_class="Other", error_code="x")
        durations.append(info.until - now)
        assert b.active("g", now) is not None
        now = info.until
        assert b.active("g", now) is None
    assert [d.total_seconds() / 60 for d in durations] == [5, 10, 20, 30, 30]
    info = b.fail("g", now + timedelta(hours=3, seconds=1), error_class="Other", error_code="x")
    assert info.until - (now + timedelta(hours=3, seconds=1)) == timedelta(minutes=5)


def test_successful_scale_up_clears_the_request() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10)
    h.add_pods([pending_pod("p", cpu="3")])
    assert h.run().node_groups[0].scale_up_in_progress
    g.register()
    result = h.run(timedelta(minutes=1))
    assert not result.node_groups[0].scale_up_in_progress
    assert result.node_groups[0].backoff is None


def test_enforce_node_group_min_size() -> None:
    h = Harness(enforce_node_group_min_size=True)
    g = h.provider.add_group("g", 3, 10, nodes=1)
    result = h.run()
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 2)]
    assert g.target == 3


def test_scale_up_from_zero_disabled_without_ready_nodes() -> None:
    h = Harness(scale_up_from_zero=False)
    g = h.provider.add_group("g", 0, 10)
    h.add_pods([pending_pod("p")])
    result = h.run()
    assert g.target == 0
    (r,) = result.scale_up.pods_remaining["default/p"]
    assert r.reason is NoScaleUpReason.SCALE_UP_FROM_ZERO_DISABLED


def test_group_without_template_is_skipped() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10)
    g.template_error = "node group g: no instance type configured"
    h.add_pods([pending_pod("p")])
    result = h.run()
    (r,) = result.scale_up.pods_remaining["default/p"]
    assert r.reason is NoScaleUpReason.NO_TEMPLATE
    assert "no instance type" in r.detail


def test_scale_from_zero_template_includes_daemonset_pods() -> None:
    from clusterscaler.model import DaemonSet
    from clusterscaler.simulator.builders import make_pod

    h = Harness()
    h.cluster.daemonsets.append(
        DaemonSet("kube-system", "logs", "uid-logs", template=make_pod("logs", "1", "1Gi"))
    )
    g = h.provider.add_group("g", 0, 10, cpu="4")
    # 3.5 cpu fit an empty 4-cpu node, but not next to the 1-cpu DaemonSet pod.
    h.add_pods([pending_pod("p", cpu="3500m")])
    result = h.run()
    assert g.target == 0
    assert result.scale_up.status is ScaleUpStatus.NO_OPTIONS_AVAILABLE


def test_cpu_limit_rejects_scale_up() -> None:
    from clusterscaler.framework.options import MinMax

    h = Harness(cores_total=MinMax(0, 8))
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([pending_pod("p", cpu="3500m")])
    h.add_pods([running_pod("a", "g-1", cpu="3"), running_pod("b", "g-2", cpu="3")])
    result = h.run()
    assert result.scale_up.decisions == ()
    (r,) = result.scale_up.pods_remaining["default/p"]
    assert r.reason is NoScaleUpReason.CPU_LIMIT_REACHED


def test_backed_off_group_is_rejected_with_reason() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10)
    g.fail_increase = "quota exceeded"
    h.add_pods([pending_pod("p")])
    first = h.run()
    assert first.scale_up.status is ScaleUpStatus.ERROR
    assert "quota exceeded" in first.scale_up.error
    result = h.run(timedelta(seconds=10))
    (r,) = result.scale_up.pods_remaining["default/p"]
    assert r.reason is NoScaleUpReason.BACKED_OFF
    later = h.run(timedelta(minutes=5))
    assert g.calls.count(("increase_size", 1)) == 2
    assert later.scale_up.status is ScaleUpStatus.ERROR


def test_timed_out_scale_up_cancels_capacity_never_created() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10)
    g.lists_requested = False
    h.add_pods([pending_pod("p", cpu="3")])
    h.run()
    assert g.target == 1
    result = h.run(timedelta(minutes=16))
    assert ("decrease_target_size", -1) in g.calls
    assert g.target == 0
    assert result.node_groups[0].backoff is not None
    # Backed off: the still-pending pod does not ask this group again.
    h.run(timedelta(seconds=10))
    assert g.target == 0


@pytest.mark.parametrize(
    ("taint", "condition"),
    [
        ("node.kubernetes.io/not-ready", None),
        ("node.kubernetes.io/network-unavailable", None),
        ("node.kubernetes.io/disk-pressure", None),
        (None, "NetworkUnavailable"),
        (None, "DiskPressure"),
    ],
    ids=[
        "not-ready-taint",
        "network-unavailable-taint",
        "disk-pressure-taint",
        "network-unavailable",
        "disk-pressure",
    ],
)
def test_new_nodes_not_ready_yet_stay_upcoming_for_the_next_loop(
    taint: str | None, condition: str | None
) -> None:
    # The API server taints every new Node not-ready until the node lifecycle controller
    # sees it Ready, seconds later: a loop in between must count the nodes it asked for as
    # on their way, as CA's GetNodeReadiness does, not as ready nodes its pods do not fit.
    h = Harness()
    g = h.provider.add_group("g", 0, 20)
    h.add_pods([pending_pod(f"p{i}", cpu="3") for i in range(3)])
    first = h.run()
    assert [(d.node_group, d.delta) for d in first.scale_up.decisions] == [("g", 3)]
    for node in g.register():
        if taint is not None:
            node = node.with_(taints=(*node.taints, Taint(taint, "", "NoSchedule")))
        if condition is not None:
            node = node.with_(conditions=(*node.conditions, NodeCondition(condition, "True")))
        h.cluster.add_node(node)
    second = h.run(timedelta(seconds=1))
    assert second.scale_up.decisions == ()
    assert g.increases == [3]
    assert second.health.counts.not_started == 3
    assert second.health.counts.ready == 0
