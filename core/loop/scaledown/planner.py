"""The scale-down planner: unneeded nodes, their timers, and the nodes to delete now.

Each loop, eligible nodes are simulated for removal in a stable order: the nodes unneeded
last loop first (their timers keep running only if they stay unneeded), then the others by
ascending utilization. Empty nodes are always considered; non-empty ones are simulated until
--scale-down-non-empty-candidates-count are found removable or
--scale-down-simulation-timeout passes. Nodes found unremovable by the simulation are not
retried before --unremovable-node-recheck-timeout.

As in Cluster Autoscaler's current planner (`categorizeNodes`), every eligible candidate is
simulated: --scale-down-candidates-pool-ratio and --scale-down-candidates-pool-min-count
belonged to the legacy scale-down, which cut the non-empty candidates to that pool, and are
accepted but have no effect.

A zero-or-max (atomic) node group goes all at once or not at all: unless every one of its
nodes (as many as its target size) is a candidate, none is simulated and each is
unremovable with `AtomicScaleDownFailed`; otherwise its nodes are simulated together, all
or nothing, outside the non-empty candidate count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import structlog
from clusterscaler.interfaces.podfilter import (
    SAFE_TO_EVICT_ANNOTATION,
    BlockingPodReason,
    DrainContext,
    PodFilter,
)
from clusterscaler.loop.clusterstate import ClusterState
from clusterscaler.loop.decisions import UnneededNode, UnremovableNode, UnremovableReason
from clusterscaler.loop.limits import Limits, Totals
from clusterscaler.loop.scaledown.budgets import (
    InProgress,
    RemovableNode,
    Selection,
    select_deletions,
)
from clusterscaler.loop.scaledown.nodeeligibility import Candidate, check_eligibility
from clusterscaler.loop.scaledown.removal import RemovalSimulator, simulate_nodes
from clusterscaler.loop.scaledown.unneeded import (
    UnneededTimers,
    UnremovableCache,
    required_unneeded_time,
)
from clusterscaler.model import (
    Controller,
    DaemonSet,
    Node,
    Pod,
    PodDisruptionBudget,
    UnreadableObject,
)
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
from clusterscaler.simulator.drain import PdbTracker

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

log = structlog.get_logger()

# Simulation outcomes that are worth remembering until the recheck timeout.
_RECHECK_REASONS = frozenset(
    {UnremovableReason.NO_PLACE_TO_MOVE_PODS, UnremovableReason.BLOCKED_BY_POD}
)


@dataclass
class ScaleDownPlan:
    unneeded: list[UnneededNode] = field(default_factory=list)
    unremovable: list[UnremovableNode] = field(default_factory=list)
    selection: Selection = field(default_factory=Selection)


@dataclass(frozen=True, slots=True)
class ScaleDownInputs:
    """The cluster as scale-down sees it."""

    nodes: Sequence[Node]
    pods_by_node: Mapping[str, Sequence[Pod]]
    pdbs: Sequence[PodDisruptionBudget]
    controllers: Sequence[Controller]
    daemonsets: Sequence[DaemonSet]
    # Pods the model could not read, by the node they are bound to: those nodes are kept.
    unreadable_pods: Mapping[str, Sequence[UnreadableObject]] = field(default_factory=dict)


def _looks_empty(pods: Sequence[Pod]) -> bool:
    return all(p.is_daemonset or p.is_mirror or p.is_terminal for p in pods)


def _atomic_groups(
    candidates: Sequence[Candidate], state: ClusterState, unremovable: list[UnremovableNode]
) -> tuple[list[Candidate], dict[str, list[Candidate]]]:
    """Split off the candidates of zero-or-max groups. A group whose candidates are not all
    of its nodes (its target size) cannot go at all: its candidates become unremovable
    (`AtomicScaleDownFailed`, added to `unremovable`). Returns the other candidates plus
    those of complete groups, and the complete groups' candidates by group."""
    by_group: dict[str, list[Candidate]] = {}
    for c in candidates:
        if state.groups[c.node_group].atomic:
            by_group.setdefault(c.node_group, []).append(c)
    if not by_group:
        return list(candidates), {}
    incomplete: set[str] = set()
    for gid, members in by_group.items():
        target = state.groups[gid].target
        if len(members) == target:
            continue
        incomplete.add(gid)
        log.debug(
            "atomic_scale_down_incomplete", node_group=gid, candidates=len(members), target=target
        )
        for c in members:
            unremovable.append(
                UnremovableNode(
                    c.node.name,
                    UnremovableReason.ATOMIC_SCALE_DOWN_FAILED,
                    detail=f"node group {gid} scales down all at once, and only "
                    f"{len(members)} of its {target} nodes may go",
                )
            )
    kept = [c for c in candidates if c.node_group not in incomplete]
    return kept, {gid: m for gid, m in by_group.items() if gid not in incomplete}


