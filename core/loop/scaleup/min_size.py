"""--enforce-node-group-min-size: the increases that bring groups up to their min size."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import structlog
from clusterscaler.loop.clusterstate import ClusterState
from clusterscaler.loop.decisions import ScaleUpDecision
from clusterscaler.loop.grouptemplates import Template
from clusterscaler.loop.limits import Limits, Totals, node_totals
from clusterscaler.loop.quotas import QuotaTracker
from clusterscaler.loop.scaleup.groupeligibility import atomic_increase

log = structlog.get_logger()


def plan_min_size_enforcement(
    state: ClusterState,
    now: datetime,
    *,
    templates: Mapping[str, Template] | None = None,
    limits: Limits | None = None,
    totals: Totals | None = None,
    gpu_label: str = "",
    quotas: QuotaTracker | None = None,
) -> list[ScaleUpDecision]:
    """--enforce-node-group-min-size: grow groups whose target is below their min size.

    With `limits` and `totals` (registered and upcoming nodes), the increases are capped as
    CA's ScaleUpToNodeGroupMinSize caps them: the cluster never goes past --max-nodes-total
    or the cores, memory and GPU maxima; groups are served in name order, each from what the
    ones before it left. A group without a template counts as nodes only.

    A zero-or-max group below its min size grows to its max size, all at once: when the
    limits do not allow that much, it is left as it is.

    With `quotas` (CapacityQuotas), as CA: a group whose next node a quota does not allow
    is left as it is, and an increase is capped at what the quotas allow; the increases
    are taken from the quotas, so the pending pods' scale-up gets what they left.
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
        tpl_node = (
            templates[gid].node_info if templates is not None and gid in templates else None
        )
        if quotas and tpl_node is not None:
            check = quotas.check(tpl_node.node, 1 if not atomic else delta)
            if check.allowed < (1 if not atomic else delta):
                log.info(
                    "min_size_enforcement_skipped",
                    node_group=gid,
                    wanted=delta,
                    allowed=check.allowed,
                    limit=",".join(e.quota for e in check.exceeded),
                )
                continue
            capped = quotas.check(tpl_node.node, delta)
            if capped.allowed < delta:
                log.info(
                    "min_size_enforcement_capped",
                    node_group=gid,
                    wanted=delta,
                    allowed=capped.allowed,
                    limit=",".join(e.quota for e in capped.exceeded),
                )
                delta = capped.allowed
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
        if quotas and tpl_node is not None:
            quotas.consume(tpl_node.node, delta)
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
