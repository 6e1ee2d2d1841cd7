from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clusterscaler.framework.options import AutoscalingOptions, GpuLimit, MinMax
from clusterscaler.interfaces.cloudprovider import ResourceLimiter
from clusterscaler.loop.balancing import GroupSize, balance, similar
from clusterscaler.loop.limits import GIB, Limits, Totals, node_totals, sum_totals
from clusterscaler.model import NodeInfo, OwnerRef
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.simulator.utilization import node_utilization
from loopkit import GROUP_LABEL, Harness, pending_pod

NOW = datetime(2024, 1, 1, tzinfo=UTC)
OPTS = AutoscalingOptions()
DS = OwnerRef("DaemonSet", "agent", "u", True)


def info(
    cpu: str = "4", memory: str = "16Gi", labels: dict[str, str] | None = None, **kw: Any
) -> NodeInfo:
    return NodeInfo(make_node("n", cpu, memory, labels=labels, **kw))


@pytest.mark.parametrize(
    ("a", "b", "options", "expected"),
    [
        (info(), info(), {}, True),
        (
            info(labels={"topology.kubernetes.io/zone": "a"}),
            info(labels={"topology.kubernetes.io/zone": "b"}),
            {},
            True,
        ),
        (info(cpu="4"), info(cpu="8"), {}, False),
        (info(memory="16000Mi"), info(memory="16200Mi"), {}, True),
        (info(memory="16000Mi"), info(memory="16500Mi"), {}, False),
        (info(labels={"pool": "a"}), info(labels={"pool": "b"}), {}, False),
        (
            info(labels={"pool": "a"}),
            info(labels={"pool": "b"}),
            {"balancing_ignore_label": ["pool"]},
            True,
        ),
        (
            info(cpu="4", labels={"team": "x"}),
            info(cpu="8", labels={"team": "x"}),
            {"balancing_label": ["team"]},
            True,
        ),
        (
            info(labels={"team": "x"}),
            info(labels={"team": "y"}),
            {"balancing_label": ["team"]},
            False,
        ),
        (info(extended={"nvidia.com/gpu": 1}), info(), {}, False),
    ],
    ids=[
        "identical",
        "zone-differs",
        "cpu-differs",
        "memory-within-1.5pct",
        "memory-beyond",
        "label-differs",
        "label-ignored",
        "balancing-label-only",
        "balancing-label-differs",
        "gpu",
    ],
)
def test_similar_node_groups(a, b, options, expected) -> None:
    assert similar(a, b, dataclasses.replace(OPTS, **options)) is expected


@pytest.mark.parametrize(
    ("label", "provider", "expected"),
    [
        ("beta.kubernetes.io/fluentd-ds-ready", "sim", True),
        ("kops.k8s.io/instancegroup", "sim", True),
        ("k8s.amazonaws.com/eniConfig", "aws", True),
        ("lifecycle", "aws", True),
        ("topology.k8s.aws/zone-id", "aws", True),
        ("lifecycle", "sim", False),
        ("topology.k8s.aws/zone-id", "gce", False),
    ],
    ids=["fluentd-ds-ready", "kops-instancegroup", "aws-eniconfig", "aws-lifecycle",
         "aws-zone-id", "lifecycle-elsewhere", "zone-id-elsewhere"],
)
def test_similar_ignores_ca_labels(label: str, provider: str, expected: bool) -> None:
    options = dataclasses.replace(OPTS, cloud_provider=provider)
    assert similar(info(labels={label: "a"}), info(labels={label: "b"}), options) is expected


def test_free_resources_must_be_close() -> None:
    busy = NodeInfo(info().node, (make_pod("ds", "1", "1Gi", owner=DS, node_name="n"),))
    assert not similar(info(), busy, OPTS)


@pytest.mark.parametrize(
    ("sizes", "new", "expected"),
    [
        ([("a", 1, 10), ("b", 1, 10)], 4, {"a": 2, "b": 2}),
        ([("a", 3, 10), ("b", 0, 10)], 3, {"b": 3}),
        ([("a", 3, 10), ("b", 0, 10)], 5, {"a": 1, "b": 4}),
        ([("a", 0, 1), ("b", 0, 10)], 4, {"a": 1, "b": 3}),
        ([("a", 0, 1), ("b", 0, 1)], 4, {"a": 1, "b": 1}),
    ],
    ids=["even", "fill-smallest", "then-spread", "respect-max", "all-full"],
)
def test_balance(sizes, new, expected) -> None:
    assert balance([GroupSize(*s) for s in sizes], new) == expected


