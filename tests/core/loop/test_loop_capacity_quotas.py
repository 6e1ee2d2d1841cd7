"""CapacityQuotas (--capacity-quotas-enabled) in scale-up, as Cluster Autoscaler's
resource-quota tracker and scale-up orchestrator apply them: the tracker's arithmetic
(upstream's tracker tests), then whole loops."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.loop.decisions import NoScaleUpReason, ScaleUpStatus
from clusterscaler.loop.quotas import ExceededQuota, QuotaCheck, QuotaTracker, quota_usage
from clusterscaler.model import CapacityQuota, ClusterObjects, LabelSelector
from clusterscaler.report.events import ObjectRef, events_for_result
from clusterscaler.simulator.builders import make_node
from loopkit import GPU_LABEL, Harness, pending_pod, running_pod


def cq(name: str, selector: dict[str, str] | None = None, **limits: int) -> CapacityQuota:
    return CapacityQuota(
        name=name,
        selector=LabelSelector(tuple(sorted((selector or {}).items()))),
        limits=limits,
    )


NODE = make_node("n", cpu="1", memory="200", labels={"pool": "a"})


@pytest.mark.parametrize(
    ("quotas", "count", "expected"),
    [
        ([cq("q1", cpu=10, memory=1000, nodes=5)], 2, QuotaCheck(2)),
        (
            [cq("q1", cpu=1, memory=1000, nodes=5)],
            2,
            QuotaCheck(1, (ExceededQuota("CapacityQuota/q1", ("cpu",)),)),
        ),
        (
            [cq("q1", cpu=1, memory=300, nodes=5)],
            2,
            QuotaCheck(1, (ExceededQuota("CapacityQuota/q1", ("cpu", "memory")),)),
        ),
        (
            [cq("q1", cpu=1, memory=2000, nodes=5), cq("q2", cpu=10, memory=300, nodes=5)],
            2,
            QuotaCheck(
                1,
                (
                    ExceededQuota("CapacityQuota/q1", ("cpu",)),
                    ExceededQuota("CapacityQuota/q2", ("memory",)),
                ),
            ),
        ),
        (
            [cq("q1", cpu=1, memory=2000, nodes=5), cq("q2", {"pool": "b"}, cpu=10, memory=300)],
            2,
            QuotaCheck(1, (ExceededQuota("CapacityQuota/q1", ("cpu",)),)),
        ),
        ([cq("q1", {"pool": "b"}, cpu=1, memory=100, nodes=1)], 2, QuotaCheck(2)),
        # A resource the node does not have (a GPU type) limits nothing.
        ([cq("q1", cpu=4, memory=2000, **{"nvidia-tesla-t4": 0})], 2, QuotaCheck(2)),
        ([cq("q1", nodes=0)], 3, QuotaCheck(0, (ExceededQuota("CapacityQuota/q1", ("nodes",)),))),
        ([cq("q1", nodes=3)], 0, QuotaCheck(0)),
    ],
    ids=[
        "fits",
        "one-resource",
        "two-resources",
        "two-quotas",
        "one-of-two-applies",
        "no-quota-applies",
        "resource-not-on-node",
        "zero-nodes",
        "zero-delta",
    ],
)
def test_check(quotas: list[CapacityQuota], count: int, expected: QuotaCheck) -> None:
    assert QuotaTracker(quotas).check(NODE, count) == expected


def test_usage_counts_registered_and_upcoming_nodes_the_quota_covers() -> None:
    nodes = [
        make_node("a1", cpu="4", labels={"pool": "a"}),
        make_node("a2", cpu="3500m", labels={"pool": "a"}),  # 4 cores, rounded up as CA
        make_node("b1", cpu="4", labels={"pool": "b"}),
        make_node("vk", cpu="1000", labels={"pool": "a", "type": "virtual-kubelet"}),
    ]
    template = make_node("tpl", cpu="4", labels={"pool": "a"})
    tracker = QuotaTracker.build(
        [cq("a", {"pool": "a"}, cpu=20, nodes=5)], nodes, upcoming=[(template, 2)]
    )
    assert tracker.left() == {"a": {"cpu": 20 - 16, "nodes": 5 - 4}}
    assert tracker.check(template, 5).allowed == 1


def test_consume_takes_all_or_nothing() -> None:
    tracker = QuotaTracker([cq("q", nodes=3)])
    assert tracker.consume(NODE, 5).allowed == 3
    assert tracker.left() == {"q": {"nodes": 3}}
    assert tracker.consume(NODE, 2).allowed == 2
    assert tracker.left() == {"q": {"nodes": 1}}


def test_gpus_count_under_the_gpu_type() -> None:
    gpu_node = make_node("g", labels={GPU_LABEL: "nvidia-tesla-t4"}, extended={"nvidia.com/gpu": 2})
    tracker = QuotaTracker([cq("gpus", **{"nvidia-tesla-t4": 5})], gpu_label=GPU_LABEL)
    assert tracker.check(gpu_node, 3) == QuotaCheck(
        2, (ExceededQuota("CapacityQuota/gpus", ("nvidia-tesla-t4",)),)
    )


def test_invalid_quota_limits_nothing() -> None:
    bad = CapacityQuota(name="bad", limits={}, error="CapacityQuota bad: spec: expected ...")
    assert QuotaTracker([bad]).check(NODE, 10).allowed == 10
    assert not QuotaTracker([bad])


def test_status_usage_sums_capacity_as_quantities() -> None:
    q = cq("a", {"pool": "a"}, cpu=1, memory=1, nodes=1, **{"nvidia.com/gpu": 1})
    nodes = [
        make_node("a1", cpu="1500m", memory="1Gi", labels={"pool": "a"}, extended={"nvidia.com/gpu": 1}),
        make_node("a2", cpu="2", memory="1Gi", labels={"pool": "a"}),
        make_node("b1", cpu="8", memory="8Gi", labels={"pool": "b"}),
    ]
    assert quota_usage(q, nodes) == {
        "cpu": "3500m",
        "memory": "2Gi",
        "nodes": "2",
        "nvidia.com/gpu": "1",
    }


# ---------------------------------------------------------------------------- loops


class QuotaCluster(InMemoryCluster):
    """A cluster whose snapshots hold CapacityQuotas."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.quotas: list[CapacityQuota] = []

    def snapshot(self) -> ClusterObjects:
        objects = super().snapshot()
        objects.capacity_quotas = list(self.quotas)
        return objects


