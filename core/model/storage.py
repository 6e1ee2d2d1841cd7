"""PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSINodes, for the volume predicates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.model.common import (
    ModelError,
    _dict,
    _int,
    _list,
    _meta,
    _str_list,
    _str_map,
)
from clusterscaler.model.resources import Resources
from clusterscaler.model.scheduling import (
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    _parse_owners,
    parse_label_selector,
    parse_node_selector_terms,
)

# The annotations the persistent-volume controller and kube-scheduler write on a claim:
# binding finished (only then does kube-scheduler count the claim as bound), and the node
# kube-scheduler chose for a claim of a WaitForFirstConsumer class.
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
# The provisioner of a class whose claims only bind to existing volumes (local volumes).
NO_PROVISIONER = "kubernetes.io/no-provisioner"

# --------------------------------------------------------------------------- storage


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    storage_class: str = ""
    capacity: int = 0
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    claim_ref: str = ""
    csi_driver: str = ""
    phase: str = ""
    # The claim's UID when the reference names one: a volume pre-bound to a claim of that
    # name that was deleted and made again is not the new claim's.
    claim_uid: str = ""
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    deleting: bool = False

    def __hash__(self) -> int:
        return hash((self.name, self.uid))

    def bound_to(self, claim: PersistentVolumeClaim) -> bool:
        """Whether the volume is pre-bound or bound to `claim` (`IsVolumeBoundToClaim`)."""
        return (
            self.claim_ref == claim.key
            and (not self.claim_uid or self.claim_uid == claim.uid)
        )


def parse_pv(raw: Mapping[str, Any]) -> PersistentVolume:
    meta, obj = _meta(raw, "PersistentVolume", namespaced=False)
    spec = _dict(raw.get("spec"), obj, "spec")
    status = _dict(raw.get("status"), obj, "status")
    capacity = Resources.from_k8s(spec.get("capacity"), obj=obj, field="spec.capacity")
    affinity = None
    na = spec.get("nodeAffinity")
    if na:
        required = _dict(
            _dict(na, obj, "spec.nodeAffinity").get("required"), obj, "spec.nodeAffinity.required"
        )
        affinity = parse_node_selector_terms(
            required.get("nodeSelectorTerms"), obj, "spec.nodeAffinity.required.nodeSelectorTerms"
        )
    claim = _dict(spec.get("claimRef"), obj, "spec.claimRef")
    csi = _dict(spec.get("csi"), obj, "spec.csi")
    return PersistentVolume(
        name=meta["name"],
        uid=meta.get("uid") or "",
        labels=_str_map(meta.get("labels"), obj, "metadata.labels"),
        storage_class=spec.get("storageClassName") or "",
        capacity=capacity.ephemeral_storage or capacity.extended.get("storage", 0),
        node_affinity=affinity,
        claim_ref=f"{claim.get('namespace') or 'default'}/{claim['name']}"
        if claim.get("name")
        else "",
        csi_driver=csi.get("driver") or "",
        phase=status.get("phase") or "",
        claim_uid=claim.get("uid") or "",
        access_modes=tuple(_str_list(spec.get("accessModes"), obj, "spec.accessModes")),
        volume_mode=spec.get("volumeMode") or "Filesystem",
        deleting=bool(meta.get("deletionTimestamp")),
    )


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str = ""
    storage_class: str = ""
    volume_name: str = ""
    phase: str = "Pending"
    requested: int = 0
    annotations: Mapping[str, str] = field(default_factory=dict)
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    # Which volumes may bind the claim; `None` (absent) means any.
    selector: LabelSelector | None = None
    # metadata.deletionTimestamp is set: kube-scheduler places no pod using the claim.
    deleting: bool = False
    # The UID of the claim's controller owner ("" for none): a generic ephemeral volume's
    # claim serves only the pod that controls it.
    controller_uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """Bound to its volume as kube-scheduler counts it: named and the binding completed
        (`isPVCFullyBound`). A claim that only names its volume (pre-bound by its author)
        is not bound until the persistent-volume controller finishes; a claim whose status
        says Bound counts as bound, as the controller writes the annotation first."""
        return bool(self.volume_name) and (
            ANN_BIND_COMPLETED in self.annotations or self.phase == "Bound"
        )

    @property
    def read_write_once_pod(self) -> bool:
        """Only one pod in the whole cluster may use the claim."""
        return "ReadWriteOncePod" in self.access_modes

    def __hash__(self) -> int:
        return hash((self.namespace, self.name, self.uid))


def parse_pvc(raw: Mapping[str, Any]) -> PersistentVolumeClaim:
    meta, obj = _meta(raw, "PersistentVolumeClaim", namespaced=True)
    spec = _dict(raw.get("spec"), obj, "spec")
    status = _dict(raw.get("status"), obj, "status")
    resources = _dict(spec.get("resources"), obj, "spec.resources")
    requests = Resources.from_k8s(
        resources.get("requests"), obj=obj, field="spec.resources.requests"
    )
    return PersistentVolumeClaim(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        uid=meta.get("uid") or "",
        storage_class=spec.get("storageClassName") or "",
        volume_name=spec.get("volumeName") or "",
        phase=status.get("phase") or "Pending",
        requested=requests.extended.get("storage", 0),
        annotations=_str_map(meta.get("annotations"), obj, "metadata.annotations"),
        access_modes=tuple(str(m) for m in _list(spec.get("accessModes"), obj, "spec.accessModes")),
        volume_mode=spec.get("volumeMode") or "Filesystem",
        selector=parse_label_selector(spec.get("selector"), obj, "spec.selector"),
        deleting=bool(meta.get("deletionTimestamp")),
        controller_uid=next((o.uid for o in _parse_owners(meta, obj) if o.controller), ""),
    )


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()


def parse_storage_class(raw: Mapping[str, Any]) -> StorageClass:
    meta, obj = _meta(raw, "StorageClass", namespaced=False)
    topologies = []
    for i, t in enumerate(_list(raw.get("allowedTopologies"), obj, "allowedTopologies")):
        t = _dict(t, obj, f"allowedTopologies[{i}]")
        reqs = []
        for j, e in enumerate(
            _list(
                t.get("matchLabelExpressions"), obj, f"allowedTopologies[{i}].matchLabelExpressions"
            )
        ):
            e = _dict(e, obj, f"allowedTopologies[{i}].matchLabelExpressions[{j}]")
            reqs.append(
                NodeSelectorRequirement(
                    e.get("key") or "",
                    "In",
                    tuple(_str_list(
                        e.get("values"), obj,
                        f"allowedTopologies[{i}].matchLabelExpressions[{j}].values",
                    )),
                )
            )
        topologies.append(NodeSelectorTerm(tuple(reqs)))
    return StorageClass(
        name=meta["name"],
        provisioner=raw.get("provisioner") or "",
        volume_binding_mode=raw.get("volumeBindingMode") or "Immediate",
        allowed_topologies=tuple(topologies),
    )


@dataclass(frozen=True, slots=True)
class CSINode:
    """Per-node CSI drivers. `drivers` maps driver name to its volume limit (`None`: no limit)."""

    name: str
    drivers: Mapping[str, int | None] = field(default_factory=dict)
    topology_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(self.name)


def parse_csinode(raw: Mapping[str, Any]) -> CSINode:
    meta, obj = _meta(raw, "CSINode", namespaced=False)
    spec = _dict(raw.get("spec"), obj, "spec")
    drivers: dict[str, int | None] = {}
    keys: dict[str, tuple[str, ...]] = {}
    for i, d in enumerate(_list(spec.get("drivers"), obj, "spec.drivers")):
        d = _dict(d, obj, f"spec.drivers[{i}]")
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise ModelError(obj, f"spec.drivers[{i}].name", "a non-empty string", name)
        alloc = _dict(d.get("allocatable"), obj, f"spec.drivers[{i}].allocatable")
        count = alloc.get("count")
        drivers[name] = (
            None if count is None else _int(count, obj, f"spec.drivers[{i}].allocatable.count")
        )
        keys[name] = tuple(
            _str_list(d.get("topologyKeys"), obj, f"spec.drivers[{i}].topologyKeys")
        )
    return CSINode(meta["name"], drivers, keys)
