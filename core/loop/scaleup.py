"""Scale-up: which node group grows, by how much, for which pending pods.

For every node group that can grow (it exists, is not backed off, is healthy, is below its
max size, has a template node), the estimator says how many template nodes the pending pods
need; the count is capped by the group's headroom, --max-nodes-total, --max-nodes-per-scaleup
and the cluster's cores, memory and GPU limits. The expander chain picks one option;
--balance-similar-node-groups spreads its nodes over similar groups. The result is a value;
`execute_scale_up` makes the provider calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import structlog
from clusterscaler.framework.cloudprovider import CloudProviderError, InstanceErrorClass, NodeGroup
from clusterscaler.framework.errors import LoopError, describe
from clusterscaler.loop.balancing import GroupSize, balance, find_similar
from clusterscaler.loop.clusterstate import ClusterState, ClusterStateRegistry, GroupState
from clusterscaler.loop.decisions import (
    GroupRejection,
    NoScaleUpReason,
    ScaleUpDecision,
    ScaleUpOption,
    ScaleUpResult,
    ScaleUpStatus,
)
from clusterscaler.loop.estimator import Estimator, ThresholdLimiter, limits_from_options
from clusterscaler.loop.expander import Option
from clusterscaler.loop.limits import CPU, MEMORY, NODES, Limits, Totals, node_totals
from clusterscaler.loop.templates import Template, instantiate
from clusterscaler.model import NodeInfo, Pod
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from clusterscaler.simulator.equivalence import PodGroup, group_pods

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

log = structlog.get_logger()

# Picks the option to execute among several: the expander chain with this loop's context.
Chooser = Callable[[Sequence[Option]], Option | None]

_LIMIT_REASONS = {
    CPU: NoScaleUpReason.CPU_LIMIT_REACHED,
    MEMORY: NoScaleUpReason.MEMORY_LIMIT_REACHED,
    NODES: NoScaleUpReason.MAX_NODES_TOTAL_REACHED,
}


@dataclass
class ScaleUpPlan:
    """A decided scale-up before it is executed."""

    result: ScaleUpResult
    increases: dict[str, int] = field(default_factory=dict)


def current_totals(
    state: ClusterState, templates: Mapping[str, Template], gpu_label: str, base: Totals
) -> Totals:
    """`base` (the registered nodes) plus upcoming nodes counted as their templates."""
    out = base
    for gid, g in state.groups.items():
        tpl = templates.get(gid)
        if g.upcoming and tpl is not None and tpl.node_info is not None:
            out = out.plus(node_totals(tpl.node_info.node, gpu_label), g.upcoming)
    return out


def _group_rejection(g: GroupState, tpl: Template | None, now: datetime) -> GroupRejection | None:
    try:
        exists = g.group.exist()
    except CloudProviderError as exc:
        return GroupRejection(g.id, NoScaleUpReason.NOT_EXIST, str(exc))
    if not exists:
        return GroupRejection(g.id, NoScaleUpReason.NOT_EXIST)
    if g.backoff is not None and g.backoff.until > now:
        return GroupRejection(
            g.id,
            NoScaleUpReason.BACKED_OFF,
            f"{g.backoff.error_class}/{g.backoff.error_code} until {g.backoff.until.isoformat()}",
        )
    if not g.healthy:
        return GroupRejection(g.id, NoScaleUpReason.UNHEALTHY)
    if g.target >= g.group.max_size:
        return GroupRejection(
            g.id, NoScaleUpReason.MAX_SIZE_REACHED, f"target {g.target} >= max {g.group.max_size}"
        )
    if tpl is None or tpl.node_info is None:
        return GroupRejection(
            g.id, NoScaleUpReason.NO_TEMPLATE, tpl.error if tpl is not None else ""
        )
    return None


def _not_schedulable_detail(pod: Pod, template: NodeInfo, snapshot: ClusterSnapshot) -> str:
    """Why `pod` does not fit an empty node of the group (the failing predicate)."""
    node = instantiate(template, f"{template.node.name}-probe")
    snapshot.fork()
    try:
        ni = snapshot.add_node(node.node, node.pods)
        return check_predicates(pod, ni, snapshot) or ""
    finally:
        snapshot.revert()


class _PodKeys:
    """The `namespace/name` key of each pending pod, built once per plan.

    The plan keys its rejections, helped pods and options by pod key, asking for the keys
    of every pod once per node group: about 1.7 million `Pod.key` strings at 20,000 pods.
    The pods are held for the whole plan, so no other object can have the id of one of
    them meanwhile; a pod the estimator returns that is not one of them (a copy) gets its
    key built as before, so the keys are the same either way.
    """

    __slots__ = ("_by_id",)

    def __init__(self, pods: Sequence[Pod]) -> None:
        self._by_id = {id(p): p.key for p in pods}

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


def plan_scale_up(
    *,
    now: datetime,
    pods: Sequence[Pod],
    state: ClusterState,
    templates: Mapping[str, Template],
    snapshot: ClusterSnapshot,
    estimator: Estimator,
    choose: Chooser,
    limits: Limits,
    totals: Totals,
    options: AutoscalingOptions,
    gpu_label: str = "",
    monotonic: Callable[[], float] = time.monotonic,
    groups: Sequence[PodGroup] | None = None,
) -> ScaleUpPlan:
    """Decide a scale-up for `pods` (already filtered: none fits existing or upcoming
    capacity). `totals` covers registered and upcoming nodes. The snapshot is left as given.

    `groups`, when the caller has them, are `group_pods(pods)` (see
    `PendingPods.unschedulable_groups`); they are not grouped again."""
    if not pods:
        return ScaleUpPlan(ScaleUpResult(status=ScaleUpStatus.NOT_NEEDED))
    keys = _PodKeys(pods)
    if not options.scale_up_from_zero and not state.ready:
        reason = GroupRejection("", NoScaleUpReason.SCALE_UP_FROM_ZERO_DISABLED)
        return ScaleUpPlan(
            ScaleUpResult(
                status=ScaleUpStatus.NOT_TRIED,
                pods_remaining={k: (reason,) for k in keys.all(pods)},
            )
        )
    pod_groups = group_pods(pods) if groups is None else groups
    rejections: dict[str, list[GroupRejection]] = {k: [] for k in keys.every()}

    def reject_all(r: GroupRejection, which: Sequence[Pod] = pods) -> None:
        for k in keys.all(which):
            rejections[k].append(r)

    cluster_nodes = totals.nodes
    # --max-binpacking-time bounds the estimations of all groups together.
    deadline = monotonic() + options.max_binpacking_time.total_seconds()
    eligible: dict[str, GroupState] = {}
    for gid in sorted(state.groups):
        g = state.groups[gid]
        rejection = _group_rejection(g, templates.get(gid), now)
        if rejection is not None:
            reject_all(rejection)
            continue
        eligible[gid] = g

    options_out: list[Option] = []
    for gid, g in eligible.items():
        tpl = templates[gid].node_info
        assert tpl is not None
        room, which = limits.max_new_nodes(totals, node_totals(tpl.node, gpu_label))
        if room <= 0:
            reject_all(
                GroupRejection(
                    gid,
                    _LIMIT_REASONS.get(which, NoScaleUpReason.GPU_LIMIT_REACHED),
                    f"limit on {which}",
                )
            )
            continue
        headroom = min(g.group.max_size - g.target, room)
        if options.balance_similar_node_groups:
            for other in find_similar(gid, _infos(templates), options, eligible):
                og = eligible[other]
                headroom += og.group.max_size - og.target
            headroom = min(headroom, room)
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
            if len(missing) < len(pg.pods) and estimate.limited_by:
                reason = GroupRejection(gid, NoScaleUpReason.MAX_SIZE_REACHED, estimate.limited_by)
            else:
                detail = _not_schedulable_detail(pg.representative, tpl, snapshot)
                if detail:
                    reason = GroupRejection(gid, NoScaleUpReason.NOT_SCHEDULABLE, detail)
                else:
                    reason = GroupRejection(
                        gid, NoScaleUpReason.MAX_SIZE_REACHED, estimate.limited_by or ""
                    )
            reject_all(reason, missing)
        if estimate.node_count > 0:
            similar_groups: tuple[NodeGroup, ...] = ()
            if options.balance_similar_node_groups:
                similar_groups = tuple(
                    eligible[o].group
                    for o in find_similar(gid, _infos(templates), options, eligible)
                )
            options_out.append(
                Option(
                    node_group=g.group,
                    node_count=estimate.node_count,
                    pods=tuple(estimate.scheduled_pods),
                    similar_node_groups=similar_groups,
                    template=tpl,
                    debug=f"estimate limited by {estimate.limited_by}"
                    if estimate.limited_by
                    else "",
                )
            )

    values = tuple(_option_value(o, keys) for o in options_out)
    helped = set().union(*(v.pods for v in values))
    remaining = {k: tuple(v) for k, v in rejections.items() if k not in helped}
    if not options_out:
        return ScaleUpPlan(
            ScaleUpResult(status=ScaleUpStatus.NO_OPTIONS_AVAILABLE, pods_remaining=remaining)
        )
    best = choose(options_out)
    if best is None:
        return ScaleUpPlan(
            ScaleUpResult(
                status=ScaleUpStatus.NO_OPTIONS_AVAILABLE,
                options=values,
                pods_remaining=remaining,
            )
        )
    best_id = best.node_group.id
    best_pods = next(
        (v.pods for o, v in zip(options_out, values, strict=True) if o is best),
        None,
    ) or tuple(keys.all(best.pods))
    increases = {best_id: best.node_count}
    if options.balance_similar_node_groups:
        similar = [g.id for g in best.similar_node_groups if g.id in eligible]
        if similar:
            sizes = [
                GroupSize(gid, eligible[gid].target, eligible[gid].group.max_size)
                for gid in (best_id, *similar)
            ]
            increases = balance(sizes, best.node_count)
    decisions = tuple(
        ScaleUpDecision(
            node_group=gid,
            delta=delta,
            target_before=state.groups[gid].target,
            pods=best_pods,
        )
        for gid, delta in sorted(increases.items())
        if delta > 0
    )
    return ScaleUpPlan(
        ScaleUpResult(
            status=ScaleUpStatus.SUCCESSFUL,
            decisions=decisions,
            triggered_pods=best_pods,
            pods_remaining=remaining,
            options=values,
        ),
        increases,
    )


def _option_value(o: Option, keys: _PodKeys) -> ScaleUpOption:
    return ScaleUpOption(
        node_group=o.node_group.id,
        node_count=o.node_count,
        pods=tuple(keys.all(o.pods)),
        similar_node_groups=tuple(g.id for g in o.similar_node_groups),
        debug=o.debug,
    )


def _infos(templates: Mapping[str, Template]) -> dict[str, NodeInfo]:
    return {gid: t.node_info for gid, t in templates.items() if t.node_info is not None}


def plan_min_size_enforcement(
    state: ClusterState,
    now: datetime,
    *,
    templates: Mapping[str, Template] | None = None,
    limits: Limits | None = None,
    totals: Totals | None = None,
    gpu_label: str = "",
) -> list[ScaleUpDecision]:
    """--enforce-node-group-min-size: grow groups whose target is below their min size.

    With `limits` and `totals` (registered and upcoming nodes), the increases are capped as
    CA's ScaleUpToNodeGroupMinSize caps them: the cluster never goes past --max-nodes-total
    or the cores, memory and GPU maxima; groups are served in name order, each from what the
    ones before it left. A group without a template counts as nodes only.
    """
    out = []
    current = totals if totals is not None else Totals()
    for gid in sorted(state.groups):
        g = state.groups[gid]
        if g.backoff is not None and g.backoff.until > now:
            continue
        if g.target >= g.group.min_size:
            continue
        delta = g.group.min_size - g.target
        if limits is not None:
            tpl = templates.get(gid) if templates is not None else None
            per_node = (
                node_totals(tpl.node_info.node, gpu_label)
                if tpl is not None and tpl.node_info is not None
                else Totals(nodes=1)
            )
            room, which = limits.max_new_nodes(current, per_node)
            if room < delta:
                log.info(
                    "min_size_enforcement_capped",
                    node_group=gid,
                    wanted=delta,
                    allowed=room,
                    limit=which,
                )
                delta = room
            if delta <= 0:
                continue
            current = current.plus(per_node, delta)
        out.append(
            ScaleUpDecision(
                node_group=gid,
                delta=delta,
                target_before=g.target,
                reason="node group below its minimum size",
            )
        )
    return out


def execute_scale_up(
    decisions: Sequence[ScaleUpDecision],
    state: ClusterState,
    registry: ClusterStateRegistry,
    now: datetime,
    *,
    dry_run: bool = False,
) -> tuple[list[ScaleUpDecision], list[str]]:
    """Call `increase_size` for each decision. Returns what succeeded and error messages;
    a failing group is backed off."""
    done: list[ScaleUpDecision] = []
    errors: list[str] = []
    for d in decisions:
        g = state.groups[d.node_group]
        if dry_run:
            log.info("scale_up", node_group=d.node_group, delta=d.delta, dry_run=True)
            done.append(d)
            continue
        try:
            g.group.increase_size(d.delta)
        except CloudProviderError as exc:
            message = f"node group {d.node_group}: increase_size({d.delta}) failed: {exc}"
            log.error("scale_up_failed", node_group=d.node_group, delta=d.delta, error=str(exc))
            registry.register_failed_scale_up(
                d.node_group,
                now,
                error_class=InstanceErrorClass.OTHER.value,
                error_code="cloudProviderError",
                message=str(exc),
            )
            errors.append(LoopError(message, describe(exc).type))
            continue
        registry.register_scale_up(g.group, d.delta, now)
        log.info(
            "scale_up",
            node_group=d.node_group,
            delta=d.delta,
            target=d.target_before + d.delta,
            pods=len(d.pods),
            reason=d.reason,
        )
        done.append(d)
    return done, errors


__all__ = [
    "Chooser",
    "ScaleUpPlan",
    "current_totals",
    "execute_scale_up",
    "plan_min_size_enforcement",
    "plan_scale_up",
]
