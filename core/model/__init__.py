"""Slim, typed, immutable views of the Kubernetes objects the autoscaler reasons about.

Objects are parsed once from raw JSON (as the API server and `kubectl get -o json` return
them) into the classes below. Only what scheduling simulation, scale-up and scale-down need
is kept. Resources are integer vectors (milli-CPU, bytes, counts) so arithmetic is exact and
cheap.

Mappings held by these objects (`labels`, `annotations`, ...) are plain dicts for speed;
treat them as read-only. Copy with `dataclasses.replace` (or the `with_` helpers).

Parse errors are `ModelError`s naming the object (`Pod default/web-1`), the field
(`spec.containers[0].resources.requests.cpu`) and the expected form.

Large inputs (snapshots, the API server's list pages) can also be parsed straight from
their JSON text (`ClusterObjects.from_json_list`, `parse_pod_json`): the same objects and
errors, with each pod spec text parsed once however many pods share it.
"""

from __future__ import annotations

import dataclasses
import difflib
import gc
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeAlias

import msgspec
from clusterscaler.model.quantity import (
    QuantityError,
    format_bytes,
    format_cpu,
    parse_cpu_millis,
    parse_int_quantity,
)

__all__ = [
    "BUILTIN_API_GROUPS",
    "CONTROLLER_KINDS",
    "DAEMONSET_POD_ANNOTATION",
    "DEFAULT_SCHEDULER",
    "HOSTNAME_LABEL",
    "LEGACY_REGION_LABEL",
    "LEGACY_ZONE_LABEL",
    "MIRROR_POD_ANNOTATION",
    "NAMESPACE_NAME_LABEL",
    "POD_SLOT",
    "REGION_LABEL",
    "SUPPORTED_KINDS",
    "UNREAD_KINDS",
    "ZERO",
    "ZONE_LABEL",
    "Affinity",
    "CSINode",
    "ClusterObjects",
    "ConfigMap",
    "Controller",
    "DaemonSet",
    "HostPort",
    "LabelSelector",
    "LabelSelectorRequirement",
    "ModelError",
    "ModelObject",
    "Namespace",
    "Node",
    "NodeAffinity",
    "NodeCondition",
    "NodeInfo",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "OwnerRef",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodDisruptionBudget",
    "Resources",
    "StorageClass",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "decode_json",
    "decode_list_page",
    "field_replacer",
    "gc_paused",
    "is_unread_kind",
    "node_selector_matches",
    "parse_config_map",
    "parse_controller",
    "parse_csinode",
    "parse_daemonset",
    "parse_label_selector",
    "parse_namespace",
    "parse_node",
    "parse_node_selector_terms",
    "parse_object",
    "parse_pdb",
    "parse_pod",
    "parse_pod_json",
    "parse_pv",
    "parse_pvc",
    "parse_storage_class",
]

# Label and annotation names the model interprets.
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
DAEMONSET_POD_ANNOTATION = "cluster-autoscaler.kubernetes.io/daemonset-pod"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
LEGACY_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
LEGACY_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"
DEFAULT_SCHEDULER = "default-scheduler"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class ModelError(ValueError):
    """A Kubernetes object could not be parsed.

    The message names the object, the field and the expected form.
    """

    def __init__(
        self,
        obj: str,
        field: str,
        expected: str,
        value: object = dataclasses.MISSING,
        hint: str = "",
    ):
        self.obj = obj
        self.field = field
        self.expected = expected
        got = "" if value is dataclasses.MISSING else f", got {value!r}"
        after = f"; {hint}" if hint else ""
        super().__init__(f"{obj}: {field}: expected {expected}{got}{after}")


# --------------------------------------------------------------------------- resources

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
_EMPTY: Mapping[str, int] = {}


