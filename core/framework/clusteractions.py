"""How the autoscaling loop changes a cluster, and what more it may ask of its source.

`ClusterActions` taints, cordons and evicts; the loop reads through `ClusterSource`
(`clusterscaler.interfaces.clusterview`), and from a source that can, one node's pods
(`NodePodsSource`) and whether its caches still follow the cluster (`StaleSource`). The
Kubernetes implementations live in `clusterscaler.kube`; `InMemoryCluster`
(`clusterscaler.framework.inmemorycluster`) implements them over plain objects.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from clusterscaler.model import Node, Pod, Taint

__all__ = [
    "ClusterActions",
    "EvictionError",
    "NodeNotFoundError",
    "NodePodsSource",
    "StaleSource",
    "SystemClock",
    "TaintsAndCordons",
]


class NodeNotFoundError(LookupError):
    """The named node does not exist (any more)."""


class EvictionError(Exception):
    """An eviction was refused.

    `retryable` is true when trying again later may succeed (a PDB has no disruption left,
    HTTP 429), false when it never will (the pod is protected, a server error).
    """

    def __init__(self, pod: str, message: str, *, retryable: bool) -> None:
        super().__init__(f"evicting pod {pod}: {message}")
        self.pod = pod
        self.retryable = retryable


@runtime_checkable
class NodePodsSource(Protocol):
    """A `ClusterSource` that can list one node's pods without a whole snapshot.

    The actuator re-reads a node's pods after tainting it, once per deleted node; a full
    `snapshot()` each time would make deleting many nodes quadratic in the cluster's pods.
    """

    def pods_on_node(self, name: str) -> list[Pod]:
        """The pods bound to `name` now (their order is the order they are evicted in)."""
        ...


@runtime_checkable
class StaleSource(Protocol):
    """A `ClusterSource` whose caches can fall behind the cluster (list+watch caches).

    The loop asks before each destructive step: a node that looks empty, or an instance
    that looks unregistered, in a cache that stopped following the cluster is a guess.
    """

    def stale_caches(self) -> tuple[str, ...]:
        """Each cache that may no longer follow the cluster, as `resource: why`; empty
        when every cache is current."""
        ...


@runtime_checkable
class ClusterActions(Protocol):
    """The changes the loop makes to Kubernetes objects (never to the cloud)."""

    def add_taint(self, node_name: str, taint: Taint) -> None:
        """Add `taint` to the node, replacing one with the same key and effect.

        Raises `NodeNotFoundError` when the node is gone.
        """
        ...

    def remove_taint(self, node_name: str, key: str) -> bool:
        """Remove every taint with `key`; returns whether the node had one."""
        ...

    def set_unschedulable(self, node_name: str, unschedulable: bool) -> None:
        """Cordon (`True`) or uncordon (`False`) the node."""
        ...

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        """Evict the pod through the Eviction API (which honours PDBs).

        A pod that no longer exists counts as evicted. Raises `EvictionError`.
        """
        ...

    def pod_exists(self, pod: Pod) -> bool:
        """Whether the pod (same namespace, name and uid) still exists."""
        ...

    def registered_instances(self, provider_ids: Collection[str]) -> set[str]:
        """Which of `provider_ids` a Node carries now, read afresh from the source of
        truth (never a cache): an instance is deleted as unregistered only when this
        confirms that no Node belongs to it."""
        ...

    def read_pods_on_node(self, node_name: str) -> list[Pod]:
        """The pods bound to the node now, read afresh from the source of truth (never a
        cache): a node is deleted only after this shows what still runs on it."""
        ...

    def read_node(self, node_name: str) -> Node | None:
        """The node as it is now, read afresh from the source of truth (never a cache);
        None when it is gone: a node is deleted as unready only while it still is."""
        ...


@runtime_checkable
class TaintsAndCordons(Protocol):
    """Cluster actions that can taint and cordon a node in one write, as CA's
    `MarkToBeDeleted` does with one update: each write waits its turn under
    --kube-client-qps. The actuator uses it where the actions offer it, else it taints,
    then cordons."""

    def add_taint_and_cordon(self, node_name: str, taint: Taint) -> None:
        """`add_taint` and `set_unschedulable(True)`; on failure, either may have been
        written. Raises `NodeNotFoundError` when the node is gone."""
        ...


class SystemClock:
    """Wall-clock time."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
