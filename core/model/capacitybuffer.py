"""CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`, and `v1alpha1` which upstream still
serves) and namespace ResourceQuotas, as Cluster Autoscaler's `apis/capacitybuffer` and its
buffer controller read them.

A buffer is spare capacity kept ahead of demand: `replicas` chunks shaped by a PodTemplate
(`podTemplateRef`) or by the pods of a scalable workload (`scalableRef`, with `percentage`
of its replicas), bounded by `limits`. Its controller writes the PodTemplate the chunks are
made from (`status.podTemplateRef`), their number (`status.replicas`) and conditions; the
autoscaler then simulates that many pods as pending.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clusterscaler.model.common import ModelError, _dict, _int, _list, _meta, _parse_time
from clusterscaler.model.provisioning import Condition, _parse_conditions, find_condition
from clusterscaler.model.resources import Resources

__all__ = [
    "ACTIVE_PROVISIONING_STRATEGY",
    "ATTRIBUTES_SET_SUCCESSFULLY_REASON",
    "CAPACITY_BUFFER_API_VERSION",
    "CAPACITY_BUFFER_GROUP",
    "CAPACITY_BUFFER_KIND",
    "CAPACITY_BUFFER_VERSIONS",
    "FAILED_TO_RESOLVE_POD",
    "FAILED_TO_WRITE_TEMPLATE",
    "LIMITED_BY_QUOTAS",
    "LIMITED_BY_QUOTAS_REASON",
    "NOT_READY_REASON",
    "PROVISIONING",
    "READY_FOR_PROVISIONING",
    "CapacityBuffer",
    "ResourceQuota",
    "ScalableRef",
    "ScopeRequirement",
    "parse_capacity_buffer",
    "parse_resource_quota",
    "without_token_volumes",
]

CAPACITY_BUFFER_GROUP = "autoscaling.x-k8s.io"
CAPACITY_BUFFER_VERSIONS = ("v1beta1", "v1alpha1")
CAPACITY_BUFFER_KIND = "CapacityBuffer"
CAPACITY_BUFFER_API_VERSION = f"{CAPACITY_BUFFER_GROUP}/v1beta1"

# The strategy of a buffer whose placeholder pods scale the cluster up (the CRD's default).
ACTIVE_PROVISIONING_STRATEGY = "buffer.x-k8s.io/active-capacity"

# Condition types and reasons (CA's capacitybuffer/constants.go).
READY_FOR_PROVISIONING = "ReadyForProvisioning"
PROVISIONING = "Provisioning"
LIMITED_BY_QUOTAS = "LimitedByQuotas"
LIMITED_BY_QUOTAS_REASON = "ResourceQuotasAllocated"
ATTRIBUTES_SET_SUCCESSFULLY_REASON = "AttributesSetSuccessfully"
# ReadyForProvisioning=False: its reason, and upstream's words for a managed PodTemplate
# that could not be built or written.
NOT_READY_REASON = "error"
FAILED_TO_RESOLVE_POD = "failed to create fake pod"
FAILED_TO_WRITE_TEMPLATE = "failed to create or update managed pod template"
# The volumes the API server adds for the service-account token.
_SERVICE_ACCOUNT_VOLUME_PREFIX = "kube-api-access-"


@dataclass(frozen=True, slots=True)
class ScalableRef:
    """The workload a buffer follows: `apiGroup` ("" or "core" for the core group),
    `kind` and `name`, in the buffer's namespace."""

    api_group: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class CapacityBuffer:
    """A CapacityBuffer: its spec and the status its controller wrote."""

    namespace: str
    name: str
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    creation_time: datetime | None = None
    api_version: str = CAPACITY_BUFFER_API_VERSION
    # spec
    provisioning_strategy: str | None = None
    pod_template_ref: str | None = None
    scalable_ref: ScalableRef | None = None
    replicas: int | None = None
    percentage: int | None = None
    limits: Resources | None = None
    # status
    status_pod_template_ref: str | None = None
    status_replicas: int | None = None
    status_pod_template_generation: int | None = None
    status_provisioning_strategy: str | None = None
    conditions: tuple[Condition, ...] = ()

    def __hash__(self) -> int:
        return hash((self.namespace, self.name, self.uid))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)


def _optional_count(spec: Mapping[str, Any], key: str, obj: str) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 31:
        raise ModelError(obj, f"spec.{key}", "an integer from 0 to 2147483647", value)
    return value