class Resources:
    """An immutable vector of integer resource amounts.

    `cpu` is in milli-cores, `memory` and `ephemeral_storage` in bytes, `pods` a count,
    `extended` maps other Kubernetes resource names (`nvidia.com/gpu`, `hugepages-2Mi`) to
    integer amounts. Zero-valued extended entries are dropped so equal vectors compare equal.
    """

    __slots__ = ("_hash", "cpu", "ephemeral_storage", "extended", "memory", "pods")

    cpu: int
    memory: int
    pods: int
    ephemeral_storage: int
    extended: Mapping[str, int]
    _hash: int | None
    ZERO: ClassVar[Resources]

    def __init__(
        self,
        cpu: int = 0,
        memory: int = 0,
        pods: int = 0,
        ephemeral_storage: int = 0,
        extended: Mapping[str, int] | None = None,
    ) -> None:
        object.__setattr__(self, "cpu", cpu)
        object.__setattr__(self, "memory", memory)
        object.__setattr__(self, "pods", pods)
        object.__setattr__(self, "ephemeral_storage", ephemeral_storage)
        if extended:
            ext = {k: v for k, v in extended.items() if v}
            object.__setattr__(self, "extended", ext if ext else _EMPTY)
        else:
            object.__setattr__(self, "extended", _EMPTY)
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Resources is immutable (tried to set {name})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            Resources,
            (self.cpu, self.memory, self.pods, self.ephemeral_storage, dict(self.extended)),
        )

    def __repr__(self) -> str:
        parts = [f"cpu={self.cpu}", f"memory={self.memory}", f"pods={self.pods}"]
        if self.ephemeral_storage:
            parts.append(f"ephemeral_storage={self.ephemeral_storage}")
        if self.extended:
            parts.append(f"extended={dict(self.extended)!r}")
        return f"Resources({', '.join(parts)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return (
            self.cpu == other.cpu
            and self.memory == other.memory
            and self.pods == other.pods
            and self.ephemeral_storage == other.ephemeral_storage
            and self.extended == other.extended
        )

    def __hash__(self) -> int:
        h: int | None = self._hash
        if h is None:
            h = hash(
                (
                    self.cpu,
                    self.memory,
                    self.pods,
                    self.ephemeral_storage,
                    frozenset(self.extended.items()),
                )
            )
            object.__setattr__(self, "_hash", h)
        return h

    def __add__(self, other: Resources) -> Resources:
        if not isinstance(other, Resources):
            return NotImplemented
        ext: Mapping[str, int] | None = None
        if other.extended:
            if self.extended:
                merged = dict(self.extended)
                for k, v in other.extended.items():
                    merged[k] = merged.get(k, 0) + v
                ext = merged
            else:
                ext = other.extended
        elif self.extended:
            ext = self.extended
        return Resources(
            self.cpu + other.cpu,
            self.memory + other.memory,
            self.pods + other.pods,
            self.ephemeral_storage + other.ephemeral_storage,
            ext,
        )

    def __sub__(self, other: Resources) -> Resources:
        if not isinstance(other, Resources):
            return NotImplemented
        ext: Mapping[str, int] | None = self.extended
        if other.extended:
            merged = dict(self.extended)
            for k, v in other.extended.items():
                merged[k] = merged.get(k, 0) - v
            ext = merged
        return Resources(
            self.cpu - other.cpu,
            self.memory - other.memory,
            self.pods - other.pods,
            self.ephemeral_storage - other.ephemeral_storage,
            ext,
        )

    def __mul__(self, factor: int) -> Resources:
        return Resources(
            self.cpu * factor,
            self.memory * factor,
            self.pods * factor,
            self.ephemeral_storage * factor,
            {k: v * factor for k, v in self.extended.items()},
        )

    __rmul__ = __mul__

    def fits(self, other: Resources) -> bool:
        """Whether this request fits into `other` (free capacity) in every dimension."""
        if (
            self.cpu > other.cpu
            or self.memory > other.memory
            or self.pods > other.pods
            or self.ephemeral_storage > other.ephemeral_storage
        ):
            return False
        if self.extended:
            oext = other.extended
            for k, v in self.extended.items():
                if v > oext.get(k, 0):
                    return False
        return True

    def insufficient(self, free: Resources) -> list[str]:
        """Kubernetes names of the resources this request does not fit into `free`."""
        out: list[str] = []
        if self.pods > free.pods:
            out.append(PODS)
        if self.cpu > free.cpu:
            out.append(CPU)
        if self.memory > free.memory:
            out.append(MEMORY)
        if self.ephemeral_storage > free.ephemeral_storage:
            out.append(EPHEMERAL_STORAGE)
        for k, v in sorted(self.extended.items()):
            if v > free.extended.get(k, 0):
                out.append(k)
        return out

    def is_zero(self) -> bool:
        return not (self.cpu or self.memory or self.pods or self.ephemeral_storage or self.extended)

    def get(self, name: str) -> int:
        """Amount of a resource by its Kubernetes name (`cpu` in milli-cores)."""
        if name == CPU:
            return self.cpu
        if name == MEMORY:
            return self.memory
        if name == PODS:
            return self.pods
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        return self.extended.get(name, 0)

    def names(self) -> list[str]:
        """Kubernetes names of the non-zero resources."""
        out = [
            n
            for n, v in (
                (CPU, self.cpu),
                (MEMORY, self.memory),
                (PODS, self.pods),
                (EPHEMERAL_STORAGE, self.ephemeral_storage),
            )
            if v
        ]
        out.extend(sorted(self.extended))
        return out

    def with_(self, **changes: Any) -> Resources:
        values: dict[str, Any] = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": self.pods,
            "ephemeral_storage": self.ephemeral_storage,
            "extended": self.extended,
        }
        values.update(changes)
        return Resources(**values)

    @classmethod
    def from_k8s(cls, mapping: Mapping[str, Any] | None, *, obj: str, field: str) -> Resources:
        """Parse a Kubernetes ResourceList (`{"cpu": "500m", "memory": "1Gi", ...}`)."""
        if not mapping:
            return ZERO
        if type(mapping) is not dict and not isinstance(mapping, Mapping):
            raise ModelError(obj, field, "a map of resource name to quantity", mapping)
        # Few distinct resource lists exist in a cluster; equal lists share one vector.
        try:
            cache_key: Any = tuple(mapping.items())
            cached = _RESOURCES_CACHE.get(cache_key)
        except TypeError:
            cache_key = None
            cached = None
        if cached is not None:
            return cached
        result = cls._parse_list(mapping, obj=obj, field=field)
        if cache_key is not None:
            if len(_RESOURCES_CACHE) > _CACHE_LIMIT:
                _RESOURCES_CACHE.clear()
            _RESOURCES_CACHE[cache_key] = result
        return result

    @classmethod
    def _parse_list(cls, mapping: Mapping[str, Any], *, obj: str, field: str) -> Resources:
        cpu = memory = pods = eph = 0
        ext: dict[str, int] | None = None
        try:
            for name, value in mapping.items():
                if name == CPU:
                    cpu = parse_cpu_millis(value, obj=obj, field=f"{field}.{name}")
                elif name == MEMORY:
                    memory = parse_int_quantity(value, obj=obj, field=f"{field}.{name}")
                elif name == PODS:
                    pods = parse_int_quantity(value, obj=obj, field=f"{field}.{name}")
                elif name == EPHEMERAL_STORAGE:
                    eph = parse_int_quantity(value, obj=obj, field=f"{field}.{name}")
                else:
                    if ext is None:
                        ext = {}
                    ext[name] = parse_int_quantity(value, obj=obj, field=f"{field}.{name}")
        except QuantityError as exc:
            raise ModelError(exc.obj, exc.field, exc.expected, exc.value) from None
        return cls(cpu, memory, pods, eph, ext)

    def to_k8s(self) -> dict[str, str]:
        """A Kubernetes ResourceList with canonical quantity strings (zeros omitted)."""
        out: dict[str, str] = {}
        if self.cpu:
            out[CPU] = format_cpu(self.cpu)
        if self.memory:
            out[MEMORY] = format_bytes(self.memory)
        if self.pods:
            out[PODS] = str(self.pods)
        if self.ephemeral_storage:
            out[EPHEMERAL_STORAGE] = format_bytes(self.ephemeral_storage)
        for k in sorted(self.extended):
            v = self.extended[k]
            out[k] = format_bytes(v) if k.startswith("hugepages-") else str(v)
        return out


ZERO = Resources()
Resources.ZERO = ZERO
_OVERCOMMITTABLE = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE})
_CACHE_LIMIT = 10_000
_RESOURCES_CACHE: dict[Any, Resources] = {}
POD_SLOT = Resources(pods=1)


def _max_resources(a: Resources, b: Resources) -> Resources:
    ext: dict[str, int] | None = None
    if a.extended or b.extended:
        ext = dict(a.extended)
        for k, v in b.extended.items():
            if v > ext.get(k, 0):
                ext[k] = v
    return Resources(
        max(a.cpu, b.cpu),
        max(a.memory, b.memory),
        max(a.pods, b.pods),
        max(a.ephemeral_storage, b.ephemeral_storage),
        ext,
    )


# --------------------------------------------------------------------------- small types


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def to_k8s(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}" if self.value else f"{{{self.key}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration matches `taint` (as `v1.Toleration.ToleratesTaint`)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            # An empty key with Exists tolerates every taint (of the effect, if given).
            return True
        if not self.key:
            return False
        return self.value == taint.value

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operator": self.operator}
        if self.key:
            out["key"] = self.key
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str = ""
    controller: bool = False
    api_version: str = ""

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "uid": self.uid}
        if self.api_version:
            out["apiVersion"] = self.api_version
        if self.controller:
            out["controller"] = True
        return out


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return labels.get(self.key) in self.values
        if op == "NotIn":
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A `metav1.LabelSelector`. The empty selector matches every set of labels."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [
                {
                    "key": r.key,
                    "operator": r.operator,
                    **({"values": list(r.values)} if r.values else {}),
                }
                for r in self.match_expressions
            ]
        return out


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        """Whether a label (or field) value, `None` when absent, satisfies the requirement."""
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt"):
            if value is None or len(self.values) != 1:
                return False
            try:
                actual = int(value)
                bound = int(self.values[0])
            except ValueError:
                return False
            return actual > bound if op == "Gt" else actual < bound
        return False

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed together; an empty term matches no node (as upstream)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False
        for req in self.match_expressions:
            if not req.matches(labels.get(req.key)):
                return False
        for req in self.match_fields:
            # metadata.name is the only supported field.
            if req.key != "metadata.name" or not req.matches(node_name):
                return False
        return True

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_expressions:
            out["matchExpressions"] = [r.to_k8s() for r in self.match_expressions]
        if self.match_fields:
            out["matchFields"] = [r.to_k8s() for r in self.match_fields]
        return out