def test_balanced_scale_up_spreads_over_similar_groups() -> None:
    h = Harness(balance_similar_node_groups=True, balancing_ignore_label=[GROUP_LABEL])
    a = h.provider.add_group("a", 0, 10, labels={"topology.kubernetes.io/zone": "za"})
    b = h.provider.add_group("b", 0, 10, labels={"topology.kubernetes.io/zone": "zb"})
    h.add_pods([pending_pod(f"p{i}", cpu="3") for i in range(4)])
    result = h.run()
    assert sorted((d.node_group, d.delta) for d in result.scale_up.decisions) == [
        ("a", 2),
        ("b", 2),
    ]
    assert (a.target, b.target) == (2, 2)


@pytest.mark.parametrize(
    ("pods", "kw", "value", "resource"),
    [
        ([("1", "1Gi", None)], {}, 0.25, "cpu"),
        ([("1", "12Gi", None)], {}, 0.75, "memory"),
        ([("1", "1Gi", DS), ("1", "1Gi", None)], {}, 0.5, "cpu"),
        ([("1", "1Gi", DS), ("1", "1Gi", None)], {"ignore_daemonsets": True}, 1 / 3, "cpu"),
        ([], {}, 0.0, "cpu"),
    ],
    ids=["cpu", "memory", "daemonset-counted", "daemonset-ignored", "empty"],
)
def test_utilization(pods, kw, value, resource) -> None:
    node = make_node("n", "4", "16Gi")
    ps = [make_pod(f"p{i}", c, m, owner=o, node_name="n") for i, (c, m, o) in enumerate(pods)]
    u = node_utilization(node, ps, now=NOW, **kw)
    assert u.value == pytest.approx(value)
    assert u.resource == resource


def test_gpu_node_utilization_is_gpu_only() -> None:
    node = make_node("n", "4", "16Gi", extended={"nvidia.com/gpu": 2}, labels={"gpu": "t4"})
    pods = [make_pod("p", "3", "12Gi", extended={"nvidia.com/gpu": 1}, node_name="n")]
    u = node_utilization(node, pods, now=NOW, gpu_label="gpu")
    assert (u.resource, u.value) == ("gpu", 0.5)


def test_long_terminating_pods_do_not_count() -> None:
    node = make_node("n", "4", "16Gi")
    pod = make_pod("p", "2", "1Gi", node_name="n", deletion_time=NOW - timedelta(minutes=10))
    assert node_utilization(node, [pod], now=NOW).value == 0.0


def test_limits_from_flags_and_provider() -> None:
    opts = dataclasses.replace(
        OPTS,
        cores_total=MinMax(2, 10),
        memory_total=MinMax(0, 64),
        max_nodes_total=5,
        gpu_total=[GpuLimit("t4", 0, 2)],
    )
    limits = Limits.from_options(opts, ResourceLimiter(max_limits={"cpu": 8}))
    assert limits.max == {"cpu": 8, "memory": 64 * GIB, "nodes": 5, "t4": 2}
    node = make_node("n", "4", "16Gi")
    current = sum_totals([node], "")
    assert limits.max_new_nodes(current, node_totals(node, "")) == (1, "cpu")
    assert limits.blocks_removal(current, node_totals(node, "")) == ["cpu"]
    assert limits.blocks_removal(current.plus(node_totals(node, "")), node_totals(node, "")) == []


def test_gpu_limit_counts_by_gpu_type_label() -> None:
    limits = Limits(max={"t4": 2})
    gpu = make_node("g", "4", "16Gi", extended={"nvidia.com/gpu": 1}, labels={"gpu": "t4"})
    assert limits.max_new_nodes(Totals(gpus={"t4": 1}), node_totals(gpu, "gpu")) == (1, "t4")


def test_removal_simulation_stops_at_the_timeout() -> None:
    from clusterscaler.interfaces.podfilter import DrainContext
    from clusterscaler.loop.scaledown.removal import RemovalSimulator, simulate_nodes
    from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
    from clusterscaler.simulator.drain import PdbTracker

    snapshot = ClusterSnapshot.from_node_infos(
        NodeInfo(make_node(f"n{i}", "4", "16Gi")) for i in range(5)
    )
    simulator = RemovalSimulator(
        snapshot, [], DrainContext.build(NOW, pdbs=PdbTracker([])), HintingSimulator()
    )
    ticks = iter(range(100))
    results, untried = simulate_nodes(
        simulator,
        [f"n{i}" for i in range(5)],
        max_non_empty=0,
        timeout_seconds=2.5,
        clock=lambda: float(next(ticks)),
    )
    assert [r.node for r in results] == ["n0", "n1"]
    assert untried == ["n2", "n3", "n4"]