def _ref_name(value: Any, obj: str, field: str, expected: str) -> str:
    if not isinstance(value, dict):
        raise ModelError(obj, field, expected, value)
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise ModelError(obj, f"{field}.name", "a non-empty string", name)
    return name


def _optional_str(value: Any, obj: str, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ModelError(obj, field, "a string", value)
    return value


def parse_capacity_buffer(raw: Mapping[str, Any]) -> CapacityBuffer:
    """Parse a CapacityBuffer of `autoscaling.x-k8s.io/v1beta1` or `v1alpha1`, checked as
    the CRD's schema and validation rules check it."""
    meta, obj = _meta(raw, CAPACITY_BUFFER_KIND, namespaced=True)
    api_version = raw.get("apiVersion") or CAPACITY_BUFFER_API_VERSION
    allowed = [f"{CAPACITY_BUFFER_GROUP}/{v}" for v in CAPACITY_BUFFER_VERSIONS]
    if api_version not in allowed:
        raise ModelError(obj, "apiVersion", " or ".join(allowed), api_version)
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        raise ModelError(
            obj, "spec", "an object with podTemplateRef or scalableRef, and replicas", spec
        )
    template_ref = None
    if spec.get("podTemplateRef") is not None:
        template_ref = _ref_name(
            spec["podTemplateRef"], obj, "spec.podTemplateRef", "an object with a name"
        )
    scalable = None
    raw_scalable = spec.get("scalableRef")
    if raw_scalable is not None:
        if not isinstance(raw_scalable, dict):
            raise ModelError(obj, "spec.scalableRef", "an object with kind and name", raw_scalable)
        kind = raw_scalable.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ModelError(
                obj, "spec.scalableRef.kind", "a non-empty string such as Deployment", kind
            )
        scalable = ScalableRef(
            api_group=_optional_str(raw_scalable.get("apiGroup"), obj, "spec.scalableRef.apiGroup")
            or "",
            kind=kind,
            name=_ref_name(raw_scalable, obj, "spec.scalableRef", "an object with kind and name"),
        )
    if template_ref is not None and scalable is not None:
        raise ModelError(
            obj, "spec", "either podTemplateRef or scalableRef, but not both", "both"
        )
    replicas = _optional_count(spec, "replicas", obj)
    percentage = _optional_count(spec, "percentage", obj)
    limits = None
    if spec.get("limits") is not None:
        limits = Resources.from_k8s(
            _dict(spec["limits"], obj, "spec.limits"), obj=obj, field="spec.limits"
        )
    if template_ref is not None and replicas is None and limits is None:
        raise ModelError(
            obj, "spec", "replicas or limits along with podTemplateRef", "neither"
        )
    status = _dict(raw.get("status"), obj, "status")
    status_ref = None
    if status.get("podTemplateRef") is not None:
        status_ref = _ref_name(
            status["podTemplateRef"], obj, "status.podTemplateRef", "an object with a name"
        )
    status_replicas = status.get("replicas")
    if status_replicas is not None:
        status_replicas = _int(status_replicas, obj, "status.replicas")
    generation = status.get("podTemplateGeneration")
    if generation is not None:
        generation = _int(generation, obj, "status.podTemplateGeneration")
    _list(status.get("conditions"), obj, "status.conditions")
    return CapacityBuffer(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        uid=meta.get("uid") or "",
        generation=_int(meta.get("generation"), obj, "metadata.generation", 0),
        resource_version=meta.get("resourceVersion") or "",
        creation_time=_parse_time(meta.get("creationTimestamp"), obj, "metadata.creationTimestamp"),
        api_version=api_version,
        # The CRD defaults it: a manifest without it is an active buffer.
        provisioning_strategy=_optional_str(
            spec.get("provisioningStrategy", ACTIVE_PROVISIONING_STRATEGY),
            obj,
            "spec.provisioningStrategy",
        ),
        pod_template_ref=template_ref,
        scalable_ref=scalable,
        replicas=replicas,
        percentage=percentage,
        limits=limits,
        status_pod_template_ref=status_ref,
        status_replicas=status_replicas,
        status_pod_template_generation=generation,
        status_provisioning_strategy=_optional_str(
            status.get("provisioningStrategy"), obj, "status.provisioningStrategy"
        ),
        conditions=_parse_conditions(status.get("conditions"), obj),
    )


# ResourceQuota scopes and scope-selector operators (core/v1).
QUOTA_SCOPES = (
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
)
SCOPE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class ScopeRequirement:
    """One requirement of a quota's scopes: `spec.scopes` entries are `Exists`."""

    scope: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """A ResourceQuota: what its status says is allowed (`hard`) and used (`used`), by
    resource name as the quota names them (`cpu`, `requests.memory`, ...), and the scopes
    a pod must match to count against it."""

    namespace: str
    name: str
    uid: str = ""
    hard: tuple[tuple[str, int], ...] = ()
    used: tuple[tuple[str, int], ...] = ()
    scopes: tuple[ScopeRequirement, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _quota_list(value: Any, obj: str, field: str) -> tuple[tuple[str, int], ...]:
    """A ResourceList as (name, amount) pairs: cpu and its `requests.`/`limits.` forms in
    milli-cores, everything else in whole units (bytes, counts)."""
    out = []
    for name, quantity in sorted(_dict(value, obj, field).items()):
        base = name.split(".", 1)[1] if name.startswith(("requests.", "limits.")) else name
        parsed = Resources.from_k8s({base: quantity}, obj=obj, field=field)
        out.append((name, parsed.get(base)))
    return tuple(out)


def parse_resource_quota(raw: Mapping[str, Any]) -> ResourceQuota:
    """Parse a ResourceQuota (core/v1)."""
    meta, obj = _meta(raw, "ResourceQuota", namespaced=True)
    spec = _dict(raw.get("spec"), obj, "spec")
    status = _dict(raw.get("status"), obj, "status")
    scopes = []
    for i, scope in enumerate(_list(spec.get("scopes"), obj, "spec.scopes")):
        if scope not in QUOTA_SCOPES:
            raise ModelError(obj, f"spec.scopes[{i}]", "one of " + ", ".join(QUOTA_SCOPES), scope)
        scopes.append(ScopeRequirement(scope, "Exists"))
    selector = _dict(spec.get("scopeSelector"), obj, "spec.scopeSelector")
    for i, req in enumerate(_list(selector.get("matchExpressions"), obj,
                                  "spec.scopeSelector.matchExpressions")):
        where = f"spec.scopeSelector.matchExpressions[{i}]"
        if not isinstance(req, dict):
            raise ModelError(obj, where, "an object with scopeName and operator", req)
        if req.get("scopeName") not in QUOTA_SCOPES:
            raise ModelError(obj, f"{where}.scopeName", "one of " + ", ".join(QUOTA_SCOPES),
                             req.get("scopeName"))
        if req.get("operator") not in SCOPE_OPERATORS:
            raise ModelError(obj, f"{where}.operator", "one of " + ", ".join(SCOPE_OPERATORS),
                             req.get("operator"))
        values = _list(req.get("values"), obj, f"{where}.values")
        if not all(isinstance(v, str) for v in values):
            raise ModelError(obj, f"{where}.values", "a list of strings", values)
        scopes.append(ScopeRequirement(req["scopeName"], req["operator"], tuple(values)))
    return ResourceQuota(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        uid=meta.get("uid") or "",
        hard=_quota_list(status.get("hard"), obj, "status.hard"),
        used=_quota_list(status.get("used"), obj, "status.used"),
        scopes=tuple(scopes),
    )


def without_token_volumes(spec: Mapping[str, Any]) -> dict[str, Any]:
    """CA's cleanUpServiceAccountVolume: the `kube-api-access-*` volumes and their mounts
    left out of a pod spec."""
    out = dict(spec)
    volumes = out.get("volumes")
    if isinstance(volumes, list):
        kept = [
            v for v in volumes
            if not (isinstance(v, dict)
                    and str(v.get("name", "")).startswith(_SERVICE_ACCOUNT_VOLUME_PREFIX))
        ]
        if kept:
            out["volumes"] = kept
        else:
            out.pop("volumes")
    for key in ("containers", "initContainers"):
        containers = out.get(key)
        if not isinstance(containers, list):
            continue
        cleaned = []
        for c in containers:
            if isinstance(c, dict) and isinstance(c.get("volumeMounts"), list):
                c = dict(c)
                mounts = [
                    m for m in c["volumeMounts"]
                    if not (isinstance(m, dict) and str(m.get("name", "")).startswith(
                        _SERVICE_ACCOUNT_VOLUME_PREFIX))
                ]
                if mounts:
                    c["volumeMounts"] = mounts
                else:
                    c.pop("volumeMounts")
            cleaned.append(c)
        out[key] = cleaned
    return out
