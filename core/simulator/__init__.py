"""Scheduling simulation: the cluster snapshot, the scheduler's filter predicates and the
hinting scheduler used by scale-up (estimation) and scale-down (removal simulation); pod
equivalence groups; node utilization; the drainability rules (`drain`) that decide which
pods may be moved.

Imports: `framework`, `model`. Never the loop.
"""

from __future__ import annotations

from clusterscaler.simulator.predicates import (
    PREDICATES,
    check_predicates,
    failing_predicates,
    pod_matches_node_affinity,
    tolerates_taints,
)
from clusterscaler.simulator.scheduler import (
    HintingSimulator,
    Placement,
    SchedulingResult,
    find_fitting_node,
    format_unschedulable,
    unschedulable_reasons,
)
from clusterscaler.simulator.snapshot import ClusterSnapshot, SimNodeInfo, SnapshotError

__all__ = [
    "PREDICATES",
    "ClusterSnapshot",
    "HintingSimulator",
    "Placement",
    "SchedulingResult",
    "SimNodeInfo",
    "SnapshotError",
    "check_predicates",
    "failing_predicates",
    "find_fitting_node",
    "format_unschedulable",
    "pod_matches_node_affinity",
    "tolerates_taints",
    "unschedulable_reasons",
]
