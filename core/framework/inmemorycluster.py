"""A cluster held in memory, for tests and for `clusterscaler simulate`.

`InMemoryCluster` is a `ClusterSource` (`clusterscaler.interfaces.clusterview`) and
`ClusterActions` (`clusterscaler.framework.clusteractions`) over plain objects; the
Kubernetes implementations live in `clusterscaler.kube`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection, Iterable
from typing import TypeVar, overload

from clusterscaler.framework.clusteractions import EvictionError, NodeNotFoundError
from clusterscaler.model import (
    ClusterObjects,
    Controller,
    DaemonSet,
    Node,
    Pod,
    PodDisruptionBudget,
    Taint,
)

__all__ = ["InMemoryCluster", "PodTable"]

_T = TypeVar("_T")


class PodTable(dict[str, Pod]):
    """Pods by key, with the keys of the pods bound to each node kept in step.

    A dict, so reads stay as fast as a plain one and code (and tests) that assign or delete
    entries directly keep the index right. The index spares deleting a node a scan of every
    pod. Not thread-safe by itself: `InMemoryCluster` guards it with its lock.
    """

    def __init__(self, pods: Iterable[Pod] = ()) -> None:
        super().__init__()
        # node name -> {pod key: insertion number}; the number is the key's first insertion
        # into the table, so `on_node` lists pods in the table's own iteration order.
        self._by_node: dict[str, dict[str, int]] = {}
        self._order: dict[str, int] = {}
        self._next = 0
        self._fill(pods)

    def _fill(self, pods: Iterable[Pod]) -> None:
        """`self[pod.key] = pod` for each pod, in one pass without a call per pod: the first
        fill holds every pod of a snapshot (50,000 in upstream's benchmark)."""
        order = self._order
        by_node = self._by_node
        put = dict.__setitem__
        n = self._next
        for pod in pods:
            key = pod.key
            if key in order:  # given twice: the general path, with the count in step
                self._next = n
                self[key] = pod
                continue
            order[key] = n
            put(self, key, pod)
            node = pod.node_name
            if node:
                bucket = by_node.get(node)
                if bucket is None:
                    by_node[node] = {key: n}
                else:
                    bucket[key] = n
            n += 1
        self._next = n

    def _unindex(self, key: str, pod: Pod) -> None:
        if pod.node_name:
            bucket = self._by_node.get(pod.node_name)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._by_node[pod.node_name]

    def __setitem__(self, key: str, pod: Pod) -> None:
        old = dict.get(self, key)
        if old is not None:
            self._unindex(key, old)
            order = self._order[key]
        else:
            order = self._next
            self._next += 1
            self._order[key] = order
        super().__setitem__(key, pod)
        if pod.node_name:
            self._by_node.setdefault(pod.node_name, {})[key] = order

    def __delitem__(self, key: str) -> None:
        pod = self[key]
        super().__delitem__(key)
        self._unindex(key, pod)
        del self._order[key]

    @overload
    def pop(self, key: str, /) -> Pod: ...

    @overload
    def pop(self, key: str, default: Pod | _T, /) -> Pod | _T: ...

    def pop(self, key: str, *default: Pod | _T) -> Pod | _T:
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        pod = self[key]
        del self[key]
        return pod

    def popitem(self) -> tuple[str, Pod]:
        key, pod = super().popitem()
        self._unindex(key, pod)
        del self._order[key]
        return key, pod

    def clear(self) -> None:
        super().clear()
        self._by_node.clear()
        self._order.clear()

    def setdefault(self, key: str, default: Pod, /) -> Pod:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: object, **kwargs: Pod) -> None:
        for key, pod in dict(*args, **kwargs).items():
            self[key] = pod

    def __ior__(self, other: object) -> PodTable:  # type: ignore[override,misc]
        self.update(other)
        return self

    def on_node(self, node_name: str) -> list[Pod]:
        """The pods bound to `node_name`, in the table's iteration order."""
        bucket = self._by_node.get(node_name)
        if not bucket:
            return []
        return [self[k] for k in sorted(bucket, key=bucket.__getitem__)]


