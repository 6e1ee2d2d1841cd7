"""Scheduler filter predicates, answering in kube-scheduler's words.

(Long on purpose: the predicates share the per-constraint indexes below and the
scheduler's filter order; split, each would reach into the others' indexes.)

Each predicate takes `(pod, node_info, snapshot)` and returns `None` when the pod fits or
the reason it does not, worded as kube-scheduler words it in events
(`Insufficient cpu`, `node(s) had untolerated taint {dedicated: gpu}`, ...).

`check_predicates` runs them in the scheduler's filter order and returns the first reason.
Predicates that need to look at other pods (inter-pod affinity, topology spread) read
counts per topology domain that the snapshot keeps up to date as pods and nodes come and go
(`ClusterSnapshot.watch`), one set per constraint shape shared by every pod of a workload:
a check costs time in the pod's constraints, not in the cluster's pods. A pod without such
terms never looks at other pods, except pods that declare required anti-affinity (which the
scheduler also checks symmetrically). The from-scratch computations remain, as the
reference the incremental state is tested against and for a pod checked while it is itself
in the snapshot (which must not count itself).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from clusterscaler.model import (
    LEGACY_REGION_LABEL,
    LEGACY_ZONE_LABEL,
    REGION_LABEL,
    ZONE_LABEL,
    LabelSelector,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinityTerm,
    Taint,
    TopologySpreadConstraint,
    Volume,
    node_selector_matches,
)
from clusterscaler.model.storage import ANN_SELECTED_NODE, NO_PROVISIONER
from clusterscaler.simulator.dra import REASON_DRA
from clusterscaler.simulator.snapshot import ClusterSnapshot, SimNodeInfo

__all__ = [
    "PREDICATES",
    "REASON_AFFINITY",
    "REASON_ANTI_AFFINITY",
    "REASON_EXISTING_ANTI_AFFINITY",
    "REASON_NODE_AFFINITY",
    "REASON_NODE_NAME",
    "REASON_PORTS",
    "REASON_SPREAD",
    "REASON_SPREAD_MISSING_LABEL",
    "REASON_TOO_MANY_PODS",
    "REASON_UNSCHEDULABLE",
    "REASON_VOLUME_BIND",
    "REASON_VOLUME_LIMIT",
    "REASON_VOLUME_NODE_AFFINITY",
    "REASON_VOLUME_RWOP",
    "REASON_VOLUME_UNBOUND_IMMEDIATE",
    "REASON_VOLUME_ZONE",
    "REASON_VOLUME_ZONE_NO_CLASS",
    "REASON_VOLUME_ZONE_NO_VOLUME",
    "Predicate",
    "check_host_ports",
    "check_inter_pod_affinity",
    "check_node_affinity",
    "check_node_name",
    "check_predicates",
    "check_resources",
    "check_taints",
    "check_topology_spread",
    "check_unschedulable",
    "check_volume_binding",
    "check_volume_limits",
    "check_volume_restrictions",
    "check_volume_zone",
    "check_volumes",
    "pod_affinity_cannot_reject",
    "pod_matches_node_affinity",
    "prepare_indexes",
    "resources_check_ignoring",
    "selected_by_existing_anti_affinity",
    "spread_cannot_reject",
    "tolerates_taints",
    "volumes_constrain_scheduling",
]

Predicate = Callable[[Pod, SimNodeInfo, ClusterSnapshot], "str | None"]

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_VOLUME_ZONE = "node(s) had no available volume zone"
# VolumeZone's words for a claim that names no volume and binds at once (or has no class).
REASON_VOLUME_ZONE_NO_VOLUME = "PersistentVolume had no name"
REASON_VOLUME_ZONE_NO_CLASS = "PersistentVolumeClaim had no pv name and storageClass name"
REASON_VOLUME_NODE_AFFINITY = "node(s) had volume node affinity conflict"
REASON_VOLUME_BIND = "node(s) didn't find available persistent volumes to bind"
REASON_VOLUME_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
REASON_VOLUME_PV_MISSING = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
REASON_VOLUME_LIMIT = "node(s) exceed max volume count"
REASON_VOLUME_RWOP = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_MISSING_LABEL = (
    "node(s) didn't match pod topology spread constraints (missing required label)"
)

UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def tolerates_taints(pod: Pod, taints: Iterable[Taint]) -> Taint | None:
    """The first NoSchedule/NoExecute taint `pod` does not tolerate, or `None`."""
    tolerations = pod.tolerations
    for taint in taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def pod_matches_node_affinity(pod: Pod, node: Node) -> bool:
    """nodeSelector and required node affinity (terms ORed, requirements ANDed)."""
    if pod.node_selector:
        labels = node.labels
        for k, v in pod.node_selector.items():
            if labels.get(k) != v:
                return False
    a = pod.affinity
    if a is not None and a.node is not None and a.node.required is not None:
        return node_selector_matches(a.node.required, node.name, node.labels)
    return True


# --------------------------------------------------------------------------- simple filters


def check_unschedulable(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    if not ni.node.unschedulable:
        return None
    if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
        return None
    return REASON_UNSCHEDULABLE


def check_node_name(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    if pod.node_name and pod.node_name != ni.node.name:
        return REASON_NODE_NAME
    return None


def check_taints(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    if not ni.node.taints:
        return None
    taint = tolerates_taints(pod, ni.node.taints)
    if taint is None:
        return None
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def check_node_affinity(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    return None if pod_matches_node_affinity(pod, ni.node) else REASON_NODE_AFFINITY


def check_host_ports(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    if not pod.host_ports or not ni.ports:
        return None
    for wanted in pod.host_ports:
        for used in ni.ports:
            if wanted.conflicts(used):
                return REASON_PORTS
    return None


def check_resources(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    return _check_resources(pod, ni, None)


def resources_check_ignoring(ignored: Callable[[str], bool]) -> Predicate:
    """NodeResourcesFit skipping the extended resources `ignored` names (its
    ignoredResources and ignoredResourceGroups args)."""

    def check(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
        return _check_resources(pod, ni, ignored)

    return check


def _check_resources(
    pod: Pod, ni: SimNodeInfo, ignored: Callable[[str], bool] | None
) -> str | None:
    r = pod.requests
    alloc = ni.node.allocatable
    if ni.req_pods + r.pods > alloc.pods:
        return REASON_TOO_MANY_PODS
    missing: list[str] = []
    if r.cpu and ni.req_cpu + r.cpu > alloc.cpu:
        missing.append("cpu")
    if r.memory and ni.req_memory + r.memory > alloc.memory:
        missing.append("memory")
    if r.ephemeral_storage and ni.req_eph + r.ephemeral_storage > alloc.ephemeral_storage:
        missing.append("ephemeral-storage")
    if r.extended:
        ext = ni.req_ext
        aext = alloc.extended
        for k in sorted(r.extended):
            if ignored is not None and ignored(k):
                continue
            if ext.get(k, 0) + r.extended[k] > aext.get(k, 0):
                missing.append(k)
    if missing:
        return ", ".join(f"Insufficient {m}" for m in missing)
    return None


# --------------------------------------------------------------------------- volumes

_ZONE_LABELS = (ZONE_LABEL, REGION_LABEL, LEGACY_ZONE_LABEL, LEGACY_REGION_LABEL)

# The only volumes the predicates read (zone, binding, RWOP, CSI limits all go through the
# claim). Projected, configMap, secret, downwardAPI, emptyDir and hostPath volumes never
# decide where a pod fits.
SCHEDULING_VOLUME_KINDS = frozenset({"persistentVolumeClaim", "ephemeral"})


def volumes_constrain_scheduling(pod: Pod) -> bool:
    """Whether any of the pod's volumes can decide where it fits (a claim)."""
    return any(v.kind in SCHEDULING_VOLUME_KINDS for v in pod.volumes)


