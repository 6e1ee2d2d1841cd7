"""How many template nodes each eligible node group needs for the pending pods, as
expansion options, and why the pods an option leaves out stay pending.

Each group's count is capped by its headroom (with --balance-similar-node-groups, its
similar groups' too), --max-nodes-total, --max-nodes-per-scaleup, the cluster's cores,
memory and GPU limits, and --max-binpacking-time across all groups.

A zero-or-max (atomic) group's option is always its whole increase to max size, however few
nodes the pods need, or no option at all when the limits do not allow that much; it is
never balanced with similar groups, nor one of another group's similar groups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from clusterscaler.interfaces.cloudprovider import NodeGroup
from clusterscaler.interfaces.estimator import Estimator
from clusterscaler.interfaces.expander import Option
from clusterscaler.loop.balancing import find_similar
from clusterscaler.loop.clusterstate import GroupState
from clusterscaler.loop.decisions import GroupRejection, NoScaleUpReason
from clusterscaler.loop.estimationlimits import (
    LIMIT_CLUSTER_MAX_NODES,
    LIMIT_NODE_GROUP_HEADROOM,
    LIMIT_NODES_PER_SCALE_UP,
    ThresholdLimiter,
    limits_from_options,
)
from clusterscaler.loop.grouptemplates import Template, instantiate
from clusterscaler.loop.limits import CPU, MEMORY, NODES, Limits, Totals, node_totals
from clusterscaler.loop.quotas import QuotaTracker
from clusterscaler.loop.scaleup.groupeligibility import atomic_increase, atomic_rejection
from clusterscaler.model import NodeInfo, Pod
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from clusterscaler.simulator.equivalence import PodGroup

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

_LIMIT_REASONS = {
    CPU: NoScaleUpReason.CPU_LIMIT_REACHED,
    MEMORY: NoScaleUpReason.MEMORY_LIMIT_REACHED,
    NODES: NoScaleUpReason.MAX_NODES_TOTAL_REACHED,
}


class PodKeys:
    """The `namespace/name` key of each pending pod, built once per plan.

    The plan keys its rejections, helped pods and options by pod key, asking for the keys
    of every pod once per node group: about 1.7 million `Pod.key` strings at 20,000 pods.
    The pods are held for the whole plan, so no other object can have the id of one of
    them meanwhile; a pod the estimator returns that is not one of them (a copy) gets its
    key built as before, so the keys are the same either way.
    """

    __slots__ = ("_by_id",)

    def __init__(self, pods: Sequence[Pod], keys: Sequence[str] | None = None) -> None:
        """`keys`, when the caller has them, are the pods' keys in the same order."""
        if keys is None:
            self._by_id = {id(p): p.key for p in pods}
        else:
            self._by_id = dict(zip(map(id, pods), keys, strict=True))

    def every(self) -> Iterable[str]:
        """The keys of the pending pods, in their order."""
        return self._by_id.values()

    def all(self, pods: Sequence[Pod]) -> list[str]:
        keys: list[str | None] = list(map(self._by_id.get, map(id, pods)))
        if None in keys:  # pods the estimator made itself
            return [k if k is not None else p.key for k, p in zip(keys, pods, strict=True)]
        return keys  # type: ignore[return-value]  # no None left

    def covers(self, ids: set[int]) -> bool:
        """Whether every id in `ids` is one of the pending pods'."""
        return ids <= self._by_id.keys()


class Rejections:
    """Why pending pods stay pending: the rejections of every group, by pod key (a pod
    no group rejected has no entry)."""

    __slots__ = ("by_pod", "keys")

    def __init__(self, keys: PodKeys) -> None:
        self.keys = keys
        self.by_pod: dict[str, list[GroupRejection]] = {}

    def add(self, rejection: GroupRejection, pods: Sequence[Pod]) -> None:
        by_pod = self.by_pod
        for k in self.keys.all(pods):
            found = by_pod.get(k)
            if found is None:
                by_pod[k] = [rejection]
            else:
                found.append(rejection)

    def remaining(self, helped: set[str]) -> dict[str, tuple[GroupRejection, ...]]:
        """Every pending pod not in `helped`, in their order, with its rejections."""
        by_pod = self.by_pod
        return {k: tuple(by_pod.get(k, ())) for k in self.keys.every() if k not in helped}


