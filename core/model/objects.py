"""ConfigMaps and Namespaces; `parse_object` by kind, the kinds read and skipped; bulk input (`decode_json`, `gc_paused`) and `ClusterObjects`, a whole cluster's objects."""

from __future__ import annotations

import difflib
import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

import msgspec
from clusterscaler.model.capacitybuffer import (
    CapacityBuffer,
    ResourceQuota,
    parse_capacity_buffer,
    parse_resource_quota,
)
from clusterscaler.model.capacityquota import CapacityQuota, parse_capacity_quota
from clusterscaler.model.common import (
    NAMESPACE_NAME_LABEL,
    ModelError,
    _meta,
    _str_map,
    decode_json,
    describe_value,
)
from clusterscaler.model.dra import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from clusterscaler.model.json_route import (
    _decode_item_head,
    _decode_list_document,
    _ItemHead,
    _pod_from_head,
)
from clusterscaler.model.node import Node, parse_node
from clusterscaler.model.pod import Pod, parse_pod
from clusterscaler.model.provisioning import (
    PodTemplate,
    ProvisioningRequest,
    parse_pod_template,
    parse_provisioning_request,
)
from clusterscaler.model.storage import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    parse_csinode,
    parse_pv,
    parse_pvc,
    parse_storage_class,
)
from clusterscaler.model.workloads import (
    Controller,
    DaemonSet,
    PodDisruptionBudget,
    parse_controller,
    parse_daemonset,
    parse_pdb,
)

# --------------------------------------------------------------------------- misc


@dataclass(frozen=True, slots=True)
class ConfigMap:
    namespace: str
    name: str
    data: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))


def parse_config_map(raw: Mapping[str, Any]) -> ConfigMap:
    meta, obj = _meta(raw, "ConfigMap", namespaced=True)
    return ConfigMap(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        data=_str_map(raw.get("data"), obj, "data"),
        annotations=_str_map(meta.get("annotations"), obj, "metadata.annotations"),
    )


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(self.name)


def parse_namespace(raw: Mapping[str, Any]) -> Namespace:
    meta, obj = _meta(raw, "Namespace", namespaced=False)
    labels = dict(_str_map(meta.get("labels"), obj, "metadata.labels"))
    # The API server sets this label on every namespace; selectors rely on it.
    labels.setdefault(NAMESPACE_NAME_LABEL, meta["name"])
    return Namespace(meta["name"], labels)


ModelObject: TypeAlias = (
    Node
    | Pod
    | PodDisruptionBudget
    | DaemonSet
    | Controller
    | PersistentVolume
    | PersistentVolumeClaim
    | StorageClass
    | CSINode
    | ConfigMap
    | Namespace
    | ResourceSlice
    | DeviceClass
    | ResourceClaim
    | ResourceClaimTemplate
    | CapacityBuffer
    | ResourceQuota
    | ProvisioningRequest
    | PodTemplate
    | CapacityQuota
)

_PARSERS: dict[str, Any] = {
    "Node": parse_node,
    "Pod": parse_pod,
    "PodDisruptionBudget": parse_pdb,
    "DaemonSet": parse_daemonset,
    "ReplicaSet": parse_controller,
    "ReplicationController": parse_controller,
    "StatefulSet": parse_controller,
    "Job": parse_controller,
    "PersistentVolume": parse_pv,
    "PersistentVolumeClaim": parse_pvc,
    "StorageClass": parse_storage_class,
    "CSINode": parse_csinode,
    "ConfigMap": parse_config_map,
    "Namespace": parse_namespace,
    "ResourceSlice": parse_resource_slice,
    "DeviceClass": parse_device_class,
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
    "CapacityBuffer": parse_capacity_buffer,
    "ResourceQuota": parse_resource_quota,
    "ProvisioningRequest": parse_provisioning_request,
    "PodTemplate": parse_pod_template,
    "CapacityQuota": parse_capacity_quota,
}

SUPPORTED_KINDS = tuple(_PARSERS)