class InMemoryCluster:
    """A cluster held in memory: a `ClusterSource` and `ClusterActions` at once.

    Evictions honour PDBs the way the API server does: a pod covered by a PDB with no
    disruption left is refused with a retryable error, otherwise the PDB's allowance drops
    by one. With `recreate_evicted`, an evicted pod owned by a controller comes back as an
    unschedulable pending pod, as its ReplicaSet or StatefulSet would recreate it.
    """

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        pods: Iterable[Pod] = (),
        *,
        pdbs: Iterable[PodDisruptionBudget] = (),
        daemonsets: Iterable[DaemonSet] = (),
        controllers: Iterable[Controller] = (),
        recreate_evicted: bool = False,
    ) -> None:
        self._lock = threading.Lock()
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        self.pods: PodTable = PodTable(pods)
        self.pdbs: dict[str, PodDisruptionBudget] = {p.key: p for p in pdbs}
        self.daemonsets: list[DaemonSet] = list(daemonsets)
        self.controllers: list[Controller] = list(controllers)
        self.recreate_evicted = recreate_evicted
        self.evicted: list[str] = []
        self._recreated = 0

    @classmethod
    def from_objects(cls, objects: ClusterObjects, **kwargs: bool) -> InMemoryCluster:
        return cls(
            objects.nodes,
            objects.pods,
            pdbs=objects.pdbs,
            daemonsets=objects.daemonsets,
            controllers=objects.controllers,
            **kwargs,
        )

    # ------------------------------------------------------------------ source

    def snapshot(self) -> ClusterObjects:
        with self._lock:
            return ClusterObjects(
                nodes=list(self.nodes.values()),
                pods=list(self.pods.values()),
                pdbs=list(self.pdbs.values()),
                daemonsets=list(self.daemonsets),
                controllers=list(self.controllers),
            )

    # ------------------------------------------------------------------ edits used by
    # providers and simulations

    def add_node(self, node: Node) -> None:
        with self._lock:
            self.nodes[node.name] = node

    def remove_node(self, name: str) -> list[Pod]:
        """Delete a node and the pods bound to it (as the cloud and the GC would).

        Returns the pods deleted with it.
        """
        with self._lock:
            self.nodes.pop(name, None)
            removed = self.pods.on_node(name)
            for pod in removed:
                del self.pods[pod.key]
            return removed

    def pods_on_node(self, name: str) -> list[Pod]:
        """The pods bound to the node now."""
        with self._lock:
            return self.pods.on_node(name)

    def add_pod(self, pod: Pod) -> None:
        with self._lock:
            self.pods[pod.key] = pod

    def bind(self, pod_key: str, node_name: str) -> None:
        with self._lock:
            pod = self.pods[pod_key]
            self.pods[pod_key] = dataclasses.replace(
                pod, node_name=node_name, phase="Running", unschedulable=False
            )

    # ------------------------------------------------------------------ actions

    def _node(self, name: str) -> Node:
        node = self.nodes.get(name)
        if node is None:
            raise NodeNotFoundError(f"node {name} not found")
        return node

    def add_taint(self, node_name: str, taint: Taint) -> None:
        with self._lock:
            self.nodes[node_name] = self._node(node_name).with_taint(taint)

    def remove_taint(self, node_name: str, key: str) -> bool:
        with self._lock:
            node = self._node(node_name)
            kept = tuple(t for t in node.taints if t.key != key)
            if len(kept) == len(node.taints):
                return False
            self.nodes[node_name] = dataclasses.replace(node, taints=kept)
            return True

    def set_unschedulable(self, node_name: str, unschedulable: bool) -> None:
        with self._lock:
            node = self._node(node_name)
            self.nodes[node_name] = dataclasses.replace(node, unschedulable=unschedulable)

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        key = pod.key
        with self._lock:
            current = self.pods.get(key)
            if current is None or (pod.uid and current.uid and current.uid != pod.uid):
                return
            covering = [b for b in self.pdbs.values() if b.matches(current)] if self.pdbs else []
            for pdb in covering:
                if pdb.disruptions_allowed < 1:
                    raise EvictionError(
                        key,
                        f"cannot evict pod as it would violate the pod's disruption budget "
                        f"{pdb.key}",
                        retryable=True,
                    )
            for pdb in covering:
                self.pdbs[pdb.key] = dataclasses.replace(
                    pdb, disruptions_allowed=pdb.disruptions_allowed - 1
                )
            del self.pods[key]
            self.evicted.append(key)
            if self.recreate_evicted and current.owner is not None and not current.is_daemonset:
                self._recreated += 1
                name = f"{current.name}-r{self._recreated}"
                self.pods[f"{current.namespace}/{name}"] = dataclasses.replace(
                    current,
                    name=name,
                    uid=f"{current.uid}-r{self._recreated}" if current.uid else "",
                    node_name="",
                    phase="Pending",
                    unschedulable=True,
                    nominated_node_name="",
                )

    def pod_exists(self, pod: Pod) -> bool:
        with self._lock:
            current = self.pods.get(pod.key)
            return current is not None and (not pod.uid or current.uid == pod.uid)

    def read_node(self, node_name: str) -> Node | None:
        with self._lock:
            return self.nodes.get(node_name)

    def read_pods_on_node(self, node_name: str) -> list[Pod]:
        # The cluster itself is the source of truth: the same as `pods_on_node`.
        with self._lock:
            return self.pods.on_node(node_name)

    def registered_instances(self, provider_ids: Collection[str]) -> set[str]:
        wanted = set(provider_ids)
        with self._lock:
            return {n.provider_id for n in self.nodes.values() if n.provider_id in wanted}