def not_schedulable_detail(pod: Pod, template: NodeInfo, snapshot: ClusterSnapshot) -> str:
    """Why `pod` does not fit an empty node of the group (the failing predicate)."""
    node = instantiate(template, f"{template.node.name}-probe")
    snapshot.fork()
    try:
        ni = snapshot.add_node(node.node, node.pods, node.resource_slices)
        return check_predicates(pod, ni, snapshot) or ""
    finally:
        snapshot.revert()


def left_out_by_plan(
    node_group: str, planned: int, limited_by: str | None, capped: str
) -> str:
    """What explain says of a pod that fits a new node of `node_group` but that the
    group's planned scale-up (`planned` new nodes, its estimate `limited_by` what, when
    anything; `capped` says what capped the headroom) leaves out. CA names no reason for
    such a pod in that loop: the pod fits the group's template."""
    nodes = f"{planned} new node{'' if planned == 1 else 's'}"
    if limited_by == LIMIT_NODE_GROUP_HEADROOM:
        return (
            f"fits a new node of {node_group}, but the scale-up planned for {node_group} "
            f"({nodes}, {capped}) is taken by other pending pods"
        )
    if limited_by in (LIMIT_CLUSTER_MAX_NODES, LIMIT_NODES_PER_SCALE_UP):
        return (
            f"fits a new node of {node_group}, but the scale-up planned for {node_group} "
            f"({nodes}, capped by --{limited_by}) is taken by other pending pods"
        )
    if limited_by:
        return (
            f"fits a new node of {node_group}, but its estimate stopped at --{limited_by} "
            f"after planning {nodes} for other pending pods"
        )
    if planned == 0:
        return f"fits an empty node of {node_group}, but the estimate planned no new node for it"
    return (
        f"fits an empty node of {node_group}, but not beside the other pending pods its "
        f"scale-up is planned for ({nodes})"
    )


def template_infos(templates: Mapping[str, Template]) -> dict[str, NodeInfo]:
    """The template node of each group that has one."""
    return {gid: t.node_info for gid, t in templates.items() if t.node_info is not None}


def _quota_allows_one(quotas: QuotaTracker, template: Template) -> bool:
    """Whether the quotas allow one more node of `template` (CA leaves a similar group its
    quotas hold back out of the balancing)."""
    tpl = template.node_info
    return tpl is not None and quotas.check(tpl.node, 1).allowed >= 1


