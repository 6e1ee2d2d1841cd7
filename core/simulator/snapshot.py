"""The cluster snapshot the scheduler simulation runs on.

(Long on purpose: every mutation and its inverse in the undo journal must sit together,
so that fork and revert stay exact.)

A `ClusterSnapshot` holds one `SimNodeInfo` per node (the node, its pods, the resources they
request, the host ports and CSI volumes they use) plus the cluster-wide objects predicates
consult (PVs, PVCs, storage classes, CSINodes, namespace labels).

Changes are cheap to try and undo: `fork()` starts recording an undo journal, `revert()`
undoes everything since the matching `fork()`, `commit()` keeps it. Forks nest. Nothing is
ever deep-copied: a mutation records its inverse, so the cost of a fork is proportional to
what changes inside it, not to the size of the cluster.

Node infos returned by the snapshot are live views; call `SimNodeInfo.to_node_info()` for an
immutable copy.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any, Protocol, TypeAlias, TypeVar

from clusterscaler.model import (
    ClusterObjects,
    CSINode,
    HostPort,
    Node,
    NodeInfo,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    Resources,
    ResourceSlice,
    StorageClass,
)
from clusterscaler.simulator.dra import DraState

__all__ = ["ClusterSnapshot", "SimNodeInfo", "SnapshotError", "SnapshotWatcher"]

# More watchers than this are dropped together (and rebuilt on demand) rather than tracked.
_WATCHER_LIMIT = 1024
# Bound on remembered per-pod watcher plans (cleared, then rebuilt on demand).
_INTEREST_LIMIT = 200_000


class SnapshotError(ValueError):
    """An impossible snapshot change (unknown node, duplicate pod, revert without fork)."""


class SimNodeInfo:
    """A node in the snapshot with the pods on it and what they use.

    Requested resources are kept as plain integers because they change on every simulated
    placement.
    """

    __slots__ = (
        "csi_volumes",
        "node",
        "pods",
        "ports",
        "req_cpu",
        "req_eph",
        "req_ext",
        "req_memory",
        "req_pods",
    )

    def __init__(self, node: Node) -> None:
        self.node = node
        self.pods: dict[str, Pod] = {}
        self.req_cpu = 0
        self.req_memory = 0
        self.req_pods = 0
        self.req_eph = 0
        self.req_ext: dict[str, int] = {}
        self.ports: list[HostPort] = []
        # driver -> volume id -> number of pods on this node using it
        self.csi_volumes: dict[str, dict[str, int]] = {}

    @property
    def name(self) -> str:
        return self.node.name

    def requested(self) -> Resources:
        return Resources(self.req_cpu, self.req_memory, self.req_pods, self.req_eph, self.req_ext)

    def free(self) -> Resources:
        return self.node.allocatable - self.requested()

    def to_node_info(self) -> NodeInfo:
        return NodeInfo(self.node, tuple(self.pods.values()))

    def __repr__(self) -> str:
        return f"SimNodeInfo({self.node.name}, pods={len(self.pods)})"

    def _add_extended(self, extended: Mapping[str, int], times: int) -> None:
        """`times` pods requesting `extended` joined (positive) or left (negative)."""
        ext = self.req_ext
        for k, v in extended.items():
            n = ext.get(k, 0) + times * v
            if n:
                ext[k] = n
            else:
                ext.pop(k, None)

    def _account_extra(self, pod: Pod, sign: int, csi: list[tuple[str, str]]) -> None:
        """Extended resources, host ports and CSI volumes of a pod joining (+1) or leaving."""
        r = pod.requests
        if r.extended:
            self._add_extended(r.extended, sign)
        if pod.host_ports:
            if sign > 0:
                self.ports.extend(pod.host_ports)
            else:
                for hp in pod.host_ports:
                    self.ports.remove(hp)
        for driver, vid in csi:
            vols = self.csi_volumes.setdefault(driver, {})
            n = vols.get(vid, 0) + sign
            if n > 0:
                vols[vid] = n
            else:
                vols.pop(vid, None)
                if not vols:
                    del self.csi_volumes[driver]


class SnapshotWatcher(Protocol):
    """Incremental state kept up to date by the snapshot as pods and nodes come and go.

    Predicates that count other pods (topology spread, inter-pod affinity) register one per
    constraint shape with `ClusterSnapshot.watch`; the snapshot replays its current nodes
    into a new watcher and then reports every change, including those `revert()` makes, so
    the watcher's counts always describe the snapshot as it is.
    """

    def interest(self, pod: Pod) -> Any:
        """What the watcher needs to know about `pod`, or `None` if it never counts it.

        Pods do not change, so the snapshot asks once per pod (and again only when the
        set of watchers changes) and hands the answer back to `pod_changed`.
        """

    def pod_changed(self, pod: Pod, plan: Any, node: Node, sign: int) -> None:
        """`pod` joined (`sign` 1) or left (-1) `node`; `plan` is `interest(pod)`."""

    def node_changed(self, ni: SimNodeInfo, sign: int) -> None:
        """A node joined (1) or is leaving (-1), with the pods it has at that moment.

        Only watchers registered with `empty_nodes=True` hear about nodes without pods:
        for a watcher that counts pods such a node changes nothing, and the estimator adds
        and removes many of them. Joining nodes reach watchers in registration order and
        leaving ones in reverse order, so a watcher may rely on one registered before it
        (a spread index on the shared registry of its domains) knowing the node.
        """


W = TypeVar("W", bound=SnapshotWatcher)

# One scheduler filter (a plugin of kube-scheduler's Filter phase): why `pod` does not fit
# the node, or None when it does.
Filter: TypeAlias = "Callable[[Pod, SimNodeInfo, ClusterSnapshot], str | None]"


_ADD_NODE = 0
_REMOVE_NODE = 1
_ADD_POD = 2
_REMOVE_POD = 3
_ADD_PODS = 4
# A DRA change (an allocation, a release, a node's slices): the entry holds its undo.
_DRA = 5

# The volume kinds that can count against a node's CSI volume limits.
_CSI_VOLUME_KINDS = frozenset({"persistentVolumeClaim", "ephemeral", "csi"})


class ClusterSnapshot:
    """Node infos by name, with fork/revert/commit and indexes for the predicates."""

    def __init__(
        self,
        *,
        pvs: Iterable[PersistentVolume] = (),
        pvcs: Iterable[PersistentVolumeClaim] = (),
        storage_classes: Iterable[StorageClass] = (),
        csinodes: Iterable[CSINode] = (),
        namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
        filters: Sequence[tuple[str, Filter]] | None = None,
        dra: DraState | None = None,
        storage_known: bool | None = None,
        unmodelled_claims: frozenset[str] = frozenset(),
    ) -> None:
        self._nodes: dict[str, SimNodeInfo] = {}
        # The filters `check_predicates` runs, by plugin name, when the scheduler's
        # configuration changes them (`--scheduler-config-file`); `None`: kube-scheduler's
        # defaults, checked by the inlined path.
        self.filters = filters
        # Every pod by namespace, so that affinity and spread only look at the namespaces
        # their terms name, and pods without such terms never look at other pods at all.
        self._by_namespace: dict[str, dict[str, Pod]] = {}
        # Pods with required anti-affinity: the incoming pod must respect them (symmetry).
        self._anti_affinity: dict[str, tuple[Pod, str]] = {}
        self._pod_node: dict[str, str] = {}
        self._journals: list[list[tuple[int, Any, Any]]] = []
        # Set by `abandon()`: the snapshot holds simulated changes and no longer describes
        # the cluster, so it may not be read again.
        self._abandoned = False
        self.generation = 0
        self.pvs: dict[str, PersistentVolume] = {pv.name: pv for pv in pvs}
        self.pvcs: dict[str, PersistentVolumeClaim] = {pvc.key: pvc for pvc in pvcs}
        self.storage_classes: dict[str, StorageClass] = {sc.name: sc for sc in storage_classes}
        self.csinodes: dict[str, CSINode] = {c.name: c for c in csinodes}
        # Whether the claims, volumes and classes above are all there are
        # (`ClusterObjects.storage_known`; by default: whether there are any), so that a
        # pod's claim missing here does not exist and the pod fits nowhere. When not, the
        # volume predicates pass over claims the snapshot does not hold.
        self.storage_known: bool = (
            bool(self.pvs or self.pvcs or self.storage_classes)
            if storage_known is None
            else storage_known
        )
        # Claims a controller makes that are not modelled (`ClusterObjects.unmodelled_claims`):
        # not checked even so.
        self.unmodelled_claims = unmodelled_claims
        # The volumes of each storage class, by name order (built on first use): what an
        # unbound WaitForFirstConsumer claim may bind to.
        self._pvs_by_class: dict[str, tuple[PersistentVolume, ...]] | None = None
        self.namespace_labels: dict[str, Mapping[str, str]] = dict(namespace_labels or {})
        # Devices and claims (resource.k8s.io), when the cluster has any DRA object or a
        # pod with claims; None otherwise, and DRA then costs nothing.
        self.dra: DraState | None = dra
        # Predicates keep per-pod precomputed state here, valid for one generation.
        self.cache: dict[Any, Any] = {}
        self._csi_cache: dict[int, tuple[Pod, list[tuple[str, str]]]] = {}
        # Watchers by key, and who hears about which pods: every pod, the pods of one
        # namespace, or only pods declaring required anti-affinity.
        self._watchers: dict[Hashable, SnapshotWatcher] = {}
        self._watch_all: list[SnapshotWatcher] = []
        self._watch_ns: dict[str, list[SnapshotWatcher]] = {}
        self._watch_anti: list[SnapshotWatcher] = []
        # Watchers that only count pods carrying one of some labels, by label (key, value),
        # with the namespaces they hear about (`None`: every namespace): a pod is offered
        # to the watchers of its own labels, not to every workload's.
        self._watch_gated: dict[
            tuple[str, str], list[tuple[SnapshotWatcher, frozenset[str] | None]]
        ] = {}
        # The watchers that also hear about nodes without pods.
        self._watch_empty_nodes: list[SnapshotWatcher] = []
        # Bumped whenever the watchers are dropped: state tied to an older epoch is stale.
        self.watch_epoch = 0
        # Per pod, the watchers counting it and their plans, valid for one watcher set.
        self._watch_version = 0
        self._interests: dict[int, tuple[Pod, int, list[tuple[SnapshotWatcher, Any]]]] = {}

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_objects(
        cls,
        objects: ClusterObjects,
        filters: Sequence[tuple[str, Filter]] | None = None,
        *,
        bound: Mapping[str, Sequence[Pod]] | None = None,
    ) -> ClusterSnapshot:
        """A snapshot of every node with its bound, non-terminal pods; `filters` as the
        constructor takes them. `bound`, from a caller that already grouped the pods, is
        the pods to place on each node instead (bound to it and not terminal); pods of
        nodes not in `objects` are left out either way."""
        snap = cls(
            filters=filters,
            pvs=objects.pvs,
            pvcs=objects.pvcs,
            storage_classes=objects.storage_classes,
            csinodes=objects.csinodes,
            namespace_labels=objects.namespace_labels(),
            dra=dra_state(objects),
            storage_known=objects.storage_known,
            unmodelled_claims=objects.unmodelled_claims,
        )
        if bound is None:
            by_node: dict[str, list[Pod]] = {node.name: [] for node in objects.nodes}
            for pod in objects.pods:
                if pod.node_name and not pod.is_terminal:
                    found = by_node.get(pod.node_name)
                    if found is not None:
                        found.append(pod)
            bound = by_node
        for node in objects.nodes:
            snap.add_node(node)
            pods = bound.get(node.name)
            if pods:
                snap.add_pods(pods, node.name)
        return snap

    @classmethod
    def from_node_infos(cls, node_infos: Iterable[NodeInfo]) -> ClusterSnapshot:
        snap = cls()
        for ni in node_infos:
            snap.add_node(ni.node, ni.pods, ni.resource_slices)
        return snap

    # ------------------------------------------------------------------ queries

    @property
    def checks_resources(self) -> bool:
        """Whether NodeResourcesFit is among the filters (it is, unless the scheduler's
        configuration disables it): only then may a node too full for a pod's cpu, memory
        or pod slot be passed over without running the filters."""
        filters = self.filters
        return filters is None or any(name == "NodeResourcesFit" for name, _ in filters)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_name: object) -> bool:
        return node_name in self._nodes

    def node_info(self, name: str) -> SimNodeInfo | None:
        return self._nodes.get(name)

    def get(self, name: str) -> SimNodeInfo:
        ni = self._nodes.get(name)
        if ni is None:
            raise SnapshotError(f"node {name!r} is not in the snapshot")
        return ni

    def node_infos(self) -> list[SimNodeInfo]:
        self._check_live()
        return list(self._nodes.values())

    def node_names(self) -> list[str]:
        self._check_live()
        return list(self._nodes)

    def __iter__(self) -> Iterator[SimNodeInfo]:
        self._check_live()
        return iter(list(self._nodes.values()))

    def pod_node(self, pod_key: str) -> str | None:
        """The node a pod (`namespace/name`) is on in the snapshot."""
        return self._pod_node.get(pod_key)

    def pods(self) -> Iterator[tuple[Pod, str]]:
        """Every pod with the name of its node."""
        where = self._pod_node
        for ns_pods in self._by_namespace.values():
            for key, pod in ns_pods.items():
                yield pod, where[key]

    def pods_in_namespace(self, namespace: str) -> Iterator[tuple[Pod, str]]:
        """The pods of one namespace with the names of their nodes."""
        ns_pods = self._by_namespace.get(namespace)
        if not ns_pods:
            return
        where = self._pod_node
        for key, pod in ns_pods.items():
            yield pod, where[key]

    def namespaces(self) -> Iterable[str]:
        return self._by_namespace.keys()

    @property
    def has_anti_affinity_pods(self) -> bool:
        """Whether any pod in the snapshot declares required anti-affinity."""
        return bool(self._anti_affinity)

    def anti_affinity_pods(self) -> Iterable[tuple[Pod, str]]:
        return self._anti_affinity.values()

    def csi_volumes_of(self, pod: Pod) -> list[tuple[str, str]]:
        """(driver, volume id) of the CSI volumes a pod uses, for volume limits."""
        volumes = pod.volumes
        if not volumes:
            return []
        for v in volumes:
            if v.kind in _CSI_VOLUME_KINDS:
                break
        else:
            # Projected, configMap, secret, emptyDir...: nothing to count (most pods).
            return []
        cached = self._csi_cache.get(id(pod))
        if cached is not None and cached[0] is pod:
            return cached[1]
        out: list[tuple[str, str]] = []
        for v in pod.volumes:
            if v.kind == "persistentVolumeClaim" or v.kind == "ephemeral":
                claim = (
                    v.claim_name if v.kind == "persistentVolumeClaim" else f"{pod.name}-{v.name}"
                )
                pvc = self.pvcs.get(f"{pod.namespace}/{claim}")
                if pvc is None:
                    continue
                if pvc.volume_name:
                    pv = self.pvs.get(pvc.volume_name)
                    if pv is not None and pv.csi_driver:
                        out.append((pv.csi_driver, pv.name))
                else:
                    sc = self.storage_classes.get(pvc.storage_class)
                    if sc is not None and sc.provisioner:
                        out.append((sc.provisioner, pvc.key))
            elif v.kind == "csi" and v.driver:
                out.append((v.driver, f"{pod.namespace}/{pod.name}/{v.name}"))
        if len(self._csi_cache) > 200_000:
            self._csi_cache.clear()
        self._csi_cache[id(pod)] = (pod, out)
        return out

    def pvs_of_class(self, storage_class: str) -> tuple[PersistentVolume, ...]:
        """The snapshot's PersistentVolumes of `storage_class` ("" for those of none)."""
        if self._pvs_by_class is None:
            by_class: dict[str, list[PersistentVolume]] = {}
            for name in sorted(self.pvs):
                pv = self.pvs[name]
                by_class.setdefault(pv.storage_class, []).append(pv)
            self._pvs_by_class = {k: tuple(v) for k, v in by_class.items()}
        return self._pvs_by_class.get(storage_class, ())

    # ------------------------------------------------------------------ mutation

    def add_node(
        self, node: Node, pods: Iterable[Pod] = (), slices: Sequence[ResourceSlice] = ()
    ) -> SimNodeInfo:
        """Add a node (and pods already on it, and the ResourceSlices local to it, as a
        template's copy has them). The name must be new."""
        if node.name in self._nodes:
            raise SnapshotError(f"node {node.name!r} is already in the snapshot")
        ni = SimNodeInfo(node)
        self._nodes[node.name] = ni
        self.generation += 1
        if self._watchers:
            self._notify_node(ni, 1)
        if self._journals:
            self._journals[-1].append((_ADD_NODE, node.name, None))
        if slices and self.dra is not None:
            self._dra_change(self.dra.add_node_slices(node.name, slices))
        for pod in pods:
            self.add_pod(pod, node.name)
        return ni

    def remove_node(self, name: str) -> None:
        """Remove a node with its pods."""
        ni = self.get(name)
        for key in list(ni.pods):
            self.remove_pod(key)
        if self._watchers:
            self._notify_node(ni, -1)
        del self._nodes[name]
        self.generation += 1
        if self._journals:
            self._journals[-1].append((_REMOVE_NODE, ni, None))

    def add_pod(self, pod: Pod, node_name: str) -> None:
        """Place `pod` on `node_name` without checking predicates."""
        ni = self._nodes.get(node_name)
        if ni is None:
            raise SnapshotError(
                f"cannot place pod {pod.key}: node {node_name!r} is not in the snapshot"
            )
        key = pod.namespace + "/" + pod.name
        if key in self._pod_node:
            raise SnapshotError(
                f"pod {key} is already on node {self._pod_node[key]!r} in the snapshot"
            )
        self._insert_pod(ni, key, pod)
        if self._journals:
            self._journals[-1].append((_ADD_POD, key, None))
        if pod.resource_claims and self.dra is not None:
            self._dra_reserve(pod, ni)

    def _dra_change(self, undo: Callable[[], None]) -> None:
        if self._journals:
            self._journals[-1].append((_DRA, undo, None))
        self.generation += 1

    def _dra_reserve(self, pod: Pod, ni: SimNodeInfo) -> None:
        """The scheduler's Reserve step for DRA: the devices `pod`'s claims get here."""
        dra = self.dra
        assert dra is not None
        found = dra.allocate(pod, ni.node)
        # A pod placed where its claims cannot be allocated (a bound pod of the cluster,
        # whose allocation the snapshot may not show) still uses its claims.
        self._dra_change(dra.reserve(pod, found if not isinstance(found, str) else {}))

    def add_pods(self, pods: Sequence[Pod], node_name: str) -> None:
        """Place many pods on one node without checking predicates, all or none.

        Faster than `add_pod` in a loop (one journal entry, one pass); the estimator uses
        it to fill template nodes.
        """
        ni = self._nodes.get(node_name)
        if ni is None:
            raise SnapshotError(
                f"cannot place {len(pods)} pods: node {node_name!r} is not in the snapshot"
            )
        self._add_pods(ni, node_name, pods)
        dra = self.dra
        if dra is not None:
            claiming = [p for p in pods if p.resource_claims]
            if claiming:
                # Each pod with claims takes its own devices, one after the other, as
                # placed one at a time; undone together.
                self._dra_change(dra.reserve_pods(claiming, ni.node))

    def _add_pods(self, ni: SimNodeInfo, node_name: str, pods: Sequence[Pod]) -> None:
        where = self._pod_node
        keys = [pod.namespace + "/" + pod.name for pod in pods]
        if len(set(keys)) != len(keys) or not where.keys().isdisjoint(keys):
            seen: set[str] = set()
            for key in keys:
                if key in where or key in seen:
                    raise SnapshotError(f"pod {key} is already in the snapshot")
                seen.add(key)
        if len(pods) >= _COPIES_AT_LEAST and not self._watchers and _copies(pods):
            self._add_copies(ni, keys, pods)
            return
        node_pods = ni.pods
        node = ni.node
        by_namespace = self._by_namespace
        anti = self._anti_affinity
        notify = self._notify_pod if self._watchers else None
        cpu = memory = count = eph = 0
        # The one namespace of the pods (`None` when they have several) and whether any
        # declares anti-affinity: what undoing the batch needs without reading the pods.
        namespace: str | None = pods[0].namespace if pods else None
        has_anti = False
        for key, pod in zip(keys, pods, strict=True):
            node_pods[key] = pod
            where[key] = node_name
            ns = by_namespace.get(pod.namespace)
            if ns is None:
                ns = by_namespace[pod.namespace] = {}
            ns[key] = pod
            if pod.namespace != namespace:
                namespace = None
            r = pod.requests
            cpu += r.cpu
            memory += r.memory
            count += r.pods
            eph += r.ephemeral_storage
            if r.extended or pod.host_ports or pod.volumes:
                ni._account_extra(pod, 1, self.csi_volumes_of(pod) if pod.volumes else _NONE)
            affinity = pod.affinity
            if affinity is not None and affinity.pod is not None and affinity.pod.anti_affinity:
                anti[key] = (pod, node_name)
                has_anti = True
            if notify is not None:
                notify(pod, node, 1)
        ni.req_cpu += cpu
        ni.req_memory += memory
        ni.req_pods += count
        ni.req_eph += eph
        self.generation += 1
        if self._journals:
            self._journals[-1].append((_ADD_PODS, node_name, _Batch(keys, namespace, has_anti)))

    def _add_copies(self, ni: SimNodeInfo, keys: list[str], pods: Sequence[Pod]) -> None:
        """`add_pods` of pods that are copies of the first for what the snapshot
        accounts (`_copies`), with no watcher to tell: each index takes them in one call,
        and the node's usage grows by the first pod's requests times their number."""
        first = pods[0]
        node_name = ni.node.name
        ni.pods.update(zip(keys, pods, strict=True))
        self._pod_node.update(zip(keys, repeat(node_name)))
        namespace = first.namespace
        ns = self._by_namespace.get(namespace)
        if ns is None:
            ns = self._by_namespace[namespace] = {}
        ns.update(zip(keys, pods, strict=True))
        affinity = first.affinity
        has_anti = bool(
            affinity is not None and affinity.pod is not None and affinity.pod.anti_affinity
        )
        if has_anti:
            self._anti_affinity.update(zip(keys, zip(pods, repeat(node_name)), strict=True))
        n = len(pods)
        r = first.requests
        ni.req_cpu += r.cpu * n
        ni.req_memory += r.memory * n
        ni.req_pods += r.pods * n
        ni.req_eph += r.ephemeral_storage * n
        if r.extended:
            ni._add_extended(r.extended, n)
        self.generation += 1
        if self._journals:
            self._journals[-1].append((_ADD_PODS, node_name, _Batch(keys, namespace, has_anti)))

    def _place(self, ni: SimNodeInfo, key: str, pod: Pod) -> None:
        """`add_pod` for callers in this package that already checked node and key."""
        self._insert_pod(ni, key, pod)
        if self._journals:
            self._journals[-1].append((_ADD_POD, key, None))
        if pod.resource_claims and self.dra is not None:
            self._dra_reserve(pod, ni)

    def remove_pod(self, pod_key: str) -> Pod:
        """Remove a pod (`namespace/name`) from its node; returns it."""
        node_name = self._pod_node.get(pod_key)
        if node_name is None:
            raise SnapshotError(f"pod {pod_key} is not in the snapshot")
        ni = self._nodes[node_name]
        pod = self._delete_pod(ni, pod_key)
        if self._journals:
            self._journals[-1].append((_REMOVE_POD, pod, node_name))
        if pod.resource_claims and self.dra is not None:
            self._dra_change(self.dra.release(pod))
        return pod

    def _insert_pod(self, ni: SimNodeInfo, key: str, pod: Pod) -> None:
        ni.pods[key] = pod
        r = pod.requests
        # Inline accounting for the common case; the general path handles the rest.
        ni.req_cpu += r.cpu
        ni.req_memory += r.memory
        ni.req_pods += r.pods
        ni.req_eph += r.ephemeral_storage
        if r.extended or pod.host_ports or pod.volumes:
            ni._account_extra(pod, 1, self.csi_volumes_of(pod) if pod.volumes else _NONE)
        node_name = ni.node.name
        self._pod_node[key] = node_name
        ns = self._by_namespace.get(pod.namespace)
        if ns is None:
            ns = self._by_namespace[pod.namespace] = {}
        ns[key] = pod
        affinity = pod.affinity
        if affinity is not None and affinity.pod is not None and affinity.pod.anti_affinity:
            self._anti_affinity[key] = (pod, node_name)
        if self._watchers:
            self._notify_pod(pod, ni.node, 1)
        self.generation += 1

    def _delete_pod(self, ni: SimNodeInfo, key: str) -> Pod:
        pod = ni.pods.pop(key)
        r = pod.requests
        ni.req_cpu -= r.cpu
        ni.req_memory -= r.memory
        ni.req_pods -= r.pods
        ni.req_eph -= r.ephemeral_storage
        if r.extended or pod.host_ports or pod.volumes:
            ni._account_extra(pod, -1, self.csi_volumes_of(pod) if pod.volumes else _NONE)
        del self._pod_node[key]
        ns = self._by_namespace[pod.namespace]
        del ns[key]
        if not ns:
            del self._by_namespace[pod.namespace]
        self._anti_affinity.pop(key, None)
        if self._watchers:
            self._notify_pod(pod, ni.node, -1)
        self.generation += 1
        return pod

    def _unindex_pods(self, batch: _Batch) -> None:
        """Undo `add_pods` on a node that the same revert then removes: the pods leave the
        snapshot's indexes, and stay on the node, which goes with them. Only without
        watchers, which must hear about each pod the way it came."""
        where = self._pod_node
        keys = batch.keys
        for key in keys:
            del where[key]
        if batch.namespace is not None:
            ns = self._by_namespace[batch.namespace]
            for key in keys:
                del ns[key]
            if not ns:
                del self._by_namespace[batch.namespace]
        else:
            by_namespace = self._by_namespace
            for key in keys:
                namespace = key.partition("/")[0]
                ns = by_namespace[namespace]
                del ns[key]
                if not ns:
                    del by_namespace[namespace]
        if batch.has_anti:
            anti = self._anti_affinity
            for key in keys:
                anti.pop(key, None)
        self.generation += 1

    def _delete_pods(self, ni: SimNodeInfo, keys: Sequence[str]) -> None:
        """Undo `add_pods`: the inverse of its single pass."""
        node_pods = ni.pods
        node = ni.node
        where = self._pod_node
        by_namespace = self._by_namespace
        anti = self._anti_affinity
        notify = self._notify_pod if self._watchers else None
        cpu = memory = count = eph = 0
        for key in keys:
            pod = node_pods.pop(key)
            del where[key]
            ns = by_namespace[pod.namespace]
            del ns[key]
            if not ns:
                del by_namespace[pod.namespace]
            r = pod.requests
            cpu += r.cpu
            memory += r.memory
            count += r.pods
            eph += r.ephemeral_storage
            if r.extended or pod.host_ports or pod.volumes:
                ni._account_extra(pod, -1, self.csi_volumes_of(pod) if pod.volumes else _NONE)
            if anti:
                anti.pop(key, None)
            if notify is not None:
                notify(pod, node, -1)
        ni.req_cpu -= cpu
        ni.req_memory -= memory
        ni.req_pods -= count
        ni.req_eph -= eph
        self.generation += 1

    # ------------------------------------------------------------------ watchers

    def watch(
        self,
        key: Hashable,
        build: Callable[[], W],
        *,
        namespaces: Iterable[str] | None = None,
        anti_affinity_only: bool = False,
        empty_nodes: bool = False,
        labels: Iterable[tuple[str, str]] | None = None,
    ) -> W:
        """The watcher registered under `key`, built and filled from the snapshot if new.

        `namespaces` limits the pod changes it hears about to those namespaces (`None`:
        every namespace); `anti_affinity_only` to pods declaring required anti-affinity.
        `labels`, when given, promises that the watcher counts no pod without one of
        these labels (key, value), so other pods are not offered to it. Every watcher
        hears about every node with pods, and with `empty_nodes` about nodes without pods
        too. The caller must use one `key` per kind of watcher;
        `watch_epoch` changes when watchers are dropped (registering one may drop them all).
        """
        found = self._watchers.get(key)
        if found is not None:
            return found  # type: ignore[return-value]
        if len(self._watchers) >= _WATCHER_LIMIT:
            self._watchers.clear()
            self._watch_all.clear()
            self._watch_ns.clear()
            self._watch_anti.clear()
            self._watch_gated.clear()
            self._watch_empty_nodes.clear()
            self.watch_epoch += 1
        watcher = build()
        for ni in self._nodes.values():
            if empty_nodes or ni.pods:
                watcher.node_changed(ni, 1)
        self._watch_version += 1
        self._watchers[key] = watcher
        if empty_nodes:
            self._watch_empty_nodes.append(watcher)
        if anti_affinity_only:
            self._watch_anti.append(watcher)
        elif labels is not None:
            scope = None if namespaces is None else frozenset(namespaces)
            for label in set(labels):
                self._watch_gated.setdefault(label, []).append((watcher, scope))
        elif namespaces is None:
            self._watch_all.append(watcher)
        else:
            for ns in set(namespaces):
                self._watch_ns.setdefault(ns, []).append(watcher)
        return watcher

    def _notify_pod(self, pod: Pod, node: Node, sign: int) -> None:
        entry = self._interests.get(id(pod))
        if entry is None or entry[0] is not pod or entry[1] != self._watch_version:
            entry = (pod, self._watch_version, self._interested(pod))
            if len(self._interests) > _INTEREST_LIMIT:
                self._interests.clear()
            self._interests[id(pod)] = entry
        for w, plan in entry[2]:
            w.pod_changed(pod, plan, node, sign)

    def _interested(self, pod: Pod) -> list[tuple[SnapshotWatcher, Any]]:
        """The watchers that count `pod`, with what each needs to know about it."""
        candidates = list(self._watch_all)
        candidates.extend(self._watch_ns.get(pod.namespace, ()))
        affinity = pod.affinity
        if affinity is not None and affinity.pod is not None and affinity.pod.anti_affinity:
            candidates.extend(self._watch_anti)
        gated = self._watch_gated
        if gated:
            namespace = pod.namespace
            offered: dict[int, SnapshotWatcher] = {}
            for label in pod.labels.items():
                for w, scope in gated.get(label, ()):
                    if scope is None or namespace in scope:
                        offered[id(w)] = w
            candidates.extend(offered.values())
        out = []
        for w in candidates:
            plan = w.interest(pod)
            if plan is not None:
                out.append((w, plan))
        return out

    def _notify_node(self, ni: SimNodeInfo, sign: int) -> None:
        if not ni.pods:
            for w in self._watch_empty_nodes:
                w.node_changed(ni, sign)
        elif sign > 0:
            for w in self._watchers.values():
                w.node_changed(ni, sign)
        else:
            for w in reversed(self._watchers.values()):
                w.node_changed(ni, sign)

    # ------------------------------------------------------------------ fork / revert

    @property
    def depth(self) -> int:
        """How many forks are open."""
        return len(self._journals)

    def fork(self) -> None:
        """Start a change set that `revert()` can undo."""
        self._check_live()
        self._journals.append([])

    def commit(self) -> None:
        """Keep the changes since the last `fork()` (they join the enclosing fork, if any)."""
        self._check_live()
        if not self._journals:
            raise SnapshotError("commit() without a matching fork()")
        journal = self._journals.pop()
        if self._journals:
            self._journals[-1].extend(journal)

    def revert(self) -> None:
        """Undo every change since the last `fork()`."""
        self._check_live()
        if not self._journals:
            raise SnapshotError("revert() without a matching fork()")
        journal = self._journals.pop()
        # Batches added to a node that this revert removes afterwards (the estimator's
        # template nodes) need not leave the node one pod at a time: the node goes with
        # them. Without watchers, only the snapshot's indexes must forget them.
        doomed = set() if self._watchers else _doomed_batches(journal)
        for i in range(len(journal) - 1, -1, -1):
            op, a, b = journal[i]
            if op == _ADD_POD:
                node_name = self._pod_node[a]
                self._delete_pod(self._nodes[node_name], a)
            elif op == _ADD_PODS:
                if i in doomed:
                    self._unindex_pods(b)
                else:
                    self._delete_pods(self._nodes[a], b.keys)
            elif op == _REMOVE_POD:
                pod: Pod = a
                self._insert_pod(self._nodes[b], pod.namespace + "/" + pod.name, pod)
            elif op == _DRA:
                a()
            elif op == _ADD_NODE:
                gone = self._nodes.pop(a)
                if self._watchers:
                    self._notify_node(gone, -1)
            else:
                ni: SimNodeInfo = a
                self._nodes[ni.node.name] = ni
                if self._watchers:
                    self._notify_node(ni, 1)
        self.generation += 1

    def abandon(self) -> None:
        """Close the last fork without undoing it, for a caller that is done with the
        snapshot: undoing a large simulation costs about as much as making it, and nobody
        would see the result. The snapshot then holds simulated changes, so listing its
        nodes or forking it again raises `SnapshotError`."""
        if not self._journals:
            raise SnapshotError("abandon() without a matching fork()")
        self._journals.clear()
        self._abandoned = True

    def _check_live(self) -> None:
        if self._abandoned:
            raise SnapshotError(
                "snapshot was abandoned with simulated changes; build a new one from the cluster"
            )


