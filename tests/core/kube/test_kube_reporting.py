"""Events, the status ConfigMap and metrics, as CA users read them."""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from clusterscaler.kube.eventwriter import KubeEventSink
from clusterscaler.kube.statusconfigmap import KubeStatusWriter
from clusterscaler.report import events as ev
from clusterscaler.report.events import (
    Event,
    EventRecorder,
    GroupResize,
    MemoryEventSink,
    ObjectRef,
)
from clusterscaler.report.metrics import HealthCheck, Metrics, OperationsServer, parse_address
from clusterscaler.report.status import (
    LAST_UPDATED_ANNOTATION,
    AutoscalerStatus,
    Condition,
    NodeCounts,
    NodeGroupStatus,
    format_last_updated,
    to_dict,
    to_yaml,
    with_transitions,
)

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class FakeClock:
    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


# --------------------------------------------------------------------------- events


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            ev.messages.scaled_up_group("ng-1", 2, 4, 10),
            "Scale-up: setting group ng-1 size to 4 instead of 2 (max: 10)",
        ),
        (
            ev.messages.triggered_scale_up([GroupResize("ng-1", 2, 4, 10)]),
            "pod triggered scale-up: [{ng-1 2->4 (max: 10)}]",
        ),
        (ev.messages.scale_down_empty("n1"), 'Scale-down: removing empty node "n1"'),
        (
            ev.messages.scale_down("n1", 0.25, ["default/a", "default/b"]),
            "Scale-down: removing node n1, utilization: 0.25, pods to reschedule: default/a,default/b",
        ),
        (ev.messages.node_marked(), "marked the node as toBeDeleted/unschedulable"),
        (ev.messages.pod_evicted(), "deleting pod for node scale down"),
        (
            ev.messages.taint_failed("boom"),
            "failed to mark the node as toBeDeleted/unschedulable: boom",
        ),
        (ev.messages.pod_eviction_failed(), "failed to delete pod for ScaleDown"),
    ],
    ids=[
        "scaled-up-group",
        "triggered-scale-up",
        "scale-down-empty",
        "scale-down",
        "node-marked",
        "pod-evicted",
        "taint-failed",
        "pod-eviction-failed",
    ],
)
def test_event_messages_match_cluster_autoscaler(message, expected):
    assert message == expected


def test_duplicate_events_dropped_within_five_minutes():
    sink, clock = MemoryEventSink(), FakeClock()
    recorder = EventRecorder(sink, clock=clock)
    pod = ObjectRef.pod("default", "web-1")
    assert recorder.normal(pod, ev.TRIGGERED_SCALE_UP, "m")
    clock.now += timedelta(minutes=4, seconds=59)
    assert not recorder.normal(pod, ev.TRIGGERED_SCALE_UP, "m")
    assert recorder.normal(pod, ev.TRIGGERED_SCALE_UP, "other message")
    assert recorder.normal(ObjectRef.pod("default", "web-2"), ev.TRIGGERED_SCALE_UP, "m")
    clock.now += timedelta(minutes=5)
    assert recorder.normal(pod, ev.TRIGGERED_SCALE_UP, "m")
    assert len(sink.events) == 4
    assert recorder.dropped == 1


def test_record_duplicated_events_flag_keeps_every_event():
    sink = MemoryEventSink()
    recorder = EventRecorder(sink, record_duplicates=True, clock=FakeClock())
    for _ in range(3):
        recorder.warning(ObjectRef.node("n1"), ev.SCALE_DOWN_FAILED, "boom")
    assert len(sink.events) == 3


def test_dry_run_events_are_marked():
    sink = MemoryEventSink()
    EventRecorder(sink, dry_run=True).normal(ObjectRef.node("n1"), ev.SCALE_DOWN, "marked")
    assert sink.events[0][0].message == "[dry-run] marked"


def test_event_type_is_validated():
    with pytest.raises(ValueError, match="type 'Info'"):
        Event(ObjectRef.node("n1"), "Info", ev.SCALE_DOWN, "m")


