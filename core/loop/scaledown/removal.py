"""Removal simulation: could this node go, with its pods moved elsewhere?

Nodes are tried one by one on one snapshot. For each, the pod filters classify its pods;
a blocking pod, or pods needing more disruptions than their PDBs have left, make the node
unremovable. Otherwise the pods to move are taken off the node and placed on other nodes
with the hinting scheduler (where each pod went last loop is tried first). Nodes already
chosen for removal, and the node itself, are never destinations. When every pod finds a
place the moves are kept (so capacity is not promised twice) and the PDB budget is
consumed; otherwise the snapshot is rolled back.

The work is linear in the pods moved: destinations are a list kept in snapshot order
rather than every node filtered for every pod, nodes with no pod slot left drop out of it
for good, and each pod's drain decision is taken once however often it moves.

The nodes of a zero-or-max (atomic) node group are simulated together, all or nothing:
when one of them cannot go, the moves of the others are undone (snapshot, destinations and
PDB budgets), so they promise no capacity, and they are unremovable with
`AtomicScaleDownFailed`.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from clusterscaler.interfaces.podfilter import BlockingPodReason, DrainContext, PodFilter
from clusterscaler.loop.decisions import BlockingPod, UnremovableReason
from clusterscaler.model import Pod
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator, Placement, SimNodeInfo
from clusterscaler.simulator.drain import (
    NodeDrainPlan,
    RememberedDecisions,
    daemonset_pods_to_evict,
    plan_node_drain,
)


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


class _NodeList:
    """Node infos in snapshot order, each with its position in that order (ascending, for
    bisection): nodes leave by position, and copies leave one node out."""

    __slots__ = ("infos", "positions")

    def __init__(self, entries: Sequence[tuple[int, SimNodeInfo]]) -> None:
        self.positions = [position for position, _ in entries]
        self.infos = [ni for _, ni in entries]

    def _index(self, position: int) -> int | None:
        at = bisect.bisect_left(self.positions, position)
        if at < len(self.positions) and self.positions[at] == position:
            return at
        return None

    def discard(self, position: int) -> None:
        at = self._index(position)
        if at is not None:
            del self.infos[at]
            del self.positions[at]

    def without(self, position: int) -> list[SimNodeInfo]:
        at = self._index(position)
        if at is None:
            return list(self.infos)
        return self.infos[:at] + self.infos[at + 1 :]


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    """The simulator's state before a set of nodes that go all or nothing."""

    removed: frozenset[str]
    # Never changed in place (only replaced), so held without a copy.
    position: dict[str, int]
    all: tuple[list[int], list[SimNodeInfo]]
    open: tuple[list[int], list[SimNodeInfo]]
    pdb_remaining: dict[str, int]


def _no_pod_slot_left(ni: SimNodeInfo) -> bool:
    return ni.req_pods >= ni.node.allocatable.pods


