"""The drainability rules, one class per rule, in Cluster Autoscaler's order.

Each rule is decisive for some pods and silent (`None`) for the rest. Rules that a flag can
switch off read it once, when they are built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

import structlog
from clusterscaler.api import (
    SAFE_TO_EVICT_ANNOTATION,
    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
    SAFE_TO_EVICT_ON_COMPLETION,
    BlockingPodReason,
    DrainContext,
    DrainDecision,
    DrainOutcome,
    Pod,
)

if TYPE_CHECKING:
    from clusterscaler.api import AutoscalingOptions

log = structlog.get_logger()

# A pod whose deletion is this much overdue past its grace period no longer counts.
LONG_TERMINATING_EXTRA = timedelta(seconds=30)
DEFAULT_GRACE_SECONDS = 30
KUBE_SYSTEM = "kube-system"
KNOWN_CONTROLLER_KINDS = frozenset(
    {"ReplicaSet", "ReplicationController", "StatefulSet", "Job", "DaemonSet"}
)


def _skip(name: str, detail: str) -> DrainDecision:
    return DrainDecision(DrainOutcome.SKIP, detail=detail, filter=name)


def _block(name: str, reason: BlockingPodReason, detail: str) -> DrainDecision:
    return DrainDecision(DrainOutcome.BLOCK, reason=reason, detail=detail, filter=name)


@dataclass
class MirrorPods:
    """Mirror (static) pods belong to their node: they stay and never need a new home."""

    name: str = "mirror"
    order: int = 10

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if pod.is_mirror:
            return _skip(self.name, "mirror pod")
        return None


@dataclass
class LongTerminatingPods:
    """Pods overdue in terminating (deletion time + grace + 30s passed) are ignored."""

    name: str = "long-terminating"
    order: int = 20

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if pod.deletion_time is None:
            return None
        grace = pod.termination_grace_seconds
        grace = DEFAULT_GRACE_SECONDS if grace is None else grace
        if pod.deletion_time + timedelta(seconds=grace) + LONG_TERMINATING_EXTRA < context.now:
            return _skip(self.name, "pod has been terminating for too long")
        return None


@dataclass
class ExpendablePods:
    """Pods below --expendable-pods-priority-cutoff are killed with the node, never moved."""

    cutoff: int
    name: str = "expendable"
    order: int = 25

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if pod.priority is not None and pod.priority < self.cutoff:
            return _skip(self.name, f"priority {pod.priority} below cutoff {self.cutoff}")
        return None


@dataclass
class ReplicaCount:
    """With --skip-nodes-with-custom-controller-pods: the controller must exist, and a
    ReplicaSet or ReplicationController must keep at least --min-replica-count replicas."""

    enabled: bool
    min_replica_count: int
    name: str = "replica-count"
    order: int = 30

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if not self.enabled or pod.owner is None:
            return None
        exists = context.controller_exists(pod)
        if exists is False:
            return _block(
                self.name,
                BlockingPodReason.CONTROLLER_NOT_FOUND,
                f"{pod.owner.kind} {pod.namespace}/{pod.owner.name} not found",
            )
        if pod.owner.kind in ("ReplicaSet", "ReplicationController"):
            controller = context.controller(pod)
            replicas = controller.replicas if controller is not None else None
            if replicas is not None and replicas < self.min_replica_count:
                return _block(
                    self.name,
                    BlockingPodReason.MIN_REPLICAS_REACHED,
                    f"{pod.owner.kind} {pod.namespace}/{pod.owner.name} has {replicas} "
                    f"replicas, fewer than --min-replica-count={self.min_replica_count}",
                )
        return None


@dataclass
class DaemonSetPods:
    """DaemonSet pods are not moved; they are evicted per --daemonset-eviction-for-*."""

    name: str = "daemonset"
    order: int = 40

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if pod.is_daemonset:
            return DrainDecision(DrainOutcome.DAEMONSET, detail="DaemonSet pod", filter=self.name)
        return None


# How many (pod, value) pairs `SafeToEvict` remembers having warned about.
WARNED_LIMIT = 10_000


@dataclass
class SafeToEvict:
    """`safe-to-evict: "true"` moves the pod, whatever the blocking rules would say.

    Any other value than "true" and "false" (`maybe`, `yes`, `True`) is ignored, as Cluster
    Autoscaler ignores it (the pod is judged as if it had no annotation); a warning names
    the pod, the annotation and the value once, so that its owner can see why the
    annotation does nothing."""

    name: str = "safe-to-evict"
    order: int = 41
    _warned: set[tuple[str, str, str]] = field(default_factory=set, repr=False)

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        value = pod.annotations.get(SAFE_TO_EVICT_ANNOTATION)
        if value is None:
            return None
        if value == "true":
            return DrainDecision(
                DrainOutcome.MOVE, detail="safe-to-evict annotation", filter=self.name
            )
        if value != "false":
            self._warn(pod, value)
        return None

    def _warn(self, pod: Pod, value: str) -> None:
        key = (pod.namespace, pod.name, value)
        if key in self._warned:
            return
        if len(self._warned) >= WARNED_LIMIT:
            self._warned.clear()
        self._warned.add(key)
        log.warning(
            "annotation_value_ignored",
            pod=f"{pod.namespace}/{pod.name}",
            annotation=SAFE_TO_EVICT_ANNOTATION,
            value=value if len(value) <= 100 else f"{value[:100]}... ({len(value)} characters)",
            expected='"true" or "false"',
        )


@dataclass
class TerminalPods:
    """Succeeded and Failed pods have finished: nothing to move."""

    name: str = "terminal"
    order: int = 42

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if pod.is_terminal:
            return _skip(self.name, f"pod phase {pod.phase}")
        return None


@dataclass
class OnCompletion:
    """`safe-to-evict: "on-completion"`: the pod is not evicted and needs no new home, but
    its node is not deleted until it has finished (CA's OnCompletion rule). It comes after
    the terminal rule: a pod that has finished holds nothing back."""

    name: str = "on-completion"
    order: int = 43

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if pod.annotations.get(SAFE_TO_EVICT_ANNOTATION) == SAFE_TO_EVICT_ON_COMPLETION:
            return DrainDecision(
                DrainOutcome.WAIT,
                detail=f"annotation {SAFE_TO_EVICT_ANNOTATION}={SAFE_TO_EVICT_ON_COMPLETION}",
                filter=self.name,
            )
        return None


@dataclass
class NotReplicated:
    """A pod without a controller would not come back after eviction.

    With --skip-nodes-with-custom-controller-pods only the built-in controller kinds count.
    """

    skip_custom_controllers: bool
    name: str = "not-replicated"
    order: int = 50

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        owner = pod.owner
        if owner is None:
            return _block(self.name, BlockingPodReason.NOT_REPLICATED, "pod has no controller")
        if self.skip_custom_controllers and owner.kind not in KNOWN_CONTROLLER_KINDS:
            return _block(
                self.name,
                BlockingPodReason.NOT_REPLICATED,
                f"pod is owned by the custom controller kind {owner.kind}",
            )
        return None


@dataclass
class SystemPods:
    """With --skip-nodes-with-system-pods, kube-system pods without a PDB block, until
    --blocking-system-pod-distruption-timeout after their creation."""

    enabled: bool
    timeout: timedelta
    name: str = "system"
    order: int = 51

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if not self.enabled or pod.namespace != KUBE_SYSTEM:
            return None
        if context.pdbs.has_pdb(pod):
            return None
        if pod.creation_time is not None and pod.creation_time + self.timeout < context.now:
            return None
        return _block(
            self.name,
            BlockingPodReason.UNMOVABLE_KUBE_SYSTEM_POD,
            "non-DaemonSet kube-system pod without a PodDisruptionBudget",
        )


@dataclass
class NotSafeToEvict:
    """`safe-to-evict: "false"` blocks."""

    name: str = "not-safe-to-evict"
    order: int = 52

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if pod.annotations.get(SAFE_TO_EVICT_ANNOTATION) == "false":
            return _block(
                self.name,
                BlockingPodReason.NOT_SAFE_TO_EVICT_ANNOTATION,
                f"annotation {SAFE_TO_EVICT_ANNOTATION}=false",
            )
        return None


@dataclass
class LocalStorage:
    """With --skip-nodes-with-local-storage, hostPath and non-memory emptyDir volumes block
    unless listed in `safe-to-evict-local-volumes`."""

    enabled: bool
    name: str = "local-storage"
    order: int = 53

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        if not self.enabled or not pod.volumes:
            return None
        listed = {
            v.strip()
            for v in pod.annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION, "").split(",")
            if v.strip()
        }
        for volume in pod.volumes:
            local = volume.kind == "hostPath" or (
                volume.kind == "emptyDir" and volume.medium != "Memory"
            )
            if local and volume.name not in listed:
                return _block(
                    self.name,
                    BlockingPodReason.LOCAL_STORAGE_REQUESTED,
                    f"volume {volume.name} ({volume.kind}) is local storage",
                )
        return None


@dataclass
class DisruptionBudgets:
    """A pod covered by a PDB with no disruption left blocks."""

    name: str = "pdb"
    order: int = 54

    def check(self, pod: Pod, context: DrainContext) -> DrainDecision | None:
        for pdb in context.pdbs.matching(pod):
            if context.pdbs.remaining.get(pdb.key, 0) < 1:
                return _block(
                    self.name,
                    BlockingPodReason.NOT_ENOUGH_PDB,
                    f"PodDisruptionBudget {pdb.key} allows no more disruptions",
                )
        return None


def mirror(options: AutoscalingOptions) -> MirrorPods:
    return MirrorPods()


def long_terminating(options: AutoscalingOptions) -> LongTerminatingPods:
    return LongTerminatingPods()


def expendable(options: AutoscalingOptions) -> ExpendablePods:
    return ExpendablePods(cutoff=options.expendable_pods_priority_cutoff)


def replica_count(options: AutoscalingOptions) -> ReplicaCount:
    return ReplicaCount(
        enabled=options.skip_nodes_with_custom_controller_pods,
        min_replica_count=options.min_replica_count,
    )


def daemonset(options: AutoscalingOptions) -> DaemonSetPods:
    return DaemonSetPods()


def safe_to_evict(options: AutoscalingOptions) -> SafeToEvict:
    return SafeToEvict()


def terminal(options: AutoscalingOptions) -> TerminalPods:
    return TerminalPods()


def on_completion(options: AutoscalingOptions) -> OnCompletion:
    return OnCompletion()


def not_replicated(options: AutoscalingOptions) -> NotReplicated:
    return NotReplicated(skip_custom_controllers=options.skip_nodes_with_custom_controller_pods)


def system(options: AutoscalingOptions) -> SystemPods:
    return SystemPods(
        enabled=options.skip_nodes_with_system_pods,
        timeout=options.blocking_system_pod_distruption_timeout,
    )


def not_safe_to_evict(options: AutoscalingOptions) -> NotSafeToEvict:
    return NotSafeToEvict()


def local_storage(options: AutoscalingOptions) -> LocalStorage:
    return LocalStorage(enabled=options.skip_nodes_with_local_storage)


def pdb(options: AutoscalingOptions) -> DisruptionBudgets:
    return DisruptionBudgets()
