"""Which node groups may grow at all: the group exists, is not backed off, is healthy, is
below its max size and has a template node. Each group that may not is rejected for every
pending pod, with the reason."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from clusterscaler.framework.cloudprovider import CloudProviderError
from clusterscaler.loop.clusterstate import ClusterState, GroupState
from clusterscaler.loop.decisions import GroupRejection, NoScaleUpReason
from clusterscaler.loop.templates import Template


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