class RemovalSimulator:
    """Simulates removing nodes one after another on `snapshot`.

    `excluded` names nodes that can receive no pods (unready or being deleted ones). While
    the simulator is in use, the snapshot changes only through it.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        filters: Sequence[PodFilter],
        context: DrainContext,
        scheduler: HintingSimulator,
        *,
        excluded: Collection[str] = (),
        evict_daemonsets_from_empty: bool = False,
        evict_daemonsets_from_occupied: bool = True,
    ) -> None:
        self.snapshot = snapshot
        # --daemonset-eviction-for-empty-nodes / --daemonset-eviction-for-occupied-nodes:
        # the DaemonSet pods evicted spend PDB budgets too.
        self.evict_daemonsets_from_empty = evict_daemonsets_from_empty
        self.evict_daemonsets_from_occupied = evict_daemonsets_from_occupied
        self.filters = filters
        self.context = context
        self.scheduler = scheduler
        self.removed: set[str] = set()
        self.excluded = set(excluded)
        # The nodes that may receive pods, listed once in snapshot order; nodes leave as
        # they are removed. Every candidate scans them from the start, so filtering all
        # nodes for every pod would make the simulation quadratic.
        self._position: dict[str, int] = {}
        self._all = _NodeList(())
        # The same without nodes whose pod slots are all taken. Such a node stays full:
        # while the simulation runs, pods leave a node only when it is the candidate (and
        # it is then removed, or everything is rolled back), so no pod that needs a slot
        # can go there again. Long runs of full nodes are not scanned, and a candidate
        # whose pods have no node with a free slot fails without touching the snapshot.
        self._open = _NodeList(())
        self._decide = RememberedDecisions()

    def _destination(self, ni: SimNodeInfo) -> bool:
        name = ni.node.name
        return name not in self.removed and name not in self.excluded

    def _destinations(self, node: str, pods: Sequence[Pod]) -> list[SimNodeInfo]:
        """The nodes the pods of `node` may go to, in snapshot order (without full ones
        when every pod needs a slot)."""
        if len(self._position) != len(self.snapshot):
            infos = self.snapshot.node_infos()
            self._position = {ni.node.name: i for i, ni in enumerate(infos)}
            kept = [(i, ni) for i, ni in enumerate(infos) if self._destination(ni)]
            self._all = _NodeList(kept)
            self._open = _NodeList([(i, ni) for i, ni in kept if not _no_pod_slot_left(ni)])
        position = self._position.get(node, -1)
        if not self.snapshot.checks_resources:
            # Full nodes are only left out for NodeResourcesFit.
            return self._all.without(position)
        for pod in pods:
            if pod.requests.pods <= 0:
                return self._all.without(position)
        return self._open.without(position)

    def _take_out(self, node: str) -> None:
        """`node` is removed: it receives no more pods."""
        position = self._position.get(node)
        if position is not None:
            self._all.discard(position)
            self._open.discard(position)

    def _filled(self, placements: Sequence[Placement]) -> None:
        """Close the nodes that `placements` left without a free pod slot."""
        seen: set[str] = set()
        for placement in placements:
            name = placement.node_name
            if name in seen:
                continue
            seen.add(name)
            ni = self.snapshot.node_info(name)
            position = self._position.get(name)
            if ni is not None and position is not None and _no_pod_slot_left(ni):
                self._open.discard(position)

    def checkpoint(self) -> _Checkpoint:
        """Open a set of removals that `rollback` undoes, or `keep` keeps. The snapshot is
        forked; the destination lists are copied (once per set, not per node)."""
        self.snapshot.fork()
        return _Checkpoint(
            frozenset(self.removed),
            self._position,
            (list(self._all.positions), list(self._all.infos)),
            (list(self._open.positions), list(self._open.infos)),
            dict(self.context.pdbs.remaining),
        )

    def keep(self, checkpoint: _Checkpoint) -> None:
        """Keep the removals since `checkpoint`."""
        self.snapshot.commit()

    def rollback(self, checkpoint: _Checkpoint) -> None:
        """Undo the removals since `checkpoint`: the nodes take their pods back, receive
        pods again, and the PDB disruptions they used are given back."""
        self.snapshot.revert()
        self.removed = set(checkpoint.removed)
        self._position = checkpoint.position
        self._all = _NodeList(list(zip(*checkpoint.all, strict=True)))
        self._open = _NodeList(list(zip(*checkpoint.open, strict=True)))
        pdbs = self.context.pdbs
        pdbs.remaining = dict(checkpoint.pdb_remaining)
        # Decisions remembered under the budgets just undone must not be reused: a new
        # version number, never seen before, makes them stale.
        pdbs.version += 1

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
        destinations = self._destinations(node, plan.to_move)
        if not destinations:
            # Nowhere to go, whatever the snapshot says about the pods themselves: the
            # first pod is the one that finds no place (even its hinted node is full).
            return self._no_place(node, plan, plan.to_move[0])
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
            return self._no_place(node, plan, result.unschedulable[0])
        moved_to = {p.pod.key: p.node_name for p in result.scheduled}
        if commit:
            snapshot.commit()
            # The moved copies are the same pods to the filters when their new node is
            # tried in turn. Placements follow `to_move` one for one (none failed).
            for original, placement in zip(plan.to_move, result.scheduled, strict=True):
                if placement.pod is not original:
                    self._decide.share(placement.pod, original)
            self.context.pdbs.consume(plan.to_move)
            self._take_out(node)
            self._filled(result.scheduled)
        else:
            self.removed.discard(node)
            snapshot.revert()
        return RemovalResult(node, True, plan, destinations=moved_to)

    def allot_daemonsets(self, results: Sequence[RemovalResult]) -> list[RemovalResult]:
        """`results` with the DaemonSet pods each removable node will evict given what the
        PDB budgets have left once every candidate's pods to move took theirs (as in CA,
        DaemonSet pods never make a node unremovable), in candidate order. Those whose
        budgets have none left are kept: not evicted, they go with their node, so that no
        eviction of the loop is refused and no budget is overspent."""
        out: list[RemovalResult] = []
        for r in results:
            if r.removable and r.plan.daemonset:
                plan = self._allot_daemonsets(r.plan)
                if plan is not r.plan:
                    r = replace(r, plan=plan)
            out.append(r)
        return out

    def _allot_daemonsets(self, plan: NodeDrainPlan) -> NodeDrainPlan:
        """`plan` with its DaemonSet pods to evict given budget disruptions; those whose
        budgets have none left are kept."""
        if not plan.daemonset:
            return plan
        evicted = daemonset_pods_to_evict(
            plan.daemonset,
            by_default=self.evict_daemonsets_from_occupied
            if plan.to_move
            else self.evict_daemonsets_from_empty,
        )
        kept = self.context.pdbs.allot(evicted)
        return replace(plan, daemonset_kept=kept) if kept else plan

    @staticmethod
    def _no_place(node: str, plan: NodeDrainPlan, stuck: Pod) -> RemovalResult:
        return RemovalResult(
            node,
            False,
            plan,
            UnremovableReason.NO_PLACE_TO_MOVE_PODS,
            detail=f"no place to move pod {stuck.key}",
        )


def _atomic_failed(node: str, group: str, failed: RemovalResult) -> RemovalResult:
    return RemovalResult(
        node,
        False,
        NodeDrainPlan(),
        UnremovableReason.ATOMIC_SCALE_DOWN_FAILED,
        detail=f"node group {group} scales down all at once, and node {failed.node} "
        f"cannot go ({failed.reason.value})",
    )


def _try_together(
    simulator: RemovalSimulator,
    group: str,
    nodes: Sequence[str],
    timed_out: Callable[[], bool],
) -> list[RemovalResult] | None:
    """Simulate removing all of `nodes` (one atomic group), all or nothing. Returns a
    result per node (the first that cannot go with its own reason, the others with
    `AtomicScaleDownFailed`), or None when the timeout passed (nothing kept)."""
    checkpoint = simulator.checkpoint()
    results: list[RemovalResult] = []
    try:
        for node in nodes:
            if timed_out():
                simulator.rollback(checkpoint)
                return None
            r = simulator.try_remove(node)
            if not r.removable:
                simulator.rollback(checkpoint)
                return [r if n == node else _atomic_failed(n, group, r) for n in nodes]
            results.append(r)
    except BaseException:
        simulator.rollback(checkpoint)
        raise
    simulator.keep(checkpoint)
    return results


def simulate_nodes(
    simulator: RemovalSimulator,
    nodes: Sequence[str],
    *,
    max_non_empty: int,
    timeout_seconds: float,
    clock: Callable[[], float] = time.monotonic,
    together: Mapping[str, tuple[str, Sequence[str]]] | None = None,
) -> tuple[list[RemovalResult], list[str]]:
    """Try `nodes` in order until `max_non_empty` removable non-empty nodes are found
    (<= 0: no limit) or the timeout passes. Returns the results, with the DaemonSet pods
    of the removable nodes given what the PDB budgets have left (`allot_daemonsets`), and
    the nodes not tried.

    `together` maps each node of a zero-or-max group to the group and all its nodes to
    try: they are tried at once, where the first of them comes in `nodes`, all or nothing
    (`_try_together`), and do not count against `max_non_empty` (as in CA, a group is
    never cut short by it)."""
    results, untried = _try_in_order(
        simulator, nodes, max_non_empty, timeout_seconds, clock, together
    )
    return simulator.allot_daemonsets(results), untried


def _try_in_order(
    simulator: RemovalSimulator,
    nodes: Sequence[str],
    max_non_empty: int,
    timeout_seconds: float,
    clock: Callable[[], float],
    together: Mapping[str, tuple[str, Sequence[str]]] | None,
) -> tuple[list[RemovalResult], list[str]]:
    results: list[RemovalResult] = []
    found = 0
    start = clock()
    done: set[str] = set()

    def timed_out() -> bool:
        return clock() - start > timeout_seconds

    for i, node in enumerate(nodes):
        if node in done:
            continue
        if timed_out():
            return results, [n for n in nodes[i:] if n not in done]
        unit = together.get(node) if together else None
        if unit is not None:
            group, members = unit
            done.update(members)
            tried = _try_together(simulator, group, members, timed_out)
            if tried is None:
                return results, [n for n in nodes[i:] if n not in done or n in members]
            results.extend(tried)
            continue
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
