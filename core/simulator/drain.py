"""Deciding, pod by pod, whether a node can be drained.

Every drainability rule is a `PodFilter` registered by a plugin
(`clusterscaler_register_pod_filters`). Filters run in ascending `order`; the first one that
returns a `DrainDecision` decides for the pod. A pod that no filter decides on must move.

`PdbTracker` keeps how many disruptions each PodDisruptionBudget still allows, so that the
removal simulation can consume budget node by node.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from clusterscaler.model import Controller, DaemonSet, Pod, PodDisruptionBudget

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.framework.pluginmanager import Registry

__all__ = [
    "DrainContext",
    "DrainDecision",
    "DrainOutcome",
    "NodeDrainPlan",
    "PdbTracker",
    "PodFilter",
    "RememberedDecisions",
    "build_pod_filters",
    "plan_node_drain",
]

SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# The value of SAFE_TO_EVICT_ANNOTATION that lets a pod finish before its node goes.
SAFE_TO_EVICT_ON_COMPLETION = "on-completion"
SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION = (
    "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
)


class BlockingPodReason(enum.Enum):
    """Why a pod blocks the removal of its node (CA's `drain.BlockingPodReason`)."""

    NO_REASON = "NoReason"
    CONTROLLER_NOT_FOUND = "ControllerNotFound"
    MIN_REPLICAS_REACHED = "MinReplicasReached"
    NOT_REPLICATED = "NotReplicated"
    LOCAL_STORAGE_REQUESTED = "LocalStorageRequested"
    NOT_SAFE_TO_EVICT_ANNOTATION = "NotSafeToEvictAnnotation"
    UNMOVABLE_KUBE_SYSTEM_POD = "UnmovableKubeSystemPod"
    NOT_ENOUGH_PDB = "NotEnoughPdb"
    UNEXPECTED_ERROR = "UnexpectedError"


class DrainOutcome(enum.Enum):
    """What happens to a pod when its node is removed."""

    # The pod needs no new home and is not evicted (mirror, terminal, long-terminating,
    # expendable pods).
    SKIP = "skip"
    # The pod is evicted and must fit on another node.
    MOVE = "move"
    # A DaemonSet pod: never re-placed; evicted per --daemonset-eviction-for-*.
    DAEMONSET = "daemonset"
    # The pod prevents the node's removal.
    BLOCK = "block"
    # The pod runs to completion first (`safe-to-evict: "on-completion"`): it needs no new
    # home, is never evicted, and the node is not deleted while it runs.
    WAIT = "wait"


@dataclass(frozen=True, slots=True)
class DrainDecision:
    outcome: DrainOutcome
    reason: BlockingPodReason = BlockingPodReason.NO_REASON
    detail: str = ""
    filter: str = ""


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


@dataclass
class DrainContext:
    """What filters may consult besides the pod."""

    now: datetime
    pdbs: PdbTracker
    controllers: Mapping[tuple[str, str, str], Controller] = field(default_factory=dict)
    daemonsets: Mapping[tuple[str, str], DaemonSet] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        now: datetime,
        *,
        pdbs: PdbTracker,
        controllers: Iterable[Controller] = (),
        daemonsets: Iterable[DaemonSet] = (),
    ) -> DrainContext:
        return cls(
            now=now,
            pdbs=pdbs,
            controllers={(c.kind, c.namespace, c.name): c for c in controllers},
            daemonsets={(d.namespace, d.name): d for d in daemonsets},
        )

    def controller_exists(self, pod: Pod) -> bool | None:
        """Whether the pod's controller object exists; `None` for kinds we do not track."""
        owner = pod.owner
        if owner is None:
            return None
        if owner.kind == "DaemonSet":
            ds = self.daemonsets.get((pod.namespace, owner.name))
            return ds is not None and (not owner.uid or not ds.uid or ds.uid == owner.uid)
        if owner.kind in ("ReplicaSet", "ReplicationController", "StatefulSet", "Job"):
            c = self.controllers.get((owner.kind, pod.namespace, owner.name))
            return c is not None and (not owner.uid or not c.uid or c.uid == owner.uid)
        return None

    def controller(self, pod: Pod) -> Controller | None:
        owner = pod.owner
        if owner is None:
            return None
        return self.controllers.get((owner.kind, pod.namespace, owner.name))


@runtime_checkable
class PodFilter(Protocol):
    """One drainability rule.

    `name` identifies the rule in explanations; `order` places it among the others (lower
    runs first). `check` returns a decision when the rule is decisive for the pod, `None`
    to let later rules decide. A filter switched off by its flag always returns `None`.
    """

    name: str
    order: int

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        """The decision for `pod`, a function of the pod and `context` only (not of the
        node it is on: `pod.node_name` is not a criterion). The removal simulation asks
        once per pod, however often it moves the pod, while the PDB budgets stay as they
        are."""
        ...


def build_pod_filters(registry: Registry, options: AutoscalingOptions) -> list[PodFilter]:
    """Instantiate every registered pod filter, sorted by `order` then name."""
    filters: list[PodFilter] = []
    for name in sorted(registry.pod_filters):
        made = registry.pod_filters[name].factory(options)
        if not isinstance(made, PodFilter):
            raise TypeError(
                f"pod filter {name!r}: factory returned {type(made).__name__}, expected an "
                f"object with name, order and check(pod, context)"
            )
        filters.append(made)
    filters.sort(key=lambda f: (f.order, f.name))
    return filters


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
