"""Choosing which unneeded nodes to delete now.

A node goes only when it has been unneeded for --scale-down-unneeded-time
(--scale-down-unready-time for unready nodes; both overridable per group), its group stays
at or above its min size counting deletions in progress, the cluster stays above the
--cores-total / --memory-total minimums, and the budgets allow it:
--max-scale-down-parallelism for all deletions at once, --max-drain-parallelism for those
that need a drain. Empty nodes are taken first, then the longest unneeded.

A zero-or-max (atomic) group goes whole or not at all, before the other nodes (as CA's
budget processor): every node unneeded long enough, the group's min size and the resource
minimums checked with all its nodes gone, and the budgets allowing all of them. So that a
group larger than the budgets is not starved, the first group chosen in a loop may go
beyond them while any budget is left; once a group does not fit, the groups after it wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from clusterscaler.loop.clusterstate import ClusterState
from clusterscaler.loop.decisions import UnremovableNode, UnremovableReason
from clusterscaler.loop.limits import Limits, Totals, node_totals
from clusterscaler.loop.scaledown.unneeded import required_unneeded_time
from clusterscaler.model import Node
from clusterscaler.simulator.drain import NodeDrainPlan

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions


@dataclass(frozen=True, slots=True)
class RemovableNode:
    """An unneeded node with what removing it involves."""

    node: Node
    node_group: str
    since: datetime
    ready: bool
    plan: NodeDrainPlan
    # Of a zero-or-max group: deleted together with all the group's other nodes.
    atomic: bool = False

    @property
    def empty(self) -> bool:
        return not self.plan.to_move


@dataclass(frozen=True, slots=True)
class InProgress:
    """Deletions started earlier that have not finished (nodes still present)."""

    total: int = 0
    drains: int = 0
    per_group: Mapping[str, int] = field(default_factory=dict)


@dataclass
class Selection:
    empty: list[RemovableNode] = field(default_factory=list)
    drain: list[RemovableNode] = field(default_factory=list)
    unremovable: list[UnremovableNode] = field(default_factory=list)
    # Unneeded long enough but over budget: they wait for the next loop.
    deferred: list[str] = field(default_factory=list)


def select_deletions(
    removable: Sequence[RemovableNode],
    state: ClusterState,
    options: AutoscalingOptions,
    now: datetime,
    *,
    limits: Limits,
    totals: Totals,
    in_progress: InProgress,
    gpu_label: str = "",
) -> Selection:
    out = Selection()
    parallel_left = options.max_scale_down_parallelism - in_progress.total
    drain_left = options.max_drain_parallelism - in_progress.drains
    chosen_per_group: dict[str, int] = dict(in_progress.per_group)
    remaining = totals
    atomic: dict[str, list[RemovableNode]] = {}
    for r in removable:
        if r.atomic:
            atomic.setdefault(r.node_group, []).append(r)
    can_overflow = True
    full = False
    # Groups with an empty node first, then the longest unneeded.
    for gid, members in sorted(
        atomic.items(),
        key=lambda kv: (all(not r.empty for r in kv[1]), min(r.since for r in kv[1]), kv[0]),
    ):
        refused = _refuse_group(
            gid, members, state, now, limits, remaining, chosen_per_group, gpu_label
        )
        if refused:
            out.unremovable.extend(refused)
            continue
        drains = sum(1 for r in members if not r.empty)
        fits = parallel_left >= len(members) and drain_left >= drains
        # Going beyond the budgets needs some of each left that the group uses.
        may_overflow = can_overflow and parallel_left > 0 and (not drains or drain_left > 0)
        if full or not (fits or may_overflow):
            full = True
            out.deferred.extend(r.node.name for r in members)
            continue
        can_overflow = False
        parallel_left -= len(members)
        drain_left -= drains
        for r in sorted(members, key=lambda r: r.node.name):
            (out.empty if r.empty else out.drain).append(r)
            remaining = remaining.plus(node_totals(r.node, gpu_label), -1)
        chosen_per_group[gid] = chosen_per_group.get(gid, 0) + len(members)
    ordered = sorted(
        (r for r in removable if not r.atomic), key=lambda r: (not r.empty, r.since, r.node.name)
    )
    for r in ordered:
        name = r.node.name
        needed, reason = required_unneeded_time(state.groups[r.node_group].options, r.ready)
        waited = now - r.since
        if waited < needed:
            out.unremovable.append(
                UnremovableNode(
                    name,
                    reason,
                    detail=f"unneeded for {waited.total_seconds():.0f}s of "
                    f"{needed.total_seconds():.0f}s",
                )
            )
            continue
        group = state.groups[r.node_group]
        after = group.target - chosen_per_group.get(r.node_group, 0) - 1
        if after < group.group.min_size:
            out.unremovable.append(
                UnremovableNode(
                    name,
                    UnremovableReason.NODE_GROUP_MIN_SIZE_REACHED,
                    detail=f"node group {r.node_group} would go to {after}, below min size "
                    f"{group.group.min_size}",
                )
            )
            continue
        this = node_totals(r.node, gpu_label)
        below = limits.blocks_removal(remaining, this)
        if below:
            out.unremovable.append(
                UnremovableNode(
                    name,
                    UnremovableReason.MINIMAL_RESOURCE_LIMIT_EXCEEDED,
                    detail="minimum of " + ", ".join(below) + " reached",
                    exceeded=tuple(below),
                )
            )
            continue
        if parallel_left <= 0 or (not r.empty and drain_left <= 0):
            out.deferred.append(name)
            continue
        parallel_left -= 1
        if r.empty:
            out.empty.append(r)
        else:
            drain_left -= 1
            out.drain.append(r)
        chosen_per_group[r.node_group] = chosen_per_group.get(r.node_group, 0) + 1
        remaining = remaining.plus(this, -1)
    return out


def _refuse_group(
    gid: str,
    members: Sequence[RemovableNode],
    state: ClusterState,
    now: datetime,
    limits: Limits,
    remaining: Totals,
    chosen_per_group: Mapping[str, int],
    gpu_label: str,
) -> list[UnremovableNode]:
    """Why the nodes of atomic group `gid` may not all go now (a reason per node), or
    nothing when they may: each unneeded long enough, the group not below its min size
    and the cluster not below a resource minimum once all of them are gone."""
    group = state.groups[gid]
    whole = f"node group {gid} scales down all at once"
    waiting: dict[str, UnremovableNode] = {}
    for r in members:
        needed, reason = required_unneeded_time(group.options, r.ready)
        waited = now - r.since
        if waited < needed:
            waiting[r.node.name] = UnremovableNode(
                r.node.name,
                reason,
                detail=f"unneeded for {waited.total_seconds():.0f}s of "
                f"{needed.total_seconds():.0f}s",
            )
    if waiting:
        return [
            waiting.get(r.node.name)
            or UnremovableNode(
                r.node.name,
                UnremovableReason.ATOMIC_SCALE_DOWN_FAILED,
                detail=f"{whole}, and {len(waiting)} of its nodes have not been unneeded "
                "long enough",
            )
            for r in members
        ]
    after = group.target - chosen_per_group.get(gid, 0) - len(members)
    if after < group.group.min_size:
        return [
            UnremovableNode(
                r.node.name,
                UnremovableReason.NODE_GROUP_MIN_SIZE_REACHED,
                detail=f"{whole}: it would go to {after}, below min size {group.group.min_size}",
            )
            for r in members
        ]
    gone = Totals()
    for r in members:
        gone = gone.plus(node_totals(r.node, gpu_label))
    below = limits.blocks_removal(remaining, gone)
    if below:
        return [
            UnremovableNode(
                r.node.name,
                UnremovableReason.MINIMAL_RESOURCE_LIMIT_EXCEEDED,
                detail=f"{whole}: minimum of " + ", ".join(below) + " reached",
                exceeded=tuple(below),
            )
            for r in members
        ]
    return []
