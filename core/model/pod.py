"""`Pod` and `parse_pod`: a pod's requests, scheduling constraints, owners and status, parsed from a dict."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict, Unpack

from clusterscaler.model.common import (
    _CACHE_LIMIT,
    DAEMONSET_POD_ANNOTATION,
    DEFAULT_SCHEDULER,
    MIRROR_POD_ANNOTATION,
    JsonObject,
    ModelError,
    _dict,
    _format_time,
    _int,
    _list,
    _meta,
    _parse_time,
    _str,
    _str_list,
    _str_map,
)
from clusterscaler.model.resources import (
    _OVERCOMMITTABLE,
    CPU,
    MEMORY,
    POD_SLOT,
    ZERO,
    Resources,
    _max_resources,
)
from clusterscaler.model.scheduling import (
    Affinity,
    HostPort,
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PodAffinityTerm,
    Toleration,
    TopologySpreadConstraint,
    Volume,
    _parse_affinity,
    _parse_owners,
    _parse_tolerations,
    parse_label_selector,
)

# --------------------------------------------------------------------------- Pod


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """An entry of a pod's `spec.resourceClaims`: the name the pod's containers use, and
    the ResourceClaim it stands for, given by name (`claim_name`) or generated for the pod
    from a ResourceClaimTemplate (`template_name`); exactly one of the two is set."""

    name: str
    claim_name: str = ""
    template_name: str = ""

    def to_k8s(self) -> dict[str, str]:
        out = {"name": self.name}
        if self.claim_name:
            out["resourceClaimName"] = self.claim_name
        if self.template_name:
            out["resourceClaimTemplateName"] = self.template_name
        return out


@dataclass(frozen=True, slots=True)
class Pod:
    """A Kubernetes Pod reduced to what scheduling and draining need.

    `requests` is what the scheduler accounts for the pod: max(sum of containers, largest
    init container) with restartable (sidecar) init containers added, plus `spec.overhead`,
    plus one pod slot. Equality is by value; hashing by namespace, name and uid.

    `resource_claims` are the pod's DRA claims (`spec.resourceClaims`); `claim_statuses`
    the names of the ResourceClaims generated for those of them made from a template, by
    pod claim name (`status.resourceClaimStatuses`; entries without a claim are left out).
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
    resource_claims: tuple[PodResourceClaim, ...] = ()
    claim_statuses: Mapping[str, str] = field(default_factory=dict)

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

    def with_(self, **changes: Unpack[PodChanges]) -> Pod:
        return dataclasses.replace(self, **changes)

    def claim_name(self, pod_claim: PodResourceClaim) -> str | None:
        """The name of the ResourceClaim `pod_claim` (one of `resource_claims`) refers to:
        the claim it names, or the one generated for it from its template; None while
        that one is not generated yet."""
        if pod_claim.claim_name:
            return pod_claim.claim_name
        return self.claim_statuses.get(pod_claim.name) or None

    def to_k8s(self) -> JsonObject:
        """A valid Kubernetes Pod. Containers collapse into one `main` container holding the
        pod's effective requests (without the pod slot): what scheduling needs is preserved."""
        meta: JsonObject = {"name": self.name, "namespace": self.namespace}
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
        container: JsonObject = {"name": "main", "image": "registry.k8s.io/pause:3.9"}
        if container_requests:
            resources: JsonObject = {"requests": container_requests}
            # The API server requires limits equal to requests for extended resources and
            # huge pages, which cannot be overcommitted.
            limits = {k: v for k, v in container_requests.items() if k not in _OVERCOMMITTABLE}
            if limits:
                resources["limits"] = limits
            container["resources"] = resources
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
        spec: JsonObject = {"containers": [container], "schedulerName": self.scheduler_name}
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
        if self.resource_claims:
            spec["resourceClaims"] = [c.to_k8s() for c in self.resource_claims]
        status: JsonObject = {"phase": self.phase}
        if self.claim_statuses:
            status["resourceClaimStatuses"] = [
                {"name": k, "resourceClaimName": v} for k, v in self.claim_statuses.items()
            ]
        if self.nominated_node_name:
            status["nominatedNodeName"] = self.nominated_node_name
        if self.unschedulable:
            status["conditions"] = [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            ]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


