"""ProvisioningRequests (`autoscaling.x-k8s.io/v1` and `v1beta1`) and the PodTemplates their
pod sets name, as Cluster Autoscaler's `apis/provisioningrequest` defines them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clusterscaler.model.common import (
    JsonValue,
    ModelError,
    _dict,
    _int,
    _list,
    _meta,
    _parse_time,
    _str_map,
)
from clusterscaler.model.pod import Pod, parse_pod

PROVISIONING_REQUEST_GROUP = "autoscaling.x-k8s.io"
PROVISIONING_REQUEST_VERSIONS = ("v1", "v1beta1")

# Condition types (CA's apis/provisioningrequest v1).
ACCEPTED = "Accepted"
BOOKING_EXPIRED = "BookingExpired"
CAPACITY_REVOKED = "CapacityRevoked"
PROVISIONED = "Provisioned"
FAILED = "Failed"
CONDITION_TYPES = (ACCEPTED, BOOKING_EXPIRED, CAPACITY_REVOKED, PROVISIONED, FAILED)

# Provisioning classes.
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
SUPPORTED_CLASSES = (CHECK_CAPACITY, BEST_EFFORT_ATOMIC)

# A pod that runs on the capacity of a request names it in this annotation; the deprecated
# key of the v1beta1 days is still recognised, as upstream does.
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
DEPRECATED_CONSUME_ANNOTATION = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
DEPRECATED_CLASS_ANNOTATION = "cluster-autoscaler.kubernetes.io/provisioning-class-name"

# The API server's bounds for `spec.podSets` (the CRD's maxItems).
MAX_POD_SETS = 32


@dataclass(frozen=True, slots=True)
class Condition:
    """One `metav1.Condition` of a request's status."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None
    observed_generation: int = 0

    @property
    def is_true(self) -> bool:
        return self.status == "True"


def find_condition(conditions: Iterable[Condition], type_: str) -> Condition | None:
    """`meta.FindStatusCondition`: the condition of that type, if any."""
    return next((c for c in conditions if c.type == type_), None)


def set_condition(conditions: tuple[Condition, ...], new: Condition) -> tuple[Condition, ...]:
    """`meta.SetStatusCondition`: the condition of that type replaced by `new` (or added),
    keeping the transition time held when its status is unchanged."""
    out = list(conditions)
    for i, c in enumerate(out):
        if c.type != new.type:
            continue
        if c.status == new.status and c.last_transition_time is not None:
            new = dataclasses.replace(new, last_transition_time=c.last_transition_time)
        out[i] = new
        return tuple(out)
    out.append(new)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PodSet:
    """`count` pods shaped by the PodTemplate `template` of the request's namespace."""

    template: str
    count: int


@dataclass(frozen=True, slots=True)
class ProvisioningRequest:
    """A ProvisioningRequest: which pods (`pod_sets`), how (`class_name`, `parameters`),
    and what the autoscaler said so far (`conditions`)."""

    namespace: str
    name: str
    class_name: str
    pod_sets: tuple[PodSet, ...]
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    creation_time: datetime | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()
    api_version: str = f"{PROVISIONING_REQUEST_GROUP}/v1"

    def __hash__(self) -> int:
        return hash((self.namespace, self.name, self.uid))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pod_count(self) -> int:
        return sum(s.count for s in self.pod_sets)

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    def is_true(self, type_: str) -> bool:
        c = self.condition(type_)
        return c is not None and c.is_true


@dataclass(frozen=True, slots=True)
class PodTemplate:
    """A PodTemplate: the pod its `template` describes, named after the PodTemplate, and
    the `template` as the API server holds it (`raw_template`: a CapacityBuffer's
    controller copies it whole)."""

    namespace: str
    name: str
    pod: Pod
    generation: int = 0
    raw_template: Mapping[str, JsonValue] = field(default_factory=dict, compare=False)

    def __hash__(self) -> int:
        return hash((self.namespace, self.name))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _str(value: Any, obj: str, field_: str, expected: str = "a string") -> str:
    if not isinstance(value, str):
        raise ModelError(obj, field_, expected, value)
    return value


def _parse_conditions(value: Any, obj: str) -> tuple[Condition, ...]:
    out = []
    for i, raw in enumerate(_list(value, obj, "status.conditions")):
        where = f"status.conditions[{i}]"
        if not isinstance(raw, dict):
            raise ModelError(obj, where, "an object with type and status", raw)
        status = raw.get("status")
        if status not in ("True", "False", "Unknown"):
            raise ModelError(obj, f"{where}.status", "one of True, False, Unknown", status)
        type_ = raw.get("type")
        if not isinstance(type_, str) or not type_:
            raise ModelError(obj, f"{where}.type", "a non-empty string", type_)
        out.append(
            Condition(
                type=type_,
                status=status,
                reason=_str(raw.get("reason") or "", obj, f"{where}.reason"),
                message=_str(raw.get("message") or "", obj, f"{where}.message"),
                last_transition_time=_parse_time(
                    raw.get("lastTransitionTime"), obj, f"{where}.lastTransitionTime"
                ),
                observed_generation=_int(
                    raw.get("observedGeneration"), obj, f"{where}.observedGeneration", 0
                ),
            )
        )
    return tuple(out)


