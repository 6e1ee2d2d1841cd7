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
    _str,
    _str_map,
    decode_json,
)
from clusterscaler.model.pod import (
    Pod,
    PodResourceClaim,
    _marked_unschedulable,
    _new_pod,
    _parse_claim_statuses,
    _parse_pod_claims,
    _parse_spread,
    _parse_volumes,
    _pod_requests,
)
from clusterscaler.model.resources import Resources
from clusterscaler.model.scheduling import (
    Affinity,
    HostPort,
    OwnerRef,
    Toleration,
    TopologySpreadConstraint,
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
    resourceClaimStatuses: Any = None


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
    tuple[PodResourceClaim, ...],
]


class _SpecEntry:
    """One distinct spec text: its fields, the service-account token volume name they were
    parsed with, and the affinity and spread constraints parsed per namespace and labels
    (pods of a workload share one object of each)."""

    __slots__ = ("derived", "fields", "token")

    def __init__(self, fields: _PodSpecFields, token: bytes) -> None:
        self.fields = fields
        self.token = token
        self.derived: dict[tuple[str, tuple[tuple[str, str], ...]], _Derived] = {}


# A pod's affinity and topology spread constraints, parsed for its namespace and labels.
_Derived: TypeAlias = tuple[Affinity | None, tuple[TopologySpreadConstraint, ...]]
_POD_SPECS: dict[bytes, _SpecEntry] = {}
# Kubernetes names each pod's projected service-account token volume
# `kube-api-access-<5 random characters>`: the only part of a workload's pod specs that
# differs from pod to pod. The spec cache is keyed with the name masked, so the pods of a
# workload share one parse; each pod still gets its own volume name.
_TOKEN_PREFIX = b'"kube-api-access-'
_TOKEN_MASK = b'"kube-api-access-?"'
# The node a running pod is bound to, likewise (see `_node_name`).
_NODE_MASK = b'"?"'
# Namespace and label sets remembered per spec (pods with a label of their own, such as
# a StatefulSet's pod name, would otherwise grow it without bound).
_DERIVED_LIMIT = 64

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
    if (
        b"Unschedulable" not in text
        and b"\\u" not in text
        and text.lstrip()[:1] in (b"[", b"n", b"")
    ):
        # A list (or null) that cannot hold the scheduler's verdict, as the conditions of
        # running pods: no need to decode their text, which differs from pod to pod.
        return False
    unschedulable = _UNSCHEDULABLE_BY_TEXT.get(text)
    if unschedulable is None:
        unschedulable = _marked_unschedulable(decode_json(text) if text else None, obj)
        if len(_UNSCHEDULABLE_BY_TEXT) > _CACHE_LIMIT:
            _UNSCHEDULABLE_BY_TEXT.clear()
        _UNSCHEDULABLE_BY_TEXT[text] = unschedulable
    return unschedulable


def _token_name(spec_text: bytes) -> bytes:
    """The quoted name of the pod's `kube-api-access-*` volume in `spec_text`, or b""."""
    start = spec_text.find(_TOKEN_PREFIX)
    if start < 0:
        return b""
    end = spec_text.find(b'"', start + len(_TOKEN_PREFIX))
    return spec_text[start : end + 1] if end > 0 else b""


class _SpecNodeName(msgspec.Struct):
    """A spec's `nodeName`, the rest skipped."""

    nodeName: Any = None


_decode_spec_node_name = msgspec.json.Decoder(_SpecNodeName).decode


def _node_name(spec_text: bytes) -> str | None:
    """The spec's `nodeName` when it can be masked in `spec_text`: a plain string written
    once in the text (the pods of a workload differ in it once they run). Otherwise None:
    the spec is cached by its whole text."""
    if b'"nodeName"' not in spec_text:
        return None
    try:
        node = _decode_spec_node_name(spec_text).nodeName
    except msgspec.MsgspecError:
        return None
    if type(node) is not str or not node or '"' in node or "\\" in node:
        return None
    # Once only: a DaemonSet pod also names its node in its affinity, which is parsed
    # from the shared text and must stay its own.
    return node if spec_text.count(b'"' + node.encode() + b'"') == 1 else None


def _spec_entry(spec_text: bytes, obj: str) -> tuple[_SpecEntry, bytes, str | None]:
    """The cache entry of a spec text (parsed on first sight), the pod's own quoted token
    volume name (b"" when it has none) and its own node name when the key masks it."""
    token = _token_name(spec_text)
    key = spec_text.replace(token, _TOKEN_MASK) if token else spec_text
    node = _node_name(key)
    if node is not None:
        key = key.replace(b'"' + node.encode() + b'"', _NODE_MASK)
    entry = _POD_SPECS.get(key)
    if entry is None:
        entry = _SpecEntry(_parse_spec_fields(spec_text, obj), token)
        if len(_POD_SPECS) > _CACHE_LIMIT:
            _POD_SPECS.clear()
        _POD_SPECS[key] = entry
    return entry, token, node


