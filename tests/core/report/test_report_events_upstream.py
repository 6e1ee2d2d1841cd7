"""Each of Cluster Autoscaler's event reasons derived from a loop result: the object it is
recorded on, its type, and its message in CA's words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from clusterscaler.interfaces.expander import ExpanderWarning
from clusterscaler.loop.decisions import (
    ClusterHealth,
    DeletionKind,
    FailedRevert,
    GroupRejection,
    LoopResult,
    NodeCounts,
    NodeDeletion,
    NodeGroupStatus,
    NoScaleUpReason,
    ScaleUpFailure,
    ScaleUpFailureKind,
    ScaleUpResult,
    ScaleUpStatus,
    TaintCleanup,
)
from clusterscaler.report.events import ObjectRef, events_for_result

T0 = datetime(2026, 1, 2, tzinfo=UTC)
STATUS = ObjectRef.config_map("kube-system", "cluster-autoscaler-status")
CM = "ConfigMap/kube-system/cluster-autoscaler-status"
PRIORITY_CM = "ConfigMap/kube-system/cluster-autoscaler-priority-expander"
GROUP = NodeGroupStatus("ng", 0, 5, 2, NodeCounts(total=2, ready=2), 0, True)


def _result(**fields: object) -> LoopResult:
    fields.setdefault("health", ClusterHealth(True, NodeCounts(total=2, ready=2)))
    return LoopResult(time=T0, node_groups=(GROUP,), **fields)  # type: ignore[arg-type]


def _warning(reason: str, message: str) -> ExpanderWarning:
    return ExpanderWarning("priority", reason, message, PRIORITY_CM.replace("/", " ", 1))


CASES = [
    pytest.param(
        _result(
            scale_up_failures=(
                ScaleUpFailure("ng", ScaleUpFailureKind.INCREASE_SIZE, "cloudProviderError", 2,
                               error="quota"),
            )
        ),
        [
            (CM, "Normal", "ScaledUpGroup", "Scale-up: setting group ng size to 4 instead of 2 (max: 5)"),
            (CM, "Warning", "FailedToScaleUpGroup", "Scale-up failed for group ng: quota"),
        ],
        id="FailedToScaleUpGroup",
    ),
    pytest.param(
        _result(
            scale_up_failures=(
                ScaleUpFailure("ng", ScaleUpFailureKind.CREATE_ERRORS, "QUOTA", 3,
                               error="OutOfResources.QUOTA", message="a, b"),
            )
        ),
        [(CM, "Warning", "ScaleUpFailed",
          "Failed adding 3 nodes to group ng due to OutOfResources.QUOTA; source errors: a, b")],
        id="ScaleUpFailed",
    ),
    pytest.param(
        _result(
            scale_up_failures=(
                ScaleUpFailure("ng", ScaleUpFailureKind.TIMEOUT, "timeout", 1,
                               waited=timedelta(minutes=15, seconds=30)),
            )
        ),
        [(CM, "Warning", "ScaleUpTimedOut", "Nodes added to group ng failed to register within 15m30s")],
        id="ScaleUpTimedOut",
    ),
    pytest.param(
        _result(failed_reverts=(FailedRevert("ng", -2, "target is locked"),)),
        [(CM, "Warning", "FailedToRevertScaleUp",
          "Failed to revert scale-up of group ng after it timed out: target is locked")],
        id="FailedToRevertScaleUp",
    ),
    pytest.param(
        _result(health=ClusterHealth(False, NodeCounts(total=2, unready=2)), halted="unhealthy"),
        [(CM, "Warning", "ClusterUnhealthy", "Cluster is unhealthy")],
        id="ClusterUnhealthy",
    ),
    pytest.param(
        _result(max_nodes_total=2, pending_pods=("default/p",)),
        [(CM, "Warning", "MaxNodesTotalReached", "Max total nodes in cluster reached: 2")],
        id="MaxNodesTotalReached",
    ),
    pytest.param(
        _result(cleanups=(NodeDeletion("i-1", "ng", DeletionKind.UNREGISTERED),)),
        [(CM, "Normal", "DeleteUnregistered", "Removed unregistered node i-1")],
        id="DeleteUnregistered",
    ),
    pytest.param(
        _result(cleanups=(NodeDeletion("i-1", "ng", DeletionKind.UNREGISTERED, error="denied"),)),
        [(CM, "Warning", "DeleteUnregisteredFailed", "Failed to remove node i-1: denied")],
        id="DeleteUnregisteredFailed",
    ),
    pytest.param(
        _result(taint_cleanups=(TaintCleanup("n1", "ToBeDeletedByClusterAutoscaler"),)),
        [("Node/n1", "Normal", "ClusterAutoscalerCleanup",
          "removed ToBeDeletedByClusterAutoscaler taint from node n1")],
        id="ClusterAutoscalerCleanup",
    ),
    pytest.param(
        _result(taint_cleanups=(TaintCleanup("n1", "ToBeDeletedByClusterAutoscaler", "gone"),)),
        [("Node/n1", "Warning", "ClusterAutoscalerCleanup",
          "failed to clean ToBeDeletedByClusterAutoscaler on node n1: gone")],
        id="ClusterAutoscalerCleanup-failed",
    ),
    pytest.param(
        _result(
            scale_up=ScaleUpResult(
                ScaleUpStatus.SUCCESSFUL,
                expander_warnings=(
                    _warning("PriorityConfigMapInvalid", "Wrong configuration for priority "
                             "expander: bad. Ignoring."),
                    _warning("PriorityConfigMapNotMatchedGroup", "Priority expander: node group "
                             "ng not found in priority expander configuration. The group won't "
                             "be used."),
                    _warning("PriorityConfigMapNoGroupMatched", "Priority expander: no "
                             "priorities info found for any of the expansion options. No "
                             "options filtered."),
                    # Not one of CA's reasons: logged only.
                    _warning("PriorityConfigMapNotFound", "not found"),
                ),
            )
        ),
        [
            (PRIORITY_CM, "Warning", "PriorityConfigMapInvalid",
             "Wrong configuration for priority expander: bad. Ignoring."),
            (PRIORITY_CM, "Warning", "PriorityConfigMapNotMatchedGroup",
             "Priority expander: node group ng not found in priority expander configuration. "
             "The group won't be used."),
            (PRIORITY_CM, "Warning", "PriorityConfigMapNoGroupMatched",
             "Priority expander: no priorities info found for any of the expansion options. "
             "No options filtered."),
        ],
        id="PriorityConfigMap",
    ),
    pytest.param(
        # As CA's scheduling error gives them: the failing filter's reasons, one per
        # resource short, counted over the groups.
        _result(
            scale_up=ScaleUpResult(
                ScaleUpStatus.NO_OPTIONS_AVAILABLE,
                pods_remaining={"default/p": (
                    GroupRejection("a", NoScaleUpReason.NOT_SCHEDULABLE,
                                   "Insufficient cpu, Insufficient memory"),
                    GroupRejection("b", NoScaleUpReason.NOT_SCHEDULABLE, "Insufficient cpu"),
                    GroupRejection("c", NoScaleUpReason.NOT_SCHEDULABLE,
                                   'persistentvolumeclaim "data" not found'),
                    GroupRejection("d", NoScaleUpReason.MAX_SIZE_REACHED),
                )},
            )
        ),
        [("Pod/default/p", "Normal", "NotTriggerScaleUp",
          "pod didn't trigger scale-up: 1 Insufficient memory, 1 max node group size reached, "
          '1 persistentvolumeclaim "data" not found, 2 Insufficient cpu')],
        id="NotTriggerScaleUp",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("result", "expected"), CASES)
def test_event_object_type_reason_and_message(result: LoopResult, expected: list[tuple]) -> None:
    got = [
        (str(e.involved), e.type, e.reason, e.message) for e in events_for_result(result, STATUS)
    ]
    assert got == expected


def test_no_max_nodes_total_event_below_the_limit_or_without_pending_pods() -> None:
    assert events_for_result(_result(max_nodes_total=3, pending_pods=("default/p",)), STATUS) == []
    assert events_for_result(_result(max_nodes_total=2), STATUS) == []
