from __future__ import annotations

from datetime import timedelta

import pytest
from clusterscaler.framework.durations import format_duration, parse_duration
from clusterscaler.framework.options import (
    AutoscalingOptions,
    GpuLimit,
    MinMax,
    OptionError,
    flag_specs,
    parse_value,
    validate,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10s", timedelta(seconds=10)),
        ("10m", timedelta(minutes=10)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("500ms", timedelta(milliseconds=500)),
        ("0s", timedelta(0)),
        ("0", timedelta(0)),
        ("1.5h", timedelta(minutes=90)),
        ("2h45m30s", timedelta(hours=2, minutes=45, seconds=30)),
        ("100us", timedelta(microseconds=100)),
        ("1m0.5s", timedelta(seconds=60.5)),
    ],
    ids=lambda v: str(v),
)
def test_parse_go_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text", ["", "10", "abc", "10 m", "-5s", "1d", "m10", "1h-5m", "99999999999999999h",
             "2562048h", "1" + "0" * 400 + "s"]
)
def test_parse_duration_rejects_malformed(text: str) -> None:
    with pytest.raises(ValueError, match="Go duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(seconds=10), "10s"),
        (timedelta(minutes=10), "10m0s"),
        (timedelta(hours=1, minutes=30), "1h30m0s"),
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(0), "0s"),
    ],
)
def test_format_duration_like_go(value: timedelta, text: str) -> None:
    assert format_duration(value) == text
    assert parse_duration(text) == value


# Defaults a CA user relies on (upstream's flag definitions).
@pytest.mark.parametrize(
    ("field", "default"),
    [
        ("scan_interval", timedelta(seconds=10)),
        ("scale_down_unneeded_time", timedelta(minutes=10)),
        ("scale_down_delay_after_add", timedelta(minutes=10)),
        ("scale_down_delay_after_failure", timedelta(minutes=3)),
        ("scale_down_unready_time", timedelta(minutes=20)),
        ("scale_down_utilization_threshold", 0.5),
        ("scale_down_gpu_utilization_threshold", 0.5),
        ("max_node_provision_time", timedelta(minutes=15)),
        ("max_total_unready_percentage", 45.0),
        ("ok_total_unready_count", 3),
        ("expendable_pods_priority_cutoff", -10),
        ("max_nodes_total", 0),
        ("cores_total", MinMax(0, 320000)),
        ("memory_total", MinMax(0, 6400000)),
        ("max_graceful_termination_sec", 600),
        ("expander", ["least-waste"]),
        ("estimator", "binpacking"),
        ("namespace", "kube-system"),
        ("status_config_map_name", "cluster-autoscaler-status"),
        ("max_nodes_per_scaleup", 1000),
        ("max_scale_down_parallelism", 10),
        ("max_drain_parallelism", 1),
        ("max_pod_eviction_time", timedelta(minutes=2)),
        ("initial_node_group_backoff_duration", timedelta(minutes=5)),
        ("max_node_group_backoff_duration", timedelta(minutes=30)),
        ("node_group_backoff_reset_timeout", timedelta(hours=3)),
        ("leader_elect", True),
        ("leader_elect_lease_duration", timedelta(seconds=15)),
        ("leader_elect_renew_deadline", timedelta(seconds=10)),
        ("leader_elect_retry_period", timedelta(seconds=2)),
        ("skip_nodes_with_local_storage", True),
        ("skip_nodes_with_system_pods", True),
        ("cordon_node_before_terminating", True),
        ("daemonset_eviction_for_empty_nodes", False),
        ("daemonset_eviction_for_occupied_nodes", True),
        ("address", ":8085"),
        ("write_status_configmap", True),
        ("scale_down_candidates_pool_min_count", 50),
        ("scale_down_candidates_pool_ratio", 0.1),
        ("scale_down_non_empty_candidates_count", 30),
        ("kube_client_qps", 5.0),
        ("kube_client_burst", 10),
    ],
    ids=lambda v: str(v),
)
def test_defaults_match_cluster_autoscaler(field: str, default: object) -> None:
    assert getattr(AutoscalingOptions(), field) == default


def test_default_list_is_not_shared_between_instances() -> None:
    a, b = AutoscalingOptions(), AutoscalingOptions()
    a.nodes.append("1:3:x")
    assert b.nodes == []


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("minMax", "0:320000", MinMax(0, 320000)),
        ("minMax", " 4 : 8 ", MinMax(4, 8)),
        ("gpuTotal", "nvidia-tesla-k80:0:4", GpuLimit("nvidia-tesla-k80", 0, 4)),
        ("stringSlice", "priority,least-waste", ["priority", "least-waste"]),
        ("bool", "false", False),
        ("bool", "True", True),
        ("int", "-10", -10),
        ("float", "0.65", 0.65),
    ],
)
def test_parse_value_forms(kind: str, text: str, expected: object) -> None:
    assert parse_value(kind, "--flag", text) == expected


