"""Slim, immutable views of MachineSets, MachineDeployments and Machines.

Parsed once per refresh from the raw JSON the API server returns. Only what the provider
needs is kept. Malformed fields raise `ConfigurationError` naming the object, the field and
the expected form, so one bad object can be reported without stopping the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.api import TAINT_EFFECTS, ConfigurationError, Taint

from clusterscaler_machineapi.apigroups import PAUSED_ANNOTATION, ApiGroup


@dataclass(frozen=True, slots=True)
class Owner:
    """A controller owner reference (`ownerReferences[]` with `controller: true`)."""

    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class InfraRef:
    """`spec.template.spec.infrastructureRef`: the infrastructure machine template.

    Cluster API v1beta1 names it by `apiVersion` (`group/version`), v1beta2 by `apiGroup`
    alone (the version is then the one API discovery prefers): `version` is empty then.
    """

    group: str
    version: str
    kind: str
    name: str

    def ref(self, namespace: str) -> str:
        return f"{self.kind} {namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ScalableResource:
    """A MachineSet or MachineDeployment."""

    api: ApiGroup
    kind: str
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    replicas: int = 0
    owner: Owner | None = None
    cluster_name: str = ""
    # Labels and taints the Machine template asks for on its Node.
    template_labels: Mapping[str, str] = field(default_factory=dict)
    template_taints: tuple[Taint, ...] = ()
    # `spec.template.spec.providerSpec.value` (OpenShift): instance type, zone, region.
    provider_spec: Mapping[str, Any] = field(default_factory=dict)
    failure_domain: str = ""
    # The infrastructure machine template, or why `infrastructureRef` could not be read.
    infrastructure_ref: InfraRef | None = None
    infrastructure_ref_error: str = ""
    # MachinePools: `spec.providerIDList`, the instances of the pool.
    provider_ids: tuple[str, ...] = ()
    # `status.replicas`, the machines the controller counts; None when it is not a
    # non-negative integer (a controller-written field: read, never refused).
    status_replicas: int | None = 0

    @property
    def paused(self) -> bool:
        """Whether Cluster API's controllers are told to leave the resource alone."""
        return PAUSED_ANNOTATION in self.annotations

    @property
    def id(self) -> str:
        """`<Kind>/<namespace>/<name>`, the node group id upstream uses."""
        return f"{self.kind}/{self.namespace}/{self.name}"

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Machine:
    """A Machine: one instance of a node group, with or without a Node yet."""

    api: ApiGroup
    namespace: str
    name: str
    uid: str
    provider_id: str = ""
    node_name: str = ""
    phase: str = ""
    failure_message: str = ""
    failure_reason: str = ""
    deleting: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: Owner | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def ref(self) -> str:
        return f"Machine {self.namespace}/{self.name}"

    @property
    def failed(self) -> bool:
        return self.phase == "Failed" or bool(self.failure_message) or bool(self.failure_reason)


def _dict(value: Any, obj: str, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{obj}: {path}: expected an object, got {value!r}")
    return value


def _str_map(value: Any, obj: str, path: str) -> dict[str, str]:
    mapping = _dict(value, obj, path)
    out: dict[str, str] = {}
    for k, v in mapping.items():
        if not isinstance(v, str):
            raise ConfigurationError(f"{obj}: {path}.{k}: expected a string, got {v!r}")
        out[str(k)] = v
    return out


def _controller_owner(meta: Mapping[str, Any], obj: str) -> Owner | None:
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list):
        raise ConfigurationError(
            f"{obj}: metadata.ownerReferences: expected a list, got {refs!r}"
        )
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return Owner(
                kind=str(ref.get("kind") or ""),
                name=str(ref.get("name") or ""),
                uid=str(ref.get("uid") or ""),
            )
    return None


def _meta(raw: Mapping[str, Any], kind: str) -> tuple[Mapping[str, Any], str]:
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise ConfigurationError(f"{kind} without metadata.name: {raw!r:.200}")
    return meta, f"{kind} {meta.get('namespace') or ''}/{meta['name']}"


def parse_taints(value: Any, obj: str, path: str) -> tuple[Taint, ...]:
    """Taints in Kubernetes form (`[{key, value, effect}]`)."""
    if not value:
        return ()
    if not isinstance(value, list):
        raise ConfigurationError(f"{obj}: {path}: expected a list of taints, got {value!r}")
    out = []
    for i, item in enumerate(value):
        item = _dict(item, obj, f"{path}[{i}]")
        key = item.get("key")
        effect = item.get("effect")
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"{obj}: {path}[{i}].key: expected a non-empty string, got {key!r}")
        if effect not in TAINT_EFFECTS:
            raise ConfigurationError(
                f"{obj}: {path}[{i}].effect: expected one of {', '.join(TAINT_EFFECTS)}, "
                f"got {effect!r}"
            )
        out.append(Taint(key, str(item.get("value") or ""), effect))
    return tuple(out)


_INFRA_REF_FORM = (
    "an object with kind, name and apiVersion (group/version) or apiGroup, e.g. "
    "{kind: AWSMachineTemplate, name: md-0, apiVersion: "
    "infrastructure.cluster.x-k8s.io/v1beta2}"
)


