"""Which node groups may grow at all: the group exists, is not backed off, is healthy, is
below its max size and has a template node. Each group that may not is rejected for every
pending pod, with the reason.

A zero-or-max (atomic) group grows only to its max size at once: when the cluster's limits
(--max-nodes-total, --cores-total, --memory-total, --gpu-total) or --max-nodes-per-scaleup
do not allow the whole increase, the group is no option at all (`atomic_rejection`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from clusterscaler.interfaces.cloudprovider import CloudProviderError
from clusterscaler.loop.clusterstate import ClusterState, GroupState
from clusterscaler.loop.decisions import GroupRejection, NoScaleUpReason
from clusterscaler.loop.grouptemplates import Template
from clusterscaler.loop.limits import CPU, MEMORY, NODES

# The reason a limit on a resource gives when it keeps an atomic group from growing.
_ATOMIC_LIMIT_REASONS = {
    CPU: NoScaleUpReason.CPU_LIMIT_REACHED,
    MEMORY: NoScaleUpReason.MEMORY_LIMIT_REACHED,
    NODES: NoScaleUpReason.ATOMIC_MAX_NODES_TOTAL,
}


def atomic_increase(g: GroupState) -> int:
    """The only increase an atomic group may get: all the way to its max size."""
    return g.group.max_size - g.target


def atomic_rejection(
    g: GroupState, room: int, limited_by: str, max_nodes_per_scaleup: int
) -> GroupRejection | None:
    """Why atomic group `g` may not grow to its max size now, or None. `room` is how many
    of its template nodes the cluster's limits allow, `limited_by` the resource that
    bounds it (see `Limits.max_new_nodes`)."""
    whole = atomic_increase(g)
    wanted = f"atomic scale-up {g.target} -> {g.group.max_size} needs {whole} nodes"
    if whole > max_nodes_per_scaleup:
        return GroupRejection(
            g.id,
            NoScaleUpReason.ATOMIC_MAX_NODES_PER_SCALE_UP,
            f"{wanted}; --max-nodes-per-scaleup is {max_nodes_per_scaleup}",
        )
    if room < whole:
        return GroupRejection(
            g.id,
            _ATOMIC_LIMIT_REASONS.get(limited_by, NoScaleUpReason.GPU_LIMIT_REACHED),
            f"{wanted}; the limit on {limited_by} leaves room for {room}",
            exceeded=(limited_by,),
        )
    return None


def group_rejection(g: GroupState, tpl: Template | None, now: datetime) -> GroupRejection | None:
    """Why group `g` may not grow now, or None."""
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


def eligible_groups(
    state: ClusterState, templates: Mapping[str, Template], now: datetime
) -> tuple[dict[str, GroupState], list[GroupRejection]]:
    """The groups that may grow (by name, in name order) and the rejections of the others."""
    eligible: dict[str, GroupState] = {}
    rejected: list[GroupRejection] = []
    for gid in sorted(state.groups):
        g = state.groups[gid]
        rejection = group_rejection(g, templates.get(gid), now)
        if rejection is None:
            eligible[gid] = g
        else:
            rejected.append(rejection)
    return eligible, rejected