@pytest.mark.parametrize(
    ("kind", "text", "form"),
    [
        ("minMax", "10", "<min>:<max>"),
        ("minMax", "8:4", "min <= max"),
        ("minMax", "-1:4", "<min>:<max>"),
        ("gpuTotal", "nvidia:1", "<gpu_type>:<min>:<max>"),
        ("gpuTotal", "nvidia:5:1", "min <= max"),
        ("bool", "maybe", "true or false"),
        ("int", "ten", "an integer"),
        ("duration", "10", "Go duration"),
    ],
)
def test_parse_value_errors_name_flag_value_and_form(kind: str, text: str, form: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_value(kind, "--some-flag", text)
    message = str(info.value)
    assert "--some-flag" in message
    assert repr(text) in message
    assert form in message


@pytest.mark.parametrize(
    ("overrides", "flag"),
    [
        ({"scale_down_utilization_threshold": 1.5}, "--scale-down-utilization-threshold"),
        ({"max_total_unready_percentage": 120.0}, "--max-total-unready-percentage"),
        ({"max_nodes_total": -1}, "--max-nodes-total"),
        ({"logging_format": "xml"}, "--logging-format"),
        ({"scan_interval": timedelta(0)}, "--scan-interval"),
        ({"leader_elect_renew_deadline": timedelta(seconds=20)}, "--leader-elect-renew-deadline"),
        ({"gpu_total": [GpuLimit("a", 0, 1), GpuLimit("a", 0, 2)]}, "--gpu-total"),
        ({"expander": []}, "--expander"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_validate_rejects_inconsistent_values(overrides: dict[str, object], flag: str) -> None:
    options = AutoscalingOptions(**overrides)  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=flag):
        validate(options)


def test_every_flag_of_the_ca_faq_table_exists() -> None:
    names = {spec.name for spec in flag_specs()}
    faq_table = {
        "cluster-name", "address", "kubernetes", "kubeconfig", "cloud-config", "namespace",
        "scale-down-enabled", "scale-down-delay-after-add", "scale-down-delay-after-delete",
        "scale-down-delay-after-failure", "scale-down-unneeded-time", "scale-down-unready-time",
        "scale-down-utilization-threshold", "scale-down-non-empty-candidates-count",
        "scale-down-candidates-pool-ratio", "scale-down-candidates-pool-min-count",
        "scan-interval", "max-nodes-total", "cores-total", "memory-total", "gpu-total",
        "cloud-provider", "max-empty-bulk-delete", "max-graceful-termination-sec",
        "max-total-unready-percentage", "ok-total-unready-count", "max-node-provision-time",
        "nodes", "node-group-auto-discovery", "estimator", "expander", "write-status-configmap",
        "max-inactivity", "max-failing-time", "balance-similar-node-groups",
        "balancing-ignore-label", "node-autoprovisioning-enabled",
        "max-autoprovisioned-node-group-count", "unremovable-node-recheck-timeout",
        "expendable-pods-priority-cutoff", "regional", "leader-elect",
        "leader-elect-lease-duration", "leader-elect-renew-deadline",
        "leader-elect-retry-period", "leader-elect-resource-lock",
        "skip-nodes-with-system-pods", "skip-nodes-with-local-storage", "min-replica-count",
    }
    newer = {
        "new-pod-scale-up-delay", "enforce-node-group-min-size", "max-nodes-per-scaleup",
        "max-nodegroup-binpacking-duration", "max-binpacking-time", "max-scale-down-parallelism",
        "max-drain-parallelism", "max-pod-eviction-time", "scale-down-simulation-timeout",
        "scale-down-gpu-utilization-threshold", "scale-down-unready-enabled",
        "ignore-daemonsets-utilization", "ignore-mirror-pods-utilization",
        "skip-nodes-with-custom-controller-pods", "daemonset-eviction-for-empty-nodes",
        "daemonset-eviction-for-occupied-nodes", "cordon-node-before-terminating",
        "record-duplicated-events", "status-config-map-name", "balancing-label",
        "initial-node-group-backoff-duration", "max-node-group-backoff-duration",
        "node-group-backoff-reset-timeout", "emit-per-nodegroup-metrics",
        "leader-elect-resource-name", "leader-elect-resource-namespace", "kube-client-qps",
        "kube-client-burst", "v", "logging-format",
    }
    # aws-use-static-instance-list comes with the clusterscaler-aws distribution.
    missing = (faq_table | newer) - names
    assert not missing
