"""What the loop knows about the cluster beyond one snapshot.

`ClusterStateTracker` (CA's `ClusterStateRegistry`) keeps it: its `update()` is called
once per loop with the nodes and the cloud provider. It maps nodes to node groups, counts
readiness, finds instances that never registered (upcoming, or unregistered for longer
than --max-node-provision-time) and instances the cloud failed to create, tracks the
scale-ups in flight and backs node groups off exponentially when they fail. Every answer
is computed from `now`, never from the wall clock, so the simulator can drive it on a
virtual clock.

Readiness follows CA's taint rules (`loop.taints.TaintConfig`): a Ready node that still carries a
startup taint has not started yet, as if it were not Ready; a status taint leaves the node
Ready (its pods just cannot land there); both are dropped from template nodes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import structlog
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    Instance,
    InstanceErrorClass,
    InstanceState,
    NodeGroup,
    NodeGroupOptions,
    scale_down_blocked,
)
from clusterscaler.loop.decisions import (
    BackoffInfo,
    ClusterHealth,
    NodeCounts,
    NodeGroupStatus,
    ScaleUpFailure,
    ScaleUpFailureKind,
)
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT, TaintConfig
from clusterscaler.model import Node

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

log = structlog.get_logger()

FAKE_NODE_REASON_ANNOTATION = "k8s.io/cluster-autoscaler/fake-node-reason"
FAKE_NODE_UNREGISTERED = "unregistered"
FAKE_NODE_CREATE_ERROR = "create-error"
SCALE_DOWN_DISABLED_ANNOTATION = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
def effective_options(group: NodeGroup, options: AutoscalingOptions) -> NodeGroupOptions:
    """The group's options with every unset value filled from the flags."""
    defaults = NodeGroupOptions(
        scale_down_utilization_threshold=options.scale_down_utilization_threshold,
        scale_down_gpu_utilization_threshold=options.scale_down_gpu_utilization_threshold,
        scale_down_unneeded_time=options.scale_down_unneeded_time,
        scale_down_unready_time=options.scale_down_unready_time,
        max_node_provision_time=options.max_node_provision_time,
        zero_or_max_node_scaling=False,
        ignore_daemonsets_utilization=options.ignore_daemonsets_utilization,
    )
    try:
        got = group.get_options(defaults)
    except CloudProviderError as exc:
        log.warning("node_group_options_failed", node_group=group.id, error=str(exc))
        return defaults
    return defaults if got is None else got.over(defaults)


def is_being_deleted(node: Node) -> bool:
    return node.deletion_time is not None or any(t.key == TO_BE_DELETED_TAINT for t in node.taints)


# CA's notReadyTaints: a node carrying one (of any effect) is not ready, whatever its Ready
# condition says. The API server puts the first on every new Node, and the node lifecycle
# controller takes it off seconds after the node reports Ready.
NOT_READY_TAINTS = frozenset(
    (
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/network-unavailable",
    )
)
# Conditions that, True, make a node not ready (as CA's GetNodeReadiness).
NOT_READY_CONDITIONS = frozenset(("DiskPressure", "NetworkUnavailable"))


def is_ready(node: Node) -> bool:
    """Whether `node` is ready as CA's GetNodeReadiness decides: its Ready condition is
    True, no condition in `NOT_READY_CONDITIONS` is True and it carries no taint in
    `NOT_READY_TAINTS`. A node that is not ready is starting (upcoming) until
    --max-node-startup-time after its creation, then unready."""
    return (
        node.ready
        and not any(t.key in NOT_READY_TAINTS for t in node.taints)
        and not any(c.type in NOT_READY_CONDITIONS and c.status == "True" for c in node.conditions)
    )


def fake_node(instance: Instance, reason: str) -> Node:
    """A Node standing for an instance that has none, so `delete_nodes` can name it."""
    return Node(
        name=instance.id,
        provider_id=instance.id,
        ready=False,
        annotations={FAKE_NODE_REASON_ANNOTATION: reason},
    )


