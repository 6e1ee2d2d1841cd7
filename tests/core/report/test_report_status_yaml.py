"""The status ConfigMap's YAML, byte for byte as Cluster Autoscaler writes it.

CA marshals its status structs to JSON and the JSON to YAML (sigs.k8s.io/yaml): keys come
sorted, a zero struct is still written (``unready``, ``backoffInfo: {}``), an unset time is
``null`` and only empty strings and zero ``omitempty`` integers are dropped. The first
document below is the one CA's own test of WriteStatusConfigMap expects.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from clusterscaler.report.status import (
    AutoscalerStatus,
    Condition,
    NodeCounts,
    NodeGroupStatus,
    initializing_status,
    to_yaml,
    with_transitions,
)

T0 = datetime(2023, 12, 21, 0, 0, 0, tzinfo=UTC)

# CA's TestWriteStatusConfigMap: ClusterAutoscalerStatus{Message: "TEST_MSG"}.
UPSTREAM_EMPTY_WITH_MESSAGE = """\
clusterWide:
  health:
    lastProbeTime: null
    lastTransitionTime: null
    nodeCounts:
      longUnregistered: 0
      registered:
        notStarted: 0
        ready: 0
        suspended: 0
        total: 0
        unready:
          resourceUnready: 0
          total: 0
      unregistered: 0
  scaleDown:
    lastProbeTime: null
    lastTransitionTime: null
  scaleUp:
    lastProbeTime: null
    lastTransitionTime: null
message: TEST_MSG
time: 2023-12-21 00:00:00 +0000 UTC
"""

INITIALIZING = "autoscalerStatus: Initializing\n" + UPSTREAM_EMPTY_WITH_MESSAGE.replace(
    "message: TEST_MSG\n", ""
)

RUNNING = """\
autoscalerStatus: Running
clusterWide:
  health:
    lastProbeTime: "2023-12-21T00:00:10Z"
    lastTransitionTime: "2023-12-21T00:00:00Z"
    nodeCounts:
      longUnregistered: 0
      registered:
        beingDeleted: 1
        notStarted: 1
        ready: 2
        suspended: 0
        total: 4
        unready:
          resourceUnready: 0
          total: 1
      unregistered: 1
    status: Healthy
  scaleDown:
    candidates: 1
    lastProbeTime: "2023-12-21T00:00:10Z"
    lastTransitionTime: "2023-12-21T00:00:10Z"
    status: CandidatesPresent
  scaleUp:
    lastProbeTime: "2023-12-21T00:00:10Z"
    lastTransitionTime: "2023-12-21T00:00:00Z"
    status: NoActivity
nodeGroups:
- health:
    cloudProviderTarget: 4
    lastProbeTime: "2023-12-21T00:00:10Z"
    lastTransitionTime: "2023-12-21T00:00:00Z"
    maxSize: 10
    minSize: 1
    nodeCounts:
      longUnregistered: 0
      registered:
        notStarted: 0
        ready: 2
        suspended: 0
        total: 2
        unready:
          resourceUnready: 0
          total: 0
      unregistered: 0
    status: Healthy
  name: ng-a
  scaleDown:
    lastProbeTime: "2023-12-21T00:00:10Z"
    lastTransitionTime: "2023-12-21T00:00:00Z"
    status: NoCandidates
  scaleUp:
    backoffInfo:
      errorCode: QUOTA_EXCEEDED
      errorMessage: out of quota
    lastProbeTime: "2023-12-21T00:00:10Z"
    lastTransitionTime: "2023-12-21T00:00:10Z"
    status: Backoff
- health:
    cloudProviderTarget: 2
    lastProbeTime: "2023-12-21T00:00:10Z"
    lastTransitionTime: "2023-12-21T00:00:00Z"
    maxSize: 5
    minSize: 0
    nodeCounts:
      longUnregistered: 0
      registered:
        beingDeleted: 1
        notStarted: 1
        ready: 0
        suspended: 0
        total: 2
        unready:
          resourceUnready: 0
          total: 1
      unregistered: 1
    status: Healthy
  name: ng-b
  scaleDown:
    candidates: 1
    lastProbeTime: "2023-12-21T00:00:10Z"
    lastTransitionTime: "2023-12-21T00:00:10Z"
    status: CandidatesPresent
  scaleUp:
    backoffInfo: {}
    lastProbeTime: "2023-12-21T00:00:10Z"
    lastTransitionTime: "2023-12-21T00:00:00Z"
    status: NoActivity
time: 2023-12-21 00:00:10 +0000 UTC
"""


def _status(now: datetime, *, backoff: bool, candidates: bool) -> AutoscalerStatus:
    def group_b_down() -> Condition:
        return Condition("CandidatesPresent" if candidates else "NoCandidates", now)

    return AutoscalerStatus(
        time=now,
        health=Condition("Healthy", now),
        node_counts=NodeCounts(
            total=4, ready=2, unready=1, not_started=1, being_deleted=1, unregistered=1
        ),
        scale_up=Condition("NoActivity", now),
        scale_down=group_b_down(),
        scale_down_candidates=1 if candidates else 0,
        node_groups=(
            NodeGroupStatus(
                name="ng-a",
                health=Condition("Healthy", now),
                node_counts=NodeCounts(total=2, ready=2),
                cloud_provider_target=4,
                min_size=1,
                max_size=10,
                scale_up=Condition("Backoff" if backoff else "NoActivity", now),
                scale_down=Condition("NoCandidates", now),
                backoff_error_code="QUOTA_EXCEEDED" if backoff else "",
                backoff_error_message="out of quota" if backoff else "",
            ),
            NodeGroupStatus(
                name="ng-b",
                health=Condition("Healthy", now),
                node_counts=NodeCounts(
                    total=2, unready=1, not_started=1, being_deleted=1, unregistered=1
                ),
                cloud_provider_target=2,
                min_size=0,
                max_size=5,
                scale_up=Condition("NoActivity", now),
                scale_down=group_b_down(),
                scale_down_candidates=1 if candidates else 0,
            ),
        ),
    )


def test_empty_status_with_a_message_is_cluster_autoscalers_document():
    status = AutoscalerStatus(
        time=T0,
        autoscaler_status="",
        message="TEST_MSG",
        health=Condition(""),
        scale_up=Condition(""),
        scale_down=Condition(""),
    )
    assert to_yaml(status) == UPSTREAM_EMPTY_WITH_MESSAGE


def test_initializing_status_is_cluster_autoscalers_empty_status():
    assert to_yaml(initializing_status(T0)) == INITIALIZING


def test_running_status_with_backoff_candidates_and_transitions():
    first = with_transitions(None, _status(T0, backoff=False, candidates=False))
    later = T0 + timedelta(seconds=10)
    second = with_transitions(first, _status(later, backoff=True, candidates=True))
    assert to_yaml(second) == RUNNING