def _parse_spec_fields(spec_text: bytes, obj: str) -> _PodSpecFields:
    """The fields `parse_pod` takes from a spec."""
    spec = decode_json(spec_text)
    if not isinstance(spec, dict):
        raise ModelError(obj, "spec", "an object with containers", spec)
    sget = spec.get
    claims = sget("resourceClaims")
    requests, ports = _pod_requests(spec, obj)
    priority = sget("priority")
    grace = sget("terminationGracePeriodSeconds")
    tolerations = sget("tolerations")
    selector = sget("nodeSelector")
    volumes = sget("volumes")
    return (
        requests,
        ports,
        _parse_tolerations(tolerations, obj, "spec.tolerations") if tolerations else (),
        {} if selector is None else _str_map(selector, obj, "spec.nodeSelector"),
        sget("affinity"),
        sget("topologySpreadConstraints"),
        _parse_volumes(volumes, obj) if volumes is not None else (),
        _str(sget("nodeName"), obj, "spec.nodeName"),
        None if priority is None else _int(priority, obj, "spec.priority"),
        None if grace is None else _int(grace, obj, "spec.terminationGracePeriodSeconds"),
        _str(sget("schedulerName"), obj, "spec.schedulerName") or DEFAULT_SCHEDULER,
        _str(sget("priorityClassName"), obj, "spec.priorityClassName"),
        _str(sget("preemptionPolicy"), obj, "spec.preemptionPolicy") or "PreemptLowerPriority",
        () if claims is None else _parse_pod_claims(claims, obj),
    )


def _own_volumes(volumes: tuple[Volume, ...], parsed: bytes, own: bytes) -> tuple[Volume, ...]:
    """`volumes` parsed from a spec whose token volume was named `parsed`, for a pod whose
    token volume is named `own` (both quoted)."""
    if own == parsed:
        return volumes
    old = parsed[1:-1].decode()
    out = list(volumes)
    for i, v in enumerate(out):
        if v.name == old:
            out[i] = Volume(
                own[1:-1].decode(), v.kind, v.claim_name, v.medium, v.driver, v.read_only
            )
    return tuple(out)


def _derived(
    entry: _SpecEntry,
    affinity: Any,
    spread: Any,
    obj: str,
    namespace: str,
    labels: Mapping[str, str],
) -> _Derived:
    """The pod's affinity and spread constraints, parsed once per namespace and labels."""
    if affinity is None and spread is None:
        return None, ()
    key = (namespace, tuple(labels.items()))
    derived = entry.derived.get(key)
    if derived is None:
        derived = (
            None
            if affinity is None
            else _parse_affinity(affinity, obj, "spec.affinity", namespace, labels),
            _parse_spread(spread, obj, labels) if spread is not None else (),
        )
        if len(entry.derived) > _DERIVED_LIMIT:
            entry.derived.clear()
        entry.derived[key] = derived
    return derived


def _pod_from_parts(meta: _PodMetadata, spec: msgspec.Raw, status: _PodStatus | None) -> Pod:
    """`parse_pod` of a valid pod whose repeated parts are still JSON text: the same `Pod`.

    Checks are those of `parse_pod` but not in its order, so a pod with an error goes back
    to `parse_pod` (see `ClusterObjects.from_json_list`), which names its first bad field.
    """
    name = meta.name
    if type(name) is not str or not name:
        raise ModelError("Pod", "metadata.name", "a non-empty string", name)
    if meta.namespace is not None and type(meta.namespace) is not str:
        raise ModelError(f"Pod {name}", "metadata.namespace", "a string", meta.namespace)
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
        claims,
    ) = (entry := _spec_entry(bytes(spec), obj))[0].fields
    labels = meta.labels
    labels = {} if labels is None else _str_map(labels, obj, "metadata.labels")
    if volumes:
        volumes = _own_volumes(volumes, entry[0].token, entry[1])
    if entry[2] is not None:
        node_name = entry[2]
    parsed_affinity, parsed_spread = _derived(entry[0], affinity, spread, obj, namespace, labels)
    owners = _owners_from_text(bytes(meta.ownerReferences), obj)
    owner = None
    for o in owners:
        if o.controller:
            owner = o
            break
    if status is None:
        phase = nominated = None
        unschedulable = False
        claim_statuses: dict[str, str] = {}
    else:
        statuses = status.resourceClaimStatuses
        # The claims made for the pod from its templates: its own, parsed per pod.
        claim_statuses = {} if statuses is None else _parse_claim_statuses(statuses, obj)
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
        _str(phase, obj, "status.phase") or "Pending",
        priority,
        owner,
        requests,
        tolerations,
        node_selector,
        parsed_affinity,
        parsed_spread,
        ports,
        volumes,
        None if created is None else _parse_time(created, obj, "metadata.creationTimestamp"),
        None if deleted is None else _parse_time(deleted, obj, "metadata.deletionTimestamp"),
        grace,
        _str(nominated, obj, "status.nominatedNodeName"),
        unschedulable,
        scheduler_name,
        owners,
        priority_class_name,
        preemption_policy,
        claims,
        claim_statuses,
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