def harness(**options: Any) -> tuple[Harness, QuotaCluster]:
    h = Harness(QuotaCluster, capacity_quotas_enabled=True, **options)
    assert isinstance(h.cluster, QuotaCluster)
    return h, h.cluster


def test_scale_up_is_capped_at_the_quota_and_the_rest_names_it() -> None:
    h, cluster = harness()
    cluster.quotas = [cq("pool-a", {"pool": "a"}, nodes=3)]
    g = h.provider.add_group("a", 0, 10, nodes=1, cpu="2", labels={"pool": "a"})
    h.add_pods([running_pod("busy", "a-1", cpu="1900m")])
    h.add_pods([pending_pod(f"p{i}", cpu="1500m") for i in range(5)])
    result = h.run()
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("a", 2)]
    assert g.target == 3
    left = [k for k, rs in result.scale_up.pods_remaining.items() if rs]
    assert len(left) == 3
    for key in left:
        (rejection,) = result.scale_up.pods_remaining[key]
        assert rejection.reason is NoScaleUpReason.CAPACITY_QUOTA_EXCEEDED
        assert rejection.detail == '"CapacityQuota/pool-a", resources: nodes'


def test_group_at_its_quota_is_skipped_with_upstreams_reason_and_event() -> None:
    h, cluster = harness()
    cluster.quotas = [cq("pool-a", {"pool": "a"}, nodes=1)]
    g = h.provider.add_group("a", 0, 10, nodes=1, cpu="2", labels={"pool": "a"})
    h.add_pods([running_pod("busy", "a-1", cpu="1900m"), pending_pod("p", cpu="1")])
    result = h.run()
    assert result.scale_up.status is ScaleUpStatus.NO_OPTIONS_AVAILABLE
    assert g.target == 1
    (rejection,) = result.scale_up.pods_remaining["default/p"]
    assert rejection.exceeded == ("nodes",)
    events = events_for_result(result, ObjectRef.config_map("kube-system", "status"))
    messages = [e.message for e in events if e.reason == "NotTriggerScaleUp"]
    assert messages == [
        "pod didn't trigger scale-up: 1 exceeded quota: "
        '"CapacityQuota/pool-a", resources: nodes'
    ]