def parse_infrastructure_ref(value: Any, obj: str) -> InfraRef | None:
    """The template reference, None when there is none; `ConfigurationError` when bad."""
    path = "spec.template.spec.infrastructureRef"
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{obj}: {path}: expected {_INFRA_REF_FORM}, got {value!r}")
    fields = {}
    for key in ("kind", "name"):
        item = value.get(key)
        if not isinstance(item, str) or not item.strip():
            raise ConfigurationError(
                f"{obj}: {path}.{key}: expected a non-empty string ({_INFRA_REF_FORM}), "
                f"got {item!r}"
            )
        fields[key] = item.strip()
    api_version = value.get("apiVersion")
    api_group = value.get("apiGroup")
    if isinstance(api_version, str) and api_version.strip():
        group, slash, version = api_version.strip().rpartition("/")
        if not slash or not group or not version:
            raise ConfigurationError(
                f"{obj}: {path}.apiVersion: expected group/version, e.g. "
                f"infrastructure.cluster.x-k8s.io/v1beta1, got {api_version!r}"
            )
    elif isinstance(api_group, str) and api_group.strip():
        group, version = api_group.strip(), ""
    else:
        raise ConfigurationError(
            f"{obj}: {path}: expected apiVersion (group/version) or apiGroup, got neither "
            f"({_INFRA_REF_FORM})"
        )
    return InfraRef(group=group, version=version, kind=fields["kind"], name=fields["name"])


def _replicas(spec: Mapping[str, Any], obj: str) -> int:
    value = spec.get("replicas")
    if value is None:
        # The API server defaults replicas to 1 for MachineSets, but MachineDeployments
        # managed by the autoscaler may leave it unset until the first scale.
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"{obj}: spec.replicas: expected a non-negative integer, got {value!r}")
    return value


def _status_replicas(raw: Mapping[str, Any]) -> int | None:
    status = raw.get("status")
    value = status.get("replicas") if isinstance(status, Mapping) else None
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def parse_scalable(raw: Mapping[str, Any], api: ApiGroup, kind: str) -> ScalableResource:
    meta, obj = _meta(raw, kind)
    spec = _dict(raw.get("spec"), obj, "spec")
    template = _dict(spec.get("template"), obj, "spec.template")
    tspec = _dict(template.get("spec"), obj, "spec.template.spec")
    tmeta = _dict(tspec.get("metadata"), obj, "spec.template.spec.metadata")
    provider_spec = _dict(
        _dict(tspec.get("providerSpec"), obj, "spec.template.spec.providerSpec").get("value"),
        obj,
        "spec.template.spec.providerSpec.value",
    )
    labels = _str_map(meta.get("labels"), obj, "metadata.labels")
    cluster_name = spec.get("clusterName") or labels.get(api.cluster_name_label) or ""
    failure_domain = tspec.get("failureDomain") or ""
    infra_ref: InfraRef | None = None
    infra_error = ""
    try:
        infra_ref = parse_infrastructure_ref(tspec.get("infrastructureRef"), obj)
    except ConfigurationError as exc:
        # Only scale from zero needs the template: the group still scales while it has
        # nodes, and the error is reported where the template is needed.
        infra_error = str(exc)
    provider_ids = spec.get("providerIDList") or []
    if not isinstance(provider_ids, list) or not all(
        isinstance(p, str) and p for p in provider_ids
    ):
        raise ConfigurationError(
            f"{obj}: spec.providerIDList: expected a list of provider IDs (strings), got "
            f"{provider_ids!r}"
        )
    return ScalableResource(
        api=api,
        kind=kind,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta["name"]),
        uid=str(meta.get("uid") or ""),
        labels=labels,
        annotations=_str_map(meta.get("annotations"), obj, "metadata.annotations"),
        replicas=_replicas(spec, obj),
        owner=_controller_owner(meta, obj),
        cluster_name=str(cluster_name),
        template_labels=_str_map(tmeta.get("labels"), obj, "spec.template.spec.metadata.labels"),
        template_taints=parse_taints(tspec.get("taints"), obj, "spec.template.spec.taints"),
        provider_spec=dict(provider_spec),
        failure_domain=str(failure_domain),
        infrastructure_ref=infra_ref,
        infrastructure_ref_error=infra_error,
        provider_ids=tuple(provider_ids),
        status_replicas=_status_replicas(raw),
    )


def parse_machine(raw: Mapping[str, Any], api: ApiGroup) -> Machine:
    meta, obj = _meta(raw, "Machine")
    spec = _dict(raw.get("spec"), obj, "spec")
    status = _dict(raw.get("status"), obj, "status")
    node_ref = _dict(status.get("nodeRef"), obj, "status.nodeRef")
    # Cluster API says failureMessage/failureReason; OpenShift errorMessage/errorReason.
    message = status.get("failureMessage") or status.get("errorMessage") or ""
    reason = status.get("failureReason") or status.get("errorReason") or ""
    return Machine(
        api=api,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta["name"]),
        uid=str(meta.get("uid") or ""),
        provider_id=str(spec.get("providerID") or ""),
        node_name=str(node_ref.get("name") or ""),
        phase=str(status.get("phase") or ""),
        failure_message=str(message),
        failure_reason=str(reason),
        deleting=bool(meta.get("deletionTimestamp")),
        annotations=_str_map(meta.get("annotations"), obj, "metadata.annotations"),
        owner=_controller_owner(meta, obj),
    )


def normalize_provider_id(provider_id: str) -> str:
    """A provider ID in a comparable form.

    Nodes and Machines of some clouds spell the same instance differently: `aws:///zone/i-1`
    against `aws://zone/i-1`, or Azure resource groups in different letter case. The scheme
    and every non-empty path segment are kept, lowercased.
    """
    text = provider_id.strip()
    if not text:
        return ""
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    segments = [s for s in rest.split("/") if s]
    return (scheme.lower() + "://" if scheme else "") + "/".join(segments).lower()