def parse_provisioning_request(raw: Mapping[str, Any]) -> ProvisioningRequest:
    """Parse a ProvisioningRequest of `autoscaling.x-k8s.io/v1` or `v1beta1`."""
    meta, obj = _meta(raw, "ProvisioningRequest", namespaced=True)
    api_version = raw.get("apiVersion") or f"{PROVISIONING_REQUEST_GROUP}/v1"
    allowed = [f"{PROVISIONING_REQUEST_GROUP}/{v}" for v in PROVISIONING_REQUEST_VERSIONS]
    if api_version not in allowed:
        raise ModelError(obj, "apiVersion", " or ".join(allowed), api_version)
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        raise ModelError(obj, "spec", "an object with podSets and provisioningClassName", spec)
    class_name = spec.get("provisioningClassName")
    if not isinstance(class_name, str) or not class_name:
        raise ModelError(
            obj,
            "spec.provisioningClassName",
            "a non-empty string such as " + " or ".join(SUPPORTED_CLASSES),
            class_name,
        )
    raw_sets = spec.get("podSets")
    if not isinstance(raw_sets, list) or not 1 <= len(raw_sets) <= MAX_POD_SETS:
        raise ModelError(
            obj,
            "spec.podSets",
            f"a list of 1 to {MAX_POD_SETS} pod sets ({{podTemplateRef: {{name}}, count}})",
            raw_sets if not isinstance(raw_sets, list) else f"{len(raw_sets)} pod sets",
        )
    pod_sets = []
    for i, item in enumerate(raw_sets):
        where = f"spec.podSets[{i}]"
        if not isinstance(item, dict):
            raise ModelError(obj, where, "an object with podTemplateRef and count", item)
        ref = item.get("podTemplateRef")
        name = ref.get("name") if isinstance(ref, dict) else None
        if not isinstance(name, str) or not name:
            raise ModelError(
                obj, f"{where}.podTemplateRef.name", "the name of a PodTemplate", name
            )
        count = item.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ModelError(obj, f"{where}.count", "an integer of at least 1", count)
        pod_sets.append(PodSet(name, count))
    status = _dict(raw.get("status"), obj, "status")
    return ProvisioningRequest(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        class_name=class_name,
        pod_sets=tuple(pod_sets),
        uid=meta.get("uid") or "",
        generation=_int(meta.get("generation"), obj, "metadata.generation", 0),
        resource_version=meta.get("resourceVersion") or "",
        creation_time=_parse_time(meta.get("creationTimestamp"), obj, "metadata.creationTimestamp"),
        parameters=_str_map(spec.get("parameters"), obj, "spec.parameters"),
        conditions=_parse_conditions(status.get("conditions"), obj),
        api_version=api_version,
    )


def parse_pod_template(raw: Mapping[str, Any]) -> PodTemplate:
    """Parse a PodTemplate (core/v1); its `template` must describe a pod the scheduler
    could place (containers with their requests)."""
    meta, obj = _meta(raw, "PodTemplate", namespaced=True)
    namespace = meta.get("namespace") or "default"
    template = raw.get("template")
    if not isinstance(template, dict):
        raise ModelError(obj, "template", "an object with metadata and spec", template)
    tmeta = _dict(template.get("metadata"), obj, "template.metadata")
    spec = template.get("spec")
    if not isinstance(spec, dict):
        raise ModelError(obj, "template.spec", "a pod spec with containers", spec)
    pod_meta = {
        "name": meta["name"],
        "namespace": namespace,
        "labels": tmeta.get("labels"),
        "annotations": tmeta.get("annotations"),
    }
    try:
        pod = parse_pod({"kind": "Pod", "metadata": pod_meta, "spec": spec})
    except ModelError as exc:
        # The pod's own fields (`spec.containers[0]...`, `metadata.labels`) are the
        # template's, one level down; what it got is kept from the pod's message.
        got = str(exc).partition(f"expected {exc.expected}")[2].removeprefix(", ")
        raise ModelError(obj, f"template.{exc.field}", exc.expected, hint=got) from None
    return PodTemplate(
        namespace=namespace,
        name=meta["name"],
        pod=pod,
        generation=_int(meta.get("generation"), obj, "metadata.generation", 0),
        raw_template=template,
    )
