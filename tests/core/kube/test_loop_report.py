"""What one loop's result publishes: status, metrics and events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from clusterscaler.loop.decisions import (
    BackoffInfo,
    ClusterHealth,
    DeletionKind,
    GroupRejection,
    LoopResult,
    NodeCounts,
    NodeDeletion,
    NodeGroupStatus,
    NoScaleUpReason,
    ScaleDownResult,
    ScaleDownStatus,
    ScaleUpDecision,
    ScaleUpResult,
    ScaleUpStatus,
    UnneededNode,
)
from clusterscaler.report.events import ObjectRef, events_for_result
from clusterscaler.report.metrics import Metrics
from clusterscaler.report.status import status_from_result, to_dict
from prometheus_client.utils import floatToGoString

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
STATUS_CM = ObjectRef.config_map("kube-system", "cluster-autoscaler-status")


def result() -> LoopResult:
    counts = NodeCounts(total=3, ready=3)
    return LoopResult(
        time=NOW,
        health=ClusterHealth(True, NodeCounts(total=4, ready=3, not_started=1)),
        node_groups=(
            NodeGroupStatus(
                "ng-a", 1, 10, 4, counts, upcoming=1, healthy=True, scale_up_in_progress=True
            ),
            NodeGroupStatus(
                "ng-b",
                0,
                5,
                0,
                NodeCounts(),
                upcoming=0,
                healthy=True,
                backoff=BackoffInfo(
                    NOW + timedelta(minutes=5), "OutOfResources", "QuotaExceeded", "no quota"
                ),
            ),
        ),
        scale_up=ScaleUpResult(
            status=ScaleUpStatus.SUCCESSFUL,
            decisions=(ScaleUpDecision("ng-a", 1, 3, pods=("default/web-1",)),),
            triggered_pods=("default/web-1",),
            pods_remaining={
                "default/big": (
                    GroupRejection("ng-a", NoScaleUpReason.NOT_SCHEDULABLE),
                    GroupRejection("ng-b", NoScaleUpReason.BACKED_OFF),
                )
            },
        ),
        scale_down=ScaleDownResult(
            status=ScaleDownStatus.NODE_DELETE_STARTED,
            unneeded=(
                UnneededNode(
                    "n2",
                    "ng-a",
                    NOW - timedelta(minutes=11),
                    empty=False,
                    utilization=0.2,
                    removable_at=NOW - timedelta(minutes=1),
                ),
            ),
            deletions=(
                NodeDeletion("n2", "ng-a", DeletionKind.DRAIN, evicted_pods=("default/db-0",)),
                NodeDeletion("n3", "ng-a", DeletionKind.EMPTY),
                NodeDeletion(
                    "n4",
                    "ng-a",
                    DeletionKind.DRAIN,
                    error="eviction timed out",
                    failed_step="evict",
                    failed_pods=("default/db-1",),
                ),
            ),
        ),
        pending_pods=("default/web-1", "default/big"),
        duration=timedelta(seconds=1.5),
    )


def test_status_from_result():
    doc = to_dict(status_from_result(result()))
    wide = doc["clusterWide"]
    assert wide["health"]["status"] == "Healthy"
    assert wide["health"]["nodeCounts"]["registered"]["notStarted"] == 1
    assert wide["scaleUp"]["status"] == "InProgress"
    assert (wide["scaleDown"]["status"], wide["scaleDown"]["candidates"]) == (
        "CandidatesPresent",
        1,
    )
    a, b = doc["nodeGroups"]
    assert (a["name"], a["scaleUp"]["status"], a["health"]["cloudProviderTarget"]) == (
        "ng-a",
        "InProgress",
        4,
    )
    assert a["scaleDown"]["candidates"] == 1
    assert b["scaleUp"]["status"] == "Backoff"
    assert b["scaleUp"]["backoffInfo"] == {"errorCode": "QuotaExceeded", "errorMessage": "no quota"}


def test_expired_backoff_is_not_reported():
    r = result()
    expired = r.node_groups[1].backoff
    assert expired is not None
    later = LoopResult(
        time=expired.until + timedelta(seconds=1), health=r.health, node_groups=r.node_groups
    )
    assert to_dict(status_from_result(later))["nodeGroups"][1]["scaleUp"]["status"] == "NoActivity"


def test_record_loop_metrics():
    metrics = Metrics(emit_per_nodegroup_metrics=True)
    metrics.record_loop(result())
    text = metrics.render().decode()
    for line in (
        "cluster_autoscaler_cluster_safe_to_autoscale 1.0",
        'cluster_autoscaler_nodes_count{state="notStarted"} 1.0',
        'cluster_autoscaler_node_groups_count{node_group_type="autoscaled"} 2.0',
        'cluster_autoscaler_unschedulable_pods_count{type="unschedulable"} 2.0',
        'cluster_autoscaler_scaled_up_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name=""} 1.0',
        'cluster_autoscaler_scaled_down_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="underutilized"} 1.0',
        'cluster_autoscaler_scaled_down_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="empty"} 1.0',
        'cluster_autoscaler_evicted_pods_total{eviction_result="succeeded"} 1.0',
        'cluster_autoscaler_evicted_pods_total{eviction_result="failed"} 1.0',
        "cluster_autoscaler_unneeded_nodes_count 1.0",
        'cluster_autoscaler_node_group_target_count{node_group="ng-a"} 4.0',
        'cluster_autoscaler_node_group_backoff_status{node_group="ng-b",reason="OutOfResources"} 1.0',
        'cluster_autoscaler_function_duration_seconds_count{function="main"} 1.0',
        f'cluster_autoscaler_last_activity{{activity="scaleUp"}} {floatToGoString(NOW.timestamp())}',
    ):
        assert line in text, line


def test_events_for_result_in_cluster_autoscaler_words():
    events = [
        (str(e.involved), e.type, e.reason, e.message)
        for e in events_for_result(result(), STATUS_CM)
    ]
    assert events == [
        (
            str(STATUS_CM),
            "Normal",
            "ScaledUpGroup",
            "Scale-up: setting group ng-a size to 4 instead of 3 (max: 10)",
        ),
        (
            "Pod/default/web-1",
            "Normal",
            "TriggeredScaleUp",
            "pod triggered scale-up: [{ng-a 3->4 (max: 10)}]",
        ),
        (
            "Pod/default/big",
            "Normal",
            "NotTriggerScaleUp",
            "pod didn't trigger scale-up: 1 in backoff after failed scale-up, "
            "1 pod does not fit the node group's template",
        ),
        (
            str(STATUS_CM),
            "Normal",
            "ScaleDown",
            "Scale-down: removing node n2, utilization: 0.2, pods to reschedule: default/db-0",
        ),
        ("Node/n2", "Normal", "ScaleDown", "marked the node as toBeDeleted/unschedulable"),
        ("Pod/default/db-0", "Normal", "ScaleDown", "deleting pod for node scale down"),
        ("Node/n2", "Normal", "ScaleDown", "nodes removed by cluster autoscaler"),
        (str(STATUS_CM), "Normal", "ScaleDown", "Scale-down: node n2 removed with drain"),
        (str(STATUS_CM), "Normal", "ScaleDownEmpty", 'Scale-down: removing empty node "n3"'),
        ("Node/n3", "Normal", "ScaleDown", "marked the node as toBeDeleted/unschedulable"),
        ("Node/n3", "Normal", "ScaleDown", "nodes removed by cluster autoscaler"),
        (str(STATUS_CM), "Normal", "ScaleDownEmpty", "Scale-down: empty node n3 removed"),
        ("Pod/default/db-1", "Warning", "ScaleDownFailed", "failed to delete pod for ScaleDown"),
        (
            "Node/n4",
            "Warning",
            "ScaleDownFailed",
            "failed to drain and delete node: eviction timed out",
        ),
    ]


def test_a_failed_taint_and_a_failed_empty_removal_in_cluster_autoscaler_words():
    r = LoopResult(
        time=NOW,
        health=ClusterHealth(True, NodeCounts()),
        scale_down=ScaleDownResult(
            status=ScaleDownStatus.ERROR,
            deletions=(
                NodeDeletion(
                    "n5", "ng-a", DeletionKind.EMPTY, error="409 Conflict", failed_step="taint"
                ),
                NodeDeletion(
                    "n6", "ng-a", DeletionKind.UNREADY, error="quota", failed_step="delete"
                ),
                NodeDeletion(
                    "n7",
                    "ng-a",
                    DeletionKind.UNREADY,
                    error="quota",
                    failed_step="delete",
                    drain=True,
                ),
            ),
        ),
    )
    assert [(str(e.involved), e.reason, e.message) for e in events_for_result(r, STATUS_CM)] == [
        (
            "Node/n5",
            "ScaleDownFailed",
            "failed to mark the node as toBeDeleted/unschedulable: 409 Conflict",
        ),
        ("Node/n6", "ScaleDownFailed", "failed to delete empty node: quota"),
        ("Node/n7", "ScaleDownFailed", "failed to drain and delete node: quota"),
    ]


def test_not_trigger_scale_up_without_node_groups_ends_after_the_colon():
    r = LoopResult(
        time=NOW,
        health=ClusterHealth(True, NodeCounts()),
        scale_up=ScaleUpResult(
            status=ScaleUpStatus.NO_OPTIONS_AVAILABLE, pods_remaining={"default/p": ()}
        ),
    )
    [event] = events_for_result(r, STATUS_CM)
    assert (event.reason, event.message) == ("NotTriggerScaleUp", "pod didn't trigger scale-up: ")