_NONE: list[tuple[str, str]] = []


class _Batch:
    """What the journal keeps of one `add_pods` call."""

    __slots__ = ("has_anti", "keys", "namespace")

    def __init__(self, keys: list[str], namespace: str | None, has_anti: bool) -> None:
        self.keys = keys
        self.namespace = namespace
        self.has_anti = has_anti


# Below this many pods, checking for copies costs more than the one-pass loop it saves.
_COPIES_AT_LEAST = 8
_requests_of = attrgetter("requests")
_namespace_of = attrgetter("namespace")
_affinity_of = attrgetter("affinity")
_host_ports_of = attrgetter("host_ports")
_volumes_of = attrgetter("volumes")


def _copies(pods: Sequence[Pod]) -> bool:
    """Whether every pod has the first's requests, namespace and affinity, and none has
    host ports or a volume that counts against CSI limits: what the snapshot accounts is
    then the same for each (the common case of a workload's pods). Each field is compared
    in one pass in C, where the pods of a workload share the objects."""
    n = len(pods)
    first = pods[0]
    if not (
        list(map(_host_ports_of, pods)).count(()) == n
        and list(map(_requests_of, pods)).count(first.requests) == n
        and list(map(_namespace_of, pods)).count(first.namespace) == n
        and list(map(_affinity_of, pods)).count(first.affinity) == n
    ):
        return False
    volumes = list(map(_volumes_of, pods))
    # Most pods carry volumes (the service-account token at least), of kinds with no
    # CSI limit to count.
    return volumes.count(()) == n or _CSI_VOLUME_KINDS.isdisjoint(
        {v.kind for vs in volumes for v in vs}
    )


def dra_state(objects: ClusterObjects) -> DraState | None:
    """The DRA state of `objects`, or None when they hold no DRA object."""
    # A pod's claims are ResourceClaims or come from ResourceClaimTemplates: without any,
    # a pod with claims fits nowhere (the DynamicResources filter says so).
    if not (objects.resource_slices or objects.resource_claims or objects.resource_claim_templates):
        return None
    return DraState.build(
        objects.resource_slices,
        objects.device_classes,
        objects.resource_claims,
        objects.resource_claim_templates,
    )


def _doomed_batches(journal: Sequence[tuple[int, Any, Any]]) -> set[int]:
    """The indexes of the `add_pods` entries of `journal` whose node was added earlier in
    it, and so is removed when it is undone after them. (Pods go only onto a node that
    is there: when a node of that name was added earlier in the journal, the node the
    batch went onto is the one added last.)"""
    added: set[str] = set()
    out: set[int] = set()
    for i, (op, a, _b) in enumerate(journal):
        if op == _ADD_NODE:
            added.add(a)
        elif op == _ADD_PODS and a in added:
            out.add(i)
    return out