def test_kube_event_sink_writes_core_v1_events(fake_kube):
    recorder = EventRecorder(KubeEventSink(fake_kube.api_client(), instance="ca-0"))
    recorder.normal(
        ObjectRef.pod("apps", "web-1", uid="u1"), ev.TRIGGERED_SCALE_UP, "pod triggered scale-up"
    )
    recorder.warning(ObjectRef.node("n1"), ev.SCALE_DOWN_FAILED, "failed")
    on_pod = fake_kube.list("events", "apps")
    assert [(e["reason"], e["type"], e["involvedObject"]["uid"]) for e in on_pod] == [
        ("TriggeredScaleUp", "Normal", "u1")
    ]
    assert on_pod[0]["source"] == {"component": "cluster-autoscaler"}
    on_node = fake_kube.list("events", "default", field_selector="involvedObject.name=n1")
    assert [(e["reason"], e["involvedObject"]["kind"]) for e in on_node] == [
        ("ScaleDownFailed", "Node")
    ]


def test_kube_event_sink_failure_is_logged_not_raised(fake_kube):
    fake_kube.add_fault(path="/events", status=500)
    sink = KubeEventSink(fake_kube.api_client())
    EventRecorder(sink).normal(ObjectRef.node("n1"), ev.SCALE_DOWN, "m")
    assert sink.failures == 1


# --------------------------------------------------------------------------- status


def sample_status(time: datetime = T0, scale_up: str = "NoActivity") -> AutoscalerStatus:
    return AutoscalerStatus(
        time=time,
        health=Condition("Healthy", time),
        node_counts=NodeCounts(total=3, ready=2, not_started=1, unregistered=1),
        scale_up=Condition(scale_up, time),
        scale_down=Condition("CandidatesPresent", time),
        scale_down_candidates=1,
        node_groups=(
            NodeGroupStatus(
                name="ng-1",
                health=Condition("Healthy", time),
                node_counts=NodeCounts(total=3, ready=2, not_started=1),
                cloud_provider_target=4,
                min_size=1,
                max_size=10,
                scale_up=Condition("Backoff", time),
                scale_down=Condition("NoCandidates", time),
                backoff_error_code="QuotaExceeded",
                backoff_error_message="out of quota",
            ),
        ),
    )


def test_status_document_follows_cluster_autoscaler_schema():
    doc = to_dict(sample_status())
    assert doc["autoscalerStatus"] == "Running"
    assert doc["time"] == "2026-01-02 03:04:05 +0000 UTC"
    health = doc["clusterWide"]["health"]
    assert health["status"] == "Healthy"
    assert health["nodeCounts"] == {
        "registered": {
            "total": 3,
            "ready": 2,
            "notStarted": 1,
            "suspended": 0,
            "unready": {"total": 0, "resourceUnready": 0},
        },
        "longUnregistered": 0,
        "unregistered": 1,
    }
    assert health["lastProbeTime"] == "2026-01-02T03:04:05Z"
    assert doc["clusterWide"]["scaleDown"] == {
        "status": "CandidatesPresent",
        "candidates": 1,
        "lastProbeTime": "2026-01-02T03:04:05Z",
        "lastTransitionTime": None,
    }
    group = doc["nodeGroups"][0]
    assert group["name"] == "ng-1"
    assert (
        group["health"]["cloudProviderTarget"],
        group["health"]["minSize"],
        group["health"]["maxSize"],
    ) == (4, 1, 10)
    assert group["scaleUp"]["status"] == "Backoff"
    assert group["scaleUp"]["backoffInfo"] == {
        "errorCode": "QuotaExceeded",
        "errorMessage": "out of quota",
    }


def test_status_yaml_sorts_keys_and_keeps_zero_structs_as_cluster_autoscaler_does():
    text = to_yaml(with_transitions(None, sample_status()))
    assert list(yaml.safe_load(text)) == ["autoscalerStatus", "clusterWide", "nodeGroups", "time"]
    health = yaml.safe_load(text)["clusterWide"]["health"]
    assert list(health) == ["lastProbeTime", "lastTransitionTime", "nodeCounts", "status"]
    counts = NodeCounts(total=2, ready=1, being_deleted=1, unready=1)
    registered = to_dict(AutoscalerStatus(time=T0, node_counts=counts))["clusterWide"]["health"][
        "nodeCounts"
    ]["registered"]
    assert registered == {
        "total": 2,
        "ready": 1,
        "notStarted": 0,
        "suspended": 0,
        "beingDeleted": 1,
        "unready": {"total": 1, "resourceUnready": 0},
    }
    assert "nodeGroups" not in to_dict(AutoscalerStatus(time=T0))


