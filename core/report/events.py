"""Events with Cluster Autoscaler's reasons and messages, deduplicated as CA does.

Where CA records them:

- on the status ConfigMap: ``ScaledUpGroup``, ``FailedToScaleUpGroup``, ``ScaleUpFailed``,
  ``ScaleUpTimedOut``, ``FailedToRevertScaleUp``, ``MaxNodesTotalReached``, ``ClusterUnhealthy``,
  ``DeleteUnregistered``, ``DeleteUnregisteredFailed``, ``ScaleDownEmpty``, ``ScaleDown``;
- on the priority expander's ConfigMap: ``PriorityConfigMapInvalid``,
  ``PriorityConfigMapNotMatchedGroup``, ``PriorityConfigMapNoGroupMatched``;
- on nodes: ``ScaleDown`` (progress of a node's removal), ``ScaleDownFailed``,
  ``ClusterAutoscalerCleanup`` (a taint an earlier run left, removed);
- on pods: ``TriggeredScaleUp``, ``NotTriggerScaleUp``, ``ScaleDown`` (evicted for a drain);
- on CapacityBuffers, for their placeholder pods: ``TriggeredScaleUp``, ``NotTriggerScaleUp``
  (``buffer_events.py``).

Node deletions run in the background: ``ScaleDown``/``ScaleDownEmpty`` on the ConfigMap and
"marked the node as toBeDeleted/unschedulable" are recorded when a deletion starts; pod
evictions, then "nodes removed by cluster autoscaler" on the node and "Scale-down: (empty)
node <n> removed" on the ConfigMap, or ``ScaleDownFailed`` (on the node, and on each pod
that could not be evicted), when it finishes. Each is recorded once.

An event equal to one recorded less than five minutes ago (same object, type, reason and
message) is dropped unless ``--record-duplicated-events``. In ``--dry-run`` every message is
prefixed with ``[dry-run]`` so nobody mistakes a decision for an action.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

import structlog
from clusterscaler.report.event_messages import GroupResize, messages

if TYPE_CHECKING:
    from clusterscaler.loop.decisions import GroupRejection, LoopResult, NodeDeletion

__all__ = [
    "CLUSTER_AUTOSCALER_CLEANUP",
    "CLUSTER_UNHEALTHY",
    "DEDUP_WINDOW",
    "DELETE_UNREGISTERED",
    "DELETE_UNREGISTERED_FAILED",
    "DRY_RUN_PREFIX",
    "FAILED_TO_REVERT_SCALE_UP",
    "FAILED_TO_SCALE_UP_GROUP",
    "MAX_NODES_TOTAL_REACHED",
    "NORMAL",
    "NOT_TRIGGER_SCALE_UP",
    "PRIORITY_CONFIG_MAP_INVALID",
    "PRIORITY_CONFIG_MAP_NOT_MATCHED_GROUP",
    "PRIORITY_CONFIG_MAP_NO_GROUP_MATCHED",
    "PRIORITY_CONFIG_MAP_REASONS",
    "SCALED_UP_GROUP",
    "SCALE_DOWN",
    "SCALE_DOWN_EMPTY",
    "SCALE_DOWN_FAILED",
    "SCALE_UP_FAILED",
    "SCALE_UP_TIMED_OUT",
    "TRIGGERED_SCALE_UP",
    "WARNING",
    "Event",
    "EventRecorder",
    "EventSink",
    "GroupResize",
    "MemoryEventSink",
    "ObjectRef",
    "events_for_result",
    "messages",
]

log = structlog.get_logger()

NORMAL = "Normal"
WARNING = "Warning"

SCALED_UP_GROUP = "ScaledUpGroup"
SCALE_DOWN_EMPTY = "ScaleDownEmpty"
SCALE_DOWN = "ScaleDown"
SCALE_DOWN_FAILED = "ScaleDownFailed"
TRIGGERED_SCALE_UP = "TriggeredScaleUp"
NOT_TRIGGER_SCALE_UP = "NotTriggerScaleUp"
# At most this many events a loop on pods that consume a ProvisioningRequest (CA's).
MAX_PROVREQ_EVENTS = 50
FAILED_TO_SCALE_UP_GROUP = "FailedToScaleUpGroup"
SCALE_UP_FAILED = "ScaleUpFailed"
SCALE_UP_TIMED_OUT = "ScaleUpTimedOut"
FAILED_TO_REVERT_SCALE_UP = "FailedToRevertScaleUp"
MAX_NODES_TOTAL_REACHED = "MaxNodesTotalReached"
CLUSTER_UNHEALTHY = "ClusterUnhealthy"
DELETE_UNREGISTERED = "DeleteUnregistered"
DELETE_UNREGISTERED_FAILED = "DeleteUnregisteredFailed"
CLUSTER_AUTOSCALER_CLEANUP = "ClusterAutoscalerCleanup"
# The priority expander's, on its ConfigMap.
PRIORITY_CONFIG_MAP_INVALID = "PriorityConfigMapInvalid"
PRIORITY_CONFIG_MAP_NOT_MATCHED_GROUP = "PriorityConfigMapNotMatchedGroup"
PRIORITY_CONFIG_MAP_NO_GROUP_MATCHED = "PriorityConfigMapNoGroupMatched"
PRIORITY_CONFIG_MAP_REASONS = frozenset(
    {
        PRIORITY_CONFIG_MAP_INVALID,
        PRIORITY_CONFIG_MAP_NOT_MATCHED_GROUP,
        PRIORITY_CONFIG_MAP_NO_GROUP_MATCHED,
    }
)

DEDUP_WINDOW = timedelta(minutes=5)
DRY_RUN_PREFIX = "[dry-run] "


@dataclass(frozen=True)
class ObjectRef:
    """The object an event is about (its ``involvedObject``)."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"

    @classmethod
    def node(cls, name: str, uid: str = "") -> ObjectRef:
        return cls("Node", name, "", uid)

    @classmethod
    def pod(cls, namespace: str, name: str, uid: str = "") -> ObjectRef:
        return cls("Pod", name, namespace, uid)

    @classmethod
    def config_map(cls, namespace: str, name: str, uid: str = "") -> ObjectRef:
        return cls("ConfigMap", name, namespace, uid)

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}/{where}{self.name}"


