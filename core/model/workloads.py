"""PodDisruptionBudgets, DaemonSets and the controllers that own pods (ReplicaSets, ReplicationControllers, StatefulSets, Jobs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.model.common import ModelError, _dict, _int, _meta, _str_map
from clusterscaler.model.pod import Pod, parse_pod
from clusterscaler.model.scheduling import (
    LabelSelector,
    OwnerRef,
    _parse_owners,
    parse_label_selector,
)

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


_INT_OR_PERCENT = "a non-negative integer or a percentage of at most 100% such as 50%"


def _int_or_percent(value: Any, obj: str, field: str) -> int | str | None:
    """A budget's `minAvailable` or `maxUnavailable`, checked as the API server checks it
    (`ValidatePositiveIntOrPercent`, `IsNotMoreThan100Percent`): a `150%` or a `-1` could
    only come from a file, never from a cluster, and is refused naming the budget."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ModelError(obj, field, _INT_OR_PERCENT, value)
    if isinstance(value, int) and 0 <= value < 1 << 31:
        return value
    if isinstance(value, str) and value.isascii():
        digits = value[:-1]
        if value.endswith("%") and digits.isdigit() and len(digits) < 8 and int(digits) <= 100:
            return value
        if value.isdigit() and len(value) < 11 and int(value) < 1 << 31:
            return int(value)
    raise ModelError(obj, field, _INT_OR_PERCENT, value)


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




def _pod_from_template(template: Any, obj: str, field: str, namespace: str, name: str) -> Pod:
    template = _dict(template, obj, field)
    meta = dict(_dict(template.get("metadata"), obj, f"{field}.metadata"))
    meta.setdefault("name", name)
    meta["namespace"] = namespace
    try:
        return parse_pod({"metadata": meta, "spec": template.get("spec")})
    except ModelError as exc:
        raise ModelError(obj, f"{field}.{exc.field}", exc.expected) from None