# Built-in kinds that a `kubectl get ... -o json` snapshot may hold and that the autoscaler
# does not read (Cluster Autoscaler does not either, or they change nothing it simulates):
# skipped with a warning. Any other kind of a built-in API group is refused, so that a typo
# (`Deploymnet`) is not silently a missing object.
UNREAD_KINDS = frozenset(
    {
        # v1
        "Binding", "ComponentStatus", "Endpoints", "Event", "LimitRange",
        "Secret", "Service", "ServiceAccount",
        # apps, batch, autoscaling, policy
        "ControllerRevision", "CronJob", "Deployment", "HorizontalPodAutoscaler",
        "PodSecurityPolicy",
        # networking.k8s.io, discovery.k8s.io, events.k8s.io
        "EndpointSlice", "IPAddress", "Ingress", "IngressClass", "NetworkPolicy", "ServiceCIDR",
        # rbac.authorization.k8s.io
        "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
        # storage.k8s.io
        "CSIDriver", "CSIStorageCapacity", "VolumeAttachment", "VolumeAttributesClass",
        # scheduling, coordination, node, certificates
        "CertificateSigningRequest", "ClusterTrustBundle", "Lease", "LeaseCandidate",
        "PriorityClass", "RuntimeClass",
        # resource.k8s.io
        "DeviceTaintRule",
        # API machinery: admission, extension, flow control, storage versions, metrics
        "APIService", "CustomResourceDefinition", "FlowSchema", "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding", "MutatingWebhookConfiguration",
        "PriorityLevelConfiguration", "StorageVersion", "StorageVersionMigration",
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration", "NodeMetrics", "PodMetrics",
    }
)  # fmt: skip

# The API groups of Kubernetes itself (`v1` is the core group ""). An object of another
# group is a custom resource, which a snapshot of a real cluster may hold.
BUILTIN_API_GROUPS = frozenset(
    {
        "", "admissionregistration.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io",
        "apps", "authentication.k8s.io", "authorization.k8s.io", "autoscaling", "batch",
        "certificates.k8s.io", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io",
        "extensions", "flowcontrol.apiserver.k8s.io", "internal.apiserver.k8s.io",
        "metrics.k8s.io", "networking.k8s.io", "node.k8s.io", "policy",
        "rbac.authorization.k8s.io", "resource.k8s.io", "scheduling.k8s.io",
        "storage.k8s.io", "storagemigration.k8s.io",
    }
)  # fmt: skip


def is_unread_kind(kind: str, api_version: object) -> bool:
    """Whether an object the model does not parse may be skipped (with a warning): a
    built-in kind of `UNREAD_KINDS`, or a custom resource (an API group outside
    Kubernetes'). Anything else, `Frobnicator` of `v1` or a kind without `apiVersion`, is
    most likely a mistake."""
    if kind in UNREAD_KINDS:
        return True
    if not isinstance(api_version, str) or not api_version:
        return False
    group, slash, _ = api_version.rpartition("/")
    return bool(slash) and group not in BUILTIN_API_GROUPS


def parse_object(raw: Mapping[str, Any]) -> ModelObject:
    """Parse one Kubernetes object by its `kind`."""
    if not isinstance(raw, Mapping):
        raise ModelError("object", "<object>", "a JSON object with kind and metadata", raw)
    kind = raw.get("kind")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        name = (
            (raw.get("metadata") or {}).get("name", "?")
            if isinstance(raw.get("metadata"), dict)
            else "?"
        )
        raise ModelError(f"object {name}", "kind", "one of " + ", ".join(SUPPORTED_KINDS), kind)
    result: ModelObject = parser(raw)
    return result


# --------------------------------------------------------------------------- bulk input


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector while a large document is decoded and parsed.

    Decoding and parsing allocate one container per JSON object and model field and free
    almost none of them, so each automatic collection on the way scans an ever larger heap
    for cycles that are not there: more than half the time of reading a 50,000-pod
    snapshot. Reference counting frees objects as usual meanwhile; the collector resumes
    afterwards if it was on (a nested or concurrent use leaves it to the outermost).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()






def _unknown_kind(i: int, raw: Mapping[str, Any], kind: object, *, strict: bool) -> ModelError:
    """The error for item `i` of a List, of a kind the model neither reads nor may skip."""
    meta = raw.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    what = f"items[{i}]"
    if isinstance(name, str) and name:
        ref = f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name
        what += f" ({kind} {ref})" if isinstance(kind, str) else f" ({ref})"
    read = ", ".join(SUPPORTED_KINDS)
    if strict:
        return ModelError(what, "kind", f"one of {read}", kind)
    hint = ""
    if isinstance(kind, str):
        close = difflib.get_close_matches(kind, [*SUPPORTED_KINDS, *sorted(UNREAD_KINDS)], n=1)
        if close:
            hint = f"did you mean {close[0]}?"
    return ModelError(
        what,
        "kind",
        f"a kind the autoscaler reads ({read}) or one it skips with a warning (built-in kinds "
        "it does not need, such as Service or Deployment, and custom resources)",
        kind,
        hint,
    )