def test_quota_over_other_nodes_leaves_the_group_free() -> None:
    h, cluster = harness()
    cluster.quotas = [cq("pool-b", {"pool": "b"}, nodes=0)]
    g = h.provider.add_group("a", 0, 10, nodes=0, cpu="2", labels={"pool": "a"})
    h.add_pods([pending_pod(f"p{i}", cpu="1500m") for i in range(3)])
    h.run()
    assert g.target == 3


def test_expander_falls_back_to_a_group_the_quota_does_not_cover() -> None:
    h, cluster = harness()
    cluster.quotas = [cq("cpu-a", {"pool": "a"}, cpu=0)]
    a = h.provider.add_group("a", 0, 10, cpu="2", labels={"pool": "a"})
    b = h.provider.add_group("b", 0, 10, cpu="2", labels={"pool": "b"})
    h.add_pods([pending_pod("p", cpu="1")])
    h.run()
    assert (a.target, b.target) == (0, 1)


def test_flag_off_ignores_quotas() -> None:
    h = Harness(QuotaCluster)
    assert isinstance(h.cluster, QuotaCluster)
    h.cluster.quotas = [cq("none", nodes=0)]
    g = h.provider.add_group("a", 0, 10, cpu="2")
    h.add_pods([pending_pod("p", cpu="1")])
    h.run()
    assert g.target == 1


def test_upcoming_nodes_count_against_the_quota() -> None:
    h, cluster = harness()
    cluster.quotas = [cq("q", nodes=2)]
    g = h.provider.add_group("a", 0, 10, cpu="2")
    h.add_pods([pending_pod(f"p{i}", cpu="1500m") for i in range(2)])
    h.run()
    assert g.target == 2
    # More pods while the two nodes are still coming: the quota is spent.
    h.add_pods([pending_pod(f"q{i}", cpu="1500m") for i in range(2)])
    result = h.run()
    assert g.target == 2
    reasons = {r.reason for rs in result.scale_up.pods_remaining.values() for r in rs}
    assert NoScaleUpReason.CAPACITY_QUOTA_EXCEEDED in reasons


def test_balanced_groups_share_one_quota() -> None:
    h, cluster = harness(balance_similar_node_groups=True)
    cluster.quotas = [cq("zones", {"pool": "a"}, nodes=3)]
    a1 = h.provider.add_group("a1", 0, 10, cpu="2", labels={"pool": "a"})
    a2 = h.provider.add_group("a2", 0, 10, cpu="2", labels={"pool": "a"})
    h.add_pods([pending_pod(f"p{i}", cpu="1500m") for i in range(6)])
    h.run()
    assert a1.target + a2.target == 3


def test_min_size_enforcement_is_capped_by_the_quota() -> None:
    h, cluster = harness(enforce_node_group_min_size=True)
    cluster.quotas = [cq("q", nodes=2)]
    g = h.provider.add_group("a", 5, 10, cpu="2")
    h.run()
    assert g.target == 2


def test_atomic_group_beyond_the_quota_is_refused_whole() -> None:
    from clusterscaler.interfaces.cloudprovider import NodeGroupOptions

    h, cluster = harness()
    cluster.quotas = [cq("q", nodes=3)]
    g = h.provider.add_group(
        "a", 0, 4, cpu="2", options=NodeGroupOptions(zero_or_max_node_scaling=True)
    )
    h.add_pods([pending_pod("p", cpu="1")])
    result = h.run()
    assert g.target == 0
    (rejection,) = result.scale_up.pods_remaining["default/p"]
    assert rejection.reason is NoScaleUpReason.CAPACITY_QUOTA_EXCEEDED


def test_loop_result_carries_each_quotas_status() -> None:
    h, cluster = harness()
    cluster.quotas = [
        cq("pool-a", {"pool": "a"}, nodes=3),
        CapacityQuota(name="bad", error="CapacityQuota bad: spec.limits: expected ..."),
    ]
    h.provider.add_group("a", 0, 10, nodes=2, cpu="2", labels={"pool": "a"})
    result = h.run()
    statuses = {s.name: s for s in result.capacity_quotas}
    assert statuses["pool-a"].used == {"nodes": "2"}
    assert [(c.type, c.status) for c in statuses["pool-a"].conditions] == [
        ("Valid", "True"),
        ("Reconciled", "True"),
    ]
    assert statuses["bad"].used is None
    assert statuses["bad"].conditions[0].message == "CapacityQuota bad: spec.limits: expected ..."
    assert all(s.changed for s in statuses.values())
    h.set_options(capacity_quotas_enabled=False)
    assert h.run().capacity_quotas == ()
