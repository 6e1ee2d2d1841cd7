"""Every metric of Cluster Autoscaler, by name, type and labels, checked against the
exposition: upstream's table (its metrics documentation and pkg/metrics) is the data below,
and the autoscaler must expose exactly these families and the few of its own listed in
`OURS` with the reason for each, no more (no `_created` series)."""

from __future__ import annotations

import pytest
from clusterscaler.report.metrics import Metrics, PlainCounter
from prometheus_client.parser import text_string_to_metric_families

GPU = ("gpu_resource_name", "gpu_name")

# name (without cluster_autoscaler_) -> (type, labels)
UPSTREAM: dict[str, tuple[str, tuple[str, ...]]] = {
    "cluster_safe_to_autoscale": ("gauge", ()),
    "nodes_count": ("gauge", ("state",)),
    "node_groups_count": ("gauge", ("node_group_type",)),
    "unschedulable_pods_count": ("gauge", ("type",)),
    "max_nodes_count": ("gauge", ()),
    "cluster_cpu_current_cores": ("gauge", ()),
    "cpu_limits_cores": ("gauge", ("direction",)),
    "cluster_memory_current_bytes": ("gauge", ()),
    "memory_limits_bytes": ("gauge", ("direction",)),
    "node_group_min_count": ("gauge", ("node_group",)),
    "node_group_max_count": ("gauge", ("node_group",)),
    "node_group_target_count": ("gauge", ("node_group",)),
    "node_group_healthiness": ("gauge", ("node_group",)),
    "node_group_backoff_status": ("gauge", ("node_group", "reason")),
    "last_activity": ("gauge", ("activity",)),
    "function_duration_seconds": ("histogram", ("function",)),
    "function_duration_quantile_seconds": ("summary", ("function",)),
    "pending_node_deletions": ("gauge", ()),
    "errors_total": ("counter", ("type",)),
    "scaled_up_nodes_total": ("counter", (*GPU, "dra_drivers")),
    "scaled_up_gpu_nodes_total": ("counter", GPU),
    "failed_scale_ups_total": ("counter", ("reason", *GPU, "dra_drivers")),
    "failed_node_creations_total": ("counter", ("reason",)),
    "failed_gpu_scale_ups_total": ("counter", ("reason", *GPU)),
    "scaled_down_nodes_total": ("counter", ("reason", *GPU, "dra_drivers")),
    "scaled_down_gpu_nodes_total": ("counter", ("reason", *GPU)),
    "evicted_pods_total": ("counter", ("eviction_result",)),
    "unneeded_nodes_count": ("gauge", ()),
    "unremovable_nodes_count": ("gauge", ("reason",)),
    "scale_down_in_cooldown": ("gauge", ()),
    "old_unregistered_nodes_removed_count": ("counter", ()),
    "overflowing_controllers_count": ("gauge", ()),
    "skipped_scale_events_count": ("counter", ("direction", "reason")),
    "created_node_groups_total": ("counter", ("group_type",)),
    "deleted_node_groups_total": ("counter", ("group_type",)),
    "node_taints_count": ("gauge", ("type",)),
    "inconsistent_instances_migs_count": ("gauge", ()),
    "binpacking_heterogeneity": ("histogram", ("instance_type", "cpu_count", "namespace_count")),
    "max_node_skip_eval_duration_seconds": ("gauge", ()),
    "node_removal_latency_seconds": ("histogram", ("deleted",)),
    "dra_node_template_resources_mismatch": ("gauge", ("driver", "mismatch_type")),
    "skipped_pods_count": ("gauge", ("type",)),
    # capacitybuffer/metrics, with --capacity-buffer-controller-enabled.
    "capacity_buffer_oldest_reconciliation_timestamp_seconds": ("gauge", ("new_buffer",)),
}
# Families upstream does not have, each for a reason a CA user would accept: a new entry
# here is a decision, not a convenience.
OURS: dict[str, tuple[str, tuple[str, ...]]] = {
    # Objects the model could not read and left out of the loop, by kind (docs/metrics.md).
    # CA cannot hold such an object at all (its typed informers drop it unseen); here one
    # is left out, and its node kept, so an operator needs a number to alert on.
    "unreadable_objects_count": ("gauge", ("kind",)),
}
# client-go's REST client metrics, which CA's /metrics carries without its prefix
# (k8s.io/component-base/metrics/prometheus/restclient): the ones of a request's count,
# latency and client-side throttling.
CLIENT_GO: dict[str, tuple[str, tuple[str, ...]]] = {
    "rest_client_requests_total": ("counter", ("code", "method", "host")),
    "rest_client_request_duration_seconds": ("histogram", ("verb", "host")),
    "rest_client_rate_limiter_duration_seconds": ("histogram", ("verb", "host")),
}
EXPOSED = {**UPSTREAM, **CLIENT_GO, **OURS}
PER_NODE_GROUP = {
    "node_group_min_count",
    "node_group_max_count",
    "node_group_target_count",
    "node_group_healthiness",
    "node_group_backoff_status",
}