def _unexpected_shape(i: int, raw: Mapping[str, Any], kind: str, exc: Exception) -> ModelError:
    """The error for item `i` that broke a parser: the object by kind and name, and the first
    top-level field that is not an object where Kubernetes has one."""
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name, namespace = meta.get("name"), meta.get("namespace")
    what = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name or f'items[{i}]'}"
    for part in ("metadata", "spec", "status"):
        value = raw.get(part)
        if value is not None and not isinstance(value, Mapping):
            return ModelError(what, part, "an object", type(value).__name__)
    if isinstance(exc, RecursionError):
        return ModelError(what, "(object)", "an object nested less deeply")
    return ModelError(
        what, "(object)", f"the fields of a Kubernetes {kind} with their types",
        hint=f"{type(exc).__name__}: {str(exc)[:200]}",
    )


@dataclass(frozen=True, slots=True)
class UnreadableObject:
    """An object of the cluster the model could not read: its kind, `namespace/name` (or
    name), the node it is bound to (a pod's `spec.nodeName`, "" when none or unreadable) and
    why. It is left out of the loop, and the node it is bound to is never removed: nobody
    can say what that node runs."""

    kind: str
    key: str
    node_name: str
    error: str

    @classmethod
    def of(cls, raw: object, kind: str, error: str) -> UnreadableObject:
        """From the raw object, as far as its metadata and `spec.nodeName` can be read."""
        spec = raw.get("spec") if isinstance(raw, Mapping) else None
        node = spec.get("nodeName") if isinstance(spec, Mapping) else None
        return cls(kind, object_key(raw), node if isinstance(node, str) else "", error[:500])