def estimate_options(
    *,
    pods: Sequence[Pod],
    pod_groups: Sequence[PodGroup],
    eligible: Mapping[str, GroupState],
    templates: Mapping[str, Template],
    snapshot: ClusterSnapshot,
    estimator: Estimator,
    limits: Limits,
    totals: Totals,
    options: AutoscalingOptions,
    gpu_label: str,
    monotonic: Callable[[], float],
    rejections: Rejections,
    quotas: QuotaTracker | None = None,
) -> list[Option]:
    """One option per eligible group that can help some pods; the pods a group cannot help
    are rejected with the reason (the failing predicate, or the limit that capped it).

    With `quotas` (CapacityQuotas), as CA: a group whose next node (an atomic group: whose
    whole increase) a quota does not allow is rejected naming the quota; another group's
    count is capped at what its quotas allow, and a similar group its quotas hold back
    takes no share."""
    keys = rejections.keys
    cluster_nodes = totals.nodes
    # --max-binpacking-time bounds the estimations of all groups together.
    deadline = monotonic() + options.max_binpacking_time.total_seconds()
    out: list[Option] = []
    balance = options.balance_similar_node_groups
    # Atomic groups take no share of another group's scale-up.
    balanceable = [gid for gid, g in eligible.items() if not g.atomic] if balance else []
    for gid, g in eligible.items():
        tpl = templates[gid].node_info
        assert tpl is not None
        per_node = node_totals(tpl.node, gpu_label)
        room, which = limits.max_new_nodes(totals, per_node)
        atomic = g.atomic
        if atomic:
            refused = atomic_rejection(g, room, which, options.max_nodes_per_scaleup)
            if refused is not None:
                rejections.add(refused, pods)
                continue
            headroom = atomic_increase(g)
        elif room <= 0:
            rejections.add(
                GroupRejection(
                    gid,
                    _LIMIT_REASONS.get(which, NoScaleUpReason.GPU_LIMIT_REACHED),
                    f"limit on {which}",
                    # Every maximum one more node would exceed, as CA counts them.
                    exceeded=tuple(limits.exceeded_by(totals.plus(per_node))) or (which,),
                ),
                pods,
            )
            continue
        else:
            headroom = min(g.group.max_size - g.target, room)
        # The quota that holds the group back below its headroom, when one does.
        quota_held: GroupRejection | None = None
        if quotas:
            check = quotas.check(tpl.node, headroom if atomic else 1)
            if check.exceeded and check.allowed < (headroom if atomic else 1):
                for exceeded in check.exceeded:
                    rejections.add(exceeded.rejection(gid), pods)
                continue
            if not atomic:
                check = quotas.check(tpl.node, headroom)
                if check.allowed < headroom:
                    headroom = check.allowed
                    # Named by what one node past the cap would exceed, as the next loop
                    # will name it when the group is at its quota.
                    beyond = quotas.check(tpl.node, headroom + 1)
                    quota_held = beyond.exceeded[0].rejection(gid)
        # The room the group (and its similar groups) would leave without the cluster-wide
        # limits.
        by_max_sizes = g.group.max_size - g.target
        similar: list[str] = []
        if balance and not atomic:
            similar = find_similar(gid, template_infos(templates), options, balanceable)
            if quotas:
                similar = [o for o in similar if _quota_allows_one(quotas, templates[o])]
            for other in similar:
                og = eligible[other]
                share = og.group.max_size - og.target
                other_tpl = templates[other].node_info
                if quotas and other_tpl is not None:
                    share = quotas.check(other_tpl.node, share).allowed
                headroom += share
                by_max_sizes += share
            headroom = min(headroom, room)
        # What capped the group's headroom, in the words of explain (a quota that did is
        # named by `quota_held` instead).
        if headroom < by_max_sizes:
            capped = f"capped by the cluster-wide limit on {which}"
        elif similar:
            capped = f"capped at the room left in {gid} and its similar groups"
        else:
            capped = f"capped at its max size {g.group.max_size}"
        limiter = ThresholdLimiter(
            limits_from_options(
                options,
                node_group_headroom=headroom,
                cluster_node_count=cluster_nodes,
                deadline=deadline,
            ),
            clock=monotonic,
        )
        estimate = estimator.estimate(pod_groups, tpl, snapshot, limiter, node_group_id=gid)
        # By identity when the estimate holds the pending pods themselves (checked), by key
        # when it made copies: the same pods are missing either way.
        scheduled_ids = set(map(id, estimate.scheduled_pods))
        by_identity = keys.covers(scheduled_ids)
        scheduled_keys = set() if by_identity else set(keys.all(estimate.scheduled_pods))
        for pg in pod_groups:
            if by_identity:
                if scheduled_ids.issuperset(map(id, pg.pods)):
                    continue
                missing = [p for p in pg.pods if id(p) not in scheduled_ids]
            else:
                missing = [
                    p
                    for p, k in zip(pg.pods, keys.all(pg.pods), strict=True)
                    if k not in scheduled_keys
                ]
                if not missing:
                    continue
            if quota_held is not None and estimate.limited_by == LIMIT_NODE_GROUP_HEADROOM:
                reason = quota_held
            elif len(missing) < len(pg.pods) and estimate.limited_by:
                reason = GroupRejection(
                    gid, NoScaleUpReason.MAX_SIZE_REACHED, estimate.limited_by,
                    left_out_by_plan=left_out_by_plan(
                        gid, estimate.node_count, estimate.limited_by, capped
                    ),
                )
            else:
                detail = not_schedulable_detail(pg.representative, tpl, snapshot)
                if detail:
                    reason = GroupRejection(gid, NoScaleUpReason.NOT_SCHEDULABLE, detail)
                else:
                    # It fits an empty node of the group: the plan left it out.
                    reason = GroupRejection(
                        gid, NoScaleUpReason.MAX_SIZE_REACHED, estimate.limited_by or "",
                        left_out_by_plan=left_out_by_plan(
                            gid, estimate.node_count, estimate.limited_by, capped
                        ),
                    )
            rejections.add(reason, missing)
        if estimate.node_count > 0:
            similar_groups: tuple[NodeGroup, ...] = tuple(eligible[o].group for o in similar)
            node_count = estimate.node_count
            debug = f"estimate limited by {estimate.limited_by}" if estimate.limited_by else ""
            if atomic:
                # As CA: the only valid size of a zero-or-max group is its max size.
                node_count = headroom
                debug = (
                    f"zero-or-max: the pods need {estimate.node_count} nodes, "
                    f"the group grows by {node_count} to its max size {g.group.max_size}"
                )
            out.append(
                Option(
                    node_group=g.group,
                    node_count=node_count,
                    pods=tuple(estimate.scheduled_pods),
                    similar_node_groups=similar_groups,
                    template=tpl,
                    debug=debug,
                )
            )
    return out
