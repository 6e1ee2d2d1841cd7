"""The estimator interface: how many nodes of a node group would the pending pods need?

An estimator plugin is registered with `registry.add_estimator(name, factory)`;
`factory(options)` returns an object satisfying `Estimator`. The loop calls
`estimate(groups, template, snapshot, limiter)` once per candidate node group; the
`EstimationLimiter` it passes says when to stop adding nodes (the loop's limits are
`clusterscaler.loop.estimationlimits`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from clusterscaler.model import NodeInfo, Pod
    from clusterscaler.simulator.equivalence import PodGroup
    from clusterscaler.simulator.snapshot import ClusterSnapshot

__all__ = ["Estimate", "EstimationLimiter", "Estimator"]


@dataclass(frozen=True, slots=True)
class Estimate:
    """The result of one estimation for one node group.

    `node_count` new nodes (only nodes that received pods count) would host
    `scheduled_pods`; `new_nodes` shows them with their pods (template pods included).
    `limited_by` names the limit that stopped the estimation from adding nodes, if any.
    """

    node_count: int
    scheduled_pods: tuple[Pod, ...] = ()
    new_nodes: tuple[NodeInfo, ...] = ()
    limited_by: str | None = None
    unscheduled_pods: tuple[Pod, ...] = ()


@runtime_checkable
class EstimationLimiter(Protocol):
    """Decides whether an estimation may add one more node."""

    def start_estimation(self, pods: Sequence[Pod], node_group_id: str) -> None:
        """Called once when an estimation for `node_group_id` begins."""
        ...

    def end_estimation(self) -> None:
        """Called once when the estimation ends, whatever the outcome."""
        ...

    def permission_to_add_node(self) -> str | None:
        """`None` to allow one more node (and count it), else the name of the limit hit."""
        ...


@runtime_checkable
class Estimator(Protocol):
    """Estimates how many template nodes the pod groups need."""

    def estimate(
        self,
        groups: Sequence[PodGroup],
        template: NodeInfo,
        snapshot: ClusterSnapshot,
        limiter: EstimationLimiter,
        *,
        node_group_id: str = "",
    ) -> Estimate:
        """Simulate adding copies of `template` to `snapshot` until the pods are placed.

        `snapshot` is the current cluster (so affinity and spread see existing pods); it is
        left exactly as it was given. Pods are only placed on the new nodes.
        """
        ...