def node_selector_matches(
    terms: Sequence[NodeSelectorTerm], node_name: str, labels: Mapping[str, str]
) -> bool:
    """Terms are ORed: a node matches when any term matches."""
    return any(term.matches(node_name, labels) for term in terms)


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """Required node affinity terms (ORed); `None` terms means no requirement."""

    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[tuple[int, NodeSelectorTerm], ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term.

    `namespaces` empty and `namespace_selector` `None` mean the pod's own namespace, which
    the parser resolves into `namespaces`. `label_selector` `None` matches no pod.
    """

    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None

    def matches_namespace(
        self, namespace: str, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> bool:
        if namespace in self.namespaces:
            return True
        if self.namespace_selector is None:
            return False
        labels = namespace_labels.get(namespace)
        if labels is None:
            # Every namespace carries its name as a label; that much is known without
            # the Namespace object.
            labels = {NAMESPACE_NAME_LABEL: namespace}
        return self.namespace_selector.matches(labels)

    def matches_pod(self, pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        if self.label_selector is None:
            return False
        return self.matches_namespace(
            pod.namespace, namespace_labels
        ) and self.label_selector.matches(pod.labels)


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """Required inter-pod affinity and anti-affinity terms of a pod."""

    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class Affinity:
    node: NodeAffinity | None = None
    pod: PodAffinity | None = None


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "maxSkew": self.max_skew,
            "topologyKey": self.topology_key,
            "whenUnsatisfiable": self.when_unsatisfiable,
            "nodeAffinityPolicy": self.node_affinity_policy,
            "nodeTaintsPolicy": self.node_taints_policy,
        }
        if self.label_selector is not None:
            out["labelSelector"] = self.label_selector.to_k8s()
        if self.min_domains is not None:
            out["minDomains"] = self.min_domains
        if self.match_label_keys:
            out["matchLabelKeys"] = list(self.match_label_keys)
        return out


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        """Same port and protocol, and one of the IPs is the wildcard or both are equal."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return (
            self.host_ip == other.host_ip or self.host_ip == "0.0.0.0" or other.host_ip == "0.0.0.0"
        )


@dataclass(frozen=True, slots=True)
class Volume:
    """A pod volume: its name, its source kind (`persistentVolumeClaim`, `emptyDir`,
    `hostPath`, `csi`, `ephemeral`, `configMap`, ...) and what the simulator needs of it."""

    name: str
    kind: str
    claim_name: str = ""
    medium: str = ""
    driver: str = ""
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class NodeCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None


# --------------------------------------------------------------------------- helpers


_TIME_CACHE: dict[str, datetime] = {}


def _parse_time(value: Any, obj: str, field: str) -> datetime | None:
    if value is None or value == "":
        return None
    cached = _TIME_CACHE.get(value) if isinstance(value, str) else None
    if cached is not None:
        return cached
    parsed = _parse_time_uncached(value, obj, field)
    if isinstance(value, str):
        if len(_TIME_CACHE) > _CACHE_LIMIT:
            _TIME_CACHE.clear()
        _TIME_CACHE[value] = parsed
    return parsed