def test_status_rejects_unknown_condition_values():
    with pytest.raises(ValueError, match=r"clusterWide\.scaleUp\.status: 'Maybe'"):
        AutoscalerStatus(time=T0, scale_up=Condition("Maybe"))


def test_last_updated_format_matches_go_layout():
    assert (
        format_last_updated(datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC))
        == "2026-01-02 03:04:05.12 +0000 UTC"
    )


def test_status_configmap_created_then_updated_with_transitions(fake_kube):
    writer = KubeStatusWriter(fake_kube.api_client(), namespace="kube-system")
    assert writer.write(sample_status())
    cm = fake_kube.get("configmaps", "cluster-autoscaler-status", "kube-system")
    assert cm["metadata"]["annotations"][LAST_UPDATED_ANNOTATION] == "2026-01-02 03:04:05 +0000 UTC"
    first = yaml.safe_load(cm["data"]["status"])
    assert first["clusterWide"]["scaleUp"]["lastTransitionTime"] == "2026-01-02T03:04:05Z"

    fake_kube.patch(
        "configmaps", "cluster-autoscaler-status", {"data": {"extra": "kept"}}, "kube-system"
    )
    later = T0 + timedelta(seconds=10)
    assert writer.write(sample_status(later, scale_up="InProgress"))
    cm = fake_kube.get("configmaps", "cluster-autoscaler-status", "kube-system")
    second = yaml.safe_load(cm["data"]["status"])
    assert cm["data"]["extra"] == "kept"
    assert second["clusterWide"]["scaleUp"]["status"] == "InProgress"
    assert second["clusterWide"]["scaleUp"]["lastTransitionTime"] == "2026-01-02T03:04:15Z"
    # Unchanged conditions keep their transition time.
    assert second["clusterWide"]["health"]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    assert second["clusterWide"]["health"]["lastProbeTime"] == "2026-01-02T03:04:15Z"


def test_status_write_failure_is_counted_not_raised(fake_kube):
    fake_kube.add_fault(path="configmaps", status=503)
    writer = KubeStatusWriter(fake_kube.api_client())
    assert not writer.write(sample_status())
    assert writer.failures == 1


# --------------------------------------------------------------------------- metrics


def test_metrics_use_cluster_autoscaler_names_in_an_own_registry():
    metrics = Metrics()
    metrics.cluster_safe_to_autoscale.set(1)
    metrics.update_nodes_count(
        ready=3, unready=1, not_started=0, long_unregistered=0, unregistered=2
    )
    metrics.unschedulable_pods_count.labels(type="unschedulable").set(4)
    metrics.update_last_activity("main", now=1700000000)
    with metrics.time_function("main"):
        pass
    metrics.scaled_up_nodes_total.labels(gpu_resource_name="", gpu_name="", dra_drivers="").inc(2)
    metrics.scaled_down_nodes_total.labels(
        reason="underutilized", gpu_resource_name="", gpu_name="", dra_drivers=""
    ).inc()
    metrics.evicted_pods_total.labels(eviction_result="succeeded").inc(3)
    metrics.register_error("cloudProviderError")
    metrics.old_unregistered_nodes_removed_count.inc()
    text = metrics.render().decode()
    for line in (
        "cluster_autoscaler_cluster_safe_to_autoscale 1.0",
        'cluster_autoscaler_nodes_count{state="ready"} 3.0',
        'cluster_autoscaler_nodes_count{state="unregistered"} 2.0',
        'cluster_autoscaler_unschedulable_pods_count{type="unschedulable"} 4.0',
        'cluster_autoscaler_last_activity{activity="main"} 1.7e+09',
        'cluster_autoscaler_function_duration_seconds_count{function="main"} 1.0',
        'cluster_autoscaler_scaled_up_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name=""} 2.0',
        'cluster_autoscaler_scaled_down_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="underutilized"} 1.0',
        'cluster_autoscaler_evicted_pods_total{eviction_result="succeeded"} 3.0',
        'cluster_autoscaler_errors_total{type="cloudProviderError"} 1.0',
        "cluster_autoscaler_old_unregistered_nodes_removed_count 1.0",
    ):
        assert line in text, line
    assert "cluster_autoscaler_unneeded_nodes_count" in text
    assert "cluster_autoscaler_scale_down_in_cooldown" in text
    # Two instances never collide: each has its own registry.
    Metrics().scaled_up_nodes_total.labels(gpu_resource_name="", gpu_name="", dra_drivers="").inc()
    assert (
        'cluster_autoscaler_scaled_up_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name=""} 2.0'
        in metrics.render().decode()
    )


