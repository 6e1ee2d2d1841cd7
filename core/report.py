"""Turning one loop's `LoopResult` into what users see: status, events and metrics.

The loop decides; this module only translates its decisions into Cluster Autoscaler's
observable forms, so that the live autoscaler and `clusterscaler simulate` report the same
things the same way:

- `build_status`: the status ConfigMap content (`clusterscaler.status.AutoscalerStatus`);
- `loop_events`: the events CA records for the decisions (`ScaledUpGroup`,
  `TriggeredScaleUp`, `NotTriggerScaleUp`, `ScaleDownEmpty`, `ScaleDown`, `ScaleDownFailed`);
- `update_metrics`: CA's Prometheus series.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from clusterscaler import decisions as d
from clusterscaler import status as st
from clusterscaler.events import (
    NORMAL,
    NOT_TRIGGER_SCALE_UP,
    SCALE_DOWN,
    SCALE_DOWN_EMPTY,
    SCALE_DOWN_FAILED,
    SCALED_UP_GROUP,
    TRIGGERED_SCALE_UP,
    WARNING,
    Event,
    GroupResize,
    ObjectRef,
    messages,
)
from clusterscaler.metrics import Metrics

__all__ = ["build_status", "loop_events", "update_metrics"]


def _counts(counts: d.NodeCounts) -> st.NodeCounts:
    return st.NodeCounts(
        total=counts.total,
        ready=counts.ready,
        not_started=counts.not_started,
        being_deleted=counts.being_deleted,
        unready=counts.unready,
        long_unregistered=counts.long_unregistered,
        unregistered=counts.unregistered,
    )


def _group_scale_up(group: d.NodeGroupStatus) -> str:
    if group.backoff is not None:
        return st.BACKOFF
    if group.scale_up_in_progress or group.upcoming > 0:
        return st.IN_PROGRESS
    return st.NO_ACTIVITY


def build_status(
    result: d.LoopResult, previous: st.AutoscalerStatus | None = None
) -> st.AutoscalerStatus:
    """The status CA would publish after this loop, transition times carried from `previous`."""
    now = result.time
    unneeded_by_group = Counter(node.node_group for node in result.scale_down.unneeded)
    groups = []
    for group in result.node_groups:
        groups.append(
            st.NodeGroupStatus(
                name=group.name,
                health=st.Condition(st.HEALTHY if group.healthy else st.UNHEALTHY, now),
                node_counts=_counts(group.counts),
                cloud_provider_target=group.target_size,
                min_size=group.min_size,
                max_size=group.max_size,
                scale_up=st.Condition(_group_scale_up(group), now),
                scale_down=st.Condition(
                    st.CANDIDATES_PRESENT if unneeded_by_group[group.name] else st.NO_CANDIDATES,
                    now,
                ),
                scale_down_candidates=unneeded_by_group[group.name],
                backoff_error_code=group.backoff.error_code if group.backoff else "",
                backoff_error_message=group.backoff.error_message if group.backoff else "",
            )
        )
    in_progress = any(g.scale_up.status == st.IN_PROGRESS for g in groups) or (
        result.scale_up.status is d.ScaleUpStatus.SUCCESSFUL
    )
    candidates = len(result.scale_down.unneeded)
    current = st.AutoscalerStatus(
        time=now,
        autoscaler_status=st.AUTOSCALER_RUNNING,
        message=result.halted or result.health.message,
        health=st.Condition(st.HEALTHY if result.health.healthy else st.UNHEALTHY, now),
        node_counts=_counts(result.health.counts),
        scale_up=st.Condition(st.IN_PROGRESS if in_progress else st.NO_ACTIVITY, now),
        scale_down=st.Condition(st.CANDIDATES_PRESENT if candidates else st.NO_CANDIDATES, now),
        scale_down_candidates=candidates,
        node_groups=tuple(groups),
    )
    return st.with_transitions(previous, current)


def _pod_ref(key: str) -> ObjectRef:
    namespace, _, name = key.partition("/")
    return ObjectRef.pod(namespace, name)


def loop_events(
    result: d.LoopResult,
    *,
    status_ref: ObjectRef,
    group_max_sizes: Mapping[str, int] | None = None,
) -> list[Event]:
    """The events CA records for this loop's decisions.

    `status_ref` is the status ConfigMap, on which CA records group-level events.
    """
    maxima = dict(group_max_sizes or {})
    for group in result.node_groups:
        maxima.setdefault(group.name, group.max_size)
    events: list[Event] = []

    resizes = [
        GroupResize(
            decision.node_group,
            decision.target_before,
            decision.target_before + decision.delta,
            maxima.get(decision.node_group, 0),
        )
        for decision in result.scale_up.decisions
    ]
    for resize in resizes:
        events.append(
            Event(
                status_ref,
                NORMAL,
                SCALED_UP_GROUP,
                messages.scaled_up_group(resize.group, resize.current, resize.new, resize.max),
            )
        )
    if resizes:
        for pod in result.scale_up.triggered_pods:
            events.append(
                Event(_pod_ref(pod), NORMAL, TRIGGERED_SCALE_UP, messages.triggered_scale_up(resizes))
            )
    for pod, rejections in sorted(result.scale_up.pods_remaining.items()):
        events.append(
            Event(
                _pod_ref(pod),
                NORMAL,
                NOT_TRIGGER_SCALE_UP,
                messages.not_trigger_scale_up(_rejection_summary(rejections)),
            )
        )

    utilization = {node.node: node.utilization for node in result.scale_down.unneeded}
    for deletion in (*result.scale_down.deletions, *result.cleanups):
        node_ref = ObjectRef.node(deletion.node)
        if not deletion.ok:
            events.append(
                Event(node_ref, WARNING, SCALE_DOWN_FAILED, messages.scale_down_failed(deletion.error))
            )
            continue
        if deletion.kind is d.DeletionKind.EMPTY:
            message = messages.scale_down_empty(deletion.node)
        else:
            message = messages.scale_down(
                deletion.node, utilization.get(deletion.node, 0.0), deletion.evicted_pods
            )
        reason = SCALE_DOWN_EMPTY if deletion.kind is d.DeletionKind.EMPTY else SCALE_DOWN
        events.append(Event(status_ref, NORMAL, reason, message))
        events.append(Event(node_ref, NORMAL, SCALE_DOWN, messages.node_marked()))
        for pod in deletion.evicted_pods:
            events.append(Event(_pod_ref(pod), NORMAL, SCALE_DOWN, messages.pod_evicted()))
    return events


def _rejection_summary(rejections: Iterable[d.GroupRejection]) -> list[str]:
    """CA's form: `N node(s) had <reason>`-style counts, grouped by reason."""
    by_reason: Counter[str] = Counter()
    for rejection in rejections:
        text = rejection.detail or rejection.reason.value
        by_reason[text] += 1
    return [f"{count} {reason}" for reason, count in sorted(by_reason.items())]


