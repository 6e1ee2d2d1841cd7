"""`Node` and `parse_node`; `NodeInfo`, a node with the pods on it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict, Unpack

from clusterscaler.model.common import (
    JsonObject,
    _dict,
    _format_time,
    _list,
    _meta,
    _parse_time,
    _str,
    _str_map,
)
from clusterscaler.model.resources import ZERO, Resources
from clusterscaler.model.scheduling import NodeCondition, Taint, _parse_taints

if TYPE_CHECKING:
    from clusterscaler.model.dra import ResourceSlice
    from clusterscaler.model.pod import Pod

# --------------------------------------------------------------------------- Node


@dataclass(frozen=True, slots=True)
class Node:
    """A Kubernetes Node. Equality is by value; hashing by name and uid."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity: Resources = ZERO
    allocatable: Resources = ZERO
    unschedulable: bool = False
    ready: bool = True
    provider_id: str = ""
    creation_time: datetime | None = None
    deletion_time: datetime | None = None
    uid: str = ""
    conditions: tuple[NodeCondition, ...] = ()
    # The CSI drivers of a node a provider describes (a template node) and how many volumes
    # each may attach (None: no limit), as its CSINode would say once it exists; copies made
    # from the template keep them. Empty for a node read from the cluster: its CSINode
    # object, when there is one, says it.
    csi_volume_limits: Mapping[str, int | None] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.name, self.uid))

    def with_(self, **changes: Unpack[NodeChanges]) -> Node:
        return dataclasses.replace(self, **changes)

    def with_taint(self, taint: Taint) -> Node:
        """A copy with `taint` added (replacing a taint of the same key and effect)."""
        kept = tuple(t for t in self.taints if (t.key, t.effect) != (taint.key, taint.effect))
        return dataclasses.replace(self, taints=(*kept, taint))

    def condition(self, type_: str) -> NodeCondition | None:
        for c in self.conditions:
            if c.type == type_:
                return c
        return None

    def to_k8s(self) -> JsonObject:
        """A valid Kubernetes Node object (apiVersion v1, kind Node)."""
        meta: JsonObject = {"name": self.name, "labels": dict(self.labels)}
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        if self.uid:
            meta["uid"] = self.uid
        if self.creation_time is not None:
            meta["creationTimestamp"] = _format_time(self.creation_time)
        if self.deletion_time is not None:
            meta["deletionTimestamp"] = _format_time(self.deletion_time)
        spec: JsonObject = {}
        if self.provider_id:
            spec["providerID"] = self.provider_id
        if self.taints:
            spec["taints"] = [t.to_k8s() for t in self.taints]
        if self.unschedulable:
            spec["unschedulable"] = True
        conditions = []
        has_ready = False
        for c in self.conditions:
            has_ready = has_ready or c.type == "Ready"
            entry: JsonObject = {"type": c.type, "status": c.status}
            if c.reason:
                entry["reason"] = c.reason
            if c.message:
                entry["message"] = c.message
            if c.last_transition_time is not None:
                entry["lastTransitionTime"] = _format_time(c.last_transition_time)
            conditions.append(entry)
        if not has_ready:
            conditions.append({"type": "Ready", "status": "True" if self.ready else "False"})
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": meta,
            "spec": spec,
            "status": {
                "capacity": self.capacity.to_k8s(),
                "allocatable": self.allocatable.to_k8s(),
                "conditions": conditions,
            },
        }


class NodeChanges(TypedDict, total=False):
    """What `Node.with_` may change: any field of `Node`, of the field's type."""

    name: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    taints: tuple[Taint, ...]
    capacity: Resources
    allocatable: Resources
    unschedulable: bool
    ready: bool
    provider_id: str
    creation_time: datetime | None
    deletion_time: datetime | None
    uid: str
    conditions: tuple[NodeCondition, ...]
    csi_volume_limits: Mapping[str, int | None]


def parse_node(raw: Mapping[str, object]) -> Node:
    """Parse a Kubernetes Node. Allocatable falls back to capacity when absent."""
    meta, obj = _meta(raw, "Node", namespaced=False)
    spec = _dict(raw.get("spec"), obj, "spec")
    status = _dict(raw.get("status"), obj, "status")
    capacity = Resources.from_k8s(status.get("capacity"), obj=obj, field="status.capacity")
    alloc_raw = status.get("allocatable")
    allocatable = (
        Resources.from_k8s(alloc_raw, obj=obj, field="status.allocatable")
        if alloc_raw
        else capacity
    )
    conditions = []
    ready = False
    for i, c in enumerate(_list(status.get("conditions"), obj, "status.conditions")):
        c = _dict(c, obj, f"status.conditions[{i}]")
        where = f"status.conditions[{i}]"
        cond = NodeCondition(
            type=_str(c.get("type"), obj, f"{where}.type"),
            status=_str(c.get("status"), obj, f"{where}.status") or "Unknown",
            reason=_str(c.get("reason"), obj, f"{where}.reason"),
            message=_str(c.get("message"), obj, f"{where}.message"),
            last_transition_time=_parse_time(
                c.get("lastTransitionTime"), obj, f"status.conditions[{i}].lastTransitionTime"
            ),
        )
        if cond.type == "Ready":
            ready = cond.status == "True"
        conditions.append(cond)
    return Node(
        name=meta["name"],
        labels=_str_map(meta.get("labels"), obj, "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), obj, "metadata.annotations"),
        taints=_parse_taints(spec.get("taints"), obj, "spec.taints"),
        capacity=capacity,
        allocatable=allocatable,
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        provider_id=_str(spec.get("providerID"), obj, "spec.providerID"),
        creation_time=_parse_time(meta.get("creationTimestamp"), obj, "metadata.creationTimestamp"),
        deletion_time=_parse_time(meta.get("deletionTimestamp"), obj, "metadata.deletionTimestamp"),
        uid=_str(meta.get("uid"), obj, "metadata.uid"),
        conditions=tuple(conditions),
    )


# --------------------------------------------------------------------------- NodeInfo


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node with the pods on it: what `NodeGroup.template_node_info()` returns."""

    node: Node
    pods: tuple[Pod, ...] = ()
    # The ResourceSlices local to the node (DRA devices), as upstream's LocalResourceSlices:
    # a template carries them so that new nodes of the group offer the same devices.
    resource_slices: tuple[ResourceSlice, ...] = ()

    @property
    def name(self) -> str:
        return self.node.name

    def requested(self) -> Resources:
        total = ZERO
        for p in self.pods:
            total = total + p.requests
        return total