def scheduling_volumes(pod: Pod) -> tuple[Volume, ...]:
    """The pod's volumes that can decide where it fits; as Cluster Autoscaler drops the
    projected service-account token volume before comparing pods, the others (whose names
    are unique per pod) do not make two pods different for scheduling."""
    volumes = pod.volumes
    if not volumes:
        return ()
    return tuple(v for v in volumes if v.kind in SCHEDULING_VOLUME_KINDS)


def check_volumes(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    """Volume binding and volume zone for the pod's claims.

    A claim the snapshot does not hold does not exist, and the pod then fits nowhere, as
    kube-scheduler judges it, when the snapshot knows the cluster's storage objects
    (`ClusterSnapshot.storage_known`). A snapshot built without any says nothing about
    claims: their volumes are then not checked, lest every stateful pod fit nowhere.
    """
    return _check_volumes(pod, ni, snapshot, zone=True, binding=True)


def check_volume_zone(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    """VolumeZone alone: the zone labels of the volumes the pod's claims name (see
    `_zone_volumes` and `_volume_zone`)."""
    return _check_volumes(pod, ni, snapshot, zone=True, binding=False)


def check_volume_binding(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    """VolumeBinding alone: usable claims, volume node affinity and claims still to bind."""
    return _check_volumes(pod, ni, snapshot, zone=False, binding=True)


def _claim_not_found(name: str) -> str:
    """The API's words for a claim that does not exist (kube-scheduler passes them on)."""
    return f'persistentvolumeclaim "{name}" not found'


def _volume_not_found(name: str) -> str:
    """The API's words for a PersistentVolume that does not exist."""
    return f'persistentvolume "{name}" not found'


def _unusable_claim(
    pod: Pod, kind: str, name: str, pvc: PersistentVolumeClaim | None
) -> str | None:
    """Why the claim `name` of one of the pod's volumes keeps the pod off every node,
    checked in kube-scheduler's order (VolumeBinding's `podHasPVCs` in
    `pkg/scheduler/framework/plugins/volumebinding/volume_binding.go`): it does not exist
    (for a generic ephemeral volume: not made yet), its volume is lost, it is being
    deleted, or, for an ephemeral volume, another object than the pod controls it
    (`VolumeIsForPod` in `k8s.io/component-helpers/storage/ephemeral`)."""
    if pvc is None:
        if kind == "ephemeral":
            return (
                "waiting for ephemeral volume controller to create the persistentvolumeclaim "
                f'"{name}"'
            )
        return _claim_not_found(name)
    if pvc.phase == "Lost":
        return (
            f'persistentvolumeclaim "{pvc.name}" bound to non-existent persistentvolume '
            f'"{pvc.volume_name}"'
        )
    if pvc.deleting:
        return f'persistentvolumeclaim "{pvc.name}" is being deleted'
    if kind == "ephemeral" and (
        pvc.namespace != pod.namespace or not pvc.controller_uid or pvc.controller_uid != pod.uid
    ):
        return (
            f"PVC {pvc.namespace}/{pvc.name} was not created for pod "
            f"{pod.namespace}/{pod.name} (pod is not owner)"
        )
    return None


def _check_volumes(
    pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot, *, zone: bool, binding: bool
) -> str | None:
    volumes = pod.volumes
    if not volumes:
        return None
    for v in volumes:
        if v.kind in SCHEDULING_VOLUME_KINDS:
            break
    else:
        return None
    # The claims, volumes and classes do not change within a snapshot: what the PreFilters
    # find holds for every node the pod is tried on.
    key = ("volumes", id(pod), zone, binding)
    cached = snapshot.cache.get(key)
    if cached is not None and cached[0] is pod:
        state: str | tuple[list[PersistentVolumeClaim], list[PersistentVolume]] | None
        state = cached[1]
    else:
        state = _volume_prefilters(pod, snapshot, zone=zone, binding=binding)
        _remember(snapshot, key, (pod, state))
    if state is None or isinstance(state, str):
        return state
    claims, found = state
    node = ni.node
    if binding:
        reason = _check_volume_binding(claims, node, snapshot)
        if reason is not None:
            return reason
    if found:
        return _volume_zone(found, node)
    return None


def _volume_prefilters(
    pod: Pod, snapshot: ClusterSnapshot, *, zone: bool, binding: bool
) -> str | tuple[list[PersistentVolumeClaim], list[PersistentVolume]] | None:
    """What VolumeBinding's and VolumeZone's PreFilters find, on no node in particular: why
    the pod fits nowhere, or the claims for VolumeBinding's Filter and the volumes for
    VolumeZone's; None when no claim is left to check."""
    known = snapshot.storage_known
    claims: list[PersistentVolumeClaim] = []
    # The `persistentVolumeClaim` volumes' claims, by name (None: not in the snapshot):
    # the only ones VolumeZone reads.
    named: list[tuple[str, PersistentVolumeClaim | None]] = []
    for v in pod.volumes:
        kind = v.kind
        if kind == "persistentVolumeClaim":
            claim = v.claim_name
        elif kind == "ephemeral":
            claim = f"{pod.name}-{v.name}"
        else:
            continue
        key = f"{pod.namespace}/{claim}"
        pvc = snapshot.pvcs.get(key)
        if pvc is None and key in snapshot.unmodelled_claims:
            continue
        if kind == "persistentVolumeClaim":
            named.append((claim, pvc))
        if binding and (pvc is not None or known):
            reason = _unusable_claim(pod, kind, claim, pvc)
            if reason is not None:
                return reason
        if pvc is not None:
            claims.append(pvc)
    if not named and not claims:
        return None
    # kube-scheduler's order: every plugin's PreFilter (VolumeBinding's, then VolumeZone's)
    # before any Filter.
    if binding:
        reason = _unbound_immediate(claims, snapshot)
        if reason is not None:
            return reason
    found: list[PersistentVolume] = []
    if zone:
        zoned = _zone_volumes(named, snapshot)
        if isinstance(zoned, str):
            return zoned
        found = zoned
    return (claims if binding else [], found)


def _zone_volumes(
    claims: Sequence[tuple[str, PersistentVolumeClaim | None]], snapshot: ClusterSnapshot
) -> list[PersistentVolume] | str:
    """kube-scheduler's VolumeZone PreFilter (`getPVbyPod` in
    `pkg/scheduler/framework/plugins/volumezone/volume_zone.go`) for the claims of the
    pod's `persistentVolumeClaim` volumes: the volumes they name, or why the pod fits
    nowhere. A claim naming no volume is VolumeBinding's when its class waits for the
    first consumer, and otherwise leaves the pod unschedulable on every node, in
    VolumeZone's words; so does a claim or volume that does not exist, when the snapshot
    knows its storage objects (`ClusterSnapshot.storage_known`; otherwise neither is
    checked)."""
    known = snapshot.storage_known
    out: list[PersistentVolume] = []
    for name, pvc in claims:
        if pvc is None:
            if known:
                return _claim_not_found(name)
            continue
        if not pvc.volume_name:
            if not pvc.storage_class:
                return REASON_VOLUME_ZONE_NO_CLASS
            sc = snapshot.storage_classes.get(pvc.storage_class)
            if sc is None:
                return f'storageclass.storage.k8s.io "{pvc.storage_class}" not found'
            if sc.volume_binding_mode != "WaitForFirstConsumer":
                return REASON_VOLUME_ZONE_NO_VOLUME
            continue
        pv = snapshot.pvs.get(pvc.volume_name)
        if pv is None:
            if known:
                return _volume_not_found(pvc.volume_name)
            continue
        out.append(pv)
    return out


def _volume_zone(volumes: Sequence[PersistentVolume], node: Node) -> str | None:
    """VolumeZone's Filter: each volume carrying zone or region labels must carry the
    node's."""
    for pv in volumes:
        for label in _ZONE_LABELS:
            wanted = pv.labels.get(label)
            if wanted is None:
                continue
            have = node.labels.get(label)
            # A PV may span zones, written `zone-a__zone-b`.
            if have is None or have not in wanted.split("__"):
                return REASON_VOLUME_ZONE
    return None


def _unbound_immediate(
    claims: Sequence[PersistentVolumeClaim], snapshot: ClusterSnapshot
) -> str | None:
    """VolumeBinding's PreFilter (`GetPodVolumeClaims` in
    `pkg/scheduler/framework/plugins/volumebinding/binder.go`): an unbound claim that is
    not of a WaitForFirstConsumer class, one merely naming its volume included, fails
    everywhere until the persistent-volume controller binds it."""
    for pvc in claims:
        if pvc.bound:
            continue
        sc = snapshot.storage_classes.get(pvc.storage_class) if pvc.storage_class else None
        if pvc.volume_name or sc is None or sc.volume_binding_mode != "WaitForFirstConsumer":
            return REASON_VOLUME_UNBOUND_IMMEDIATE
    return None


def _check_volume_binding(
    claims: Sequence[PersistentVolumeClaim], node: Node, snapshot: ClusterSnapshot
) -> str | None:
    """kube-scheduler's VolumeBinding Filter for a pod's claims on `node` (`FindPodVolumes`
    in `pkg/scheduler/framework/plugins/volumebinding/binder.go`), the claims having
    passed `_unbound_immediate`: a bound claim's volume must exist (when the snapshot
    knows its storage objects) and accept the node; an unbound claim of a
    WaitForFirstConsumer class needs an available volume that accepts the node (each
    volume for one claim of the pod), or a class that provisions one there.

    As in Cluster Autoscaler, which runs this filter without its Reserve step (upstream
    `simulator/clustersnapshot/predicate/predicate_snapshot.go` reserves only DRA claims),
    a volume one pod was placed with stays available to the next: the simulation never
    binds volumes."""
    delayed: list[PersistentVolumeClaim] = []
    for pvc in claims:
        if not pvc.bound:
            delayed.append(pvc)
            continue
        pv = snapshot.pvs.get(pvc.volume_name)
        if pv is None:
            if snapshot.storage_known:
                return REASON_VOLUME_PV_MISSING
            continue
        if not _volume_accepts(pv, node):
            return REASON_VOLUME_NODE_AFFINITY
    if not delayed:
        return None
    chosen: set[str] = set()
    to_provision: list[PersistentVolumeClaim] = []
    # Smallest requests first, so each takes the smallest volume that fits (`byPVCSize`).
    for pvc in sorted(delayed, key=lambda c: c.requested):
        selected = pvc.annotations.get(ANN_SELECTED_NODE)
        if selected is not None:
            if selected != node.name:
                return REASON_VOLUME_BIND
            to_provision.append(pvc)
            continue
        pv = _matching_volume(pvc, snapshot.pvs_of_class(pvc.storage_class), node, chosen)
        if pv is None:
            to_provision.append(pvc)
        else:
            chosen.add(pv.name)
    for pvc in to_provision:
        # `checkVolumeProvisions`; the provisioner's storage capacity
        # (CSIStorageCapacity) is not modelled.
        sc = snapshot.storage_classes[pvc.storage_class]
        if not sc.provisioner or sc.provisioner == NO_PROVISIONER:
            return REASON_VOLUME_BIND
        if sc.allowed_topologies and not node_selector_matches(
            sc.allowed_topologies, node.name, node.labels
        ):
            return REASON_VOLUME_BIND
    return None


def _volume_accepts(pv: PersistentVolume, node: Node) -> bool:
    """The volume's node affinity admits the node (`CheckNodeAffinity`: by labels only)."""
    return pv.node_affinity is None or node_selector_matches(pv.node_affinity, "", node.labels)


def _matching_volume(
    pvc: PersistentVolumeClaim,
    volumes: Iterable[PersistentVolume],
    node: Node,
    chosen: set[str],
) -> PersistentVolume | None:
    """The volume an unbound claim would bind to on `node` (`FindMatchingVolume` in
    `k8s.io/component-helpers/storage/volume/pv_helpers.go`, the scheduler's path): one
    pre-bound to the claim if it accepts the node, else the smallest available one of the
    claim's class, size, volume mode, access modes and selector that accepts the node."""
    smallest: PersistentVolume | None = None
    for pv in volumes:
        if pv.name in chosen:
            continue
        bound_here = pv.bound_to(pvc)
        if pv.claim_ref and not bound_here:
            continue
        if pv.capacity < pvc.requested or pv.volume_mode != pvc.volume_mode or pv.deleting:
            continue
        accepts = _volume_accepts(pv, node)
        if bound_here:
            return pv if accepts else None
        if pv.phase != "Available":
            continue
        if pvc.selector is not None and not pvc.selector.matches(pv.labels):
            continue
        if pv.storage_class != pvc.storage_class or not accepts:
            continue
        if not set(pvc.access_modes) <= set(pv.access_modes):
            continue
        if smallest is None or pv.capacity < smallest.capacity:
            smallest = pv
    return smallest


def _claim_keys(pod: Pod) -> list[str]:
    out = []
    for v in pod.volumes:
        if v.kind == "persistentVolumeClaim":
            out.append(f"{pod.namespace}/{v.claim_name}")
        elif v.kind == "ephemeral":
            out.append(f"{pod.namespace}/{pod.name}-{v.name}")
    return out


def check_volume_restrictions(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    """A ReadWriteOncePod claim may be used by one pod only, anywhere in the cluster."""
    if not pod.volumes:
        return None
    exclusive = []
    for key in _claim_keys(pod):
        pvc = snapshot.pvcs.get(key)
        if pvc is not None and pvc.read_write_once_pod:
            exclusive.append(key)
    if not exclusive:
        return None
    own_key = pod.namespace + "/" + pod.name
    for other, _node in snapshot.pods_in_namespace(pod.namespace):
        if not other.volumes or other.namespace + "/" + other.name == own_key:
            continue
        if any(k in exclusive for k in _claim_keys(other)):
            return REASON_VOLUME_RWOP
    return None


def check_volume_limits(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    """CSI attach limits, where the node's CSINode declares them (for a template node: the
    limits its provider stated, `Node.csi_volume_limits`)."""
    if not pod.volumes:
        return None
    csinode = snapshot.csinodes.get(ni.node.name)
    drivers = csinode.drivers if csinode is not None else ni.node.csi_volume_limits
    if not drivers:
        return None
    wanted: dict[str, set[str]] = {}
    for driver, vid in snapshot.csi_volumes_of(pod):
        wanted.setdefault(driver, set()).add(vid)
    for driver, vids in wanted.items():
        limit = drivers.get(driver)
        if limit is None:
            continue
        used = ni.csi_volumes.get(driver, {})
        new = sum(1 for vid in vids if vid not in used)
        if new and len(used) + new > limit:
            return REASON_VOLUME_LIMIT
    return None


# --------------------------------------------------------------------------- inter-pod affinity


# Every pending pod with spread or affinity terms keeps up to two entries (its references
# to the indexes) for as long as they live: the bound must hold a large backlog's worth, or
# each estimate would rebuild them all after clearing.
_CACHE_LIMIT = 250_000


def _remember(snapshot: ClusterSnapshot, key: object, value: object) -> None:
    # From-scratch entries are only valid for one generation; bound the cache rather than
    # track them.
    if len(snapshot.cache) > _CACHE_LIMIT:
        snapshot.cache.clear()
    snapshot.cache[key] = value


_Label = tuple[str, str]


def _label_gate(ways: Iterable[LabelSelector | None]) -> frozenset[_Label] | None:
    """Labels a pod needs one of to count for a watcher that counts pods matching any of
    `ways` (`ClusterSnapshot.watch`'s `labels`); `None` when every pod may count."""
    gate: set[_Label] = set()
    for selector in ways:
        if selector is None:
            continue  # matches no pod
        if not selector.match_labels:
            return None
        # Any of its labels is necessary; the first will do.
        gate.add(selector.match_labels[0])
    return frozenset(gate)


def _term_candidates(
    term: PodAffinityTerm, owner_namespace: str, snapshot: ClusterSnapshot
) -> Iterable[tuple[Pod, str]]:
    """Pods that may match `term`: those in the namespaces the term selects."""
    if term.namespace_selector is not None:
        labels = snapshot.namespace_labels
        for ns in list(snapshot.namespaces()):
            if term.matches_namespace(ns, labels):
                yield from snapshot.pods_in_namespace(ns)
        return
    for ns in term.namespaces:
        yield from snapshot.pods_in_namespace(ns)


@dataclass(slots=True)
class _AffinityState:
    affinity_counts: dict[tuple[str, str], int]
    anti_counts: dict[tuple[str, str], int]
    existing_anti: dict[tuple[str, str], int]
    matches_own_terms: bool
    # Existing pods' anti-affinity terms matching the pod, as (topology key, value ->
    # pods): the incremental form of `existing_anti`.
    existing_terms: list[tuple[str, dict[str, int]]] = field(default_factory=list)


def _affinity_state_scratch(pod: Pod, snapshot: ClusterSnapshot) -> _AffinityState:
    """The affinity state computed from every candidate pod (the reference answer)."""
    key = ("affinity-scratch", id(pod))
    cached = snapshot.cache.get(key)
    if cached is not None and cached[0] is pod and cached[1] == snapshot.generation:
        state: _AffinityState = cached[2]
        return state
    nsl = snapshot.namespace_labels
    affinity_counts: dict[tuple[str, str], int] = {}
    anti_counts: dict[tuple[str, str], int] = {}
    existing_anti: dict[tuple[str, str], int] = {}
    terms = pod.affinity.pod if pod.affinity is not None else None
    own_key = pod.namespace + "/" + pod.name
    if terms is not None and terms.affinity:
        first = terms.affinity[0]
        for other, node_name in _term_candidates(first, pod.namespace, snapshot):
            if other.namespace + "/" + other.name == own_key:
                continue
            if all(t.matches_pod(other, nsl) for t in terms.affinity):
                labels = snapshot.get(node_name).node.labels
                for t in terms.affinity:
                    value = labels.get(t.topology_key)
                    if value is not None:
                        pair = (t.topology_key, value)
                        affinity_counts[pair] = affinity_counts.get(pair, 0) + 1
    if terms is not None and terms.anti_affinity:
        for t in terms.anti_affinity:
            for other, node_name in _term_candidates(t, pod.namespace, snapshot):
                if other.namespace + "/" + other.name == own_key:
                    continue
                if t.matches_pod(other, nsl):
                    value = snapshot.get(node_name).node.labels.get(t.topology_key)
                    if value is not None:
                        pair = (t.topology_key, value)
                        anti_counts[pair] = anti_counts.get(pair, 0) + 1
    for other, node_name in snapshot.anti_affinity_pods():
        if other.namespace + "/" + other.name == own_key:
            continue
        other_terms = other.affinity.pod if other.affinity is not None else None
        if other_terms is None:
            continue
        for t in other_terms.anti_affinity:
            if t.matches_pod(pod, nsl):
                value = snapshot.get(node_name).node.labels.get(t.topology_key)
                if value is not None:
                    pair = (t.topology_key, value)
                    existing_anti[pair] = existing_anti.get(pair, 0) + 1
    matches_own = terms is not None and all(t.matches_pod(pod, nsl) for t in terms.affinity)
    state = _AffinityState(affinity_counts, anti_counts, existing_anti, matches_own)
    _remember(snapshot, key, (pod, snapshot.generation, state))
    return state


class _OwnTermsIndex:
    """Pods matching one set of required (anti-)affinity terms, by topology domain.

    `affinity_counts` counts pods matching every affinity term, once per term whose
    topology key their node has; `anti_counts` counts, per anti-affinity term, the pods
    matching it. Both keep only positive entries, as the from-scratch state does.
    """

    __slots__ = ("affinity", "affinity_counts", "anti", "anti_counts", "nsl")

    def __init__(
        self,
        affinity: tuple[PodAffinityTerm, ...],
        anti: tuple[PodAffinityTerm, ...],
        nsl: Mapping[str, Mapping[str, str]],
    ) -> None:
        self.affinity = affinity
        self.anti = anti
        self.nsl = nsl
        self.affinity_counts: dict[tuple[str, str], int] = {}
        self.anti_counts: dict[tuple[str, str], int] = {}

    def interest(self, pod: Pod) -> tuple[bool, tuple[PodAffinityTerm, ...]] | None:
        nsl = self.nsl
        matches_affinity = bool(self.affinity) and all(
            t.matches_pod(pod, nsl) for t in self.affinity
        )
        anti = tuple(t for t in self.anti if t.matches_pod(pod, nsl))
        if not matches_affinity and not anti:
            return None
        return matches_affinity, anti

    def pod_changed(
        self, pod: Pod, plan: tuple[bool, tuple[PodAffinityTerm, ...]], node: Node, sign: int
    ) -> None:
        labels = node.labels
        matches_affinity, anti = plan
        if matches_affinity:
            for t in self.affinity:
                value = labels.get(t.topology_key)
                if value is not None:
                    _bump(self.affinity_counts, (t.topology_key, value), sign)
        for t in anti:
            value = labels.get(t.topology_key)
            if value is not None:
                _bump(self.anti_counts, (t.topology_key, value), sign)

    def node_changed(self, ni: SimNodeInfo, sign: int) -> None:
        for pod in ni.pods.values():
            plan = self.interest(pod)
            if plan is not None:
                self.pod_changed(pod, plan, ni.node, sign)


class _ExistingAntiIndex:
    """Required anti-affinity terms of the pods in the snapshot: term -> value -> pods.

    `version` is the number of terms seen so far: a term is never forgotten (its counts
    may drop to nothing), so per-pod lists of matching terms only need to look at the
    terms past the version they were made at (`order[version:]`).
    """

    __slots__ = ("order", "terms", "version")

    def __init__(self) -> None:
        self.terms: dict[PodAffinityTerm, dict[str, int]] = {}
        self.order: list[tuple[PodAffinityTerm, dict[str, int]]] = []
        self.version = 0

    def interest(self, pod: Pod) -> tuple[PodAffinityTerm, ...] | None:
        terms = pod.affinity.pod if pod.affinity is not None else None
        if terms is None or not terms.anti_affinity:
            return None
        return terms.anti_affinity

    def pod_changed(
        self, pod: Pod, plan: tuple[PodAffinityTerm, ...], node: Node, sign: int
    ) -> None:
        labels = node.labels
        for t in plan:
            counts = self.terms.get(t)
            if counts is None:
                counts = self.terms[t] = {}
                self.order.append((t, counts))
                self.version += 1
            value = labels.get(t.topology_key)
            if value is not None:
                _bump(counts, value, sign)

    def node_changed(self, ni: SimNodeInfo, sign: int) -> None:
        for pod in ni.pods.values():
            plan = self.interest(pod)
            if plan is not None:
                self.pod_changed(pod, plan, ni.node, sign)


def _bump(counts: dict[Any, int], key: Any, sign: int) -> None:
    n = counts.get(key, 0) + sign
    if n > 0:
        counts[key] = n
    else:
        counts.pop(key, None)


_NO_COUNTS: dict[tuple[str, str], int] = {}


class _AffinityRefs:
    """What one pod needs from the affinity indexes, kept while they live."""

    __slots__ = (
        "epoch",
        "existing",
        "matches_own",
        "matching",
        "own",
        "own_key",
        "pod",
        "state",
        "version",
    )

    def __init__(
        self,
        pod: Pod,
        epoch: int,
        own: _OwnTermsIndex | None,
        existing: _ExistingAntiIndex,
        matches_own: bool,
        own_key: str,
    ) -> None:
        self.pod = pod
        self.epoch = epoch
        self.own = own
        self.existing = existing
        self.matches_own = matches_own
        self.own_key = own_key
        # How many of the existing index's terms `matching` has looked at.
        self.version = 0
        self.matching: list[tuple[str, dict[str, int]]] = []
        # Built when `matching` is; its counts are the indexes' own, so it stays current.
        self.state: _AffinityState | None = None


def _affinity_refs(pod: Pod, snapshot: ClusterSnapshot) -> _AffinityRefs:
    """The pod's references to the affinity indexes, registering them if new."""
    key = ("affinity", id(pod))
    cached = snapshot.cache.get(key)
    if cached is not None and cached.pod is pod and cached.epoch == snapshot.watch_epoch:
        refs: _AffinityRefs = cached
        return refs
    terms = pod.affinity.pod if pod.affinity is not None else None
    own: _OwnTermsIndex | None = None
    nsl = snapshot.namespace_labels
    if terms is not None and (terms.affinity or terms.anti_affinity):
        every = terms.affinity + terms.anti_affinity
        namespaces: set[str] | None = set()
        for t in every:
            if t.namespace_selector is not None:
                namespaces = None
                break
            assert namespaces is not None
            namespaces.update(t.namespaces)
        # A pod counts when it matches every affinity term (so the first's label is
        # necessary, if it has one) or any anti-affinity term.
        ways = [t.label_selector for t in terms.anti_affinity]
        if terms.affinity:
            labelled = [
                t.label_selector
                for t in terms.affinity
                if t.label_selector is None or t.label_selector.match_labels
            ]
            ways.append(labelled[0] if labelled else LabelSelector(()))
        own = snapshot.watch(
            ("pod-affinity", terms.affinity, terms.anti_affinity),
            lambda: _OwnTermsIndex(terms.affinity, terms.anti_affinity, nsl),
            namespaces=namespaces,
            labels=_label_gate(ways),
        )
    existing = snapshot.watch("existing-anti-affinity", _ExistingAntiIndex, anti_affinity_only=True)
    matches_own = terms is not None and all(t.matches_pod(pod, nsl) for t in terms.affinity)
    refs = _AffinityRefs(
        pod, snapshot.watch_epoch, own, existing, matches_own, pod.namespace + "/" + pod.name
    )
    _remember(snapshot, key, refs)
    return refs


def _refresh_matching(refs: _AffinityRefs, pod: Pod, snapshot: ClusterSnapshot) -> None:
    """Bring the pod's list of the existing anti-affinity terms selecting it up to date."""
    existing = refs.existing
    if refs.version != existing.version:
        nsl = snapshot.namespace_labels
        # Only the terms seen since the list was made can add to it.
        refs.matching.extend(
            (t.topology_key, counts)
            for t, counts in existing.order[refs.version :]
            if t.matches_pod(pod, nsl)
        )
        refs.version = existing.version


def selected_by_existing_anti_affinity(pod: Pod, snapshot: ClusterSnapshot) -> bool:
    """Whether a required anti-affinity term of a pod in the snapshot (or one that was)
    selects `pod`: unless one does, other pods' anti-affinity never rejects it."""
    if not snapshot.has_anti_affinity_pods:
        return False
    refs = _affinity_refs(pod, snapshot)
    _refresh_matching(refs, pod, snapshot)
    return bool(refs.matching)


def _affinity_state(pod: Pod, snapshot: ClusterSnapshot) -> _AffinityState:
    """The affinity state from the snapshot's incremental indexes.

    A pod that is itself in the snapshot must not count itself; that rare case (a pod
    checked where it already runs) takes the from-scratch path.
    """
    refs = _affinity_refs(pod, snapshot)
    if refs.own_key in snapshot._pod_node:
        return _affinity_state_scratch(pod, snapshot)
    state = refs.state
    if state is None or refs.version != refs.existing.version:
        _refresh_matching(refs, pod, snapshot)
        own = refs.own
        state = refs.state = _AffinityState(
            own.affinity_counts if own is not None else _NO_COUNTS,
            own.anti_counts if own is not None else _NO_COUNTS,
            _NO_COUNTS,
            refs.matches_own,
            refs.matching,
        )
    return state


def check_inter_pod_affinity(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    """Required pod affinity, anti-affinity, and existing pods' anti-affinity (symmetry)."""
    terms = pod.affinity.pod if pod.affinity is not None else None
    if terms is None and not snapshot.has_anti_affinity_pods:
        return None
    state = _affinity_state(pod, snapshot)
    labels = ni.node.labels
    if terms is not None and terms.affinity:
        pods_exist = True
        for t in terms.affinity:
            value = labels.get(t.topology_key)
            if value is None:
                return REASON_AFFINITY
            if state.affinity_counts.get((t.topology_key, value), 0) <= 0:
                pods_exist = False
        # The first pod of a group that selects itself may go anywhere the terms allow.
        if not pods_exist and not (not state.affinity_counts and state.matches_own_terms):
            return REASON_AFFINITY
    if terms is not None and terms.anti_affinity:
        for t in terms.anti_affinity:
            value = labels.get(t.topology_key)
            if value is not None and state.anti_counts.get((t.topology_key, value), 0) > 0:
                return REASON_ANTI_AFFINITY
    if state.existing_anti:
        for k, v in labels.items():
            if state.existing_anti.get((k, v), 0) > 0:
                return REASON_EXISTING_ANTI_AFFINITY
    for topology_key, counts in state.existing_terms:
        value = labels.get(topology_key)
        if value is not None and counts.get(value, 0) > 0:
            return REASON_EXISTING_ANTI_AFFINITY
    return None


# --------------------------------------------------------------------------- topology spread


@dataclass(slots=True)
class _SpreadState:
    constraints: tuple[TopologySpreadConstraint, ...]
    # per constraint: eligible domain -> matching pods, and the minimum over them
    counts: Sequence[Mapping[str, int]]
    minimum: list[int]
    self_match: list[int]


def _spread_state_scratch(pod: Pod, snapshot: ClusterSnapshot) -> _SpreadState:
    """The spread state computed from every node and pod (the reference answer)."""
    key = ("spread-scratch", id(pod))
    cached = snapshot.cache.get(key)
    if cached is not None and cached[0] is pod and cached[1] == snapshot.generation:
        state: _SpreadState = cached[2]
        return state
    constraints = tuple(c for c in pod.topology_spread if c.when_unsatisfiable == "DoNotSchedule")
    all_keys = [c.topology_key for c in constraints]
    counts: list[dict[str, int]] = [{} for _ in constraints]
    affinity_ok: dict[str, bool] = {}
    taints_ok: dict[str, bool] = {}

    def eligible(c: TopologySpreadConstraint, node: Node) -> bool:
        labels = node.labels
        if any(k not in labels for k in all_keys):
            return False
        if c.node_affinity_policy == "Honor":
            ok = affinity_ok.get(node.name)
            if ok is None:
                ok = affinity_ok[node.name] = pod_matches_node_affinity(pod, node)
            if not ok:
                return False
        if c.node_taints_policy == "Honor":
            ok = taints_ok.get(node.name)
            if ok is None:
                ok = taints_ok[node.name] = tolerates_taints(pod, node.taints) is None
            if not ok:
                return False
        return True

    # Domains of eligible nodes exist even with no matching pod: they drive the minimum.
    for ni in snapshot.node_infos():
        for i, c in enumerate(constraints):
            if eligible(c, ni.node):
                counts[i].setdefault(ni.node.labels[c.topology_key], 0)
    own_key = pod.namespace + "/" + pod.name
    for other, node_name in snapshot.pods_in_namespace(pod.namespace):
        if other.deletion_time is not None or other.namespace + "/" + other.name == own_key:
            continue
        node = snapshot.get(node_name).node
        for i, c in enumerate(constraints):
            if c.label_selector is None or not c.label_selector.matches(other.labels):
                continue
            if eligible(c, node):
                value = node.labels[c.topology_key]
                counts[i][value] = counts[i].get(value, 0) + 1
    minimum = []
    self_match = []
    for i, c in enumerate(constraints):
        domain_counts = counts[i]
        low = min(domain_counts.values()) if domain_counts else 0
        if c.min_domains is not None and len(domain_counts) < c.min_domains:
            # Fewer domains than required: the missing ones count as empty.
            low = 0
        minimum.append(low)
        self_match.append(
            1 if c.label_selector is not None and c.label_selector.matches(pod.labels) else 0
        )
    state = _SpreadState(constraints, counts, minimum, self_match)
    _remember(snapshot, key, (pod, snapshot.generation, state))
    return state


class _SpreadDomains:
    """The eligible nodes of one topology spread constraint shape, by domain.

    Eligibility depends only on the node and on what the constraint honours (the pod
    shape's node selector and required node affinity, its tolerations), and every
    constraint also needs the node to carry all of its pod's topology keys. Workloads
    whose constraints agree on these share one registry, so a node joining or leaving
    (template nodes, on every estimate) costs one update per registry rather than one per
    workload. Registered with `empty_nodes=True`: the only watcher kind that needs nodes
    without pods.
    """

    __slots__ = (
        "all_keys",
        "domain_nodes",
        "domain_of",
        "honor_affinity",
        "honor_taints",
        "shape",
        "topology_key",
    )

    def __init__(
        self,
        shape: Pod,
        constraint: TopologySpreadConstraint,
        all_keys: tuple[str, ...],
    ) -> None:
        self.shape = shape
        self.topology_key = constraint.topology_key
        self.all_keys = all_keys
        self.honor_affinity = constraint.node_affinity_policy == "Honor"
        self.honor_taints = constraint.node_taints_policy == "Honor"
        # node name -> domain, and domain -> eligible nodes (a domain exists while it has one)
        self.domain_of: dict[str, str] = {}
        self.domain_nodes: dict[str, int] = {}

    @staticmethod
    def key(
        shape: Pod, constraint: TopologySpreadConstraint, all_keys: tuple[str, ...]
    ) -> tuple[Any, ...]:
        """The registry key: everything `node_changed` decides eligibility with."""
        honor_affinity = constraint.node_affinity_policy == "Honor"
        honor_taints = constraint.node_taints_policy == "Honor"
        node_affinity = shape.affinity.node if shape.affinity is not None else None
        # The policies themselves too: honouring taints without tolerations is not ignoring them.
        return (
            "topology-spread-domains",
            constraint.topology_key,
            tuple(sorted(set(all_keys))),
            honor_affinity,
            tuple(sorted(shape.node_selector.items())) if honor_affinity else (),
            node_affinity.required if honor_affinity and node_affinity is not None else None,
            honor_taints,
            shape.tolerations if honor_taints else (),
        )

    def interest(self, pod: Pod) -> None:
        return None

    def pod_changed(self, pod: Pod, plan: Any, node: Node, sign: int) -> None:
        return None

    def node_changed(self, ni: SimNodeInfo, sign: int) -> None:
        node = ni.node
        labels = node.labels
        for k in self.all_keys:
            if k not in labels:
                return
        if self.honor_affinity and not pod_matches_node_affinity(self.shape, node):
            return
        if self.honor_taints and tolerates_taints(self.shape, node.taints) is not None:
            return
        value = labels[self.topology_key]
        nodes = self.domain_nodes
        if sign > 0:
            self.domain_of[node.name] = value
            nodes[value] = nodes.get(value, 0) + 1
        else:
            del self.domain_of[node.name]
            left = nodes[value] - 1
            if left:
                nodes[value] = left
            else:
                del nodes[value]


class _DomainCounts(Mapping[str, int]):
    """Matching pods per eligible domain of one constraint, zero included: a live view
    joining a registry's domains with an index's positive counts."""

    __slots__ = ("_domains", "_positive")

    def __init__(self, domains: _SpreadDomains, positive: dict[str, int]) -> None:
        self._domains = domains.domain_nodes
        self._positive = positive

    def get(self, value: str, default: Any = None) -> Any:
        n = self._positive.get(value)
        if n is not None:
            return n
        return 0 if value in self._domains else default

    def __getitem__(self, value: str) -> int:
        n = self._positive.get(value)
        if n is not None:
            return n
        if value in self._domains:
            return 0
        raise KeyError(value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._domains)

    def __len__(self) -> int:
        return len(self._domains)


class _SpreadIndex:
    """Pods matching each topology spread constraint of one pod shape, by domain.

    The shape is the namespace, the constraints and what decides which nodes count (node
    selector and required node affinity, tolerations): every pod of a workload shares one.
    Per constraint: the registry of eligible domains (shared with other shapes), the
    matching pods per domain where there are any, and how many domains have each positive
    count. A domain without matching pods has count 0, so the minimum is 0 while the
    registry has more domains than the index has counts, else the smallest count in the
    histogram: neither needs a scan of the domains.
    """

    __slots__ = ("constraints", "counts", "domains", "histogram", "namespace", "views")

    def __init__(
        self,
        shape: Pod,
        constraints: tuple[TopologySpreadConstraint, ...],
        domains: list[_SpreadDomains],
    ) -> None:
        self.namespace = shape.namespace
        self.constraints = constraints
        self.domains = domains
        n = len(constraints)
        self.counts: list[dict[str, int]] = [{} for _ in range(n)]
        self.histogram: list[dict[int, int]] = [{} for _ in range(n)]
        self.views = [_DomainCounts(d, c) for d, c in zip(domains, self.counts, strict=True)]

    def interest(self, pod: Pod) -> tuple[int, ...] | None:
        """The constraints whose selector matches `pod`, if the pod counts at all."""
        if pod.namespace != self.namespace or pod.deletion_time is not None:
            return None
        labels = pod.labels
        matching = tuple(
            i
            for i, c in enumerate(self.constraints)
            if c.label_selector is not None and c.label_selector.matches(labels)
        )
        return matching or None

    def pod_changed(self, pod: Pod, plan: tuple[int, ...], node: Node, sign: int) -> None:
        name = node.name
        for i in plan:
            value = self.domains[i].domain_of.get(name)
            if value is None:
                continue
            counts = self.counts[i]
            hist = self.histogram[i]
            old = counts.get(value, 0)
            new = old + sign
            if old:
                _bump(hist, old, -1)
            if new:
                counts[value] = new
                hist[new] = hist.get(new, 0) + 1
            else:
                del counts[value]

    def node_changed(self, ni: SimNodeInfo, sign: int) -> None:
        # The registries hear about the node first when it joins and last when it leaves
        # (the snapshot's notification order), so its domain is known either way.
        node = ni.node
        for pod in ni.pods.values():
            plan = self.interest(pod)
            if plan is not None:
                self.pod_changed(pod, plan, node, sign)

    def minimums(self) -> list[int]:
        out = []
        for i, c in enumerate(self.constraints):
            domains = len(self.domains[i].domain_nodes)
            if (c.min_domains is not None and domains < c.min_domains) or len(
                self.counts[i]
            ) < domains:
                # A domain without matching pods, or fewer domains than required (the
                # missing ones count as empty).
                out.append(0)
            else:
                hist = self.histogram[i]
                out.append(min(hist) if hist else 0)
        return out


class _SpreadRefs:
    """What one pod needs from its spread index, kept while the index lives."""

    __slots__ = ("epoch", "index", "own_key", "pod", "self_match")

    def __init__(
        self, pod: Pod, epoch: int, index: _SpreadIndex, self_match: list[int], own_key: str
    ) -> None:
        self.pod = pod
        self.epoch = epoch
        self.index = index
        self.self_match = self_match
        self.own_key = own_key


def _watch_spread_index(
    pod: Pod, constraints: tuple[TopologySpreadConstraint, ...], snapshot: ClusterSnapshot
) -> _SpreadIndex:
    honor_taints = any(c.node_taints_policy == "Honor" for c in constraints)
    node_affinity = pod.affinity.node if pod.affinity is not None else None
    shape = (
        "topology-spread",
        pod.namespace,
        constraints,
        tuple(sorted(pod.node_selector.items())),
        node_affinity.required if node_affinity is not None else None,
        pod.tolerations if honor_taints else (),
    )
    all_keys = tuple(c.topology_key for c in constraints)
    while True:
        # Registering a watcher may drop every watcher (the snapshot's bound on them);
        # then registries fetched before belong to the old epoch: fetch them again.
        epoch = snapshot.watch_epoch
        domains = [
            snapshot.watch(
                _SpreadDomains.key(pod, c, all_keys),
                partial(_SpreadDomains, pod, c, all_keys),
                namespaces=(),
                empty_nodes=True,
            )
            for c in constraints
        ]
        index = snapshot.watch(
            shape,
            partial(_SpreadIndex, pod, constraints, domains),
            namespaces=(pod.namespace,),
            labels=_label_gate(c.label_selector for c in constraints),
        )
        if snapshot.watch_epoch == epoch:
            return index


def _spread_refs(pod: Pod, snapshot: ClusterSnapshot) -> _SpreadRefs:
    """The pod's references to its spread index, registering it if new."""
    key = ("spread", id(pod))
    cached = snapshot.cache.get(key)
    if cached is not None and cached.pod is pod and cached.epoch == snapshot.watch_epoch:
        refs: _SpreadRefs = cached
        return refs
    constraints = tuple(c for c in pod.topology_spread if c.when_unsatisfiable == "DoNotSchedule")
    index = _watch_spread_index(pod, constraints, snapshot)
    self_match = [
        1 if c.label_selector is not None and c.label_selector.matches(pod.labels) else 0
        for c in constraints
    ]
    refs = _SpreadRefs(pod, snapshot.watch_epoch, index, self_match, pod.namespace + "/" + pod.name)
    _remember(snapshot, key, refs)
    return refs


def _spread_state(pod: Pod, snapshot: ClusterSnapshot) -> _SpreadState:
    """The spread state from the snapshot's incremental index for the pod's shape.

    A pod that is itself in the snapshot must not count itself; that rare case takes the
    from-scratch path.
    """
    refs = _spread_refs(pod, snapshot)
    if refs.own_key in snapshot._pod_node:
        return _spread_state_scratch(pod, snapshot)
    index = refs.index
    return _SpreadState(index.constraints, index.views, index.minimums(), refs.self_match)


def prepare_indexes(pod: Pod, snapshot: ClusterSnapshot) -> None:
    """Register the incremental indexes `pod`'s checks will read, if not yet there.

    An index is filled from the nodes and pods of the snapshot when it is registered, so
    a caller about to add many nodes and pods and check pods on them (the estimator)
    calls this first, for one pod of each group: the index is then filled from the
    snapshot as it is, not from a snapshot full of simulated pods to replay. Checks give
    the same answers either way.
    """
    if pod.topology_spread and any(
        c.when_unsatisfiable == "DoNotSchedule" for c in pod.topology_spread
    ):
        _spread_refs(pod, snapshot)
    if (pod.affinity is not None and pod.affinity.pod is not None) or (
        snapshot.has_anti_affinity_pods
    ):
        _affinity_refs(pod, snapshot)


def pod_affinity_cannot_reject(
    pod: Pod, labels: Mapping[str, str], snapshot: ClusterSnapshot
) -> bool:
    """Whether `pod`'s required pod affinity never rejects it from nodes with `labels`,
    however many pods like it join them (it has no anti-affinity terms of its own).

    So it is when, in the domains of `labels`, pods matching every term already run, or
    when no pod matches anywhere and the pod matches its own terms: the first such pod
    may go anywhere, and then the pods matching run where it went.
    """
    terms = pod.affinity.pod if pod.affinity is not None else None
    if terms is None or terms.anti_affinity:
        return False
    if not terms.affinity:
        return True
    refs = _affinity_refs(pod, snapshot)
    if refs.own_key in snapshot._pod_node or refs.own is None:
        return False
    counts = refs.own.affinity_counts
    domains = []
    for t in terms.affinity:
        value = labels.get(t.topology_key)
        if value is None:
            return False
        domains.append((t.topology_key, value))
    if all(counts.get(domain, 0) > 0 for domain in domains):
        return True
    return not counts and refs.matches_own


def spread_cannot_reject(pod: Pod, labels: Mapping[str, str], snapshot: ClusterSnapshot) -> bool:
    """Whether `pod`'s topology spread never rejects it from nodes with `labels`, however
    many pods like it join them, while only nodes with these labels join the snapshot.

    So it is when every constraint (whenUnsatisfiable=DoNotSchedule) has at most one
    domain, the one of `labels`, and asks for no more domains than that: the domain's count
    is then the minimum, and a pod raises the skew to at most 1.
    """
    refs = _spread_refs(pod, snapshot)
    if refs.own_key in snapshot._pod_node:
        return False
    index = refs.index
    for i, c in enumerate(index.constraints):
        value = labels.get(c.topology_key)
        if value is None or c.max_skew < 1 or (c.min_domains is not None and c.min_domains > 1):
            return False
        domains = index.domains[i].domain_nodes
        if len(domains) > 1 or (domains and value not in domains):
            return False
    return True


def check_topology_spread(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    """Topology spread constraints with whenUnsatisfiable=DoNotSchedule."""
    if not pod.topology_spread:
        return None
    refs = _spread_refs(pod, snapshot)
    counts: Sequence[Mapping[str, int]]
    if refs.own_key in snapshot._pod_node:
        state = _spread_state_scratch(pod, snapshot)
        constraints, counts, minimum = state.constraints, state.counts, state.minimum
    else:
        # The index's positive counts answer as its views do: a domain without matching
        # pods, eligible or not, counts 0.
        index = refs.index
        constraints, counts, minimum = index.constraints, index.counts, index.minimums()
    self_match = refs.self_match
    labels = ni.node.labels
    for i, c in enumerate(constraints):
        value = labels.get(c.topology_key)
        if value is None:
            return REASON_SPREAD_MISSING_LABEL
        skew = counts[i].get(value, 0) + self_match[i] - minimum[i]
        if skew > c.max_skew:
            return REASON_SPREAD
    return None


def check_dynamic_resources(pod: Pod, node_info: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    """DynamicResources: the pod's claims can be allocated on this node (or are already
    allocated where this node is)."""
    if not pod.resource_claims:
        return None
    dra = snapshot.dra
    if dra is None:
        return f"{REASON_DRA}: the cluster has no ResourceSlices, ResourceClaims or templates"
    return dra.unfit(pod, node_info.node)


# --------------------------------------------------------------------------- all together

PREDICATES: tuple[tuple[str, Predicate], ...] = (
    ("NodeUnschedulable", check_unschedulable),
    ("NodeName", check_node_name),
    ("TaintToleration", check_taints),
    ("NodeAffinity", check_node_affinity),
    ("NodePorts", check_host_ports),
    ("NodeResourcesFit", check_resources),
    ("VolumeRestrictions", check_volume_restrictions),
    ("NodeVolumeLimits", check_volume_limits),
    ("VolumeBinding", check_volumes),
    ("PodTopologySpread", check_topology_spread),
    ("InterPodAffinity", check_inter_pod_affinity),
    ("DynamicResources", check_dynamic_resources),
)


def check_predicates(pod: Pod, node_info: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
    """`None` when `pod` fits `node_info`, else the first failing filter's reason."""
    filters = snapshot.filters
    if filters is not None:
        # The scheduler's configuration changed the filters: run the ones it keeps.
        for _name, predicate in filters:
            reason = predicate(pod, node_info, snapshot)
            if reason:
                return reason
        return None
    node = node_info.node
    # Inline the checks every pod needs; call out only for what the pod or node uses.
    if node.unschedulable and check_unschedulable(pod, node_info, snapshot):
        return REASON_UNSCHEDULABLE
    if pod.node_name and pod.node_name != node.name:
        return REASON_NODE_NAME
    if node.taints:
        reason = check_taints(pod, node_info, snapshot)
        if reason:
            return reason
    if (pod.node_selector or pod.affinity is not None) and not pod_matches_node_affinity(pod, node):
        return REASON_NODE_AFFINITY
    if pod.host_ports and node_info.ports and check_host_ports(pod, node_info, snapshot):
        return REASON_PORTS
    r = pod.requests
    alloc = node.allocatable
    if (
        node_info.req_cpu + r.cpu > alloc.cpu
        or node_info.req_memory + r.memory > alloc.memory
        or node_info.req_pods + r.pods > alloc.pods
        or (
            r.ephemeral_storage
            and node_info.req_eph + r.ephemeral_storage > alloc.ephemeral_storage
        )
        or r.extended
    ):
        reason = check_resources(pod, node_info, snapshot)
        if reason:
            return reason
    if pod.volumes:
        reason = (
            check_volume_restrictions(pod, node_info, snapshot)
            or check_volume_limits(pod, node_info, snapshot)
            or check_volumes(pod, node_info, snapshot)
        )
        if reason:
            return reason
    if pod.topology_spread:
        reason = check_topology_spread(pod, node_info, snapshot)
        if reason:
            return reason
    if pod.affinity is not None or snapshot._anti_affinity:
        reason = check_inter_pod_affinity(pod, node_info, snapshot)
        if reason:
            return reason
    if pod.resource_claims:
        return check_dynamic_resources(pod, node_info, snapshot)
    return None



def failing_predicates(
    pod: Pod, node_info: SimNodeInfo, snapshot: ClusterSnapshot
) -> Mapping[str, str]:
    """Every failing filter by name with its reason, for explanations."""
    out: dict[str, str] = {}
    filters = snapshot.filters
    for name, predicate in PREDICATES if filters is None else filters:
        reason = predicate(pod, node_info, snapshot)
        if reason:
            out[name] = reason
    return out