# --------------------------------------------------------------------------- backoff


@dataclass
class _BackoffEntry:
    duration: timedelta
    until: datetime
    last_failure: datetime
    info: BackoffInfo


class Backoff:
    """Exponential backoff per node group: the first failure backs off for
    --initial-node-group-backoff-duration, each further one doubles it up to
    --max-node-group-backoff-duration, and a group that has not failed for
    --node-group-backoff-reset-timeout starts over."""

    def __init__(self, initial: timedelta, maximum: timedelta, reset_after: timedelta) -> None:
        self.initial = initial
        self.maximum = maximum
        self.reset_after = reset_after
        self._entries: dict[str, _BackoffEntry] = {}

    def fail(
        self,
        group: str,
        now: datetime,
        *,
        error_class: str,
        error_code: str,
        error_message: str = "",
    ) -> BackoffInfo:
        prev = self._entries.get(group)
        if prev is None or now - prev.last_failure > self.reset_after:
            duration = self.initial
        else:
            duration = min(prev.duration * 2, self.maximum)
        info = BackoffInfo(now + duration, error_class, error_code, error_message)
        self._entries[group] = _BackoffEntry(duration, now + duration, now, info)
        log.warning(
            "node_group_backoff",
            node_group=group,
            until=info.until.isoformat(),
            duration_s=duration.total_seconds(),
            error_class=error_class,
            error_code=error_code,
        )
        return info

    def active(self, group: str, now: datetime) -> BackoffInfo | None:
        entry = self._entries.get(group)
        if entry is None or now >= entry.until:
            return None
        return entry.info

    def remove(self, group: str) -> None:
        """Forget the current backoff (after a successful scale-up), keeping no history."""
        self._entries.pop(group, None)

    def expire(self, now: datetime) -> None:
        """Drop entries whose reset timeout passed, so memory does not grow."""
        for group in [
            g for g, e in self._entries.items() if now - e.last_failure > self.reset_after
        ]:
            del self._entries[group]


# --------------------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class ScaleUpRequest:
    node_group: str
    increase: int
    time: datetime
    expected_by: datetime


@dataclass
class GroupState:
    """One node group as this loop sees it."""

    group: NodeGroup
    options: NodeGroupOptions
    target: int
    nodes: list[Node] = field(default_factory=list)
    counts: NodeCounts = field(default_factory=NodeCounts)
    # Instances without a Node that are still within the provision time.
    unregistered: list[Instance] = field(default_factory=list)
    long_unregistered: list[Instance] = field(default_factory=list)
    create_errors: list[Instance] = field(default_factory=list)
    upcoming: int = 0
    healthy: bool = True
    backoff: BackoffInfo | None = None
    in_progress: bool = False
    # Why the provider says no node of the group may be removed now ("" when they may).
    scale_down_blocked: str = ""

    @property
    def id(self) -> str:
        return self.group.id

    @property
    def atomic(self) -> bool:
        """Whether the group scales zero-or-max: up to its max size at once, down by all
        its nodes at once (`NodeGroupOptions.zero_or_max_node_scaling`)."""
        return bool(self.options.zero_or_max_node_scaling)


@dataclass
class ClusterState:
    """The result of one `ClusterStateTracker.update()`."""

    now: datetime
    groups: dict[str, GroupState]
    group_of_node: dict[str, str]
    ready: set[str]
    unready: set[str]
    not_started: set[str]
    being_deleted: set[str]
    health: ClusterHealth
    # Scale-ups that did not materialise in time, detected in this update.
    timed_out: list[ScaleUpRequest] = field(default_factory=list)
    # Taints on the nodes per `TaintConfig.report_type`, for
    # cluster_autoscaler_node_taints_count{type}.
    taint_counts: dict[str, int] = field(default_factory=dict)

    def node_group(self, node_name: str) -> GroupState | None:
        gid = self.group_of_node.get(node_name)
        return self.groups.get(gid) if gid is not None else None

    def total_upcoming(self) -> int:
        return sum(g.upcoming for g in self.groups.values())

    def statuses(self) -> tuple[NodeGroupStatus, ...]:
        return tuple(
            NodeGroupStatus(
                name=g.id,
                min_size=g.group.min_size,
                max_size=g.group.max_size,
                target_size=g.target,
                counts=g.counts,
                upcoming=g.upcoming,
                healthy=g.healthy,
                backoff=g.backoff,
                scale_up_in_progress=g.in_progress,
                scale_down_blocked=g.scale_down_blocked,
            )
            for g in sorted(self.groups.values(), key=lambda g: g.id)
        )


