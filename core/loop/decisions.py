"""The decisions of one autoscaling loop, as plain values.

`run_once` returns a `LoopResult`; events, the status ConfigMap, metrics, logs, `explain`
and `simulate --once --json` all read it. Reason names are Cluster Autoscaler's, so users
can search for them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from clusterscaler.framework.errors import ErrorType
from clusterscaler.interfaces.cloudprovider import ProviderProblem
from clusterscaler.interfaces.expander import ExpanderWarning
from clusterscaler.interfaces.podfilter import BlockingPodReason
from clusterscaler.model import UnreadableObject
from clusterscaler.model.provisioning import Condition

if TYPE_CHECKING:
    from clusterscaler.loop.capacitybuffers import BufferResult
    from clusterscaler.loop.quotas import CapacityQuotaStatus


class UnremovableReason(enum.Enum):
    """Why a node cannot be removed (CA's `simulator.UnremovableReason`)."""

    NO_REASON = "NoReason"
    SCALE_DOWN_DISABLED_ANNOTATION = "ScaleDownDisabledAnnotation"
    SCALE_DOWN_UNREADY_DISABLED = "ScaleDownUnreadyDisabled"
    NOT_AUTOSCALED = "NotAutoscaled"
    NOT_UNNEEDED_LONG_ENOUGH = "NotUnneededLongEnough"
    NOT_UNREADY_LONG_ENOUGH = "NotUnreadyLongEnough"
    NODE_GROUP_MIN_SIZE_REACHED = "NodeGroupMinSizeReached"
    NODE_GROUP_MAX_DELETION_COUNT_REACHED = "NodeGroupMaxDeletionCountReached"
    ATOMIC_SCALE_DOWN_FAILED = "AtomicScaleDownFailed"
    MINIMAL_RESOURCE_LIMIT_EXCEEDED = "MinimalResourceLimitExceeded"
    CURRENTLY_BEING_DELETED = "CurrentlyBeingDeleted"
    NOT_UNDERUTILIZED = "NotUnderutilized"
    NOT_UNNEEDED_OTHER_REASON = "NotUnneededOtherReason"
    RECENTLY_UNREMOVABLE = "RecentlyUnremovable"
    NO_PLACE_TO_MOVE_PODS = "NoPlaceToMovePods"
    BLOCKED_BY_POD = "BlockedByPod"
    BLOCKED_BY_ON_COMPLETION_POD = "BlockedByOnCompletionPod"
    UNEXPECTED_ERROR = "UnexpectedError"
    NO_NODE_INFO = "NoNodeInfo"


class NoScaleUpReason(enum.Enum):
    """Why a node group cannot help a pending pod; the text is what CA's event says."""

    NOT_SCHEDULABLE = "pod does not fit the node group's template"
    MAX_SIZE_REACHED = "max node group size reached"
    BACKED_OFF = "in backoff after failed scale-up"
    UNHEALTHY = "node group has too many unready nodes"
    NOT_EXIST = "node group does not exist"
    NO_TEMPLATE = "no template node available"
    MAX_NODES_TOTAL_REACHED = "max node total count already reached"
    CPU_LIMIT_REACHED = "max cluster cpu limit reached"
    MEMORY_LIMIT_REACHED = "max cluster memory limit reached"
    GPU_LIMIT_REACHED = "max cluster gpu limit reached"
    NOT_SELECTED = "another node group was chosen"
    # A zero-or-max (atomic) group grows to its max size at once or not at all.
    ATOMIC_MAX_NODES_TOTAL = "atomic scale-up exceeds cluster node count limit"
    ATOMIC_MAX_NODES_PER_SCALE_UP = "atomic scale-up exceeds max nodes per scale-up"
    SCALE_UP_FROM_ZERO_DISABLED = "scale-up from zero ready nodes is disabled"
    # A CapacityQuota (--capacity-quotas-enabled) that the group's nodes would exceed; the
    # detail names it and its resources, so that `<reason>: <detail>` is upstream's text.
    CAPACITY_QUOTA_EXCEEDED = "exceeded quota"


class ScaleUpStatus(enum.Enum):
    """CA's `ScaleUpStatus` results, which status and metrics report."""

    SUCCESSFUL = "Successful"
    ERROR = "Error"
    NO_OPTIONS_AVAILABLE = "NoOptionsAvailable"
    NOT_NEEDED = "NotNeeded"
    NOT_TRIED = "NotTried"
    IN_COOLDOWN = "InCooldown"


class ScaleDownStatus(enum.Enum):
    """CA's `ScaleDownResult` values."""

    NO_UNNEEDED = "NoUnneeded"
    NO_NODE_DELETED = "NoNodeDeleted"
    NODE_DELETE_STARTED = "NodeDeleteStarted"
    IN_COOLDOWN = "InCooldown"
    ERROR = "Error"
    NOT_TRIED = "NotTried"


class DeletionKind(enum.Enum):
    EMPTY = "empty"
    DRAIN = "drain"
    UNREADY = "unready"
    UNREGISTERED = "unregistered"
    CREATE_ERROR = "create-error"


@dataclass(frozen=True, slots=True)
class BlockingPod:
    """The pod that blocks a node's removal, with the reason."""

    pod: str
    reason: BlockingPodReason
    detail: str = ""


@dataclass(frozen=True, slots=True)
class GroupRejection:
    """Why one node group could not help a set of pending pods."""

    node_group: str
    reason: NoScaleUpReason
    detail: str = ""
    # The cluster-wide maxima (`loop.limits` names: "cpu", "memory", ...) the group's
    # scale-up would exceed, when a resource limit rejects it
    # (skipped_scale_events_count{direction="up"}).
    exceeded: tuple[str, ...] = ()
    # For a pod that fits the group's template node but that the group's planned scale-up
    # left out (its new nodes taken by other pods): what happened, which explain says in
    # place of the reason. The reason stays what CA's event says once the group is full.
    left_out_by_plan: str = ""


@dataclass(frozen=True, slots=True)
class ScaleUpOption:
    """One way to help pending pods: `node_count` new nodes in `node_group`, holding `pods`."""

    node_group: str
    node_count: int
    pods: tuple[str, ...]
    similar_node_groups: tuple[str, ...] = ()
    debug: str = ""


@dataclass(frozen=True, slots=True)
class ScaleUpDecision:
    """One `increase_size` call: the group, by how much, and the size before."""

    node_group: str
    delta: int
    target_before: int
    pods: tuple[str, ...] = ()
    reason: str = "pending pods"


@dataclass(frozen=True, slots=True)
class ScaleUpResult:
    status: ScaleUpStatus
    decisions: tuple[ScaleUpDecision, ...] = ()
    # Pods that the chosen scale-up will help (TriggeredScaleUp events).
    triggered_pods: tuple[str, ...] = ()
    # Pods that no node group can help, with each group's reason (NotTriggerScaleUp).
    pods_remaining: dict[str, tuple[GroupRejection, ...]] = field(default_factory=dict)
    # The pending pods the plan considered that some group cannot help, helped ones
    # included, with the reason of each such group (`explain` lists them next to the group
    # that does); a pod every group can help has no entry. The plan's own table, handed
    # over without a copy: read it, never change it.
    group_rejections: Mapping[str, Sequence[GroupRejection]] = field(default_factory=dict)
    options: tuple[ScaleUpOption, ...] = ()
    error: str = ""
    # Warnings expanders raised while choosing (e.g. priority ConfigMap problems).
    expander_warnings: tuple[ExpanderWarning, ...] = ()


@dataclass(frozen=True, slots=True)
class UnremovableNode:
    node: str
    reason: UnremovableReason
    blocking_pod: BlockingPod | None = None
    detail: str = ""
    # The cluster-wide minima (`loop.limits` names) its removal would go below, for
    # MinimalResourceLimitExceeded (skipped_scale_events_count{direction="down"}).
    exceeded: tuple[str, ...] = ()
    # Not evaluated in this loop: the removal simulation stopped before it
    # (--scale-down-simulation-timeout) or left it out (--scale-down-non-empty-candidates-count);
    # for max_node_skip_eval_duration_seconds.
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class UnneededNode:
    """A node that could be removed, unneeded since `since`; `empty` means nothing to move.

    `removable_at` is when it has been unneeded long enough to go, by its node group's
    effective --scale-down-unneeded-time (or --scale-down-unready-time for an unready
    node), per-group overrides included: `explain` and `simulate` report it as decided.
    """

    node: str
    node_group: str
    since: datetime
    empty: bool
    utilization: float
    # Where the simulation moved each pod (pod key -> node), reused as hints next loop.
    destinations: dict[str, str] = field(default_factory=dict)
    removable_at: datetime = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class NodeDeletion:
    """One node's deletion: started (in `ScaleDownResult.started`), or finished with its
    outcome (in `ScaleDownResult.deletions` and `LoopResult.cleanups`); `error` is empty
    on success, and `error_type` is then CA's type of the failure (errors_total{type})."""

    node: str
    node_group: str
    kind: DeletionKind
    evicted_pods: tuple[str, ...] = ()
    error: str = ""
    # On a finished deletion: its start was reported in `started` of a loop, so the events
    # CA records when a deletion starts have been recorded already.
    start_reported: bool = False
    error_type: ErrorType | None = None
    # Removed with a drain (CA's drain set: pods to move) rather than as empty; an
    # unready node is either.
    drain: bool = False
    # On a failure: the step that failed (taint, cordon, evict, wait, delete, ...), and the
    # pods whose eviction failed.
    failed_step: str = ""
    failed_pods: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind is DeletionKind.DRAIN and not self.drain:
            object.__setattr__(self, "drain", True)

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass(frozen=True, slots=True)
class ScaleDownResult:
    """Scale-down in one loop.

    Deletions run in the background: `started` are the deletions this loop started,
    `deletions` those that finished (succeeded or failed and rolled back) since the previous
    loop, each reported once, and `in_flight` the nodes still being deleted when the loop
    ended. A deletion that finishes within its loop (always, with the inline executor of
    `simulate`) is in both `started` and `deletions`.
    """

    status: ScaleDownStatus
    unneeded: tuple[UnneededNode, ...] = ()
    unremovable: tuple[UnremovableNode, ...] = ()
    deletions: tuple[NodeDeletion, ...] = ()
    cooldown_reason: str = ""
    started: tuple[NodeDeletion, ...] = ()
    in_flight: tuple[str, ...] = ()


class ScaleUpFailureKind(enum.Enum):
    """How a scale-up failed, each with CA's event: `increase_size` refused
    (FailedToScaleUpGroup), instances the provider failed to create (ScaleUpFailed), or
    requested nodes that did not register within --max-node-provision-time
    (ScaleUpTimedOut)."""

    INCREASE_SIZE = "increase-size"
    CREATE_ERRORS = "create-errors"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class ScaleUpFailure:
    """One failed scale-up of a node group, as CA registers it.

    `reason` is failed_scale_ups_total's reason (CA's error type for a refused
    `increase_size`, the provider's error code for failed instances, `timeout`); `nodes`
    how many nodes did not come (failed_node_creations_total). `error` is the provider's
    error (or the `<class>.<code>` of failed instances, whose messages are in `message`);
    `waited` how long a timed-out scale-up was waited for."""

    node_group: str
    kind: ScaleUpFailureKind
    reason: str
    nodes: int
    error: str = ""
    message: str = ""
    waited: timedelta = timedelta(0)


@dataclass(frozen=True, slots=True)
class FailedRevert:
    """A timed-out scale-up whose capacity never created could not be cancelled: the
    node group's `decrease_target_size(delta)` failed with `error` (CA's
    FailedToRevertScaleUp). The group is backed off all the same."""

    node_group: str
    delta: int
    error: str


@dataclass(frozen=True, slots=True)
class TaintCleanup:
    """An autoscaler taint removed from a node (or whose removal failed, `error`) while
    cleaning what an earlier run left (CA's ClusterAutoscalerCleanup)."""

    node: str
    taint: str
    error: str = ""


@dataclass(frozen=True, slots=True)
class BackoffInfo:
    until: datetime
    error_class: str
    error_code: str
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class NodeCounts:
    """Registered nodes by state, plus unregistered instances (CA's ``NodeCount``), as the
    status ConfigMap reports them."""

    total: int = 0
    ready: int = 0
    unready: int = 0
    # Of the unready ones, those only missing resources (e.g. GPUs not advertised yet).
    resource_unready: int = 0
    not_started: int = 0
    being_deleted: int = 0
    unregistered: int = 0
    long_unregistered: int = 0
    # Registered nodes whose instance the provider reports suspended (CA's
    # registered.suspended); no provider here suspends instances yet.
    suspended: int = 0


@dataclass(frozen=True, slots=True)
class NodeGroupStatus:
    name: str
    min_size: int
    max_size: int
    target_size: int
    counts: NodeCounts
    upcoming: int
    healthy: bool
    backoff: BackoffInfo | None = None
    scale_up_in_progress: bool = False
    # The group's GPU as CA labels its metrics (gpu_resource_name, gpu_name): both empty
    # for a group without GPUs.
    gpu_resource_name: str = ""
    gpu_name: str = ""
    # The DRA drivers of the group's template devices, sorted and comma-separated, as CA
    # labels its scaling metrics (dra_drivers); empty for a group without DRA devices.
    dra_drivers: str = ""
    # Why the provider says no node of the group may be removed now ("" when they may),
    # e.g. a Cluster API MachineDeployment that is rolling out.
    scale_down_blocked: str = ""


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    healthy: bool
    counts: NodeCounts
    message: str = ""


@dataclass(frozen=True, slots=True)
class ProvisioningRequestResult:
    """A request as the loop leaves it: its conditions, and the types it changed (the
    request's status is written when `changed` is not empty)."""

    namespace: str
    name: str
    class_name: str
    conditions: tuple[Condition, ...]
    changed: tuple[str, ...] = ()
    api_version: str = ""
    # Deleted, as CA deletes a request whose Provisioned or Failed condition is older than
    # a week (`uid`: the object meant, a precondition of the deletion).
    delete: bool = False
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def statuses(self) -> dict[str, str]:
        """Each condition's status by type."""
        return {c.type: c.status for c in self.conditions}


@dataclass(frozen=True, slots=True)
class LoopResult:
    """Everything one `run_once` decided and did."""

    time: datetime
    health: ClusterHealth
    node_groups: tuple[NodeGroupStatus, ...] = ()
    scale_up: ScaleUpResult = field(
        default_factory=lambda: ScaleUpResult(status=ScaleUpStatus.NOT_TRIED)
    )
    scale_down: ScaleDownResult = field(
        default_factory=lambda: ScaleDownResult(status=ScaleDownStatus.NOT_TRIED)
    )
    # Why the loop stopped early (unhealthy cluster, provider failure), empty otherwise.
    halted: str = ""
    pending_pods: tuple[str, ...] = ()
    # Deletions of unregistered or failed instances done by cluster-state upkeep.
    cleanups: tuple[NodeDeletion, ...] = ()
    # What failed in this loop without stopping it; a `LoopError` entry carries CA's error
    # type (errors_total{type}), a plain string counts as an internal error.
    errors: tuple[str, ...] = ()
    duration: timedelta = timedelta(0)
    # Configuration problems the cloud provider reported at its last refresh (bad tags or
    # annotations of a node group), so users see a misconfigured group.
    problems: tuple[ProviderProblem, ...] = ()
    # Taints on the cluster's nodes by type, as CA's CountNodeTaints reports them (see
    # `TaintConfig.report_type`: "startup-taint", "status-taint", "other", the key of the
    # autoscaler's and node-condition taints, the deprecated ignore-taint prefix), for
    # cluster_autoscaler_node_taints_count{type}. None: the loop stopped before counting.
    taint_counts: dict[str, int] | None = None
    # The caches that stopped following the cluster (`resource: why`): while any is
    # stale, the loop takes no destructive action (scale-down, instance clean-up).
    stale_caches: tuple[str, ...] = ()
    # Objects of the cluster the model could not read, left out of this loop (the nodes
    # their pods are bound to are kept).
    unreadable: tuple[UnreadableObject, ...] = ()
    # Scale-ups that failed in this loop (refused, instances failed, timed out).
    scale_up_failures: tuple[ScaleUpFailure, ...] = ()
    # --max-nodes-total in force (0: none), for CA's MaxNodesTotalReached.
    max_nodes_total: int = 0
    # Stale autoscaler taints removed (or not) in this loop.
    taint_cleanups: tuple[TaintCleanup, ...] = ()
    # Timed-out scale-ups whose target could not be decreased back in this loop.
    failed_reverts: tuple[FailedRevert, ...] = ()
    # Per DRA driver, how the devices ready nodes publish differ from their node group's
    # template (missing, extra, mismatch, unknown: see `simulator.dra_compare`), for
    # dra_node_template_resources_mismatch. None: the loop stopped before comparing.
    dra_template_mismatch: dict[str, dict[str, int]] | None = None
    # The ProvisioningRequests served (--enable-provisioning-requests), with the
    # conditions this loop left them with; those it changed are written to their status.
    provisioning_requests: tuple[ProvisioningRequestResult, ...] = ()
    # Unschedulable pods left out of scale-up as they consume a ProvisioningRequest, with
    # the request (`namespace/name`), for CA's event on each.
    provisioning_request_consumers: tuple[tuple[str, str], ...] = ()
    # CapacityBuffers (--capacity-buffer-controller-enabled,
    # --capacity-buffer-pod-injection-enabled): each one's status, the PodTemplate its
    # controller keeps, and the placeholder pods injected for it.
    capacity_buffers: tuple[BufferResult, ...] = ()
    # CapacityQuotas (--capacity-quotas-enabled): the status each one gets (usage and
    # conditions); those that changed are written to their status.
    capacity_quotas: tuple[CapacityQuotaStatus, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (enums by value, times in ISO 8601)."""
        out: dict[str, Any] = _jsonable(asdict(self))
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