@dataclass(frozen=True)
class Event:
    """One event: ``type`` is Normal or Warning; ``reason`` one of CA's reasons."""

    involved: ObjectRef
    type: str
    reason: str
    message: str

    def __post_init__(self) -> None:
        if self.type not in (NORMAL, WARNING):
            raise ValueError(
                f"event {self.reason} on {self.involved}: type {self.type!r} must be "
                f"{NORMAL!r} or {WARNING!r}"
            )


class EventSink(Protocol):
    """Where recorded events go (the Kubernetes API, a list in tests)."""

    def write(self, event: Event, timestamp: datetime) -> None:
        """Persist one event. Failures must be handled (logged) by the sink, not raised."""
        ...


class EventRecorder:
    """Records events to a sink, dropping duplicates within ``DEDUP_WINDOW``."""

    def __init__(
        self,
        sink: EventSink,
        *,
        record_duplicates: bool = False,
        dry_run: bool = False,
        window: timedelta = DEDUP_WINDOW,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.sink = sink
        self.record_duplicates = record_duplicates
        self.dry_run = dry_run
        self.window = window
        self.clock = clock
        self._last_seen: dict[Event, datetime] = {}
        self._lock = threading.Lock()
        self.dropped = 0

    def record(self, event: Event) -> bool:
        """Record ``event``; False when it was dropped as a duplicate."""
        if self.dry_run and not event.message.startswith(DRY_RUN_PREFIX):
            event = Event(event.involved, event.type, event.reason, DRY_RUN_PREFIX + event.message)
        now = self.clock()
        with self._lock:
            last = self._last_seen.get(event)
            if not self.record_duplicates and last is not None and now - last < self.window:
                self.dropped += 1
                return False
            self._last_seen[event] = now
            if len(self._last_seen) > 4096:
                self._forget(now)
        log.info(
            "event",
            object=str(event.involved),
            type=event.type,
            reason=event.reason,
            message=event.message,
        )
        self.sink.write(event, now)
        return True

    def _forget(self, now: datetime) -> None:
        for key in [k for k, t in self._last_seen.items() if now - t >= self.window]:
            del self._last_seen[key]

    def normal(self, involved: ObjectRef, reason: str, message: str) -> bool:
        return self.record(Event(involved, NORMAL, reason, message))

    def warning(self, involved: ObjectRef, reason: str, message: str) -> bool:
        return self.record(Event(involved, WARNING, reason, message))


class MemoryEventSink:
    """Keeps events in a list (for ``simulate`` and tests)."""

    def __init__(self) -> None:
        self.events: list[tuple[Event, datetime]] = []

    def write(self, event: Event, timestamp: datetime) -> None:
        self.events.append((event, timestamp))


def _event_reasons(rejection: GroupRejection) -> list[str]:
    """A group's reasons for not helping a pod, in CA's `NotTriggerScaleUp` words: for a
    template the pod does not fit, the failing filter's reasons (upstream's
    `SchedulingError.Reasons()`: `Insufficient cpu`, `persistentvolumeclaim "data" not
    found`), NodeResourcesFit's one per resource; for a quota,
    `exceeded quota: "CapacityQuota/<name>", resources: <names>`."""
    from clusterscaler.loop.decisions import NoScaleUpReason

    text = rejection.reason.value
    if rejection.reason is NoScaleUpReason.NOT_SCHEDULABLE and rejection.detail:
        parts = rejection.detail.split(", ")
        if all(p.startswith("Insufficient ") for p in parts):
            return parts
        return [rejection.detail]
    if rejection.reason is NoScaleUpReason.CAPACITY_QUOTA_EXCEEDED:
        return [f"{text}: {rejection.detail}"]
    return [text]


def events_for_result(result: LoopResult, status_config_map: ObjectRef) -> list[Event]:
    """The events CA records for one loop's decisions, in CA's words.

    Pods are named ``namespace/name`` in the result; their events carry no uid.
    """
    from clusterscaler.loop.decisions import DeletionKind

    out: list[Event] = []
    if not result.health.healthy:
        out.append(
            Event(status_config_map, WARNING, CLUSTER_UNHEALTHY, messages.cluster_unhealthy())
        )
    out.extend(_cleanup_events(result, status_config_map))
    max_sizes = {g.name: g.max_size for g in result.node_groups}
    out.extend(_scale_up_failure_events(result, status_config_map))
    if _max_nodes_total_reached(result):
        out.append(
            Event(
                status_config_map,
                WARNING,
                MAX_NODES_TOTAL_REACHED,
                messages.max_nodes_total_reached(result.max_nodes_total),
            )
        )
    out.extend(_expander_events(result))
    resizes_by_pod: dict[str, list[GroupResize]] = {}
    for decision in result.scale_up.decisions:
        new = decision.target_before + decision.delta
        max_size = max_sizes.get(decision.node_group, new)
        out.append(
            Event(
                status_config_map,
                NORMAL,
                SCALED_UP_GROUP,
                messages.scaled_up_group(
                    decision.node_group, decision.target_before, new, max_size
                ),
            )
        )
        resize = GroupResize(decision.node_group, decision.target_before, new, max_size)
        for pod in decision.pods:
            resizes_by_pod.setdefault(pod, []).append(resize)
    # CapacityBuffers' placeholder pods exist nowhere: their events go to their buffers.
    buffer_of = {p: r for r in result.capacity_buffers for p in r.pods}
    buffer_reasons: dict[str, list[str]] = {}
    for pod, resizes in resizes_by_pod.items():
        if pod in buffer_of:
            continue
        out.append(
            Event(_pod_ref(pod), NORMAL, TRIGGERED_SCALE_UP, messages.triggered_scale_up(resizes))
        )
    for pod, rejections in result.scale_up.pods_remaining.items():
        if pod in resizes_by_pod:
            continue
        counts: dict[str, int] = {}
        for rejection in rejections:
            for text in _event_reasons(rejection):
                counts[text] = counts.get(text, 0) + 1
        # As CA: "<count> <reason>" per distinct reason, sorted as strings; with no node
        # group at all CA's message ends after the colon.
        reasons = sorted(f"{n} {text}" for text, n in counts.items())
        if pod in buffer_of:
            buffer_reasons.setdefault(pod, reasons)
            continue
        out.append(
            Event(
                _pod_ref(pod), NORMAL, NOT_TRIGGER_SCALE_UP, messages.not_trigger_scale_up(reasons)
            )
        )
    if buffer_of:
        from clusterscaler.report.buffer_events import buffer_events

        out.extend(buffer_events(result, buffer_of, resizes_by_pod, buffer_reasons))
    # As CA's ProvisioningRequestPodsFilter: on at most 50 pods a loop, and with no reason.
    for pod, request in result.provisioning_request_consumers[:MAX_PROVREQ_EVENTS]:
        out.append(
            Event(
                _pod_ref(pod),
                NORMAL,
                "",
                "Unschedulable pod didn't trigger scale-up, because it's consuming "
                f"ProvisioningRequest {request}",
            )
        )
    unneeded = {u.node: u for u in result.scale_down.unneeded}

    def started_events(deletion: NodeDeletion, pods: Iterable[str]) -> list[Event]:
        # What CA records when it starts removing a node: on the status ConfigMap, and on
        # the node once it carries the ToBeDeleted taint.
        node = ObjectRef.node(deletion.node)
        if deletion.kind is DeletionKind.EMPTY:
            announce = Event(
                status_config_map,
                NORMAL,
                SCALE_DOWN_EMPTY,
                messages.scale_down_empty(deletion.node),
            )
        else:
            u = unneeded.get(deletion.node)
            announce = Event(
                status_config_map,
                NORMAL,
                SCALE_DOWN,
                messages.scale_down(deletion.node, u.utilization if u else 0.0, pods),
            )
        return [announce, Event(node, NORMAL, SCALE_DOWN, messages.node_marked())]

    # Deletions run in the background: the start events come with `started`, the outcome
    # (evicted pods, or the failure) with `deletions` when the deletion finished.
    started_nodes = {d.node for d in result.scale_down.started}
    for deletion in result.scale_down.started:
        u = unneeded.get(deletion.node)
        out.extend(started_events(deletion, sorted(u.destinations) if u else ()))
    for deletion in result.scale_down.deletions:
        node = ObjectRef.node(deletion.node)
        if deletion.error:
            out.extend(_deletion_failed_events(deletion))
            continue
        if not deletion.start_reported and deletion.node not in started_nodes:
            # A finished deletion whose start no result reported (a result built by hand,
            # or a loop that did not report `started`): its start events come now.
            out.extend(started_events(deletion, deletion.evicted_pods))
        for pod in deletion.evicted_pods:
            out.append(Event(_pod_ref(pod), NORMAL, SCALE_DOWN, messages.pod_evicted()))
        # As CA's RegisterAndRecordSuccessfulScaleDownEvent: on the node (which CA's spam
        # filter usually drops, "marked" having used the node's ScaleDown token), then on
        # the status ConfigMap.
        out.append(Event(node, NORMAL, SCALE_DOWN, messages.node_deleted()))
        out.append(
            Event(
                status_config_map,
                NORMAL,
                SCALE_DOWN if deletion.drain else SCALE_DOWN_EMPTY,
                messages.node_removed(deletion.node, drain=deletion.drain),
            )
        )
    return out


def _deletion_failed_events(deletion: NodeDeletion) -> list[Event]:
    """CA's events for a node it did not remove: a taint it could not write
    (actuator.go), each pod it could not evict (drain.go), or the removal that failed after
    (CleanUpAndRecordFailedScaleDownEvent)."""
    node = ObjectRef.node(deletion.node)
    if deletion.failed_step in ("taint", "cordon"):
        return [Event(node, WARNING, SCALE_DOWN_FAILED, messages.taint_failed(deletion.error))]
    out = [
        Event(_pod_ref(pod), WARNING, SCALE_DOWN_FAILED, messages.pod_eviction_failed())
        for pod in deletion.failed_pods
    ]
    message = messages.scale_down_failed(deletion.error, drain=deletion.drain)
    out.append(Event(node, WARNING, SCALE_DOWN_FAILED, message))
    return out


def _cleanup_events(result: LoopResult, status_config_map: ObjectRef) -> list[Event]:
    """Upkeep before deciding: stale taints removed from nodes, unregistered instances
    removed (CA records both before it scales)."""
    from clusterscaler.loop.decisions import DeletionKind

    out: list[Event] = []
    for cleanup in result.taint_cleanups:
        node = ObjectRef.node(cleanup.node)
        if cleanup.error:
            message = messages.taint_cleanup_failed(cleanup.taint, cleanup.node, cleanup.error)
            out.append(Event(node, WARNING, CLUSTER_AUTOSCALER_CLEANUP, message))
        else:
            message = messages.taint_cleaned(cleanup.taint, cleanup.node)
            out.append(Event(node, NORMAL, CLUSTER_AUTOSCALER_CLEANUP, message))
    for removal in result.cleanups:
        if removal.kind is not DeletionKind.UNREGISTERED:
            continue
        if removal.error:
            message = messages.delete_unregistered_failed(removal.node, removal.error)
            out.append(Event(status_config_map, WARNING, DELETE_UNREGISTERED_FAILED, message))
        else:
            message = messages.delete_unregistered(removal.node)
            out.append(Event(status_config_map, NORMAL, DELETE_UNREGISTERED, message))
    return out


def _scale_up_failure_events(result: LoopResult, status_config_map: ObjectRef) -> list[Event]:
    """CA announces every scale-up (ScaledUpGroup) before calling the provider, so a
    refused one is announced too, then reported as FailedToScaleUpGroup."""
    from clusterscaler.loop.decisions import ScaleUpFailureKind

    groups = {g.name: g for g in result.node_groups}
    out: list[Event] = []
    for failure in result.scale_up_failures:
        if failure.kind is ScaleUpFailureKind.INCREASE_SIZE:
            group = groups.get(failure.node_group)
            if group is not None:
                # A refused increase leaves the target where it was.
                new = group.target_size + failure.nodes
                announce = messages.scaled_up_group(
                    failure.node_group, group.target_size, new, group.max_size
                )
                out.append(Event(status_config_map, NORMAL, SCALED_UP_GROUP, announce))
            message = messages.failed_to_scale_up_group(failure.node_group, failure.error)
            out.append(Event(status_config_map, WARNING, FAILED_TO_SCALE_UP_GROUP, message))
        elif failure.kind is ScaleUpFailureKind.CREATE_ERRORS:
            message = messages.scale_up_failed(
                failure.nodes, failure.node_group, failure.error, failure.message
            )
            out.append(Event(status_config_map, WARNING, SCALE_UP_FAILED, message))
        else:
            message = messages.scale_up_timed_out(failure.node_group, failure.waited)
            out.append(Event(status_config_map, WARNING, SCALE_UP_TIMED_OUT, message))
    # After the timeout, the capacity never created is given back; when the provider
    # refuses, the group keeps asking for nodes that will not come.
    for revert in result.failed_reverts:
        message = messages.failed_to_revert_scale_up(revert.node_group, revert.error)
        out.append(Event(status_config_map, WARNING, FAILED_TO_REVERT_SCALE_UP, message))
    return out


def _max_nodes_total_reached(result: LoopResult) -> bool:
    """As CA: pending pods while --max-nodes-total is reached, or a scale-up that the
    limit held back (some pods then name the limit as their reason)."""
    from clusterscaler.loop.decisions import NoScaleUpReason

    if result.max_nodes_total <= 0 or not result.pending_pods:
        return False
    if result.health.counts.ready >= result.max_nodes_total:
        return True
    return any(
        r.reason is NoScaleUpReason.MAX_NODES_TOTAL_REACHED
        for rejections in result.scale_up.pods_remaining.values()
        for r in rejections
    )


def _expander_events(result: LoopResult) -> list[Event]:
    """Expander warnings (the priority expander's ConfigMap problems) on the object they
    are about, as CA's priority expander records them."""
    out: list[Event] = []
    for warning in result.scale_up.expander_warnings:
        ref = _object_ref(warning.object_ref)
        # Only the reasons CA records; other warnings are logged by the expander.
        if ref is not None and warning.reason in PRIORITY_CONFIG_MAP_REASONS:
            out.append(Event(ref, WARNING, warning.reason, warning.message))
    return out


def _object_ref(text: str) -> ObjectRef | None:
    """`Kind namespace/name` (or `Kind name`) as an ObjectRef; None when empty."""
    kind, _, where = text.partition(" ")
    if not kind or not where:
        return None
    namespace, _, name = where.rpartition("/")
    return ObjectRef(kind, name, namespace)


def _pod_ref(key: str) -> ObjectRef:
    namespace, _, name = key.partition("/")
    return ObjectRef.pod(namespace, name) if name else ObjectRef.pod("default", namespace)

