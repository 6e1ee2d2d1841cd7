"""Pods parsed straight from their JSON text (list pages of the API server, snapshots): the same objects and errors as `parse_pod`, with each pod spec text parsed once however many pods share it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import msgspec
from clusterscaler.model.common import (
    _CACHE_LIMIT,
    DEFAULT_SCHEDULER,
    ModelError,
    _int,
    _parse_time,
    _str_map,
    decode_json,
)
from clusterscaler.model.pod import (
    Pod,
    _marked_unschedulable,
    _new_pod,
    _parse_spread,
    _parse_volumes,
    _pod_requests,
)
from clusterscaler.model.resources import Resources
from clusterscaler.model.scheduling import (
    HostPort,
    OwnerRef,
    Toleration,
    Volume,
    _parse_affinity,
    _parse_owners,
    _parse_tolerations,
)


class _ListDocument(msgspec.Struct):
    """A `List` document with its items left undecoded."""

    items: list[msgspec.Raw]
    kind: Any = None
    metadata: Any = None


class _PodMetadata(msgspec.Struct):
    """The metadata a pod keeps, owner references left undecoded."""

    name: Any = None
    namespace: Any = None
    uid: Any = None
    labels: Any = None
    annotations: Any = None
    ownerReferences: msgspec.Raw = msgspec.Raw()
    creationTimestamp: Any = None
    deletionTimestamp: Any = None


class _PodStatus(msgspec.Struct):
    """The status a pod keeps, conditions left undecoded."""

    phase: Any = None
    conditions: msgspec.Raw = msgspec.Raw()
    nominatedNodeName: Any = None


class _ItemHead(msgspec.Struct):
    """An item's kind and, for a pod, what it keeps: the parts that repeat across a
    workload (spec, owner references, conditions) left as JSON text."""

    kind: Any = None
    metadata: _PodMetadata | None = None
    spec: msgspec.Raw = msgspec.Raw()
    status: _PodStatus | None = None


_decode_list_document = msgspec.json.Decoder(_ListDocument).decode
_decode_item_head = msgspec.json.Decoder(_ItemHead).decode

# What a pod takes from its spec, by the spec's JSON text: requests, host ports,
# tolerations, node selector, the raw affinity and spread constraints (parsed per pod:
# they depend on its namespace and labels), volumes, node name, priority, grace period,
# scheduler name, priority class name, preemption policy.
_PodSpecFields: TypeAlias = tuple[
    Resources,
    tuple[HostPort, ...],
    tuple[Toleration, ...],
    Mapping[str, str],
    Any,
    Any,
    tuple[Volume, ...],
    str,
    int | None,
    int | None,
    str,
    str,
    str,
]
_POD_SPECS: dict[bytes, _PodSpecFields] = {}
_OWNERS_BY_TEXT: dict[bytes, tuple[OwnerRef, ...]] = {}
_UNSCHEDULABLE_BY_TEXT: dict[bytes, bool] = {}




def _owners_from_text(text: bytes, obj: str) -> tuple[OwnerRef, ...]:
    """`_parse_owners` of a pod whose owner references are still JSON text."""
    owners = _OWNERS_BY_TEXT.get(text)
    if owners is None:
        refs = decode_json(text) if text else None
        owners = _parse_owners({"ownerReferences": refs}, obj) if refs else ()
        if len(_OWNERS_BY_TEXT) > _CACHE_LIMIT:
            _OWNERS_BY_TEXT.clear()
        _OWNERS_BY_TEXT[text] = owners
    return owners


def _unschedulable_from_text(text: bytes, obj: str) -> bool:
    """Whether conditions still in JSON text say PodScheduled=False/Unschedulable."""
    unschedulable = _UNSCHEDULABLE_BY_TEXT.get(text)
    if unschedulable is None:
        unschedulable = _marked_unschedulable(decode_json(text) if text else None, obj)
        if len(_UNSCHEDULABLE_BY_TEXT) > _CACHE_LIMIT:
            _UNSCHEDULABLE_BY_TEXT.clear()
        _UNSCHEDULABLE_BY_TEXT[text] = unschedulable
    return unschedulable


def _pod_spec_fields(spec_text: bytes, obj: str) -> _PodSpecFields:
    """The fields `parse_pod` takes from a spec, parsed once per distinct spec text."""
    fields = _POD_SPECS.get(spec_text)
    if fields is not None:
        return fields
    spec = decode_json(spec_text)
    if not isinstance(spec, dict):
        raise ModelError(obj, "spec", "an object with containers", spec)
    sget = spec.get
    requests, ports = _pod_requests(spec, obj)
    priority = sget("priority")
    grace = sget("terminationGracePeriodSeconds")
    tolerations = sget("tolerations")
    selector = sget("nodeSelector")
    volumes = sget("volumes")
    fields = (
        requests,
        ports,
        _parse_tolerations(tolerations, obj, "spec.tolerations") if tolerations else (),
        {} if selector is None else _str_map(selector, obj, "spec.nodeSelector"),
        sget("affinity"),
        sget("topologySpreadConstraints"),
        _parse_volumes(volumes, obj) if volumes is not None else (),
        sget("nodeName") or "",
        None if priority is None else _int(priority, obj, "spec.priority"),
        None if grace is None else _int(grace, obj, "spec.terminationGracePeriodSeconds"),
        sget("schedulerName") or DEFAULT_SCHEDULER,
        sget("priorityClassName") or "",
        sget("preemptionPolicy") or "PreemptLowerPriority",
    )
    if len(_POD_SPECS) > _CACHE_LIMIT:
        _POD_SPECS.clear()
    _POD_SPECS[spec_text] = fields
    return fields


def _pod_from_parts(meta: _PodMetadata, spec: msgspec.Raw, status: _PodStatus | None) -> Pod:
    """`parse_pod` of a valid pod whose repeated parts are still JSON text: the same `Pod`.

    Checks are those of `parse_pod` but not in its order, so a pod with an error goes back
    to `parse_pod` (see `ClusterObjects.from_json_list`), which names its first bad field.
    """
    name = meta.name
    if type(name) is not str or not name:
        raise ModelError("Pod", "metadata.name", "a non-empty string", name)
    namespace = meta.namespace or "default"
    obj = f"Pod {namespace}/{name}"
    (
        requests,
        ports,
        tolerations,
        node_selector,
        affinity,
        spread,
        volumes,
        node_name,
        priority,
        grace,
        scheduler_name,
        priority_class_name,
        preemption_policy,
    ) = _pod_spec_fields(bytes(spec), obj)
    labels = meta.labels
    labels = {} if labels is None else _str_map(labels, obj, "metadata.labels")
    owners = _owners_from_text(bytes(meta.ownerReferences), obj)
    owner = None
    for o in owners:
        if o.controller:
            owner = o
            break
    if status is None:
        phase = nominated = None
        unschedulable = False
    else:
        phase = status.phase
        nominated = status.nominatedNodeName
        unschedulable = _unschedulable_from_text(bytes(status.conditions), obj)
    annotations = meta.annotations
    created = meta.creationTimestamp
    deleted = meta.deletionTimestamp
    return _new_pod(
        namespace,
        name,
        meta.uid or "",
        labels,
        {} if annotations is None else _str_map(annotations, obj, "metadata.annotations"),
        node_name,
        phase or "Pending",
        priority,
        owner,
        requests,
        tolerations,
        node_selector,
        None
        if affinity is None
        else _parse_affinity(affinity, obj, "spec.affinity", namespace, labels),
        _parse_spread(spread, obj, labels) if spread is not None else (),
        ports,
        volumes,
        None if created is None else _parse_time(created, obj, "metadata.creationTimestamp"),
        None if deleted is None else _parse_time(deleted, obj, "metadata.deletionTimestamp"),
        grace,
        nominated or "",
        unschedulable,
        scheduler_name,
        owners,
        priority_class_name,
        preemption_policy,
    )


def decode_list_page(data: bytes | str) -> tuple[Any, list[msgspec.Raw]] | None:
    """The `metadata` (as `decode_json` gives it) and the items (undecoded, for
    `parse_pod_json`) of a JSON List such as a page of the API server's list responses.

    `None` when `data` is not a JSON object with an `items` array: decode it with
    `decode_json` instead.
    """
    try:
        doc = _decode_list_document(data)
    except (msgspec.MsgspecError, UnicodeDecodeError):
        return None
    return doc.metadata, doc.items


def parse_pod_json(text: msgspec.Raw | bytes) -> tuple[Pod, Any] | None:
    """The pod `parse_pod(decode_json(text))` gives, and its `metadata.namespace` as
    written, parsed as `ClusterObjects.from_json_list` parses pods.

    `None` when the text is not a valid pod (or not shaped like one): `parse_pod` of the
    decoded text then gives the reason, or the pod.
    """
    try:
        head = _decode_item_head(text)
    except msgspec.MsgspecError:
        return None
    pod = _pod_from_head(head)
    if pod is None or head.metadata is None:
        return None
    return pod, head.metadata.namespace


def _pod_from_head(head: _ItemHead) -> Pod | None:
    """The pod of a decoded item head; `None` when it is not a valid pod."""
    meta = head.metadata
    if meta is None or not head.spec:
        return None
    try:
        return _pod_from_parts(meta, head.spec, head.status)
    except Exception:
        return None
