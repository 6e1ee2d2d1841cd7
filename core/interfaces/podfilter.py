"""The pod-filter interface: the drainability rules of scale-down.

A pod filter is registered with `registry.add_pod_filter(name, factory)`; `factory(options)`
returns an object satisfying `PodFilter`. For each pod of a node considered for removal it
returns a `DrainDecision` (move it, skip it, block the removal with a `BlockingPodReason`,
...) or `None` to leave the pod to the other filters, from the pod and a `DrainContext`.
How the filters are run over a node is the simulator's (`clusterscaler.simulator.drain`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from clusterscaler.model import Controller, DaemonSet, Pod
    from clusterscaler.simulator.drain import PdbTracker

__all__ = [
    "SAFE_TO_EVICT_ANNOTATION",
    "SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION",
    "SAFE_TO_EVICT_ON_COMPLETION",
    "BlockingPodReason",
    "DrainContext",
    "DrainDecision",
    "DrainOutcome",
    "PodFilter",
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