class PodChanges(TypedDict, total=False):
    """What `Pod.with_` may change: any field of `Pod`, of the field's type."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    node_name: str
    phase: str
    priority: int | None
    owner: OwnerRef | None
    requests: Resources
    tolerations: tuple[Toleration, ...]
    node_selector: Mapping[str, str]
    affinity: Affinity | None
    topology_spread: tuple[TopologySpreadConstraint, ...]
    host_ports: tuple[HostPort, ...]
    volumes: tuple[Volume, ...]
    creation_time: datetime | None
    deletion_time: datetime | None
    termination_grace_seconds: int | None
    nominated_node_name: str
    unschedulable: bool
    scheduler_name: str
    owners: tuple[OwnerRef, ...]
    priority_class_name: str
    preemption_policy: str
    resource_claims: tuple[PodResourceClaim, ...]
    claim_statuses: Mapping[str, str]


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


def _volume_to_k8s(v: Volume) -> JsonObject:
    if v.kind == "persistentVolumeClaim":
        return {"name": v.name, "persistentVolumeClaim": {"claimName": v.claim_name}}
    if v.kind == "emptyDir":
        return {"name": v.name, "emptyDir": {"medium": v.medium} if v.medium else {}}
    if v.kind == "hostPath":
        return {"name": v.name, "hostPath": {"path": "/"}}
    if v.kind == "csi":
        return {"name": v.name, "csi": {"driver": v.driver}}
    return {"name": v.name, v.kind: {}}


def _affinity_to_k8s(a: Affinity | None) -> JsonObject:
    if a is None:
        return {}
    out: JsonObject = {}
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    if a.node is not None:
        na: JsonObject = {}
        if a.node.required is not None:
            na[key] = {"nodeSelectorTerms": [t.to_k8s() for t in a.node.required]}
        if a.node.preferred:
            na["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "preference": t.to_k8s()} for w, t in a.node.preferred
            ]
        if na:
            out["nodeAffinity"] = na

    def terms(ts: tuple[PodAffinityTerm, ...]) -> list[JsonObject]:
        result = []
        for t in ts:
            entry: JsonObject = {"topologyKey": t.topology_key}
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
        match_keys = tuple(_str_list(c.get("matchLabelKeys"), obj, f"{f}.matchLabelKeys"))
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


# Parsed `spec.resourceClaims` by their fields: the pods of a workload share one tuple, so
# that comparing theirs (equivalence groups, the estimator's alike pods) is by identity.
_CLAIMS_CACHE: dict[tuple[tuple[str, str, str], ...], tuple[PodResourceClaim, ...]] = {}


def _parse_pod_claims(value: Any, obj: str) -> tuple[PodResourceClaim, ...]:
    """`spec.resourceClaims`: each entry names a ResourceClaim or a ResourceClaimTemplate."""
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for i, c in enumerate(_list(value, obj, "spec.resourceClaims")):
        f = f"spec.resourceClaims[{i}]"
        if not isinstance(c, dict):
            raise ModelError(
                obj, f, "an object with name and resourceClaimName or resourceClaimTemplateName", c
            )
        name = c.get("name")
        if not isinstance(name, str) or not name:
            raise ModelError(obj, f"{f}.name", "a non-empty string", name)
        if name in seen:
            raise ModelError(obj, f"{f}.name", "a name unique among the pod's claims", name)
        seen.add(name)
        claim = c.get("resourceClaimName")
        template = c.get("resourceClaimTemplateName")
        for key, v in (("resourceClaimName", claim), ("resourceClaimTemplateName", template)):
            if v is not None and (not isinstance(v, str) or not v):
                raise ModelError(obj, f"{f}.{key}", "a non-empty string", v)
        if (claim is None) == (template is None):
            raise ModelError(
                obj,
                f,
                "exactly one of resourceClaimName and resourceClaimTemplateName",
                {k: v for k, v in c.items() if k != "name"},
            )
        out.append((name, claim or "", template or ""))
    entries = tuple(out)
    shared = _CLAIMS_CACHE.get(entries)
    if shared is None:
        if len(_CLAIMS_CACHE) > _CACHE_LIMIT:
            _CLAIMS_CACHE.clear()
        shared = _CLAIMS_CACHE[entries] = tuple(PodResourceClaim(*e) for e in entries)
    return shared


def _parse_claim_statuses(value: Any, obj: str) -> dict[str, str]:
    """`status.resourceClaimStatuses`: the claim generated for each templated pod claim."""
    out: dict[str, str] = {}
    for i, s in enumerate(_list(value, obj, "status.resourceClaimStatuses")):
        f = f"status.resourceClaimStatuses[{i}]"
        if not isinstance(s, dict):
            raise ModelError(obj, f, "an object with name and resourceClaimName", s)
        name = s.get("name")
        if not isinstance(name, str) or not name:
            raise ModelError(obj, f"{f}.name", "a non-empty string", name)
        claim = s.get("resourceClaimName")
        if claim is None:
            # No claim was needed for this one.
            continue
        if not isinstance(claim, str):
            raise ModelError(obj, f"{f}.resourceClaimName", "a string", claim)
        if claim:
            out[name] = claim
    return out


def parse_pod(raw: Mapping[str, object]) -> Pod:
    """Parse a Kubernetes Pod (or a pod template wrapped as a Pod)."""
    meta, obj = _meta(raw, "Pod", namespaced=True)
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        raise ModelError(obj, "spec", "an object with containers", spec)
    # This runs for every pod of the cluster: absent fields (most of them) skip the helper
    # call, and the Pod is built positionally, in field order.
    mget = meta.get
    sget = spec.get
    status = raw.get("status")
    if not isinstance(status, dict):
        status = _dict(status, obj, "status")
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
    claims = sget("resourceClaims")
    claim_statuses = status.get("resourceClaimStatuses")
    return _new_pod(
        namespace,
        meta["name"],
        mget("uid") or "",
        labels,
        {} if annotations is None else _str_map(annotations, obj, "metadata.annotations"),
        _str(sget("nodeName"), obj, "spec.nodeName"),
        _str(status.get("phase"), obj, "status.phase") or "Pending",
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
        _str(status.get("nominatedNodeName"), obj, "status.nominatedNodeName"),
        unschedulable,
        _str(sget("schedulerName"), obj, "spec.schedulerName") or DEFAULT_SCHEDULER,
        owners,
        _str(sget("priorityClassName"), obj, "spec.priorityClassName"),
        _str(sget("preemptionPolicy"), obj, "spec.preemptionPolicy") or "PreemptLowerPriority",
        () if claims is None else _parse_pod_claims(claims, obj),
        {} if claim_statuses is None else _parse_claim_statuses(claim_statuses, obj),
    )




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
