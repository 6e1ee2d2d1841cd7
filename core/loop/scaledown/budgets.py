"""Choosing which unneeded nodes to delete now.

A node goes only when it has been unneeded for --scale-down-unneeded-time
(--scale-down-unready-time for unready nodes; both overridable per group), its group stays
at or above its min size counting deletions in progress, the cluster stays above the
--cores-total / --memory-total minimums, and the budgets allow it:
--max-scale-down-parallelism for all deletions at once, --max-drain-parallelism for those
that need a drain. Empty nodes are taken first, then the longest unneeded.
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
    ordered = sorted(removable, key=lambda r: (not r.empty, r.since, r.node.name))
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
