"""cluster_autoscaler_node_taints_count{type}: the taints on the cluster's nodes by CA's
report types, exported from the loop's result."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.loop.decisions import ClusterHealth, LoopResult, NodeCounts
from clusterscaler.loop.taints import TaintConfig
from clusterscaler.model import Taint
from clusterscaler.report.metrics import Metrics
from clusterscaler.simulator.builders import make_node

NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)


def loop_result(taint_counts: dict[str, int] | None) -> LoopResult:
    return LoopResult(
        time=NOW, health=ClusterHealth(True, NodeCounts()), taint_counts=taint_counts
    )


def taints(metrics: Metrics) -> dict[str, float]:
    return {
        sample.labels["type"]: sample.value
        for family in metrics.registry.collect()
        if family.name == "cluster_autoscaler_node_taints_count"
        for sample in family.samples
    }


def t(key: str) -> Taint:
    return Taint(key=key, value="", effect="NoSchedule")


def test_taints_of_the_nodes_are_exported_by_report_type() -> None:
    config = TaintConfig.from_options(
        replace(AutoscalingOptions(), startup_taint=["cilium.io/agent-not-ready"],
                status_taint=["example.com/maintenance"])
    )
    nodes = [
        make_node("a", taints=[t("ToBeDeletedByClusterAutoscaler"), t("cilium.io/agent-not-ready")]),
        make_node("b", taints=[t("startup-taint.cluster-autoscaler.kubernetes.io/csi"),
                               t("example.com/maintenance"), t("dedicated")]),
        make_node("c", taints=[t("ignore-taint.cluster-autoscaler.kubernetes.io/gpu"),
                               t("node.kubernetes.io/not-ready"), t("dedicated")]),
    ]
    metrics = Metrics()
    metrics.record_loop(loop_result(config.count_node_taints(nodes)))

    assert taints(metrics) == {
        "ToBeDeletedByClusterAutoscaler": 1,
        "startup-taint": 2,
        "status-taint": 1,
        "ignore-taint.cluster-autoscaler.kubernetes.io/": 1,
        "node.kubernetes.io/not-ready": 1,
        "other": 2,
    }
    text = metrics.render().decode()
    assert "# TYPE cluster_autoscaler_node_taints_count gauge" in text
    assert 'cluster_autoscaler_node_taints_count{type="startup-taint"} 2.0' in text


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        ({"other": 3}, {"ToBeDeletedByClusterAutoscaler": 0, "other": 3}),
        ({}, {"ToBeDeletedByClusterAutoscaler": 0, "other": 0}),
        (None, {"ToBeDeletedByClusterAutoscaler": 4, "other": 1}),
    ],
    ids=["type-gone-drops-to-zero", "no-taints-left", "loop-stopped-before-counting"],
)
def test_gauge_follows_the_latest_count(
    second: dict[str, int] | None, expected: dict[str, float]
) -> None:
    metrics = Metrics()
    metrics.record_loop(loop_result({"ToBeDeletedByClusterAutoscaler": 4, "other": 1}))
    metrics.record_loop(loop_result(second))
    assert taints(metrics) == expected


def test_taint_counts_are_part_of_the_loop_result_document() -> None:
    assert loop_result({"other": 2}).to_dict()["taint_counts"] == {"other": 2}
    assert loop_result(None).to_dict()["taint_counts"] is None


def test_a_loop_reports_the_taints_of_its_nodes_to_the_metrics() -> None:
    """End to end through `run_once`: the count the cluster state takes is the one the
    gauge shows."""
    from loopkit import Harness, pending_pod

    h = Harness()
    g = h.provider.add_group("g", 0, 10, nodes=1)
    node = h.cluster.nodes[g.nodes()[0].id.split("://")[-1]]
    h.cluster.add_node(node.with_(taints=(t("dedicated"),)))
    h.add_pods([pending_pod("p", cpu="1")])
    metrics = Metrics()
    result = h.run()
    metrics.record_loop(result)
    assert result.taint_counts == {"other": 1}
    assert taints(metrics) == {"other": 1}