def too_many_unready(unready: int, registered: int, options: AutoscalingOptions) -> bool:
    """CA's rule: unhealthy when unready nodes exceed both the absolute allowance and the
    percentage of registered nodes."""
    return (
        unready > options.ok_total_unready_count
        and unready > options.max_total_unready_percentage / 100.0 * registered
    )


class ClusterStateTracker:
    """Cluster state kept between loops: backoff, scale-ups in flight, first sightings of
    unregistered instances."""

    def __init__(self, options: AutoscalingOptions) -> None:
        self.options = options
        self.taints = TaintConfig.from_options(options)
        self.backoff = Backoff(
            options.initial_node_group_backoff_duration,
            options.max_node_group_backoff_duration,
            options.node_group_backoff_reset_timeout,
        )
        self.requests: dict[str, ScaleUpRequest] = {}
        self.unregistered_since: dict[str, datetime] = {}
        self._seen_errors: set[str] = set()
        self._failures: list[ScaleUpFailure] = []

    # ------------------------------------------------------------------ events from the loop

    def register_scale_up(self, group: NodeGroup, delta: int, now: datetime) -> None:
        provision = effective_options(group, self.options).max_node_provision_time
        assert provision is not None
        prev = self.requests.get(group.id)
        increase = delta + (prev.increase if prev is not None else 0)
        self.requests[group.id] = ScaleUpRequest(group.id, increase, now, now + provision)

    def register_failed_scale_up(
        self,
        group: str,
        now: datetime,
        *,
        error_class: str,
        error_code: str,
        message: str = "",
        failures: Sequence[ScaleUpFailure] = (),
    ) -> BackoffInfo:
        """Back `group` off; `failures` are reported in the loop's result (events,
        failed_scale_ups_total)."""
        self._failures.extend(failures)
        self.requests.pop(group, None)
        return self.backoff.fail(
            group, now, error_class=error_class, error_code=error_code, error_message=message
        )

    def take_failures(self) -> list[ScaleUpFailure]:
        """The scale-up failures registered since the last call."""
        failures, self._failures = self._failures, []
        return failures

    # ------------------------------------------------------------------ per-loop update

    def update(
        self,
        now: datetime,
        nodes: Sequence[Node],
        provider: CloudProvider,
        *,
        deleting: Collection[str] = (),
    ) -> ClusterState:
        """The state of this loop. `deleting` names nodes whose deletion this process has
        in flight: they count as being deleted even before the taint shows in `nodes`."""
        opts = self.options
        groups: dict[str, GroupState] = {}
        for g in provider.node_groups():
            try:
                target = g.target_size()
            except CloudProviderError as exc:
                log.warning("node_group_target_failed", node_group=g.id, error=str(exc))
                continue
            groups[g.id] = GroupState(
                group=g,
                options=effective_options(g, opts),
                target=target,
                scale_down_blocked=scale_down_blocked(g) or "",
            )

        group_of_node: dict[str, str] = {}
        ready: set[str] = set()
        unready: set[str] = set()
        not_started: set[str] = set()
        being_deleted: set[str] = set()
        registered_ids: set[str] = set()
        for node in nodes:
            if node.provider_id:
                registered_ids.add(node.provider_id)
            if node.name in deleting or is_being_deleted(node):
                being_deleted.add(node.name)
            # As CA's FilterOutNodesWithStartupTaints: a Ready node that still carries a
            # startup taint is treated as not Ready, so it is starting (upcoming), then
            # unready, and never ready capacity, a template or a Ready scale-down candidate.
            node_ready = is_ready(node)
            starting_taint = self.taints.startup_taint(node) if node_ready else None
            if starting_taint is not None:
                log.debug("node_has_startup_taint", node=node.name, taint=starting_taint)
            if node_ready and starting_taint is None:
                ready.add(node.name)
            elif (
                node.creation_time is not None
                # Until the startup time is over, boundary included: a booting node is
                # upcoming capacity and no scale-down candidate.
                and now - node.creation_time <= opts.max_node_startup_time
            ):
                not_started.add(node.name)
            else:
                unready.add(node.name)
            owner = provider.node_group_for_node(node)
            if owner is not None and owner.id in groups:
                group_of_node[node.name] = owner.id
                groups[owner.id].nodes.append(node)

        seen_unregistered: set[str] = set()
        for state in groups.values():
            self._account_instances(state, registered_ids, seen_unregistered, now)
            names = [n.name for n in state.nodes]
            counts = NodeCounts(
                total=len(names),
                ready=sum(1 for n in names if n in ready),
                unready=sum(1 for n in names if n in unready),
                not_started=sum(1 for n in names if n in not_started),
                being_deleted=sum(1 for n in names if n in being_deleted),
                unregistered=len(state.unregistered),
                long_unregistered=len(state.long_unregistered),
            )
            state.counts = counts
            # As CA's GetUpcomingNodes: registered nodes that have not started (not Ready
            # yet, within --max-node-startup-time) are still on their way, so they count as
            # upcoming; the loop stands template nodes in for them.
            state.upcoming = max(
                0,
                state.target
                - (counts.total - counts.not_started)
                - len(state.long_unregistered)
                - len(state.create_errors),
            )
            state.healthy = not too_many_unready(counts.unready, counts.total, opts)
        # Forget first sightings of instances that registered or disappeared.
        for iid in [i for i in self.unregistered_since if i not in seen_unregistered]:
            del self.unregistered_since[iid]

        timed_out = self._update_requests(groups, now)
        self.backoff.expire(now)
        for state in groups.values():
            state.backoff = self.backoff.active(state.id, now)
            state.in_progress = state.id in self.requests and state.upcoming > 0

        registered = len(ready) + len(unready) + len(not_started)
        counts = NodeCounts(
            total=len(nodes),
            ready=len(ready),
            unready=len(unready),
            not_started=len(not_started),
            being_deleted=len(being_deleted),
            unregistered=sum(len(g.unregistered) for g in groups.values()),
            long_unregistered=sum(len(g.long_unregistered) for g in groups.values()),
        )
        healthy = not too_many_unready(len(unready), registered, opts)
        message = (
            ""
            if healthy
            else (
                f"{len(unready)} of {registered} registered nodes are unready, more than "
                f"--ok-total-unready-count={opts.ok_total_unready_count} and "
                f"--max-total-unready-percentage={opts.max_total_unready_percentage:g}"
            )
        )
        return ClusterState(
            now=now,
            groups=groups,
            group_of_node=group_of_node,
            ready=ready,
            unready=unready,
            not_started=not_started,
            being_deleted=being_deleted,
            health=ClusterHealth(healthy, counts, message),
            timed_out=timed_out,
            taint_counts=self.taints.count_node_taints(nodes),
        )

    def _account_instances(
        self,
        state: GroupState,
        registered_ids: set[str],
        seen: set[str],
        now: datetime,
    ) -> None:
        try:
            instances = list(state.group.nodes())
        except CloudProviderError as exc:
            log.warning("node_group_instances_failed", node_group=state.id, error=str(exc))
            return
        provision = state.options.max_node_provision_time
        assert provision is not None
        # Instances that failed since the last update: they are one failed scale-up, so the
        # group backs off once however many of its instances failed.
        new_errors: list[Instance] = []
        for inst in instances:
            if inst.id in registered_ids:
                continue
            if inst.state is InstanceState.DELETING:
                continue
            if inst.error is not None:
                state.create_errors.append(inst)
                if inst.id not in self._seen_errors:
                    self._seen_errors.add(inst.id)
                    new_errors.append(inst)
                continue
            seen.add(inst.id)
            # An instance requested by our scale-up has been coming since the request, even
            # if the provider listed it only later.
            request = self.requests.get(state.id)
            since = min(now, request.time) if request is not None else now
            first = self.unregistered_since.setdefault(inst.id, since)
            if now - first > provision:
                state.long_unregistered.append(inst)
            else:
                state.unregistered.append(inst)
        if new_errors:
            failure = new_errors[0].error
            assert failure is not None
            self.register_failed_scale_up(
                state.id,
                now,
                error_class=failure.error_class.value,
                error_code=failure.error_code,
                message=failure.error_message,
                failures=_creation_failures(state.id, new_errors),
            )
            log.warning(
                "instances_failed",
                node_group=state.id,
                count=len(new_errors),
                error_code=failure.error_code,
            )
        live = {i.id for i in instances}
        self._seen_errors = {i for i in self._seen_errors if i in live or i in registered_ids}

    def _update_requests(
        self, groups: Mapping[str, GroupState], now: datetime
    ) -> list[ScaleUpRequest]:
        timed_out: list[ScaleUpRequest] = []
        for gid, req in list(self.requests.items()):
            state = groups.get(gid)
            if state is None:
                del self.requests[gid]
                continue
            if state.upcoming == 0 and not state.long_unregistered:
                # Every requested node registered: the scale-up succeeded.
                del self.requests[gid]
                self.backoff.remove(gid)
                continue
            if now > req.expected_by:
                timed_out.append(req)
                failure = ScaleUpFailure(
                    gid,
                    ScaleUpFailureKind.TIMEOUT,
                    "timeout",
                    max(1, state.upcoming + len(state.long_unregistered)),
                    waited=now - req.time,
                )
                self.register_failed_scale_up(
                    gid,
                    now,
                    error_class=InstanceErrorClass.OTHER.value,
                    error_code="timeout",
                    message=(
                        f"{state.upcoming} of {req.increase} requested nodes did not register "
                        f"within {req.expected_by - req.time}"
                    ),
                    failures=(failure,),
                )
        return timed_out


