"""Replica arithmetic of the cluster-proportional-autoscaler: pure functions, no I/O.

Linear: per dimension `ceil(value / perReplica)` clamped to `[min, max]`, the larger
dimension wins, then `preventSinglePointFailure` raises the result to 2 when there is more
than one node (even above `max`, as upstream does).

Ladder: per dimension the replicas of the last step whose threshold is at or below the
value (below the first step, the first step's replicas), the larger dimension wins; zero is
a valid answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from clusterscaler.proportional.params import LadderParams, LadderStep, LinearParams, Params

# The Scale subresource stores replicas as int32; a tiny coresPerReplica must not produce a
# count the API server refuses (or a float overflow).
MAX_REPLICAS = 2**31 - 1


@dataclass(frozen=True)
class ClusterSize:
    """Nodes and whole cores, counted over all nodes and over schedulable ones."""

    nodes: int
    cores: int
    schedulable_nodes: int
    schedulable_cores: int

    def __post_init__(self) -> None:
        for name in ("nodes", "cores", "schedulable_nodes", "schedulable_cores"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"ClusterSize.{name}: expected an integer >= 0, got {value!r}")
        if self.schedulable_nodes > self.nodes:
            raise ValueError(
                f"ClusterSize.schedulable_nodes: expected at most nodes ({self.nodes}), "
                f"got {self.schedulable_nodes}"
            )
        if self.schedulable_cores > self.cores:
            raise ValueError(
                f"ClusterSize.schedulable_cores: expected at most cores ({self.cores}), "
                f"got {self.schedulable_cores}"
            )

    @classmethod
    def uniform(cls, nodes: int, cores: int) -> ClusterSize:
        """A cluster whose nodes are all schedulable."""
        return cls(nodes=nodes, cores=cores, schedulable_nodes=nodes, schedulable_cores=cores)


@dataclass(frozen=True)
class Decision:
    """The replica count and how it was reached (for logs and `calc`).

    `replicas_from_cores` / `replicas_from_nodes` are None when the parameters do not use
    that dimension. `nodes` / `cores` are the counts the parameters looked at: schedulable
    ones unless `includeUnschedulableNodes` is set.
    """

    replicas: int
    mode: str
    nodes: int
    cores: int
    include_unschedulable_nodes: bool
    replicas_from_cores: int | None
    replicas_from_nodes: int | None
    # The rule that set `replicas`: `coresPerReplica`, `nodesPerReplica`, `min`,
    # `preventSinglePointFailure` (linear); `coresToReplicas`, `nodesToReplicas` (ladder);
    # `none` when nothing asks for a replica.
    decided_by: str = "none"


def _linear_dimension(value: int, per_replica: float, params: LinearParams) -> int | None:
    if per_replica == 0:
        return None
    quotient = value / per_replica
    replicas = MAX_REPLICAS if quotient >= MAX_REPLICAS else math.ceil(quotient)
    if params.max_replicas:
        replicas = min(replicas, params.max_replicas)
    return max(replicas, params.min_replicas)


def ladder_lookup(steps: Sequence[LadderStep], value: int) -> int | None:
    """Replicas of the last step at or below `value`; below the first step, the first's.

    `steps` must be sorted by threshold (as `parse_ladder` returns them). None when empty.
    """
    if not steps:
        return None
    chosen = steps[0]
    for step in steps:
        if step.threshold > value:
            break
        chosen = step
    return chosen.replicas


def compute_replicas(params: Params, size: ClusterSize) -> Decision:
    """The replica count `params` ask for on a cluster of `size`."""
    if params.include_unschedulable_nodes:
        nodes, cores = size.nodes, size.cores
    else:
        nodes, cores = size.schedulable_nodes, size.schedulable_cores
    if isinstance(params, LinearParams):
        from_cores = _linear_dimension(cores, params.cores_per_replica, params)
        from_nodes = _linear_dimension(nodes, params.nodes_per_replica, params)
        replicas, decided_by = _largest(
            (from_cores, "coresPerReplica"),
            (from_nodes, "nodesPerReplica"),
            (params.min_replicas, "min"),
        )
        if params.prevent_single_point_failure and nodes > 1 and replicas < 2:
            replicas, decided_by = 2, "preventSinglePointFailure"
    else:
        from_cores = ladder_lookup(params.cores_to_replicas, cores)
        from_nodes = ladder_lookup(params.nodes_to_replicas, nodes)
        replicas, decided_by = _largest(
            (from_cores, "coresToReplicas"), (from_nodes, "nodesToReplicas")
        )
    return Decision(
        replicas=replicas,
        mode=params.mode,
        nodes=nodes,
        cores=cores,
        include_unschedulable_nodes=params.include_unschedulable_nodes,
        replicas_from_cores=from_cores,
        replicas_from_nodes=from_nodes,
        decided_by=decided_by,
    )


def _largest(*candidates: tuple[int | None, str]) -> tuple[int, str]:
    """The largest candidate and the rule it comes from (the first rule on a tie)."""
    best, rule = 0, "none"
    for value, name in candidates:
        if value is not None and value > best:
            best, rule = value, name
    return best, rule


__all__ = [
    "MAX_REPLICAS",
    "ClusterSize",
    "Decision",
    "LadderParams",
    "compute_replicas",
    "ladder_lookup",
]
