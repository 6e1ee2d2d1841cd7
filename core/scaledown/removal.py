"""Removal simulation: could this node go, with its pods moved elsewhere?

Nodes are tried one by one on one snapshot. For each, the pod filters classify its pods;
a blocking pod, or pods needing more disruptions than their PDBs have left, make the node
unremovable. Otherwise the pods to move are taken off the node and placed on other nodes
with the hinting scheduler (where each pod went last loop is tried first). Nodes already
chosen for removal, and the node itself, are never destinations. When every pod finds a
place the moves are kept (so capacity is not promised twice) and the PDB budget is
consumed; otherwise the snapshot is rolled back.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from clusterscaler.decisions import BlockingPod, BlockingPodReason, UnremovableReason
from clusterscaler.drain import (
    DrainContext,
    NodeDrainPlan,
    PodFilter,
    RememberedDecisions,
    plan_node_drain,
)
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator, SimNodeInfo


@dataclass(frozen=True, slots=True)
class RemovalResult:
    """The outcome for one node: removable (with where its pods go) or not (and why)."""

    node: str
    removable: bool
    plan: NodeDrainPlan
    reason: UnremovableReason = UnremovableReason.NO_REASON
    blocking: BlockingPod | None = None
    detail: str = ""
    destinations: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.plan.to_move


class RemovalSimulator:
    """Simulates removing nodes one after another on `snapshot`.

    `excluded` names nodes that can receive no pods (unready or being deleted ones). Pods
    may come and go in the snapshot between calls, nodes may not: the nodes pods can move
    to are listed once, in snapshot order, and nodes leave the list as they are removed.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        filters: Sequence[PodFilter],
        context: DrainContext,
        scheduler: HintingSimulator,
        *,
        excluded: Collection[str] = (),
    ) -> None:
        self.snapshot = snapshot
        self.filters = filters
        self.context = context
        self.scheduler = scheduler
        self.removed: set[str] = set()
        self.excluded = set(excluded)
        # The nodes that may receive pods, in snapshot order, with each one's position in
        # that order (ascending, for bisection). Every candidate scans them from the
        # start, so filtering all nodes per pod would make the simulation quadratic.
        self._destinations: list[SimNodeInfo] = []
        self._positions: list[int] = []
        self._position: dict[str, int] = {}
        self._decide = RememberedDecisions()

    def _destination(self, ni: SimNodeInfo) -> bool:
        name = ni.node.name
        return name not in self.removed and name not in self.excluded

    def _destinations_without(self, node: str) -> list[SimNodeInfo]:
        """The nodes the pods of `node` may go to."""
        if len(self._position) != len(self.snapshot):
            infos = self.snapshot.node_infos()
            self._position = {ni.node.name: i for i, ni in enumerate(infos)}
            kept = [(i, ni) for i, ni in enumerate(infos) if self._destination(ni)]
            self._positions = [i for i, _ in kept]
            self._destinations = [ni for _, ni in kept]
        at = self._index(node)
        if at is None:
            return list(self._destinations)
        return self._destinations[:at] + self._destinations[at + 1 :]

    def _index(self, node: str) -> int | None:
        position = self._position.get(node)
        if position is None:
            return None
        at = bisect.bisect_left(self._positions, position)
        if at < len(self._positions) and self._positions[at] == position:
            return at
        return None

    def _take_out(self, node: str) -> None:
        """`node` is removed: it receives no more pods."""
        at = self._index(node)
        if at is not None:
            del self._destinations[at]
            del self._positions[at]

    def drain_plan(self, node: str) -> NodeDrainPlan | None:
        ni = self.snapshot.node_info(node)
        if ni is None:
            return None
        return plan_node_drain(ni.pods.values(), self.filters, self.context, decide_fn=self._decide)

    def try_remove(self, node: str, *, commit: bool = True) -> RemovalResult:
        """Simulate removing `node`; with `commit`, a removable node stays removed in the
        snapshot (its pods on their new nodes) and its PDB disruptions are consumed."""
        plan = self.drain_plan(node)
        if plan is None:
            return RemovalResult(
                node,
                False,
                NodeDrainPlan(),
                UnremovableReason.NO_NODE_INFO,
                detail="not in snapshot",
            )
        if plan.blocking is not None and plan.decision is not None:
            return RemovalResult(
                node,
                False,
                plan,
                UnremovableReason.BLOCKED_BY_POD,
                BlockingPod(plan.blocking.key, plan.decision.reason, plan.decision.detail),
                detail=plan.decision.detail,
            )
        exhausted = self.context.pdbs.first_exhausted(plan.to_move)
        if exhausted is not None:
            pod, pdb = exhausted
            detail = f"PodDisruptionBudget {pdb.key} allows too few disruptions"
            return RemovalResult(
                node,
                False,
                plan,
                UnremovableReason.BLOCKED_BY_POD,
                BlockingPod(pod.key, BlockingPodReason.NOT_ENOUGH_PDB, detail),
                detail=detail,
            )
        if not plan.to_move:
            if commit:
                self.removed.add(node)
                self._take_out(node)
            return RemovalResult(node, True, plan)
        snapshot = self.snapshot
        destinations = self._destinations_without(node)
        snapshot.fork()
        self.removed.add(node)
        try:
            for pod in plan.to_move:
                snapshot.remove_pod(pod.key)
            result = self.scheduler.try_schedule_pods(
                snapshot,
                plan.to_move,
                node_filter=self._destination,
                nodes=destinations,
                unbind=True,
                break_on_failure=True,
            )
        except BaseException:
            self.removed.discard(node)
            snapshot.revert()
            raise
        if result.unschedulable:
            self.removed.discard(node)
            snapshot.revert()
            stuck = result.unschedulable[0]
            return RemovalResult(
                node,
                False,
                plan,
                UnremovableReason.NO_PLACE_TO_MOVE_PODS,
                detail=f"no place to move pod {stuck.key}",
            )
        moved_to = {p.pod.key: p.node_name for p in result.scheduled}
        if commit:
            snapshot.commit()
            self.context.pdbs.consume(plan.to_move)
            self._take_out(node)
        else:
            self.removed.discard(node)
            snapshot.revert()
        return RemovalResult(node, True, plan, destinations=moved_to)


def simulate_nodes(
    simulator: RemovalSimulator,
    nodes: Sequence[str],
    *,
    max_non_empty: int,
    timeout_seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[RemovalResult], list[str]]:
    """Try `nodes` in order until `max_non_empty` removable non-empty nodes are found
    (<= 0: no limit) or the timeout passes. Returns the results and the nodes not tried."""
    results: list[RemovalResult] = []
    found = 0
    start = clock()
    for i, node in enumerate(nodes):
        if clock() - start > timeout_seconds:
            return results, list(nodes[i:])
        if 0 < max_non_empty <= found:
            # Still let empty nodes through: they need no simulation budget.
            plan = simulator.drain_plan(node)
            if plan is None or plan.to_move or plan.blocking is not None:
                results.append(
                    RemovalResult(
                        node,
                        False,
                        plan or NodeDrainPlan(),
                        UnremovableReason.NOT_UNNEEDED_OTHER_REASON,
                        detail="non-empty candidate limit reached",
                    )
                )
                continue
        r = simulator.try_remove(node)
        if r.removable and not r.empty:
            found += 1
        results.append(r)
    return results, []
