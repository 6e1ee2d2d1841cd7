"""The limits of an estimation: how many nodes, and how long, an estimator may add.

The loop calls the selected `Estimator` (`clusterscaler.interfaces.estimator`) once per
candidate node group, with a limiter built from the flags and the group's headroom
(`limits_from_options` + `ThresholdLimiter`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.model import Pod

__all__ = [
    "LIMIT_CLUSTER_MAX_NODES",
    "LIMIT_DURATION",
    "LIMIT_MAX_BINPACKING_TIME",
    "LIMIT_NODES_PER_SCALE_UP",
    "LIMIT_NODE_GROUP_HEADROOM",
    "EstimationLimits",
    "ThresholdLimiter",
    "limits_from_options",
]

# Why an estimation stopped adding nodes (the flag or quantity that limited it).
LIMIT_NODES_PER_SCALE_UP = "max-nodes-per-scaleup"
LIMIT_NODE_GROUP_HEADROOM = "node-group-max-size"
LIMIT_CLUSTER_MAX_NODES = "max-nodes-total"
LIMIT_DURATION = "max-nodegroup-binpacking-duration"
LIMIT_MAX_BINPACKING_TIME = "max-binpacking-time"


@dataclass(frozen=True, slots=True)
class EstimationLimits:
    """Node-count and time limits for one node group's estimation.

    `None` means "no limit"; a count of 0 or less allows no node at all. `deadline` is a
    `clock()` value shared by every estimation of one scale-up (`--max-binpacking-time`).
    """

    max_nodes_per_scale_up: int | None = 1000
    node_group_headroom: int | None = None
    cluster_headroom: int | None = None
    max_duration: timedelta | None = timedelta(seconds=10)
    deadline: float | None = None


def limits_from_options(
    options: AutoscalingOptions,
    *,
    node_group_headroom: int | None,
    cluster_node_count: int,
    deadline: float | None = None,
    started_at: float | None = None,
) -> EstimationLimits:
    """Limits from the flags.

    `node_group_headroom` is the sum of `max_size - target_size` over the node group and
    its similar groups; `cluster_node_count` counts every node and upcoming node, for
    `--max-nodes-total` (0: no limit). For `--max-binpacking-time`, pass the `clock()`
    value at which the scale-up started as `started_at` (the same for every node group
    of one scale-up), or an explicit `deadline`.
    """
    total = options.max_nodes_total
    duration = options.max_nodegroup_binpacking_duration
    if deadline is None and started_at is not None:
        budget = options.max_binpacking_time
        if budget > timedelta(0):
            deadline = started_at + budget.total_seconds()
    return EstimationLimits(
        max_nodes_per_scale_up=options.max_nodes_per_scaleup,
        node_group_headroom=node_group_headroom,
        cluster_headroom=(total - cluster_node_count) if total > 0 else None,
        max_duration=duration if duration > timedelta(0) else None,
        deadline=deadline,
    )


@dataclass
class ThresholdLimiter:
    """An `EstimationLimiter` enforcing `EstimationLimits`."""

    limits: EstimationLimits
    clock: Callable[[], float] = time.monotonic
    added: int = 0
    started: float = 0.0
    node_group_id: str = ""
    limited_by: str | None = field(default=None)

    def start_estimation(self, pods: Sequence[Pod], node_group_id: str) -> None:
        self.added = 0
        self.started = self.clock()
        self.node_group_id = node_group_id
        self.limited_by = None

    def end_estimation(self) -> None:
        self.started = 0.0

    def permission_to_add_node(self) -> str | None:
        limits = self.limits
        reason: str | None = None
        for name, cap in (
            (LIMIT_NODES_PER_SCALE_UP, limits.max_nodes_per_scale_up),
            (LIMIT_NODE_GROUP_HEADROOM, limits.node_group_headroom),
            (LIMIT_CLUSTER_MAX_NODES, limits.cluster_headroom),
        ):
            if cap is not None and self.added >= cap:
                reason = name
                break
        if reason is None and (limits.max_duration is not None or limits.deadline is not None):
            now = self.clock()
            if (
                limits.max_duration is not None
                and now - self.started > limits.max_duration.total_seconds()
            ):
                reason = LIMIT_DURATION
            elif limits.deadline is not None and now > limits.deadline:
                reason = LIMIT_MAX_BINPACKING_TIME
        if reason is not None:
            self.limited_by = reason
            return reason
        self.added += 1
        return None