def update_metrics(metrics: Metrics, result: d.LoopResult) -> None:
    """Set CA's gauges and advance its counters from one loop's result."""
    counts = result.health.counts
    metrics.cluster_safe_to_autoscale.set(1 if result.health.healthy and not result.halted else 0)
    metrics.update_nodes_count(
        ready=counts.ready,
        unready=counts.unready,
        not_started=counts.not_started,
        long_unregistered=counts.long_unregistered,
        unregistered=counts.unregistered,
    )
    metrics.node_groups_count.labels(node_group_type="autoscaled").set(len(result.node_groups))
    metrics.unschedulable_pods_count.labels(type="unschedulable").set(len(result.pending_pods))
    for group in result.node_groups:
        metrics.node_group_healthiness.labels(node_group=group.name).set(1 if group.healthy else 0)
        metrics.update_node_group(
            group.name, min_size=group.min_size, max_size=group.max_size, target=group.target_size
        )
    scaled_up = sum(decision.delta for decision in result.scale_up.decisions)
    if scaled_up:
        metrics.scaled_up_nodes_total.inc(scaled_up)
    if result.scale_up.status is d.ScaleUpStatus.ERROR:
        metrics.failed_scale_ups_total.labels(reason="cloudProviderError").inc()
    for deletion in (*result.scale_down.deletions, *result.cleanups):
        if not deletion.ok:
            continue
        metrics.scaled_down_nodes_total.labels(reason=_deletion_reason(deletion.kind)).inc()
        for _ in deletion.evicted_pods:
            metrics.evicted_pods_total.labels(eviction_result="succeeded").inc()
    metrics.unneeded_nodes_count.set(len(result.scale_down.unneeded))
    unremovable = Counter(node.reason.value for node in result.scale_down.unremovable)
    metrics.unremovable_nodes_count.clear()
    for reason, count in unremovable.items():
        metrics.unremovable_nodes_count.labels(reason=reason).set(count)
    metrics.scale_down_in_cooldown.set(
        1 if result.scale_down.status is d.ScaleDownStatus.IN_COOLDOWN else 0
    )
    for error in result.errors:
        metrics.register_error(_error_type(error))


def _deletion_reason(kind: d.DeletionKind) -> str:
    # CA's NodeScaleDownReason label values.
    return {
        d.DeletionKind.EMPTY: "empty",
        d.DeletionKind.DRAIN: "underutilized",
        d.DeletionKind.UNREADY: "unready",
        d.DeletionKind.UNREGISTERED: "unregistered",
        d.DeletionKind.CREATE_ERROR: "unregistered",
    }[kind]


def _error_type(error: str) -> str:
    # CA's error types are cloudProviderError, apiCallError, internalError, ...; the loop's
    # messages start with the failing component.
    lowered = error.lower()
    if "cloud" in lowered or "provider" in lowered or "node group" in lowered:
        return "cloudProviderError"
    if "api" in lowered or "kubernetes" in lowered:
        return "apiCallError"
    return "internalError"