def _touch(metrics: Metrics, name: str, labels: tuple[str, ...]) -> None:
    """One sample with exactly `labels` (prometheus_client refuses any other label set)."""
    metric = getattr(metrics, name)
    values = dict.fromkeys(labels, "x")
    if isinstance(metric, PlainCounter):
        metric.inc(1, **values)
        return
    child = metric.labels(**values) if labels else metric
    if hasattr(child, "observe"):
        child.observe(1)
    else:
        child.inc(1)


def _exposed_types(metrics: Metrics) -> dict[str, str]:
    out = {}
    for line in metrics.render().decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            out[name.removeprefix("cluster_autoscaler_")] = kind
    return out


def test_every_upstream_metric_with_its_type_and_nothing_else() -> None:
    metrics = Metrics(emit_per_nodegroup_metrics=True)
    for name, (_, labels) in EXPOSED.items():
        _touch(metrics, name, labels)
    types = _exposed_types(metrics)
    # The exposition names counters by their own names, `_total` and all.
    assert types == {name: kind for name, (kind, _) in EXPOSED.items()}
    assert not set(OURS) & set(UPSTREAM)
    samples = [line.split("{")[0].split(" ")[0] for line in metrics.render().decode().splitlines()]
    assert not [s for s in samples if s.endswith("_created")]


@pytest.mark.parametrize("name", sorted(EXPOSED))
def test_label_names(name: str) -> None:
    metrics = Metrics(emit_per_nodegroup_metrics=True)
    labels = EXPOSED[name][1]
    _touch(metrics, name, labels)
    seen = 0
    for family in text_string_to_metric_families(metrics.render().decode()):
        if family.name.removeprefix("cluster_autoscaler_") != name.removesuffix("_total"):
            continue
        for sample in family.samples:
            seen += 1
            assert set(sample.labels) - {"le"} == set(labels), sample
    assert seen, name


def test_per_node_group_series_only_with_the_flag() -> None:
    assert not PER_NODE_GROUP & set(_exposed_types(Metrics()))
    assert set(_exposed_types(Metrics(emit_per_nodegroup_metrics=True))) >= PER_NODE_GROUP


def test_loop_result_feeds_scale_up_counters_with_the_groups_gpu() -> None:
    from datetime import UTC, datetime

    from clusterscaler.loop.decisions import (
        ClusterHealth,
        LoopResult,
        NodeCounts,
        NodeGroupStatus,
        ScaleUpDecision,
        ScaleUpFailure,
        ScaleUpFailureKind,
        ScaleUpResult,
        ScaleUpStatus,
    )

    gpu_group = NodeGroupStatus(
        "gpu", 0, 5, 2, NodeCounts(), 0, True, gpu_resource_name="nvidia.com/gpu",
        gpu_name="nvidia-tesla-t4",
    )  # fmt: skip
    plain = NodeGroupStatus("plain", 0, 5, 1, NodeCounts(), 0, True)
    metrics = Metrics()
    metrics.record_loop(
        LoopResult(
            time=datetime(2026, 1, 1, tzinfo=UTC),
            health=ClusterHealth(True, NodeCounts()),
            node_groups=(gpu_group, plain),
            scale_up=ScaleUpResult(
                ScaleUpStatus.SUCCESSFUL, decisions=(ScaleUpDecision("gpu", 2, 0),)
            ),
            scale_up_failures=(
                ScaleUpFailure("gpu", ScaleUpFailureKind.TIMEOUT, "timeout", 3),
                ScaleUpFailure("plain", ScaleUpFailureKind.INCREASE_SIZE, "cloudProviderError", 1),
            ),
        )
    )
    value = metrics.registry.get_sample_value
    t4 = {"gpu_resource_name": "nvidia.com/gpu", "gpu_name": "nvidia-tesla-t4"}
    none = {"gpu_resource_name": "", "gpu_name": "", "dra_drivers": ""}
    assert value("cluster_autoscaler_scaled_up_nodes_total", {**t4, "dra_drivers": ""}) == 2
    assert value("cluster_autoscaler_scaled_up_gpu_nodes_total", t4) == 2
    assert (
        value(
            "cluster_autoscaler_failed_scale_ups_total",
            {"reason": "timeout", **t4, "dra_drivers": ""},
        )
        == 1
    )
    assert value("cluster_autoscaler_failed_gpu_scale_ups_total", {"reason": "timeout", **t4}) == 1
    assert (
        value("cluster_autoscaler_failed_scale_ups_total", {"reason": "cloudProviderError", **none})
        == 1
    )
    assert value("cluster_autoscaler_failed_node_creations_total", {"reason": "timeout"}) == 3
    assert (
        value("cluster_autoscaler_failed_node_creations_total", {"reason": "cloudProviderError"})
        == 1
    )
    assert (
        value(
            "cluster_autoscaler_failed_gpu_scale_ups_total",
            {"reason": "cloudProviderError", "gpu_resource_name": "", "gpu_name": ""},
        )
        is None
    )
