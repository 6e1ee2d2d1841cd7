"""Deciding, pod by pod, whether a node can be drained.

Every drainability rule is a `PodFilter` (`clusterscaler.interfaces.podfilter`) registered
by a plugin (`clusterscaler_register_pod_filters`). Filters run in ascending `order`; the
first one that returns a `DrainDecision` decides for the pod. A pod that no filter decides
on must move.

`PdbTracker` keeps how many disruptions each PodDisruptionBudget still allows, so that the
removal simulation can consume budget node by node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterscaler.interfaces.podfilter import DrainContext, DrainDecision, DrainOutcome, PodFilter
from clusterscaler.interfaces.registry import build_in_order
from clusterscaler.model import Pod, PodDisruptionBudget

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.interfaces.registry import Registry

__all__ = [
    "NodeDrainPlan",
    "PdbTracker",
    "RememberedDecisions",
    "build_pod_filters",
    "plan_node_drain",
]

# On a DaemonSet pod: whether it is evicted when its node is removed, whatever the flags say.
ENABLE_DS_EVICTION_ANNOTATION = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"


def daemonset_pods_to_evict(pods: Sequence[Pod], *, by_default: bool) -> list[Pod]:
    """The DaemonSet pods of a removed node that are evicted (CA's `PodsToEvict`): a pod's
    `cluster-autoscaler.kubernetes.io/enable-ds-eviction` annotation decides ("true" evicts,
    any other value keeps it); without it, --daemonset-eviction-for-empty-nodes or
    --daemonset-eviction-for-occupied-nodes (`by_default`) does."""
    out: list[Pod] = []
    for pod in pods:
        value = pod.annotations.get(ENABLE_DS_EVICTION_ANNOTATION)
        if value == "true" if value is not None else by_default:
            out.append(pod)
    return out


class PdbTracker:
    """Disruptions left per PodDisruptionBudget, consumed as nodes are chosen for removal."""

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        self.pdbs: list[PodDisruptionBudget] = list(pdbs)
        self.remaining: dict[str, int] = {p.key: p.disruptions_allowed for p in self.pdbs}
        self._by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        for p in self.pdbs:
            self._by_namespace.setdefault(p.namespace, []).append(p)
        # Bumped whenever `consume` changes a budget: decisions depending on the budgets
        # and remembered under an older version are stale.
        self.version = 0

    def matching(self, pod: Pod) -> list[PodDisruptionBudget]:
        return [p for p in self._by_namespace.get(pod.namespace, ()) if p.matches(pod)]

    def has_pdb(self, pod: Pod) -> bool:
        return bool(self.matching(pod))

    def first_exhausted(self, pods: Sequence[Pod]) -> tuple[Pod, PodDisruptionBudget] | None:
        """The first pod whose removal together with the others would exceed a budget."""
        if not self._by_namespace:
            return None
        used: dict[str, int] = {}
        for pod in pods:
            for pdb in self.matching(pod):
                used[pdb.key] = used.get(pdb.key, 0) + 1
                if used[pdb.key] > self.remaining[pdb.key]:
                    return pod, pdb
        return None

    def allot(self, pods: Sequence[Pod]) -> tuple[Pod, ...]:
        """Consume a disruption for each of `pods` whose budgets all have one left, in
        order; the pods whose budgets have none (returned) must not be evicted.

        For DaemonSet pods evicted best-effort with their node: they never hold a node
        back, but an eviction the API server accepts spends the budget as any other, so
        the removals planned after them must not count on it."""
        if not self._by_namespace:
            return ()
        kept: list[Pod] = []
        for pod in pods:
            budgets = self.matching(pod)
            if any(self.remaining[pdb.key] <= 0 for pdb in budgets):
                kept.append(pod)
                continue
            for pdb in budgets:
                self.remaining[pdb.key] -= 1
                self.version += 1
        return tuple(kept)

    def consume(self, pods: Sequence[Pod]) -> None:
        if not self._by_namespace:
            return
        for pod in pods:
            for pdb in self.matching(pod):
                self.remaining[pdb.key] -= 1
                self.version += 1

    def copy(self) -> PdbTracker:
        out = PdbTracker(self.pdbs)
        out.remaining = dict(self.remaining)
        return out


def build_pod_filters(registry: Registry, options: AutoscalingOptions) -> list[PodFilter]:
    """Instantiate every registered pod filter, sorted by `order` then name."""
    return build_in_order(
        "pod filter",
        registry.pod_filters,
        options,
        PodFilter,
        "an object with name, order and check(pod, context)",
    )


def decide(pod: Pod, filters: Sequence[PodFilter], context: DrainContext) -> DrainDecision:
    for f in filters:
        decision = f.check(pod, context)
        if decision is not None:
            return decision
    return DrainDecision(DrainOutcome.MOVE)


class RememberedDecisions:
    """`decide`, remembering each pod's decision while the PDB budgets stay unchanged.

    The removal simulation classifies a pod again on every node it is moved through and
    on every candidate that fails; filters depend only on the pod and the context, and of
    the context only the budgets change as nodes are chosen (`PdbTracker.version`). Use
    one instance per filter list and context. Pods are remembered by identity.
    """

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Pod, int, DrainDecision]] = {}

    def __call__(
        self, pod: Pod, filters: Sequence[PodFilter], context: DrainContext
    ) -> DrainDecision:
        version = context.pdbs.version
        hit = self._memo.get(id(pod))
        if hit is not None and hit[0] is pod and hit[1] == version:
            return hit[2]
        decision = decide(pod, filters, context)
        # The pod is kept with its decision, so its id cannot be reused while remembered.
        self._memo[id(pod)] = (pod, version, decision)
        return decision

    def share(self, moved: Pod, original: Pod) -> None:
        """`moved` is `original` placed elsewhere by the simulation (a copy that differs
        only in `node_name`): it has the same decision, since filters judge the pod, not
        the node it is on."""
        hit = self._memo.get(id(original))
        if hit is not None and hit[0] is original:
            self._memo[id(moved)] = (moved, hit[1], hit[2])


@dataclass(frozen=True, slots=True)
class NodeDrainPlan:
    """A node's pods sorted by what removal does to them."""

    to_move: tuple[Pod, ...] = ()
    daemonset: tuple[Pod, ...] = ()
    skipped: tuple[Pod, ...] = ()
    blocking: Pod | None = None
    decision: DrainDecision | None = None
    # Pods left to run to completion: the node may be unneeded, but is not deleted yet.
    on_completion: tuple[Pod, ...] = ()
    # DaemonSet pods not to evict: their budgets are spent by the removals planned before
    # this one (they go with their node).
    daemonset_kept: tuple[Pod, ...] = ()


def plan_node_drain(
    pods: Iterable[Pod],
    filters: Sequence[PodFilter],
    context: DrainContext,
    *,
    decide_fn: Callable[[Pod, Sequence[PodFilter], DrainContext], DrainDecision] = decide,
) -> NodeDrainPlan:
    """Classify the pods of one node; stops at the first blocking pod."""
    move: list[Pod] = []
    ds: list[Pod] = []
    skipped: list[Pod] = []
    waiting: list[Pod] = []
    for pod in pods:
        d = decide_fn(pod, filters, context)
        if d.outcome is DrainOutcome.BLOCK:
            return NodeDrainPlan(
                tuple(move), tuple(ds), tuple(skipped), pod, d, on_completion=tuple(waiting)
            )
        if d.outcome is DrainOutcome.MOVE:
            move.append(pod)
        elif d.outcome is DrainOutcome.DAEMONSET:
            ds.append(pod)
        elif d.outcome is DrainOutcome.WAIT:
            waiting.append(pod)
        else:
            skipped.append(pod)
    return NodeDrainPlan(tuple(move), tuple(ds), tuple(skipped), on_completion=tuple(waiting))
