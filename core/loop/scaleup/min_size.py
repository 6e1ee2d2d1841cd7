"""--enforce-node-group-min-size: the increases that bring groups up to their min size."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import structlog
from clusterscaler.loop.clusterstate import ClusterState
from clusterscaler.loop.decisions import ScaleUpDecision
from clusterscaler.loop.limits import Limits, Totals, node_totals
from clusterscaler.loop.scaleup.eligibility import atomic_increase
from clusterscaler.loop.templates import Template

log = structlog.get_logger()


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

    A zero-or-max group below its min size grows to its max size, all at once: when the
    limits do not allow that much, it is left as it is.
    """
    out = []
    current = totals if totals is not None else Totals()
    for gid in sorted(state.groups):
        g = state.groups[gid]
        if g.backoff is not None and g.backoff.until > now:
            continue
        if g.target >= g.group.min_size:
            continue
        atomic = g.atomic
        delta = atomic_increase(g) if atomic else g.group.min_size - g.target
        if limits is not None:
            tpl = templates.get(gid) if templates is not None else None
            per_node = (
                node_totals(tpl.node_info.node, gpu_label)
                if tpl is not None and tpl.node_info is not None
                else Totals(nodes=1)
            )
            room, which = limits.max_new_nodes(current, per_node)
            if atomic and room < delta:
                log.info(
                    "min_size_enforcement_skipped",
                    node_group=gid,
                    wanted=delta,
                    allowed=room,
                    limit=which,
                    reason="zero-or-max group grows to its max size or not at all",
                )
                continue
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
                reason="node group below its minimum size"
                + (" (zero-or-max: to its max size)" if atomic else ""),
            )
        )
    return out
