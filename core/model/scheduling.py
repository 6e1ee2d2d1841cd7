"""What scheduling reads besides resources: taints and tolerations, label and node selectors, node and pod affinity, topology spread, host ports, volumes, owner references, node conditions, and their parsers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from clusterscaler.model.common import (
    _CACHE_LIMIT,
    NAMESPACE_NAME_LABEL,
    JsonObject,
    ModelError,
    _dict,
    _int,
    _list,
    _str_list,
    _str_map,
)

if TYPE_CHECKING:
    from clusterscaler.model.pod import Pod

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

    def to_k8s(self) -> JsonObject:
        out: JsonObject = {"operator": self.operator}
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

    def to_k8s(self) -> JsonObject:
        out: JsonObject = {"kind": self.kind, "name": self.name, "uid": self.uid}
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

    def to_k8s(self) -> JsonObject:
        out: JsonObject = {}
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

    def to_k8s(self) -> JsonObject:
        out: JsonObject = {"key": self.key, "operator": self.operator}
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

    def to_k8s(self) -> JsonObject:
        out: JsonObject = {}
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

    def to_k8s(self) -> JsonObject:
        out: JsonObject = {
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
        values = tuple(_str_list(e.get("values"), obj, f"{f}.values"))
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
        values = tuple(_str_list(e.get("values"), obj, f"{f}.values", numbers=True))
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
        for k in _str_list(t.get("matchLabelKeys"), obj, f"{f}.matchLabelKeys"):
            if k in labels:
                extra.append(LabelSelectorRequirement(k, "In", (labels[k],)))
        for k in _str_list(t.get("mismatchLabelKeys"), obj, f"{f}.mismatchLabelKeys"):
            if k in labels:
                extra.append(LabelSelectorRequirement(k, "NotIn", (labels[k],)))
        if extra and selector is not None:
            selector = LabelSelector(
                selector.match_labels, selector.match_expressions + tuple(extra)
            )
        namespaces = frozenset(_str_list(t.get("namespaces"), obj, f"{f}.namespaces"))
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


# The effects a node taint may have, as the API server validates them.
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_EFFECT_FORM = "one of " + ", ".join(TAINT_EFFECTS) + " or empty (every effect)"


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
        if effect and effect not in TAINT_EFFECTS:
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
        if effect not in TAINT_EFFECTS:
            raise ModelError(obj, f"{f}.effect", "one of " + ", ".join(TAINT_EFFECTS), effect)
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
        uid, api_version, controller = r.get("uid"), r.get("apiVersion"), r.get("controller")
        # A key of the pod's equivalence group and of its controller: strings, as the API
        # server's validation has them, or left out.
        for field, value in (("uid", uid), ("apiVersion", api_version)):
            if value is not None and not isinstance(value, str):
                raise ModelError(obj, f"metadata.ownerReferences[{i}].{field}", "a string", value)
        if controller is not None and not isinstance(controller, bool):
            raise ModelError(
                obj, f"metadata.ownerReferences[{i}].controller", "true or false", controller
            )
        out.append(OwnerRef(kind, name, uid or "", bool(controller), api_version or ""))
    return tuple(out)