@pytest.mark.parametrize("enabled", [True, False], ids=["emit-per-nodegroup", "default"])
def test_per_node_group_metrics_only_with_flag(enabled):
    metrics = Metrics(emit_per_nodegroup_metrics=enabled)
    metrics.update_node_group("ng-1", min_size=1, max_size=5, target=3)
    text = metrics.render().decode()
    assert ('cluster_autoscaler_node_group_target_count{node_group="ng-1"} 3.0' in text) is enabled
    assert ('cluster_autoscaler_node_group_max_count{node_group="ng-1"} 5.0' in text) is enabled


class Ticker:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def monitored() -> tuple[HealthCheck, Ticker]:
    tick = Ticker()
    health = HealthCheck(timedelta(minutes=10), timedelta(minutes=15), clock=tick)
    tick.t = 10_000
    assert health.check() == (True, "OK")  # healthy until the first loop starts monitoring
    health.start_monitoring()
    health.update_last_successful_run()
    return health, tick


def test_health_check_fails_after_max_inactivity():
    health, tick = monitored()
    tick.t += 10 * 60 - 1
    assert health.check() == (True, "OK")
    tick.t += 2
    ok, message = health.check()
    assert not ok
    assert "last activity" in message


def test_health_check_fails_after_max_failing_time_despite_activity():
    health, tick = monitored()
    for _ in range(3):
        tick.t += 5 * 60
        health.update_last_activity()
        assert health.check()[0]
    tick.t += 1
    ok, message = health.check()
    assert not ok
    assert "last successful run" in message


@pytest.mark.parametrize(
    ("startup", "fails_after"),
    [(timedelta(minutes=20), 20 * 60), (timedelta(minutes=5), 15 * 60), (None, 15 * 60)],
    ids=["startup-limit", "raised-to-max-failing-time", "unset"],
)
def test_health_check_allows_max_startup_time_until_the_first_successful_run(
    startup, fails_after
):
    tick = Ticker()
    health = HealthCheck(timedelta(minutes=10), timedelta(minutes=15), startup, clock=tick)
    health.start_monitoring()
    # Past --max-inactivity without any loop finishing: still starting up.
    tick.t += 10 * 60 + 1
    health.update_last_activity()
    assert health.check() == (True, "OK")
    tick.t = fails_after
    assert health.check() == (True, "OK")
    tick.t += 1
    ok, message = health.check()
    assert not ok and "--max-startup-time" in message
    # Once a loop has succeeded, the steady-state limits apply.
    health.update_last_successful_run()
    tick.t += 10 * 60 + 1
    ok, message = health.check()
    assert not ok and "--max-inactivity" in message


def test_successful_run_keeps_health_check_green():
    health, tick = monitored()
    for _ in range(5):
        tick.t += 9 * 60
        health.update_last_successful_run()
        assert health.check() == (True, "OK")


@pytest.mark.parametrize(
    ("address", "expected"),
    [(":8085", ("", 8085)), ("127.0.0.1:9000", ("127.0.0.1", 9000)), ("[::1]:8085", ("::1", 8085))],
    ids=["port-only", "host-port", "ipv6"],
)
def test_parse_address(address, expected):
    assert parse_address(address) == expected


def test_parse_address_rejects_missing_port():
    with pytest.raises(ValueError, match="--address 'localhost'"):
        parse_address("localhost")


def test_operations_server_serves_metrics_and_health_check():
    tick = Ticker()
    metrics = Metrics()
    metrics.cluster_safe_to_autoscale.set(1)
    health = HealthCheck(timedelta(seconds=10), timedelta(seconds=10), clock=tick)
    with OperationsServer("127.0.0.1:0", metrics, health) as server:
        base = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(f"{base}/metrics") as response:
            assert b"cluster_autoscaler_cluster_safe_to_autoscale 1.0" in response.read()
        with urllib.request.urlopen(f"{base}/health-check") as response:
            assert response.status == 200
        health.start_monitoring()
        tick.t += 11
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(f"{base}/health-check")
        assert exc.value.code == 500