def _creation_failures(group: str, failed: Sequence[Instance]) -> list[ScaleUpFailure]:
    """Newly failed instances as CA reports them: one failure per error class and code,
    with the distinct messages (after three, CA's message ends with ", ...")."""
    by_code: dict[tuple[str, str], list[Instance]] = {}
    for inst in failed:
        assert inst.error is not None
        key = (inst.error.error_class.value, inst.error.error_code)
        by_code.setdefault(key, []).append(inst)
    out: list[ScaleUpFailure] = []
    for (error_class, code), instances in by_code.items():
        messages = list(dict.fromkeys(i.error.error_message for i in instances if i.error))
        text = ", ".join(messages) + (", ..." if len(messages) > 3 else "")
        out.append(
            ScaleUpFailure(
                group,
                ScaleUpFailureKind.CREATE_ERRORS,
                code,
                len(instances),
                error=f"{error_class}.{code}",
                message=text,
            )
        )
    return out


def long_unregistered_nodes(state: ClusterState) -> Iterable[tuple[GroupState, list[Node]]]:
    for g in state.groups.values():
        if g.long_unregistered:
            yield g, [fake_node(i, FAKE_NODE_UNREGISTERED) for i in g.long_unregistered]


def create_error_nodes(state: ClusterState) -> Iterable[tuple[GroupState, list[Node]]]:
    for g in state.groups.values():
        if g.create_errors:
            yield g, [fake_node(i, FAKE_NODE_CREATE_ERROR) for i in g.create_errors]