def _together(
    atomic: Mapping[str, Sequence[Candidate]], order: Sequence[str]
) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each node of a complete zero-or-max group, mapped to its group and all the group's
    nodes in simulation order (for `simulate_nodes`)."""
    if not atomic:
        return {}
    position = {name: i for i, name in enumerate(order)}
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for gid, members in atomic.items():
        names = tuple(sorted((c.node.name for c in members), key=position.__getitem__))
        for name in names:
            out[name] = (gid, names)
    return out


def _hold_on_completion(selection: Selection, unremovable: list[UnremovableNode]) -> None:
    """Take out of `selection` the nodes running `safe-to-evict: "on-completion"` pods: as
    in CA's planner they stay unneeded (their timers run) but are not deleted while those
    pods run (`BlockedByOnCompletionPod`). A zero-or-max group goes whole or not at all, so
    one such node holds back its whole group (`AtomicScaleDownFailed` for the others)."""
    waiting = [r for r in (*selection.empty, *selection.drain) if r.plan.on_completion]
    if not waiting:
        return
    held = {r.node.name for r in waiting}
    held_groups = {r.node_group: r.node.name for r in waiting if r.atomic}
    for r in waiting:
        pods = sorted(p.key for p in r.plan.on_completion)
        log.debug("scale_down_on_completion_pods", node=r.node.name, pods=pods)
        unremovable.append(
            UnremovableNode(
                r.node.name,
                UnremovableReason.BLOCKED_BY_ON_COMPLETION_POD,
                detail=f"pod {pods[0]} runs to completion first",
            )
        )
    for r in (*selection.empty, *selection.drain):
        if r.node.name not in held and r.atomic and r.node_group in held_groups:
            held.add(r.node.name)
            unremovable.append(
                UnremovableNode(
                    r.node.name,
                    UnremovableReason.ATOMIC_SCALE_DOWN_FAILED,
                    detail=f"node group {r.node_group} scales down all at once, and node "
                    f"{held_groups[r.node_group]} runs pods to completion first",
                )
            )
    selection.empty = [r for r in selection.empty if r.node.name not in held]
    selection.drain = [r for r in selection.drain if r.node.name not in held]


class ScaleDownPlanner:
    """Keeps unneeded timers, recheck delays and placement hints between loops."""

    def __init__(
        self,
        options: AutoscalingOptions,
        filters: Sequence[PodFilter],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.options = options
        self.filters = list(filters)
        self.timers = UnneededTimers()
        self.recheck = UnremovableCache(options.unremovable_node_recheck_timeout)
        self.scheduler = HintingSimulator()
        self.clock = clock
        # The pod without a controller each node was last said to be kept by.
        self._kept_by_orphan: dict[str, str] = {}

    def plan(
        self,
        now: datetime,
        inputs: ScaleDownInputs,
        snapshot: ClusterSnapshot,
        state: ClusterState,
        *,
        limits: Limits,
        totals: Totals,
        in_progress: InProgress,
        allow_deletion: bool,
        gpu_label: str = "",
        last_use: bool = False,
        skip_groups: Mapping[str, str] | None = None,
    ) -> ScaleDownPlan:
        """Find unneeded nodes and, with `allow_deletion`, the ones to delete now.

        The snapshot is left as given, unless the caller says this is its `last_use` of
        it: then the removal simulation is abandoned in it rather than undone (undoing it
        is a large share of planning on big clusters), and the snapshot refuses any later
        listing or fork.

        The nodes of `skip_groups` (node group to why) are no candidates in this loop
        (--scale-down-delay-type-local); they still receive the pods of others.
        """
        options = self.options
        candidates, unremovable = check_eligibility(
            inputs.nodes, inputs.pods_by_node, state, options, now, gpu_label=gpu_label,
            unreadable_pods=inputs.unreadable_pods, dra=snapshot.dra,
        )
        if skip_groups:
            skipped = [c for c in candidates if c.node_group in skip_groups]
            for gid in sorted({c.node_group for c in skipped}):
                log.debug("scale_down_group_in_cooldown", node_group=gid, reason=skip_groups[gid])
            candidates = [c for c in candidates if c.node_group not in skip_groups]
        self.recheck.forget_missing(n.name for n in inputs.nodes)
        by_name: dict[str, Candidate] = {}
        fresh: list[Candidate] = []
        for c in candidates:
            pods = (p.key for p in inputs.pods_by_node.get(c.node.name, ()))
            if self.recheck.recently_unremovable(c.node.name, now, pods):
                unremovable.append(
                    UnremovableNode(c.node.name, UnremovableReason.RECENTLY_UNREMOVABLE)
                )
                continue
            by_name[c.node.name] = c
            fresh.append(c)
        fresh, atomic = _atomic_groups(fresh, state, unremovable)
        order = self._order(fresh, inputs.pods_by_node)
        together = _together(atomic, order)

        excluded = {
            n.name
            for n in inputs.nodes
            if n.name not in state.ready or n.name in state.being_deleted
        }
        context = DrainContext.build(
            now,
            pdbs=PdbTracker(inputs.pdbs),
            controllers=inputs.controllers,
            daemonsets=inputs.daemonsets,
        )
        simulator = RemovalSimulator(
            snapshot,
            self.filters,
            context,
            self.scheduler,
            excluded=excluded,
            evict_daemonsets_from_empty=options.daemonset_eviction_for_empty_nodes,
            evict_daemonsets_from_occupied=options.daemonset_eviction_for_occupied_nodes,
        )
        snapshot.fork()
        try:
            results, untried = simulate_nodes(
                simulator,
                order,
                max_non_empty=options.scale_down_non_empty_candidates_count,
                timeout_seconds=options.scale_down_simulation_timeout.total_seconds(),
                clock=self.clock,
                together=together,
            )
        finally:
            if last_use:
                snapshot.abandon()
            else:
                snapshot.revert()
        for name in untried:
            unremovable.append(
                UnremovableNode(
                    name,
                    UnremovableReason.NOT_UNNEEDED_OTHER_REASON,
                    detail="--scale-down-simulation-timeout reached",
                    skipped=True,
                )
            )

        removable_results = [r for r in results if r.removable]
        self.timers.update((r.node for r in removable_results), now)
        unneeded: list[UnneededNode] = []
        removable: list[RemovableNode] = []
        for r in removable_results:
            c = by_name[r.node]
            since = self.timers.since[r.node]
            required, _ = required_unneeded_time(state.groups[c.node_group].options, c.ready)
            unneeded.append(
                UnneededNode(
                    node=r.node,
                    node_group=c.node_group,
                    since=since,
                    empty=r.empty,
                    utilization=c.utilization.value,
                    destinations=r.destinations,
                    removable_at=since + required,
                )
            )
            removable.append(
                RemovableNode(
                    c.node, c.node_group, since, c.ready, r.plan, atomic=c.node_group in atomic
                )
            )
        for r in results:
            if r.removable:
                continue
            if r.reason in _RECHECK_REASONS:
                self.recheck.add(r.node, now, (p.key for p in inputs.pods_by_node.get(r.node, ())))
            # In a simulation result this reason is only the non-empty candidate limit's.
            left_out = r.reason is UnremovableReason.NOT_UNNEEDED_OTHER_REASON
            unremovable.append(
                UnremovableNode(r.node, r.reason, r.blocking, r.detail, skipped=left_out)
            )
        # Hints only matter for pods that may move again.
        self.scheduler.drop_old_hints(k for u in unneeded for k in u.destinations)

        selection = Selection()
        if allow_deletion:
            selection = select_deletions(
                removable,
                state,
                options,
                now,
                limits=limits,
                totals=totals,
                in_progress=in_progress,
                gpu_label=gpu_label,
            )
            unremovable.extend(selection.unremovable)
            _hold_on_completion(selection, unremovable)
        unremovable.sort(key=lambda u: u.node)
        self._warn_kept_by_orphans(unremovable)
        log.debug(
            "scale_down_plan",
            candidates=len(candidates),
            unneeded=len(unneeded),
            unremovable=len(unremovable),
            empty=len(selection.empty),
            drain=len(selection.drain),
        )
        return ScaleDownPlan(unneeded, unremovable, selection)

    def _warn_kept_by_orphans(self, unremovable: Sequence[UnremovableNode]) -> None:
        """A warning, once per node and pod, when a node that would otherwise be removed is
        kept only by a pod without a controller: Cluster Autoscaler keeps it silently, and
        its users ask why the node stays. Nothing is evicted on the strength of it."""
        for u in unremovable:
            blocking = u.blocking_pod
            if blocking is None or blocking.reason is not BlockingPodReason.NOT_REPLICATED:
                continue
            if self._kept_by_orphan.get(u.node) == blocking.pod:
                continue
            if len(self._kept_by_orphan) >= 10_000:
                self._kept_by_orphan.clear()
            self._kept_by_orphan[u.node] = blocking.pod
            log.warning(
                "node_kept_by_pod_without_controller",
                node=u.node,
                pod=blocking.pod,
                detail=blocking.detail,
                fix="run it under a controller (Deployment, StatefulSet, Job), or annotate it "
                f"{SAFE_TO_EVICT_ANNOTATION}=true if it may be deleted",
            )

    def _order(
        self, candidates: Sequence[Candidate], pods_by_node: Mapping[str, Sequence[Pod]]
    ) -> list[str]:
        previous = [c for c in candidates if c.node.name in self.timers.since]
        previous.sort(key=lambda c: (self.timers.since[c.node.name], c.node.name))
        others = [c for c in candidates if c.node.name not in self.timers.since]
        others.sort(key=lambda c: (c.utilization.value, c.node.name))
        empty = [c for c in others if _looks_empty(pods_by_node.get(c.node.name, ()))]
        busy = [c for c in others if not _looks_empty(pods_by_node.get(c.node.name, ()))]
        return [c.node.name for c in (*previous, *empty, *busy)]