def _parse_time_uncached(value: Any, obj: str, field: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise ModelError(obj, field, "an RFC 3339 timestamp such as 2024-01-02T03:04:05Z", value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ModelError(
            obj, field, "an RFC 3339 timestamp such as 2024-01-02T03:04:05Z", value
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _str_map(value: Any, obj: str, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelError(obj, field, "a map of string to string", value)
    return value


def _int(value: Any, obj: str, field: str, default: int | None = None) -> int:
    if value is None:
        if default is None:
            raise ModelError(obj, field, "an integer")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelError(obj, field, "an integer", value)
    return value


def _list(value: Any, obj: str, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ModelError(obj, field, "a list", value)
    return value


def _dict(value: Any, obj: str, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelError(obj, field, "an object", value)
    return value


def _meta(raw: Mapping[str, Any], kind: str, namespaced: bool) -> tuple[dict[str, Any], str]:
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise ModelError(kind, "<object>", "a JSON object", raw)
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        raise ModelError(kind, "metadata", "an object with a name")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ModelError(kind, "metadata.name", "a non-empty string", name)
    if namespaced:
        ns = meta.get("namespace") or "default"
        return meta, f"{kind} {ns}/{name}"
    return meta, f"{kind} {name}"


def parse_label_selector(value: Any, obj: str, field: str) -> LabelSelector | None:
    """A `metav1.LabelSelector`; `None` (absent) stays `None`, which matches nothing."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ModelError(obj, field, "a label selector object", value)
    labels = _str_map(value.get("matchLabels"), obj, f"{field}.matchLabels")
    exprs = []
    for i, e in enumerate(_list(value.get("matchExpressions"), obj, f"{field}.matchExpressions")):
        f = f"{field}.matchExpressions[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("key"), str):
            raise ModelError(obj, f, "an object with key, operator and values", e)
        op = e.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ModelError(obj, f"{f}.operator", "one of In, NotIn, Exists, DoesNotExist", op)
        values = tuple(_list(e.get("values"), obj, f"{f}.values"))
        if op in ("In", "NotIn") and not values:
            raise ModelError(obj, f"{f}.values", f"a non-empty list for operator {op}")
        exprs.append(LabelSelectorRequirement(e["key"], op, values))
    return LabelSelector(tuple(sorted(labels.items())), tuple(exprs))


_NODE_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _parse_node_requirements(
    value: Any, obj: str, field: str
) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    for i, e in enumerate(_list(value, obj, field)):
        f = f"{field}[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("key"), str):
            raise ModelError(obj, f, "an object with key, operator and values", e)
        op = e.get("operator")
        if op not in _NODE_OPS:
            raise ModelError(obj, f"{f}.operator", "one of " + ", ".join(_NODE_OPS), op)
        values = tuple(str(v) for v in _list(e.get("values"), obj, f"{f}.values"))
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise ModelError(
                    obj, f"{f}.values", f"exactly one integer for operator {op}", list(values)
                )
            try:
                int(values[0])
            except ValueError:
                raise ModelError(
                    obj, f"{f}.values", f"an integer for operator {op}", values[0]
                ) from None
        out.append(NodeSelectorRequirement(e["key"], op, values))
    return tuple(out)


def parse_node_selector_terms(value: Any, obj: str, field: str) -> tuple[NodeSelectorTerm, ...]:
    terms = []
    for i, t in enumerate(_list(value, obj, field)):
        f = f"{field}[{i}]"
        t = _dict(t, obj, f)
        terms.append(
            NodeSelectorTerm(
                _parse_node_requirements(t.get("matchExpressions"), obj, f"{f}.matchExpressions"),
                _parse_node_requirements(t.get("matchFields"), obj, f"{f}.matchFields"),
            )
        )
    return tuple(terms)


def _parse_pod_affinity_terms(
    value: Any, obj: str, field: str, namespace: str, labels: Mapping[str, str]
) -> tuple[PodAffinityTerm, ...]:
    out = []
    for i, t in enumerate(_list(value, obj, field)):
        f = f"{field}[{i}]"
        t = _dict(t, obj, f)
        key = t.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise ModelError(obj, f"{f}.topologyKey", "a non-empty label key", key)
        selector = parse_label_selector(t.get("labelSelector"), obj, f"{f}.labelSelector")
        # matchLabelKeys / mismatchLabelKeys merge the incoming pod's label values into the
        # selector, as the API server does.
        extra: list[LabelSelectorRequirement] = []
        for k in _list(t.get("matchLabelKeys"), obj, f"{f}.matchLabelKeys"):
            if k in labels:
                extra.append(LabelSelectorRequirement(k, "In", (labels[k],)))
        for k in _list(t.get("mismatchLabelKeys"), obj, f"{f}.mismatchLabelKeys"):
            if k in labels:
                extra.append(LabelSelectorRequirement(k, "NotIn", (labels[k],)))
        if extra and selector is not None:
            selector = LabelSelector(
                selector.match_labels, selector.match_expressions + tuple(extra)
            )
        namespaces = frozenset(_list(t.get("namespaces"), obj, f"{f}.namespaces"))
        ns_selector = parse_label_selector(
            t.get("namespaceSelector"), obj, f"{f}.namespaceSelector"
        )
        if not namespaces and ns_selector is None:
            namespaces = frozenset((namespace,))
        out.append(PodAffinityTerm(key, selector, namespaces, ns_selector))
    return tuple(out)


def _parse_affinity(
    value: Any, obj: str, field: str, namespace: str, labels: Mapping[str, str]
) -> Affinity | None:
    if not value:
        return None
    value = _dict(value, obj, field)
    node: NodeAffinity | None = None
    na = value.get("nodeAffinity")
    if na:
        na = _dict(na, obj, f"{field}.nodeAffinity")
        req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
        required = None
        if req is not None:
            req = _dict(
                req, obj, f"{field}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            )
            required = parse_node_selector_terms(
                req.get("nodeSelectorTerms"),
                obj,
                f"{field}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
            )
        preferred = []
        pf = f"{field}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        for i, p in enumerate(
            _list(na.get("preferredDuringSchedulingIgnoredDuringExecution"), obj, pf)
        ):
            p = _dict(p, obj, f"{pf}[{i}]")
            terms = parse_node_selector_terms(
                [p.get("preference") or {}], obj, f"{pf}[{i}].preference"
            )
            preferred.append((_int(p.get("weight"), obj, f"{pf}[{i}].weight", 1), terms[0]))
        node = NodeAffinity(required, tuple(preferred))
    pod: PodAffinity | None = None
    pa = _dict(value.get("podAffinity"), obj, f"{field}.podAffinity")
    paa = _dict(value.get("podAntiAffinity"), obj, f"{field}.podAntiAffinity")
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    aff = _parse_pod_affinity_terms(
        pa.get(key), obj, f"{field}.podAffinity.{key}", namespace, labels
    )
    anti = _parse_pod_affinity_terms(
        paa.get(key), obj, f"{field}.podAntiAffinity.{key}", namespace, labels
    )
    if aff or anti:
        pod = PodAffinity(aff, anti)
    if node is None and pod is None:
        return None
    return Affinity(node, pod)


_TOLERATIONS_CACHE: dict[Any, tuple[Toleration, ...]] = {}
_OWNERS_CACHE: dict[Any, tuple[OwnerRef, ...]] = {}


def _cache_key(items: list[Any]) -> Any:
    """A hashable key for a list of flat JSON objects, or `None` when not flat."""
    try:
        # Built without a Python-level loop: this runs for every pod's owners.
        key = tuple(map(tuple, map(dict.items, items)))
        hash(key)
    except TypeError:
        return None
    return key


def _parse_tolerations(value: Any, obj: str, field: str) -> tuple[Toleration, ...]:
    if not value:
        return ()
    key = _cache_key(value) if isinstance(value, list) else None
    if key is not None:
        cached = _TOLERATIONS_CACHE.get(key)
        if cached is not None:
            return cached
    result = _parse_tolerations_uncached(value, obj, field)
    if key is not None:
        if len(_TOLERATIONS_CACHE) > _CACHE_LIMIT:
            _TOLERATIONS_CACHE.clear()
        _TOLERATIONS_CACHE[key] = result
    return result


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_EFFECT_FORM = "one of " + ", ".join(_TAINT_EFFECTS) + " or empty (every effect)"


def _parse_tolerations_uncached(value: Any, obj: str, field: str) -> tuple[Toleration, ...]:
    # The API server refuses what is refused here; a snapshot or scenario has no API server
    # in front of it, and a misspelt effect would otherwise tolerate nothing, silently.
    out = []
    for i, t in enumerate(_list(value, obj, field)):
        f = f"{field}[{i}]"
        t = _dict(t, obj, f)
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ModelError(obj, f"{f}.operator", "Equal or Exists", op)
        effect = t.get("effect") or ""
        if effect and effect not in _TAINT_EFFECTS:
            raise ModelError(obj, f"{f}.effect", _TOLERATION_EFFECT_FORM, effect)
        key = t.get("key") or ""
        if not isinstance(key, str):
            raise ModelError(obj, f"{f}.key", "a string", key)
        val = t.get("value") or ""
        if not isinstance(val, str):
            raise ModelError(obj, f"{f}.value", "a string", val)
        seconds = t.get("tolerationSeconds")
        out.append(
            Toleration(
                key=key,
                operator=op,
                value=val,
                effect=effect,
                toleration_seconds=None
                if seconds is None
                else _int(seconds, obj, f"{f}.tolerationSeconds"),
            )
        )
    return tuple(out)


def _parse_taints(value: Any, obj: str, field: str) -> tuple[Taint, ...]:
    out = []
    for i, t in enumerate(_list(value, obj, field)):
        f = f"{field}[{i}]"
        t = _dict(t, obj, f)
        key = t.get("key")
        if not isinstance(key, str) or not key:
            raise ModelError(obj, f"{f}.key", "a non-empty string", key)
        effect = t.get("effect")
        if effect not in _TAINT_EFFECTS:
            raise ModelError(obj, f"{f}.effect", "one of " + ", ".join(_TAINT_EFFECTS), effect)
        val = t.get("value") or ""
        if not isinstance(val, str):
            raise ModelError(obj, f"{f}.value", "a string", val)
        out.append(Taint(key, val, effect))
    return tuple(out)


def _parse_owners(meta: Mapping[str, Any], obj: str) -> tuple[OwnerRef, ...]:
    refs = meta.get("ownerReferences")
    if not refs:
        return ()
    key = _cache_key(refs) if isinstance(refs, list) else None
    if key is not None:
        cached = _OWNERS_CACHE.get(key)
        if cached is not None:
            return cached
    result = _parse_owners_uncached(refs, obj)
    if key is not None:
        if len(_OWNERS_CACHE) > _CACHE_LIMIT:
            _OWNERS_CACHE.clear()
        _OWNERS_CACHE[key] = result
    return result


def _parse_owners_uncached(refs: Any, obj: str) -> tuple[OwnerRef, ...]:
    out = []
    for i, r in enumerate(_list(refs, obj, "metadata.ownerReferences")):
        r = _dict(r, obj, f"metadata.ownerReferences[{i}]")
        kind = r.get("kind")
        name = r.get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            raise ModelError(
                obj, f"metadata.ownerReferences[{i}]", "an object with kind and name", r
            )
        out.append(
            OwnerRef(
                kind, name, r.get("uid") or "", bool(r.get("controller")), r.get("apiVersion") or ""
            )
        )
    return tuple(out)


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

    def __hash__(self) -> int:
        return hash((self.name, self.uid))

    def with_(self, **changes: Any) -> Node:
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

    def to_k8s(self) -> dict[str, Any]:
        """A valid Kubernetes Node object (apiVersion v1, kind Node)."""
        meta: dict[str, Any] = {"name": self.name, "labels": dict(self.labels)}
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        if self.uid:
            meta["uid"] = self.uid
        if self.creation_time is not None:
            meta["creationTimestamp"] = _format_time(self.creation_time)
        if self.deletion_time is not None:
            meta["deletionTimestamp"] = _format_time(self.deletion_time)
        spec: dict[str, Any] = {}
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
            entry: dict[str, Any] = {"type": c.type, "status": c.status}
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


def parse_node(raw: Mapping[str, Any]) -> Node:
    """Parse a Kubernetes Node. Allocatable falls back to capacity when absent."""
    meta, obj = _meta(raw, "Node", namespaced=False)
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
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
        cond = NodeCondition(
            type=c.get("type") or "",
            status=c.get("status") or "Unknown",
            reason=c.get("reason") or "",
            message=c.get("message") or "",
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
        provider_id=spec.get("providerID") or "",
        creation_time=_parse_time(meta.get("creationTimestamp"), obj, "metadata.creationTimestamp"),
        deletion_time=_parse_time(meta.get("deletionTimestamp"), obj, "metadata.deletionTimestamp"),
        uid=meta.get("uid") or "",
        conditions=tuple(conditions),
    )


# --------------------------------------------------------------------------- Pod


@dataclass(frozen=True, slots=True)
class Pod:
    """A Kubernetes Pod reduced to what scheduling and draining need.

    `requests` is what the scheduler accounts for the pod: max(sum of containers, largest
    init container) with restartable (sidecar) init containers added, plus `spec.overhead`,
    plus one pod slot. Equality is by value; hashing by namespace, name and uid.
    """

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    phase: str = "Pending"
    priority: int | None = None
    owner: OwnerRef | None = None
    requests: Resources = POD_SLOT
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: Affinity | None = None
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    volumes: tuple[Volume, ...] = ()
    creation_time: datetime | None = None
    deletion_time: datetime | None = None
    termination_grace_seconds: int | None = None
    nominated_node_name: str = ""
    unschedulable: bool = False
    scheduler_name: str = DEFAULT_SCHEDULER
    owners: tuple[OwnerRef, ...] = ()
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"

    def __hash__(self) -> int:
        return hash((self.namespace, self.name, self.uid))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_mirror(self) -> bool:
        return MIRROR_POD_ANNOTATION in self.annotations

    @property
    def is_daemonset(self) -> bool:
        if self.owner is not None and self.owner.kind == "DaemonSet":
            return True
        return self.annotations.get(DAEMONSET_POD_ANNOTATION) == "true"

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def has_pod_affinity(self) -> bool:
        return self.affinity is not None and self.affinity.pod is not None

    @property
    def required_node_terms(self) -> tuple[NodeSelectorTerm, ...] | None:
        a = self.affinity
        if a is None or a.node is None:
            return None
        return a.node.required

    def with_(self, **changes: Any) -> Pod:
        return dataclasses.replace(self, **changes)

    def to_k8s(self) -> dict[str, Any]:
        """A valid Kubernetes Pod. Containers collapse into one `main` container holding the
        pod's effective requests (without the pod slot): what scheduling needs is preserved."""
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.labels:
            meta["labels"] = dict(self.labels)
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        if self.uid:
            meta["uid"] = self.uid
        if self.owners:
            meta["ownerReferences"] = [o.to_k8s() for o in self.owners]
        elif self.owner is not None:
            meta["ownerReferences"] = [self.owner.to_k8s()]
        if self.creation_time is not None:
            meta["creationTimestamp"] = _format_time(self.creation_time)
        if self.deletion_time is not None:
            meta["deletionTimestamp"] = _format_time(self.deletion_time)
        container_requests = (
            (self.requests - POD_SLOT).to_k8s() if self.requests.pods else self.requests.to_k8s()
        )
        container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.9"}
        if container_requests:
            container["resources"] = {"requests": container_requests}
            # The API server requires limits equal to requests for extended resources and
            # huge pages, which cannot be overcommitted.
            limits = {k: v for k, v in container_requests.items() if k not in _OVERCOMMITTABLE}
            if limits:
                container["resources"]["limits"] = limits
        if self.host_ports:
            container["ports"] = [
                {
                    "containerPort": hp.port,
                    "hostPort": hp.port,
                    "protocol": hp.protocol,
                    **({"hostIP": hp.host_ip} if hp.host_ip != "0.0.0.0" else {}),
                }
                for hp in self.host_ports
            ]
        spec: dict[str, Any] = {"containers": [container], "schedulerName": self.scheduler_name}
        if self.node_name:
            spec["nodeName"] = self.node_name
        if self.priority is not None:
            spec["priority"] = self.priority
        if self.priority_class_name:
            spec["priorityClassName"] = self.priority_class_name
        if self.tolerations:
            spec["tolerations"] = [t.to_k8s() for t in self.tolerations]
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.termination_grace_seconds is not None:
            spec["terminationGracePeriodSeconds"] = self.termination_grace_seconds
        affinity = _affinity_to_k8s(self.affinity)
        if affinity:
            spec["affinity"] = affinity
        if self.topology_spread:
            spec["topologySpreadConstraints"] = [c.to_k8s() for c in self.topology_spread]
        if self.volumes:
            spec["volumes"] = [_volume_to_k8s(v) for v in self.volumes]
        status: dict[str, Any] = {"phase": self.phase}
        if self.nominated_node_name:
            status["nominatedNodeName"] = self.nominated_node_name
        if self.unschedulable:
            status["conditions"] = [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            ]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _positional_constructor(cls: type[Any]) -> Callable[..., Any]:
    """A function taking every field of the frozen, slotted dataclass `cls` positionally
    and returning the instance.

    A frozen dataclass's `__init__` sets each field through `object.__setattr__(self,
    "name", value)`, a lookup by name per field; parsing builds one `Pod` per pod of the
    cluster and that lookup was nearly half of `parse_pod`. Calling each slot's descriptor
    directly gives the same object (no `__post_init__` exists to skip) at about two thirds
    of the cost. The function is generated from `dataclasses.fields`, so it follows the
    class's fields.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for name in names:
        namespace[f"_set_{name}"] = cls.__dict__[name].__set__
    body = "".join(f"    _set_{name}(self, {name})\n" for name in names)
    source = f"def construct({', '.join(names)}):\n    self = _new(_cls)\n{body}    return self\n"
    # The source holds only the class's own field names (Python identifiers).
    exec(source, namespace)
    construct: Callable[..., Any] = namespace["construct"]
    return construct


_new_pod: Callable[..., Pod] = _positional_constructor(Pod)


def field_replacer(cls: type[Any], changed: Sequence[str]) -> Callable[..., Any]:
    """A function `replace(obj, *values)` returning a copy of `obj`, an instance of the
    frozen, slotted dataclass `cls`, with the fields named in `changed` set to `values`
    (in that order): what `dataclasses.replace(obj, **dict(zip(changed, values)))` returns.

    `dataclasses.replace` goes through `__init__` with a keyword per field; simulation
    copies template nodes and their pods by the thousand, so the copy reads and writes each
    slot through its descriptor instead. Valid only for classes without `__post_init__` or
    `init=False` fields (checked here); generated from `dataclasses.fields`, so it follows
    the class's fields.
    """
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    unknown = [n for n in changed if n not in names]
    if unknown or len(set(changed)) != len(changed):
        raise TypeError(f"{cls.__name__}: expected distinct field names, got {list(changed)}")
    if hasattr(cls, "__post_init__") or any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__}: a copy must run __init__ (post-init or init=False)")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    lines = []
    for name in names:
        descriptor = cls.__dict__[name]
        namespace[f"_set_{name}"] = descriptor.__set__
        namespace[f"_get_{name}"] = descriptor.__get__
        value = name if name in changed else f"_get_{name}(obj)"
        lines.append(f"    _set_{name}(new, {value})\n")
    source = (
        f"def replace(obj, {', '.join(changed)}):\n    new = _new(_cls)\n"
        + "".join(lines)
        + "    return new\n"
    )
    # The source holds only the class's own field names (Python identifiers).
    exec(source, namespace)
    replace: Callable[..., Any] = namespace["replace"]
    return replace


def _volume_to_k8s(v: Volume) -> dict[str, Any]:
    if v.kind == "persistentVolumeClaim":
        return {"name": v.name, "persistentVolumeClaim": {"claimName": v.claim_name}}
    if v.kind == "emptyDir":
        return {"name": v.name, "emptyDir": {"medium": v.medium} if v.medium else {}}
    if v.kind == "hostPath":
        return {"name": v.name, "hostPath": {"path": "/"}}
    if v.kind == "csi":
        return {"name": v.name, "csi": {"driver": v.driver}}
    return {"name": v.name, v.kind: {}}


def _affinity_to_k8s(a: Affinity | None) -> dict[str, Any]:
    if a is None:
        return {}
    out: dict[str, Any] = {}
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    if a.node is not None:
        na: dict[str, Any] = {}
        if a.node.required is not None:
            na[key] = {"nodeSelectorTerms": [t.to_k8s() for t in a.node.required]}
        if a.node.preferred:
            na["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "preference": t.to_k8s()} for w, t in a.node.preferred
            ]
        if na:
            out["nodeAffinity"] = na

    def terms(ts: tuple[PodAffinityTerm, ...]) -> list[dict[str, Any]]:
        result = []
        for t in ts:
            entry: dict[str, Any] = {"topologyKey": t.topology_key}
            if t.label_selector is not None:
                entry["labelSelector"] = t.label_selector.to_k8s()
            if t.namespaces:
                entry["namespaces"] = sorted(t.namespaces)
            if t.namespace_selector is not None:
                entry["namespaceSelector"] = t.namespace_selector.to_k8s()
            result.append(entry)
        return result

    if a.pod is not None:
        if a.pod.affinity:
            out["podAffinity"] = {key: terms(a.pod.affinity)}
        if a.pod.anti_affinity:
            out["podAntiAffinity"] = {key: terms(a.pod.anti_affinity)}
    return out


def _container_requests(c: Mapping[str, Any], obj: str, field: str) -> Resources:
    resources = c.get("resources")
    if not resources:
        return ZERO
    if not isinstance(resources, dict):
        raise ModelError(obj, f"{field}.resources", "an object with requests and limits", resources)
    requests = resources.get("requests")
    limits = resources.get("limits")
    if limits:
        # The API server defaults a missing request to the limit; manifests read offline
        # have not been through defaulting, so do it here.
        if not isinstance(limits, dict):
            raise ModelError(
                obj, f"{field}.resources.limits", "a map of resource name to quantity", limits
            )
        if requests:
            if not isinstance(requests, dict):
                raise ModelError(
                    obj,
                    f"{field}.resources.requests",
                    "a map of resource name to quantity",
                    requests,
                )
            missing = [k for k in limits if k not in requests]
            if missing:
                merged = dict(requests)
                for k in missing:
                    merged[k] = limits[k]
                requests = merged
        else:
            requests = limits
    return Resources.from_k8s(requests, obj=obj, field=f"{field}.resources.requests")


_REQUESTS_CACHE: dict[Any, Resources] = {}


def _shared_requests(
    cpu: int, memory: int, pods: int, eph: int, ext: dict[str, int] | None
) -> Resources:
    """One `Resources` object per distinct request vector: pods of a workload share it."""
    key = (cpu, memory, pods, eph, tuple(sorted(ext.items())) if ext else None)
    cached = _REQUESTS_CACHE.get(key)
    if cached is None:
        if len(_REQUESTS_CACHE) > _CACHE_LIMIT:
            _REQUESTS_CACHE.clear()
        cached = _REQUESTS_CACHE[key] = Resources(cpu, memory, pods, eph, ext)
    return cached


# Pod requests (with the pod slot) by the requests of the pod's only container.
_ONE_CONTAINER_REQUESTS: dict[Resources, Resources] = {}
_FIRST_REQUESTS_FIELD = "spec.containers[0].resources.requests"


def _pod_requests(spec: Mapping[str, Any], obj: str) -> tuple[Resources, tuple[HostPort, ...]]:
    containers = spec.get("containers")
    if not isinstance(containers, list):
        raise ModelError(obj, "spec.containers", "a list of containers", containers)
    if len(containers) == 1:
        # Most pods: one container with requests and no limits, ports, init containers,
        # overhead or pod-level resources. The general path below gives the same vector:
        # the container's requests plus the pod slot, shared by every pod asking for it.
        c = containers[0]
        if type(c) is dict and not c.get("ports"):
            resources = c.get("resources")
            if type(resources) is dict and not resources.get("limits"):
                requests = resources.get("requests")
                if (
                    type(requests) is dict
                    and requests
                    and not spec.get("initContainers")
                    and not spec.get("overhead")
                    and not spec.get("resources")
                ):
                    own = Resources.from_k8s(requests, obj=obj, field=_FIRST_REQUESTS_FIELD)
                    shared = _ONE_CONTAINER_REQUESTS.get(own)
                    if shared is None:
                        if len(_ONE_CONTAINER_REQUESTS) > _CACHE_LIMIT:
                            _ONE_CONTAINER_REQUESTS.clear()
                        shared = _ONE_CONTAINER_REQUESTS[own] = _shared_requests(
                            own.cpu,
                            own.memory,
                            own.pods + 1,
                            own.ephemeral_storage,
                            dict(own.extended) if own.extended else None,
                        )
                    return shared, ()
    ports: list[HostPort] = []
    # Regular containers are summed with plain integers: this runs for every pod.
    cpu = memory = eph = 0
    pods = 1  # the pod slot
    ext: dict[str, int] | None = None
    for i, c in enumerate(containers):
        if not isinstance(c, dict):
            raise ModelError(obj, f"spec.containers[{i}]", "a container object", c)
        if c.get("resources"):
            r = _container_requests(c, obj, f"spec.containers[{i}]")
            cpu += r.cpu
            memory += r.memory
            pods += r.pods
            eph += r.ephemeral_storage
            if r.extended:
                if ext is None:
                    ext = {}
                for k, v in r.extended.items():
                    ext[k] = ext.get(k, 0) + v
        if c.get("ports"):
            ports.extend(_host_ports(c["ports"], obj, f"spec.containers[{i}].ports"))
    init = spec.get("initContainers")
    overhead = spec.get("overhead")
    pod_level = spec.get("resources")
    if not init and not overhead and not pod_level:
        return _shared_requests(cpu, memory, pods, eph, ext), tuple(ports)
    total = Resources(cpu, memory, pods - 1, eph, ext)
    if init:
        restartable = ZERO
        init_max = ZERO
        for i, c in enumerate(_list(init, obj, "spec.initContainers")):
            f = f"spec.initContainers[{i}]"
            c = _dict(c, obj, f)
            r = _container_requests(c, obj, f)
            if c.get("restartPolicy") == "Always":
                # Sidecars keep running: they add to the regular containers, and every later
                # init container runs next to the sidecars started before it.
                total = total + r
                restartable = restartable + r
                candidate = restartable
                if c.get("ports"):
                    ports.extend(_host_ports(c["ports"], obj, f"{f}.ports"))
            else:
                candidate = r + restartable
            init_max = _max_resources(init_max, candidate)
        total = _max_resources(total, init_max)
    if pod_level:
        # Pod-level resources (spec.resources) replace the containers' aggregate for the
        # resources they name; the scheduler supports cpu and memory there.
        requests = _dict(pod_level, obj, "spec.resources").get("requests")
        if requests:
            level = Resources.from_k8s(requests, obj=obj, field="spec.resources.requests")
            total = total.with_(
                cpu=level.cpu if CPU in requests else total.cpu,
                memory=level.memory if MEMORY in requests else total.memory,
            )
    if overhead:
        total = total + Resources.from_k8s(overhead, obj=obj, field="spec.overhead")
    total = total + POD_SLOT
    return (
        _shared_requests(
            total.cpu, total.memory, total.pods, total.ephemeral_storage, dict(total.extended)
        ),
        tuple(ports),
    )


def _host_ports(value: Any, obj: str, field: str) -> list[HostPort]:
    out = []
    for i, p in enumerate(_list(value, obj, field)):
        p = _dict(p, obj, f"{field}[{i}]")
        hp = p.get("hostPort")
        if not hp:
            continue
        port = _int(hp, obj, f"{field}[{i}].hostPort")
        out.append(HostPort(port, p.get("protocol") or "TCP", p.get("hostIP") or "0.0.0.0"))
    return out


def _parse_volumes(value: Any, obj: str) -> tuple[Volume, ...]:
    out = []
    for i, v in enumerate(_list(value, obj, "spec.volumes")):
        f = f"spec.volumes[{i}]"
        v = _dict(v, obj, f)
        name = v.get("name") or ""
        kind = next((k for k in v if k != "name"), "emptyDir")
        src = v.get(kind)
        src = src if isinstance(src, dict) else {}
        if kind == "persistentVolumeClaim":
            claim = src.get("claimName")
            if not isinstance(claim, str) or not claim:
                raise ModelError(
                    obj, f"{f}.persistentVolumeClaim.claimName", "a non-empty string", claim
                )
            out.append(Volume(name, kind, claim_name=claim, read_only=bool(src.get("readOnly"))))
        elif kind == "emptyDir":
            out.append(Volume(name, kind, medium=src.get("medium") or ""))
        elif kind == "csi":
            out.append(Volume(name, kind, driver=src.get("driver") or ""))
        elif kind == "ephemeral":
            # A generic ephemeral volume is backed by a PVC named <pod>-<volume>.
            out.append(Volume(name, kind, claim_name=""))
        else:
            out.append(Volume(name, kind))
    return tuple(out)


def _parse_spread(
    value: Any, obj: str, labels: Mapping[str, str]
) -> tuple[TopologySpreadConstraint, ...]:
    out = []
    for i, c in enumerate(_list(value, obj, "spec.topologySpreadConstraints")):
        f = f"spec.topologySpreadConstraints[{i}]"
        c = _dict(c, obj, f)
        max_skew = _int(c.get("maxSkew"), obj, f"{f}.maxSkew")
        if max_skew < 1:
            raise ModelError(obj, f"{f}.maxSkew", "an integer >= 1", max_skew)
        key = c.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise ModelError(obj, f"{f}.topologyKey", "a non-empty label key", key)
        when = c.get("whenUnsatisfiable") or "DoNotSchedule"
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise ModelError(obj, f"{f}.whenUnsatisfiable", "DoNotSchedule or ScheduleAnyway", when)
        selector = parse_label_selector(c.get("labelSelector"), obj, f"{f}.labelSelector")
        match_keys = tuple(_list(c.get("matchLabelKeys"), obj, f"{f}.matchLabelKeys"))
        if match_keys and selector is not None:
            extra = tuple(
                LabelSelectorRequirement(k, "In", (labels[k],)) for k in match_keys if k in labels
            )
            selector = LabelSelector(selector.match_labels, selector.match_expressions + extra)
        min_domains = c.get("minDomains")
        if min_domains is not None:
            min_domains = _int(min_domains, obj, f"{f}.minDomains")
            if min_domains < 1:
                raise ModelError(obj, f"{f}.minDomains", "an integer >= 1", min_domains)
        nap = c.get("nodeAffinityPolicy") or "Honor"
        ntp = c.get("nodeTaintsPolicy") or "Ignore"
        if nap not in ("Honor", "Ignore"):
            raise ModelError(obj, f"{f}.nodeAffinityPolicy", "Honor or Ignore", nap)
        if ntp not in ("Honor", "Ignore"):
            raise ModelError(obj, f"{f}.nodeTaintsPolicy", "Honor or Ignore", ntp)
        out.append(
            TopologySpreadConstraint(
                max_skew, key, when, selector, min_domains, nap, ntp, match_keys
            )
        )
    return tuple(out)


def parse_pod(raw: Mapping[str, Any]) -> Pod:
    """Parse a Kubernetes Pod (or a pod template wrapped as a Pod)."""
    meta, obj = _meta(raw, "Pod", namespaced=True)
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        raise ModelError(obj, "spec", "an object with containers", spec)
    # This runs for every pod of the cluster: absent fields (most of them) skip the helper
    # call, and the Pod is built positionally, in field order.
    mget = meta.get
    sget = spec.get
    status = raw.get("status") or {}
    namespace = mget("namespace") or "default"
    labels = mget("labels")
    labels = {} if labels is None else _str_map(labels, obj, "metadata.labels")
    requests, ports = _pod_requests(spec, obj)
    owners = _parse_owners(meta, obj) if mget("ownerReferences") else ()
    owner = None
    for o in owners:
        if o.controller:
            owner = o
            break
    unschedulable = _marked_unschedulable(status.get("conditions"), obj)
    priority = sget("priority")
    grace = sget("terminationGracePeriodSeconds")
    annotations = mget("annotations")
    tolerations = sget("tolerations")
    selector = sget("nodeSelector")
    affinity = sget("affinity")
    spread = sget("topologySpreadConstraints")
    volumes = sget("volumes")
    created = mget("creationTimestamp")
    deleted = mget("deletionTimestamp")
    return _new_pod(
        namespace,
        meta["name"],
        mget("uid") or "",
        labels,
        {} if annotations is None else _str_map(annotations, obj, "metadata.annotations"),
        sget("nodeName") or "",
        status.get("phase") or "Pending",
        None if priority is None else _int(priority, obj, "spec.priority"),
        owner,
        requests,
        _parse_tolerations(tolerations, obj, "spec.tolerations") if tolerations else (),
        {} if selector is None else _str_map(selector, obj, "spec.nodeSelector"),
        None
        if affinity is None
        else _parse_affinity(affinity, obj, "spec.affinity", namespace, labels),
        _parse_spread(spread, obj, labels) if spread is not None else (),
        ports,
        _parse_volumes(volumes, obj) if volumes is not None else (),
        None if created is None else _parse_time(created, obj, "metadata.creationTimestamp"),
        None if deleted is None else _parse_time(deleted, obj, "metadata.deletionTimestamp"),
        None if grace is None else _int(grace, obj, "spec.terminationGracePeriodSeconds"),
        status.get("nominatedNodeName") or "",
        unschedulable,
        sget("schedulerName") or DEFAULT_SCHEDULER,
        owners,
        sget("priorityClassName") or "",
        sget("preemptionPolicy") or "PreemptLowerPriority",
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


def _marked_unschedulable(conditions: Any, obj: str) -> bool:
    """Whether a pod's `status.conditions` hold the scheduler's verdict
    PodScheduled=False/Unschedulable."""
    if not conditions:
        return False
    return any(
        isinstance(c, dict)
        and c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in _list(conditions, obj, "status.conditions")
    )


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


def _pod_from_template(template: Any, obj: str, field: str, namespace: str, name: str) -> Pod:
    template = _dict(template, obj, field)
    meta = dict(_dict(template.get("metadata"), obj, f"{field}.metadata"))
    meta.setdefault("name", name)
    meta["namespace"] = namespace
    try:
        return parse_pod({"metadata": meta, "spec": template.get("spec")})
    except ModelError as exc:
        raise ModelError(obj, f"{field}.{exc.field}", exc.expected) from None


# --------------------------------------------------------------------------- NodeInfo


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node with the pods on it: what `NodeGroup.template_node_info()` returns."""

    node: Node
    pods: tuple[Pod, ...] = ()

    @property
    def name(self) -> str:
        return self.node.name

    def requested(self) -> Resources:
        total = ZERO
        for p in self.pods:
            total = total + p.requests
        return total


# --------------------------------------------------------------------------- workloads


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    uid: str = ""
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    disruptions_allowed: int = 0
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def matches(self, pod: Pod) -> bool:
        """Whether the budget covers `pod` (same namespace, selector matches)."""
        if pod.namespace != self.namespace or self.selector is None:
            return False
        return self.selector.matches(pod.labels)


def _int_or_percent(value: Any, obj: str, field: str) -> int | str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ModelError(obj, field, "an integer or a percentage such as 50%", value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if value.endswith("%") and value[:-1].isdigit():
            return value
        if value.isdigit():
            return int(value)
    raise ModelError(obj, field, "an integer or a percentage such as 50%", value)


def parse_pdb(raw: Mapping[str, Any]) -> PodDisruptionBudget:
    meta, obj = _meta(raw, "PodDisruptionBudget", namespaced=True)
    spec = _dict(raw.get("spec"), obj, "spec")
    status = _dict(raw.get("status"), obj, "status")
    return PodDisruptionBudget(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        uid=meta.get("uid") or "",
        selector=parse_label_selector(spec.get("selector"), obj, "spec.selector"),
        min_available=_int_or_percent(spec.get("minAvailable"), obj, "spec.minAvailable"),
        max_unavailable=_int_or_percent(spec.get("maxUnavailable"), obj, "spec.maxUnavailable"),
        disruptions_allowed=_int(
            status.get("disruptionsAllowed"), obj, "status.disruptionsAllowed", 0
        ),
        current_healthy=_int(status.get("currentHealthy"), obj, "status.currentHealthy", 0),
        desired_healthy=_int(status.get("desiredHealthy"), obj, "status.desiredHealthy", 0),
        expected_pods=_int(status.get("expectedPods"), obj, "status.expectedPods", 0),
    )


@dataclass(frozen=True, slots=True)
class DaemonSet:
    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    selector: LabelSelector | None = None
    template: Pod | None = None
    desired_number_scheduled: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def __hash__(self) -> int:
        return hash((self.namespace, self.name, self.uid))


def parse_daemonset(raw: Mapping[str, Any]) -> DaemonSet:
    meta, obj = _meta(raw, "DaemonSet", namespaced=True)
    spec = _dict(raw.get("spec"), obj, "spec")
    status = _dict(raw.get("status"), obj, "status")
    namespace = meta.get("namespace") or "default"
    template = None
    if spec.get("template") is not None:
        template = _pod_from_template(
            spec["template"], obj, "spec.template", namespace, meta["name"]
        )
        # DaemonSet pods are owned by their DaemonSet; the template does not say so.
        owner = OwnerRef("DaemonSet", meta["name"], meta.get("uid") or "", True, "apps/v1")
        template = dataclasses.replace(template, owner=owner, owners=(owner,))
    return DaemonSet(
        namespace=namespace,
        name=meta["name"],
        uid=meta.get("uid") or "",
        labels=_str_map(meta.get("labels"), obj, "metadata.labels"),
        selector=parse_label_selector(spec.get("selector"), obj, "spec.selector"),
        template=template,
        desired_number_scheduled=_int(
            status.get("desiredNumberScheduled"), obj, "status.desiredNumberScheduled", 0
        ),
    )


@dataclass(frozen=True, slots=True)
class Controller:
    """A pod controller: ReplicaSet, ReplicationController, StatefulSet or Job.

    `replicas` is `spec.replicas` (for a Job, `spec.parallelism`), 1 when unset as the API
    server defaults it. `owner` is the controller's own controller (a ReplicaSet's
    Deployment).
    """

    kind: str
    namespace: str
    name: str
    uid: str = ""
    replicas: int | None = 1
    labels: Mapping[str, str] = field(default_factory=dict)
    selector: LabelSelector | None = None
    owner: OwnerRef | None = None
    ready_replicas: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def __hash__(self) -> int:
        return hash((self.kind, self.namespace, self.name, self.uid))


CONTROLLER_KINDS = ("ReplicaSet", "ReplicationController", "StatefulSet", "Job")


def parse_controller(raw: Mapping[str, Any], kind: str | None = None) -> Controller:
    """Parse a ReplicaSet, ReplicationController, StatefulSet or Job (`kind` for items of
    a typed list, which carry no `kind` of their own)."""
    if kind is None:
        kind = raw.get("kind") if isinstance(raw, Mapping) else None
    if kind not in CONTROLLER_KINDS:
        raise ModelError("controller", "kind", "one of " + ", ".join(CONTROLLER_KINDS), kind)
    meta, obj = _meta(raw, kind, namespaced=True)
    spec = _dict(raw.get("spec"), obj, "spec")
    status = _dict(raw.get("status"), obj, "status")
    if kind == "Job":
        # The API server defaults parallelism to 1.
        replicas: int | None = _int(spec.get("parallelism"), obj, "spec.parallelism", 1)
    else:
        replicas = _int(spec.get("replicas"), obj, "spec.replicas", 1)
    selector_raw = spec.get("selector")
    if (
        kind == "ReplicationController"
        and isinstance(selector_raw, dict)
        and "matchLabels" not in selector_raw
    ):
        # An RC's selector is a plain label map.
        selector: LabelSelector | None = LabelSelector(
            tuple(sorted(_str_map(selector_raw, obj, "spec.selector").items()))
        )
    else:
        selector = parse_label_selector(selector_raw, obj, "spec.selector")
    owners = _parse_owners(meta, obj)
    return Controller(
        kind=kind,
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        uid=meta.get("uid") or "",
        replicas=replicas,
        labels=_str_map(meta.get("labels"), obj, "metadata.labels"),
        selector=selector,
        owner=next((o for o in owners if o.controller), None),
        ready_replicas=_int(status.get("readyReplicas"), obj, "status.readyReplicas", 0),
    )


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

    def __hash__(self) -> int:
        return hash((self.name, self.uid))


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

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

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
                NodeSelectorRequirement(e.get("key") or "", "In", tuple(e.get("values") or ()))
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
        keys[name] = tuple(d.get("topologyKeys") or ())
    return CSINode(meta["name"], drivers, keys)


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
}

SUPPORTED_KINDS = tuple(_PARSERS)

# Built-in kinds that a `kubectl get ... -o json` snapshot may hold and that the autoscaler
# does not read (Cluster Autoscaler does not either, or they change nothing it simulates):
# skipped with a warning. Any other kind of a built-in API group is refused, so that a typo
# (`Deploymnet`) is not silently a missing object.
UNREAD_KINDS = frozenset(
    {
        # v1
        "Binding", "ComponentStatus", "Endpoints", "Event", "LimitRange", "PodTemplate",
        "ResourceQuota", "Secret", "Service", "ServiceAccount",
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
        "DeviceClass", "DeviceTaintRule", "ResourceClaim", "ResourceClaimTemplate",
        "ResourceSlice",
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


_decode_json_fast = msgspec.json.Decoder().decode


def decode_json(data: bytes | str) -> Any:
    """A JSON document, exactly as `json.loads` returns it.

    msgspec decodes to the same dicts, lists, strings and numbers (integers of any size
    included) in about half the time. The few inputs it refuses and `json` accepts
    (`NaN`, out-of-range floats, lone surrogates) and every malformed document go to
    `json.loads`, so results and errors (`json.JSONDecodeError`) are `json`'s own.
    """
    try:
        return _decode_json_fast(data)
    except (msgspec.MsgspecError, UnicodeDecodeError):
        return json.loads(data)


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
    # Kinds present in the input that the model does not cover, with their counts.
    skipped: dict[str, int] = field(default_factory=dict)

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

    @classmethod
    def from_items(
        cls,
        items: Iterable[Mapping[str, Any]],
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
        if parser is parse_controller:
            self.add(parse_controller(raw, kind))
        else:
            self.add(parser(raw))

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
        cls, doc: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, strict: bool = False
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