def object_key(raw: object) -> str:
    """`namespace/name` (or `name`) of a raw object, whatever its shape: a name that is not
    a string is shown bounded (`describe_value`), and the key is at most 400 characters
    (a valid one, at most 63 + 1 + 253, is whole)."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name, namespace = meta.get("name"), meta.get("namespace")
    name = name if isinstance(name, str) else describe_value(name)
    if namespace:
        namespace = namespace if isinstance(namespace, str) else describe_value(namespace)
        return f"{namespace}/{name}"[:400]
    return name[:400]


T = TypeVar("T")


def read_guarded(raw: Any, kind: str, parse: Callable[[Any], T]) -> T | UnreadableObject:
    """`parse(raw)`, or the `UnreadableObject` saying why it failed: any exception at all
    (a `ModelError`, and the `TypeError`, `RecursionError` or `OverflowError` of a shape no
    parser expects), so that one object never stops the reading of the others. This is the
    guard of the caches of the live cluster."""
    try:
        if isinstance(raw, dict):
            raw.setdefault("kind", kind)
        return parse(raw)
    except Exception as exc:
        return UnreadableObject.of(raw, kind, f"{type(exc).__name__}: {exc}")


@dataclass
class ClusterObjects:
    """Every modelled object of a cluster, by kind."""

    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    daemonsets: list[DaemonSet] = field(default_factory=list)
    controllers: list[Controller] = field(default_factory=list)
    pvs: list[PersistentVolume] = field(default_factory=list)
    pvcs: list[PersistentVolumeClaim] = field(default_factory=list)
    storage_classes: list[StorageClass] = field(default_factory=list)
    csinodes: list[CSINode] = field(default_factory=list)
    config_maps: list[ConfigMap] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    # Dynamic Resource Allocation (resource.k8s.io).
    resource_slices: list[ResourceSlice] = field(default_factory=list)
    device_classes: list[DeviceClass] = field(default_factory=list)
    resource_claims: list[ResourceClaim] = field(default_factory=list)
    resource_claim_templates: list[ResourceClaimTemplate] = field(default_factory=list)
    # CapacityBuffers (autoscaling.x-k8s.io) and the ResourceQuotas that bound them.
    capacity_buffers: list[CapacityBuffer] = field(default_factory=list)
    resource_quotas: list[ResourceQuota] = field(default_factory=list)
    # ProvisioningRequests (autoscaling.x-k8s.io) and the PodTemplates of their pod sets.
    provisioning_requests: list[ProvisioningRequest] = field(default_factory=list)
    pod_templates: list[PodTemplate] = field(default_factory=list)
    # CapacityQuotas (autoscaling.x-k8s.io): limits on the nodes a selector picks.
    capacity_quotas: list[CapacityQuota] = field(default_factory=list)
    # The source lists PersistentVolumeClaims, PersistentVolumes and StorageClasses (the
    # live cluster's caches do), so a claim it does not hold does not exist; without any
    # storage object the input says nothing about claims (see `storage_known`).
    storage_listed: bool = False
    # Claims (`namespace/name`) that a controller of the input makes for the pods it makes
    # (the StatefulSet and ephemeral volume controllers of a simulated cluster), not
    # modelled: not checked, as if the input said nothing about them.
    unmodelled_claims: frozenset[str] = frozenset()
    # Kinds present in the input that the model does not cover, with their counts.
    skipped: dict[str, int] = field(default_factory=dict)
    # Objects of the kinds above that could not be read (left out of the lists).
    unreadable: list[UnreadableObject] = field(default_factory=list)

    @property
    def storage_known(self) -> bool:
        """Whether the objects tell which claims, volumes and classes exist: the source
        lists them, or holds at least one. A snapshot file without any says nothing about
        them, and a pod's claims are then not checked."""
        return self.storage_listed or bool(self.pvcs or self.pvs or self.storage_classes)

    def unreadable_pods_by_node(self) -> dict[str, list[UnreadableObject]]:
        """The unreadable pods bound to each node."""
        out: dict[str, list[UnreadableObject]] = {}
        for item in self.unreadable:
            if item.kind == "Pod" and item.node_name:
                out.setdefault(item.node_name, []).append(item)
        return out

    def add(self, item: ModelObject) -> None:
        if isinstance(item, Pod):
            self.pods.append(item)
        elif isinstance(item, Node):
            self.nodes.append(item)
        elif isinstance(item, PodDisruptionBudget):
            self.pdbs.append(item)
        elif isinstance(item, DaemonSet):
            self.daemonsets.append(item)
        elif isinstance(item, Controller):
            self.controllers.append(item)
        elif isinstance(item, PersistentVolume):
            self.pvs.append(item)
        elif isinstance(item, PersistentVolumeClaim):
            self.pvcs.append(item)
        elif isinstance(item, StorageClass):
            self.storage_classes.append(item)
        elif isinstance(item, CSINode):
            self.csinodes.append(item)
        elif isinstance(item, ConfigMap):
            self.config_maps.append(item)
        elif isinstance(item, ResourceClaim):
            self.resource_claims.append(item)
        elif isinstance(item, ResourceSlice):
            self.resource_slices.append(item)
        elif isinstance(item, DeviceClass):
            self.device_classes.append(item)
        elif isinstance(item, ResourceClaimTemplate):
            self.resource_claim_templates.append(item)
        elif isinstance(item, CapacityBuffer):
            self.capacity_buffers.append(item)
        elif isinstance(item, ResourceQuota):
            self.resource_quotas.append(item)
        elif isinstance(item, ProvisioningRequest):
            self.provisioning_requests.append(item)
        elif isinstance(item, PodTemplate):
            self.pod_templates.append(item)
        elif isinstance(item, CapacityQuota):
            self.capacity_quotas.append(item)
        else:
            self.namespaces.append(item)

    def __iter__(self) -> Iterator[ModelObject]:
        yield from self.nodes
        yield from self.pods
        yield from self.pdbs
        yield from self.daemonsets
        yield from self.controllers
        yield from self.pvs
        yield from self.pvcs
        yield from self.storage_classes
        yield from self.csinodes
        yield from self.config_maps
        yield from self.namespaces
        yield from self.resource_slices
        yield from self.device_classes
        yield from self.resource_claims
        yield from self.resource_claim_templates
        yield from self.capacity_buffers
        yield from self.resource_quotas
        yield from self.provisioning_requests
        yield from self.pod_templates
        yield from self.capacity_quotas

    @classmethod
    def from_items(
        cls,
        items: Iterable[Mapping[str, object]],
        *,
        strict: bool = False,
        default_kind: str | None = None,
    ) -> ClusterObjects:
        """Parse raw objects; kinds the model does not cover are counted in `skipped`
        (or rejected with `strict`). `default_kind` applies to items without `kind`."""
        with gc_paused():
            return cls._from_items(items, strict=strict, default_kind=default_kind)

    @classmethod
    def _from_items(
        cls, items: Iterable[Mapping[str, Any]], *, strict: bool, default_kind: str | None
    ) -> ClusterObjects:
        out = cls()
        for i, raw in enumerate(items):
            out._add_raw(i, raw, strict=strict, default_kind=default_kind)
        return out

    def _add_raw(self, i: int, raw: Any, *, strict: bool, default_kind: str | None) -> None:
        """Item `i` of a List, parsed by its kind, or counted in `skipped` when its kind is
        one the model may skip (`is_unread_kind`); any other kind is an error."""
        if not isinstance(raw, Mapping):
            raise ModelError("List", f"items[{i}]", "a Kubernetes object", raw)
        kind = raw.get("kind") or default_kind
        parser = _PARSERS.get(kind) if isinstance(kind, str) else None
        if parser is None:
            if (
                strict
                or not isinstance(kind, str)
                or not is_unread_kind(kind, raw.get("apiVersion"))
            ):
                raise _unknown_kind(i, raw, kind, strict=strict)
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            return
        try:
            self.add(parse_controller(raw, kind) if parser is parse_controller else parser(raw))
        except ModelError:
            raise
        except Exception as exc:  # a shape no parser expects: still named, never a traceback
            raise _unexpected_shape(i, raw, str(kind), exc) from None

    @classmethod
    def from_json_list(cls, data: bytes | str, *, strict: bool = False) -> ClusterObjects | None:
        """Parse a JSON `List` (an object with an `items` array of objects, what
        `kubectl get -o json` prints) straight from its text.

        The objects and the errors are those of `from_list(decode_json(data))`. Returns
        `None` for anything else (malformed JSON, a plain array, a single object, `items`
        missing or not an array): decode it with `decode_json` and call `from_list`.

        Why it is faster: a pod's spec, owner references and conditions stay JSON text
        until needed, and what is parsed from each is shared by every pod with the same
        text (the pods of a workload), so a workload's spec is decoded and checked once;
        the fields the model does not keep are skipped by the decoder.
        """
        try:
            doc = _decode_list_document(data)
        except (msgspec.MsgspecError, UnicodeDecodeError):
            return None
        list_kind = doc.kind
        default_kind = (
            list_kind[: -len("List")]
            if isinstance(list_kind, str) and list_kind.endswith("List") and list_kind != "List"
            else None
        )
        out = cls()
        pods = out.pods
        with gc_paused():
            for i, item in enumerate(doc.items):
                try:
                    head: _ItemHead | None = _decode_item_head(item)
                except msgspec.MsgspecError:
                    # Not shaped like a pod (or not an object at all).
                    head = None
                pod = (
                    _pod_from_head(head)
                    if head is not None and (head.kind or default_kind) == "Pod"
                    else None
                )
                if pod is not None:
                    pods.append(pod)
                else:
                    # Other kinds, and pods with anything wrong: the general parser, which
                    # reports the first bad field in its own order of checks.
                    out._add_raw(
                        i, decode_json(bytes(item)), strict=strict, default_kind=default_kind
                    )
        return out

    @classmethod
    def from_list(
        cls, doc: Mapping[str, object] | Sequence[Mapping[str, object]], *, strict: bool = False
    ) -> ClusterObjects:
        """Parse `kubectl get -o json` output: a `List` (or any `*List`) with `items`, or a
        plain JSON array of objects. Items of a typed list (`PodList`) may omit `kind`."""
        if isinstance(doc, Mapping):
            items = doc.get("items")
            if not isinstance(items, list):
                raise ModelError(
                    f"{doc.get('kind', 'List')}", "items", "a list of Kubernetes objects", items
                )
            list_kind = doc.get("kind")
            if isinstance(list_kind, str) and list_kind.endswith("List") and list_kind != "List":
                item_kind = list_kind[: -len("List")]
                return cls.from_items(items, strict=strict, default_kind=item_kind)
            return cls.from_items(items, strict=strict)
        if isinstance(doc, Sequence) and not isinstance(doc, str | bytes):
            return cls.from_items(doc, strict=strict)
        raise ModelError(
            "List", "<document>", "a List object with items or a JSON array", type(doc).__name__
        )

    def namespace_labels(self) -> dict[str, Mapping[str, str]]:
        """Labels by namespace name, for pod affinity namespace selectors."""
        return {ns.name: ns.labels for ns in self.namespaces}
