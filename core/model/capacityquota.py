"""CapacityQuotas (`autoscaling.x-k8s.io/v1alpha1`, cluster-scoped, short name `cq`), as
Cluster Autoscaler's `apis/capacityquota` defines them: limits on the nodes, CPU, memory
(and GPUs of a type) of the nodes a label selector picks.

A quota whose spec breaks the API's rules (a limit that is not a non-negative integer, a
bad selector) is still read, with `error` saying what is wrong: the autoscaler does not
enforce it and reports it `Valid=False` in its status, as upstream's controller does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.model.common import ModelError, _dict, _int, _meta
from clusterscaler.model.provisioning import Condition, _parse_conditions, find_condition
from clusterscaler.model.quantity import QuantityError, parse_quantity
from clusterscaler.model.scheduling import LabelSelector, parse_label_selector

CAPACITY_QUOTA_GROUP = "autoscaling.x-k8s.io"
CAPACITY_QUOTA_VERSION = "v1alpha1"
CAPACITY_QUOTA_API_VERSION = f"{CAPACITY_QUOTA_GROUP}/{CAPACITY_QUOTA_VERSION}"
CAPACITY_QUOTA_PLURAL = "capacityquotas"

# The resource names of the API (other names are cloud-provider resources, such as a GPU
# type).
RESOURCE_CPU = "cpu"
RESOURCE_MEMORY = "memory"
RESOURCE_NODES = "nodes"

# Condition types and reasons (upstream's v1alpha1 constants).
VALID = "Valid"
VALIDATION_SUCCEEDED = "ValidationSucceeded"
VALIDATION_FAILED = "ValidationFailed"
RECONCILED = "Reconciled"
RECONCILIATION_SUCCEEDED = "ReconciliationSucceeded"
RECONCILIATION_FAILED = "ReconciliationFailed"

# The CRD's bounds for `spec.limits.resources`.
MAX_RESOURCES = 20
MAX_RESOURCE_NAME = 63

_LIMIT_FORM = (
    "a non-negative integer quantity such as 10, 2k or 32Gi (no fractions, no milli units)"
)


@dataclass(frozen=True, slots=True)
class CapacityQuota:
    """One CapacityQuota: the nodes it covers (`selector`; empty covers every node) and
    the most of each resource they may have together (`limits`: `cpu` in cores, `memory`
    in bytes, `nodes`, or another resource name in its own unit).

    `error` is empty for a quota the autoscaler enforces; otherwise it says which field
    breaks the API's rules, and the quota limits nothing."""

    name: str
    selector: LabelSelector = field(default_factory=LabelSelector)
    limits: Mapping[str, int] = field(default_factory=dict)
    error: str = ""
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    # What the status says now: `status.used.resources` as written, and the conditions.
    used: Mapping[str, str] = field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()

    def __hash__(self) -> int:
        return hash((self.name, self.uid))

    @property
    def id(self) -> str:
        """How upstream names the quota in its messages: `CapacityQuota/<name>`."""
        return f"CapacityQuota/{self.name}"

    @property
    def valid(self) -> bool:
        return not self.error

    def applies_to(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with `labels` counts against this quota."""
        return self.selector.matches(labels)

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)


def _limit(value: object, obj: str, where: str) -> int:
    if isinstance(value, str) and value.strip().endswith("m"):
        # As the CRD's rule says: milli quantities are refused even when whole ("1000m").
        raise ModelError(obj, where, _LIMIT_FORM, value)
    try:
        parsed = parse_quantity(value, obj=obj, field=where)
    except QuantityError:
        raise ModelError(obj, where, _LIMIT_FORM, value) from None
    if parsed < 0 or parsed.denominator != 1:
        raise ModelError(obj, where, _LIMIT_FORM, value)
    return int(parsed)


def _parse_spec(spec: Any, obj: str) -> tuple[LabelSelector, dict[str, int]]:
    if not isinstance(spec, dict):
        raise ModelError(obj, "spec", "an object with limits.resources", spec)
    selector = parse_label_selector(spec.get("selector"), obj, "spec.selector")
    limits_raw = spec.get("limits")
    if not isinstance(limits_raw, dict):
        raise ModelError(obj, "spec.limits", "an object with resources", limits_raw)
    resources = limits_raw.get("resources")
    if not isinstance(resources, dict):
        raise ModelError(
            obj,
            "spec.limits.resources",
            "a map of resource name (cpu, memory, nodes, ...) to quantity",
            resources,
        )
    if len(resources) > MAX_RESOURCES:
        raise ModelError(
            obj,
            "spec.limits.resources",
            f"at most {MAX_RESOURCES} resources",
            f"{len(resources)} resources",
        )
    limits: dict[str, int] = {}
    for name, value in resources.items():
        where = f"spec.limits.resources[{name!r}]"
        if not name or len(name) > MAX_RESOURCE_NAME:
            raise ModelError(obj, where, f"a resource name of 1 to {MAX_RESOURCE_NAME} characters")
        limits[name] = _limit(value, obj, where)
    # A missing selector, like an empty one, covers every node.
    return selector or LabelSelector(), limits


def parse_capacity_quota(raw: Mapping[str, Any]) -> CapacityQuota:
    """Parse a CapacityQuota of `autoscaling.x-k8s.io/v1alpha1`.

    Raises `ModelError` when the object cannot be named or its status cannot be read; a
    spec that breaks the API's rules gives a quota with `error` set instead."""
    meta, obj = _meta(raw, "CapacityQuota", namespaced=False)
    api_version = raw.get("apiVersion") or CAPACITY_QUOTA_API_VERSION
    if api_version != CAPACITY_QUOTA_API_VERSION:
        raise ModelError(obj, "apiVersion", CAPACITY_QUOTA_API_VERSION, api_version)
    status = _dict(raw.get("status"), obj, "status")
    used_raw = _dict(
        _dict(status.get("used"), obj, "status.used").get("resources"), obj, "status.used.resources"
    )
    used = {str(k): str(v) for k, v in used_raw.items()}
    common: dict[str, Any] = {
        "name": meta["name"],
        "uid": str(meta.get("uid") or ""),
        "generation": _int(meta.get("generation"), obj, "metadata.generation", 0),
        "resource_version": str(meta.get("resourceVersion") or ""),
        "used": used,
        "conditions": _parse_conditions(status.get("conditions"), obj),
    }
    try:
        selector, limits = _parse_spec(raw.get("spec"), obj)
    except ModelError as exc:
        return CapacityQuota(error=str(exc), **common)
    return CapacityQuota(selector=selector, limits=limits, **common)
