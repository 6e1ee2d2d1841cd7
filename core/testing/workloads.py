"""Generated scheduling workloads (Hypothesis strategies) and the objects that make them.

A `Workload` is a few node groups (the kwok provider's template nodes), existing nodes of no
group with pods running on them, and pending pods that use the scheduler's filters: requests
(CPU, memory, pod slots, an extended resource), node selectors, required and preferred node
affinity, pod affinity and anti-affinity (hostname and zone), topology spread constraints
(DoNotSchedule and ScheduleAnyway, hostname and zone, minDomains, nodeAffinityPolicy and
nodeTaintsPolicy), taints and tolerations, host ports, priorities, and persistent volume
claims: static local PersistentVolumes pinned to an existing node (by hostname) or to a zone,
of a WaitForFirstConsumer class with no provisioner, each claim either pre-bound to its volume
(bound by kube-controller-manager before the pods come) or left for kube-scheduler to bind
to an available volume that accepts the node it picks. Each workload records the features it
uses (`Workload.features`), so an outcome can be counted per feature.

`Workload.objects(namespace, tag)` renders it for one namespace of a shared cluster: every
node of the workload carries the label and taint `diff.clusterscaler.io/workload=<tag>`, and
every pod selects that label and tolerates that taint, so several workloads share a control
plane without one's pods landing on, or being counted in, another's nodes. Zones, volumes
and storage classes are named per workload for the same reason. One combination is left out on purpose: a spread
constraint that ignores both the pod's node affinity and node taints would count every
workload's nodes as its domains.

`workloads()` draws one workload; `workload_batches()` draws lists of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from clusterscaler.testing.kwokenv import GROUP_LABEL, KWOK_TOLERATION
from hypothesis import strategies as st

WORKLOAD_LABEL = "diff.clusterscaler.io/workload"
TIER_LABEL = "diff.clusterscaler.io/tier"
DISK_LABEL = "diff.clusterscaler.io/disk"
GEN_LABEL = "diff.clusterscaler.io/gen"
DEDICATED_TAINT = "diff.clusterscaler.io/dedicated"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
EXTENDED_RESOURCE = "example.com/widget"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# A class whose claims only bind to existing volumes, each workload its own.
NO_PROVISIONER = "kubernetes.io/no-provisioner"
# Created once per cluster (`priority_classes()`): the pods name them.
PRIORITY_CLASSES = {"diff-low": 100, "diff-high": 1000}
APPS = ("a", "b", "c")
ZONES = ("z1", "z2", "z3")

# The features a workload can use, as `Workload.features` names them.
FEATURES = (
    "cpu",
    "memory",
    "pod-slots",
    "extended-resource",
    "node-labels",
    "zones",
    "node-selector",
    "required-node-affinity",
    "preferred-node-affinity",
    "pod-affinity-hostname",
    "pod-affinity-zone",
    "pod-anti-affinity-hostname",
    "pod-anti-affinity-zone",
    "preferred-pod-affinity",
    "spread-hostname",
    "spread-zone",
    "spread-do-not-schedule",
    "spread-schedule-anyway",
    "spread-min-domains",
    "spread-node-affinity-policy",
    "spread-node-taints-policy",
    "taints",
    "tolerations",
    "no-execute-taint",
    "host-ports",
    "priorities",
    "existing-nodes",
    "several-groups",
    "pvc-pre-bound",
    "pvc-wait-for-first-consumer",
    "pv-pinned-to-node",
    "pv-pinned-to-zone",
)


@dataclass(frozen=True)
class Shape:
    """What a node offers: allocatable CPU (milli), memory (MiB), pod slots, widgets,
    labels (besides hostname, group and workload) and taints (key, value, effect)."""

    cpu: int
    memory: int
    pods: int
    widgets: int = 0
    labels: tuple[tuple[str, str], ...] = ()
    zone: str = ""
    taints: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class Group:
    name: str
    shape: Shape
    max_count: int


@dataclass(frozen=True)
class Spread:
    topology_key: str
    max_skew: int
    when_unsatisfiable: str
    app: str
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None


@dataclass(frozen=True)
class PodTerm:
    """A pod (anti-)affinity term: pods of `app` in the namespace, by `topology_key`."""

    app: str
    topology_key: str


@dataclass(frozen=True)
class PodSpec:
    name: str
    app: str
    cpu: int
    memory: int
    widgets: int = 0
    node_selector: tuple[tuple[str, str], ...] = ()
    # Required node affinity: one term of match expressions (key, operator, values).
    required: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    preferred: tuple[tuple[str, str], ...] = ()
    affinity: tuple[PodTerm, ...] = ()
    anti_affinity: tuple[PodTerm, ...] = ()
    preferred_affinity: tuple[PodTerm, ...] = ()
    spread: tuple[Spread, ...] = ()
    tolerations: tuple[tuple[str, str, str, str], ...] = ()  # key, operator, value, effect
    host_port: int | None = None
    priority_class: str | None = None
    # The workload's claim the pod mounts (`Claim.name`).
    claim: str | None = None


@dataclass(frozen=True)
class LocalVolume:
    """A static local PersistentVolume of `size` GiB, pinned by its node affinity to the
    existing node `node` (by hostname) or else to `zone` (and labelled with it)."""

    name: str
    size: int
    node: str = ""
    zone: str = ""


@dataclass(frozen=True)
class Claim:
    """A PersistentVolumeClaim of `size` GiB of the workload's class: pre-bound to `volume`
    (its `volumeName`, and the volume's `claimRef`), or, with no volume, left for
    kube-scheduler to bind."""

    name: str
    size: int
    volume: str = ""


@dataclass(frozen=True)
class ExistingNode:
    name: str
    shape: Shape
    pods: tuple[PodSpec, ...] = ()


@dataclass(frozen=True)
class Workload:
    groups: tuple[Group, ...]
    existing: tuple[ExistingNode, ...]
    pending: tuple[PodSpec, ...]
    features: frozenset[str] = field(default_factory=frozenset)
    volumes: tuple[LocalVolume, ...] = ()
    claims: tuple[Claim, ...] = ()

    def group_name(self, tag: str, group: Group) -> str:
        return f"{tag}-{group.name}"

    def storage_class(self, tag: str) -> str:
        return f"diff-local-{tag}"

    def objects(self, namespace: str, tag: str) -> Rendered:
        """The template nodes, existing nodes, running pods and pending pods of this
        workload in `namespace`, its nodes marked by `tag`."""
        templates = [self._template(tag, g) for g in self.groups]
        nodes = [_node(f"{tag}-{n.name}", n.shape, tag) for n in self.existing]
        running = [
            _pod(namespace, tag, p, node_name=f"{tag}-{n.name}")
            for n in self.existing
            for p in n.pods
        ]
        pending = [_pod(namespace, tag, p) for p in self.pending]
        storage: list[dict[str, Any]] = []
        if self.claims:
            storage.append(_storage_class(self.storage_class(tag), tag))
            by_volume = {c.volume: c for c in self.claims if c.volume}
            storage += [_volume(namespace, tag, self.storage_class(tag), v, by_volume.get(v.name))
                        for v in self.volumes]
            storage += [_claim(namespace, tag, self.storage_class(tag), c) for c in self.claims]
        return Rendered(templates, nodes, running, pending, storage)

    def _template(self, tag: str, group: Group) -> dict[str, Any]:
        name = self.group_name(tag, group)
        node = _node(f"{name}-template", group.shape, tag)
        node["metadata"]["labels"][GROUP_LABEL] = name
        node["metadata"]["annotations"] = {
            "cluster-autoscaler.kwok.nodegroup/min-count": "0",
            "cluster-autoscaler.kwok.nodegroup/max-count": str(group.max_count),
        }
        return node

    def describe(self) -> str:
        """A short text of the workload for failure messages (the dataclass repr is long)."""
        return repr(self)


@dataclass(frozen=True)
class Rendered:
    templates: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    running: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    # The StorageClass, PersistentVolumes and PersistentVolumeClaims, in creation order.
    storage: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pre_bound(self) -> list[str]:
        """The claims pre-bound to their volume, as `namespace/name`."""
        return [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in self.storage
                if o["kind"] == "PersistentVolumeClaim" and o["spec"].get("volumeName")]


def _storage_class(name: str, tag: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name, "labels": {WORKLOAD_LABEL: tag}},
        "provisioner": NO_PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
    }


def _volume(namespace: str, tag: str, storage_class: str, volume: LocalVolume,
            claim: Claim | None) -> dict[str, Any]:
    labels = {WORKLOAD_LABEL: tag}
    if volume.node:
        key, value = HOSTNAME_LABEL, f"{tag}-{volume.node}"
    else:
        key, value = ZONE_LABEL, f"{tag}-{volume.zone}"
        labels[ZONE_LABEL] = value
    spec: dict[str, Any] = {
        "capacity": {"storage": f"{volume.size}Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": storage_class,
        "local": {"path": f"/mnt/{volume.name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": [value]}]}]}},
    }
    if claim is not None:
        spec["claimRef"] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "namespace": namespace, "name": claim.name}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"{tag}-{volume.name}", "labels": labels}, "spec": spec}


def _claim(namespace: str, tag: str, storage_class: str, claim: Claim) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        "resources": {"requests": {"storage": f"{claim.size}Gi"}},
    }
    if claim.volume:
        spec["volumeName"] = f"{tag}-{claim.volume}"
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim.name, "namespace": namespace}, "spec": spec}


def priority_classes() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": value}
        for name, value in PRIORITY_CLASSES.items()
    ]


def _node(name: str, shape: Shape, tag: str) -> dict[str, Any]:
    resources: dict[str, str] = {
        "cpu": f"{shape.cpu}m",
        "memory": f"{shape.memory}Mi",
        "pods": str(shape.pods),
        "ephemeral-storage": "100Gi",
    }
    if shape.widgets:
        resources[EXTENDED_RESOURCE] = str(shape.widgets)
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        HOSTNAME_LABEL: name,
        WORKLOAD_LABEL: tag,
        **dict(shape.labels),
    }
    if shape.zone:
        labels[ZONE_LABEL] = f"{tag}-{shape.zone}"
    taints = [{"key": WORKLOAD_LABEL, "value": tag, "effect": "NoSchedule"}]
    taints += [{"key": k, "value": v, "effect": e} for k, v, e in shape.taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": taints},
        "status": {"allocatable": resources, "capacity": resources},
    }


def _selector(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


def _term(term: PodTerm) -> dict[str, Any]:
    return {"labelSelector": _selector(term.app), "topologyKey": term.topology_key}


def _zone_value(tag: str, key: str, value: str) -> str:
    return f"{tag}-{value}" if key == ZONE_LABEL else value


def _pod(namespace: str, tag: str, spec: PodSpec, node_name: str | None = None) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": f"{spec.cpu}m", "memory": f"{spec.memory}Mi"}
    limits: dict[str, str] = {}
    if spec.widgets:
        requests[EXTENDED_RESOURCE] = limits[EXTENDED_RESOURCE] = str(spec.widgets)
    container: dict[str, Any] = {
        "name": "app",
        "image": PAUSE_IMAGE,
        "resources": {"requests": requests, **({"limits": limits} if limits else {})},
    }
    if spec.host_port is not None:
        container["ports"] = [{"containerPort": spec.host_port, "hostPort": spec.host_port,
                               "protocol": "TCP"}]
    tolerations: list[dict[str, Any]] = [
        KWOK_TOLERATION,
        {"key": WORKLOAD_LABEL, "operator": "Equal", "value": tag, "effect": "NoSchedule"},
    ]
    for key, operator, value, effect in spec.tolerations:
        toleration: dict[str, Any] = {"key": key, "operator": operator}
        if effect:
            toleration["effect"] = effect
        if operator == "Equal":
            toleration["value"] = value
        tolerations.append(toleration)
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "tolerations": tolerations,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "nodeSelector": {WORKLOAD_LABEL: tag, **dict(spec.node_selector)},
    }
    if node_name is not None:
        pod_spec["nodeName"] = node_name
    if spec.priority_class is not None:
        pod_spec["priorityClassName"] = spec.priority_class
    affinity: dict[str, Any] = {}
    if spec.required or spec.preferred:
        node_affinity: dict[str, Any] = {}
        if spec.required:
            node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": k, "operator": op,
                     **({"values": [_zone_value(tag, k, v) for v in values]} if values else {})}
                    for k, op, values in spec.required
                ]}]
            }
        if spec.preferred:
            node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": 10 * (i + 1), "preference": {"matchExpressions": [
                    {"key": k, "operator": "In", "values": [v]}]}}
                for i, (k, v) in enumerate(spec.preferred)
            ]
        affinity["nodeAffinity"] = node_affinity
    if spec.affinity:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(t) for t in spec.affinity]
        }
    if spec.preferred_affinity:
        affinity.setdefault("podAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"
        ] = [{"weight": 50, "podAffinityTerm": _term(t)} for t in spec.preferred_affinity]
    if spec.anti_affinity:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(t) for t in spec.anti_affinity]
        }
    if affinity:
        pod_spec["affinity"] = affinity
    if spec.claim is not None:
        pod_spec["volumes"] = [{"name": "data",
                                "persistentVolumeClaim": {"claimName": spec.claim}}]
    if spec.spread:
        constraints = []
        for s in spec.spread:
            c: dict[str, Any] = {
                "maxSkew": s.max_skew,
                "topologyKey": s.topology_key,
                "whenUnsatisfiable": s.when_unsatisfiable,
                "labelSelector": _selector(s.app),
            }
            if s.min_domains is not None:
                c["minDomains"] = s.min_domains
            if s.node_affinity_policy is not None:
                c["nodeAffinityPolicy"] = s.node_affinity_policy
            if s.node_taints_policy is not None:
                c["nodeTaintsPolicy"] = s.node_taints_policy
            constraints.append(c)
        pod_spec["topologySpreadConstraints"] = constraints
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": spec.name, "namespace": namespace, "labels": {"app": spec.app}},
        "spec": pod_spec,
    }


# ---------------------------------------------------------------- strategies

_TIERS = ("a", "b", "c")
_DISKS = ("ssd", "hdd")
_GENS = ("2", "3", "4", "5")
_DEDICATED = ("gpu", "batch")


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    labels: list[tuple[str, str]] = []
    # Labels are common, so that selectors and affinity often find a group.
    if draw(st.integers(0, 3)) > 0:
        labels.append((TIER_LABEL, draw(st.sampled_from(_TIERS))))
    if draw(st.booleans()):
        labels.append((DISK_LABEL, draw(st.sampled_from(_DISKS))))
    if draw(st.integers(0, 2)) > 0:
        labels.append((GEN_LABEL, draw(st.sampled_from(_GENS))))
    taints: tuple[tuple[str, str, str], ...] = ()
    if draw(st.integers(0, 3)) == 0:
        taints = ((DEDICATED_TAINT, draw(st.sampled_from(_DEDICATED)),
                   draw(st.sampled_from(("NoSchedule", "NoSchedule", "NoExecute")))),)
    return Shape(
        cpu=draw(st.sampled_from((1000, 2000, 4000, 8000))),
        memory=draw(st.sampled_from((2048, 4096, 8192, 16384))),
        pods=draw(st.sampled_from((2, 3, 5, 110))),
        widgets=draw(st.sampled_from((0, 0, 2, 4))),
        labels=tuple(labels),
        zone=draw(st.sampled_from(("", *ZONES, *ZONES))),
        taints=taints,
    )


def _expression(key: str, values: Sequence[str]) -> st.SearchStrategy[
    tuple[str, str, tuple[str, ...]]
]:
    some = st.lists(st.sampled_from(values), min_size=1, max_size=2, unique=True).map(tuple)
    return st.one_of(
        st.tuples(st.just(key), st.sampled_from(("In", "NotIn")), some),
        st.tuples(st.just(key), st.sampled_from(("Exists", "DoesNotExist")), st.just(())),
    )


_GEN_COMPARE = st.tuples(
    st.just(GEN_LABEL), st.sampled_from(("Gt", "Lt")), st.sampled_from(_GENS).map(lambda v: (v,))
)
_TOPOLOGY = st.sampled_from((HOSTNAME_LABEL, ZONE_LABEL))


@st.composite
def spreads(draw: st.DrawFn, app: str) -> Spread:
    hard = draw(st.booleans())
    affinity_policy = draw(st.sampled_from((None, "Honor", "Ignore")))
    taints_policy = draw(st.sampled_from((None, "Honor", "Ignore")))
    if affinity_policy == "Ignore" and taints_policy == "Ignore":
        # Every workload's nodes would be this constraint's domains (module docstring).
        taints_policy = "Honor"
    return Spread(
        topology_key=draw(_TOPOLOGY),
        max_skew=draw(st.integers(1, 2)),
        when_unsatisfiable="DoNotSchedule" if hard else "ScheduleAnyway",
        app=draw(st.sampled_from((app, app, *APPS))),
        min_domains=draw(st.sampled_from((None, None, 2, 3))) if hard else None,
        node_affinity_policy=affinity_policy,
        node_taints_policy=taints_policy,
    )


@st.composite
def pod_specs(draw: st.DrawFn, name: str, *, running: bool = False) -> PodSpec:
    """One pod; `running` pods (bound to an existing node) keep to requests, ports and
    priorities: their placement is given, not scheduled."""
    app = draw(st.sampled_from(APPS))
    cpu = draw(st.sampled_from((100, 250, 500, 1000, 1500, 3000)))
    memory = draw(st.sampled_from((128, 512, 1024, 3072)))
    widgets = draw(st.sampled_from((0, 0, 0, 1, 3)))
    host_port = draw(st.sampled_from((None, None, None, 8080, 8081)))
    priority = draw(st.sampled_from((None, None, "diff-low", "diff-high")))
    if running:
        # Running pods tolerate their node's taints: a NoExecute taint would evict them.
        return PodSpec(name, app, cpu, memory, widgets=widgets, host_port=host_port,
                       priority_class=priority,
                       tolerations=((DEDICATED_TAINT, "Exists", "", ""),))
    selector: tuple[tuple[str, str], ...] = ()
    if draw(st.integers(0, 3)) == 0:
        key = draw(st.sampled_from((TIER_LABEL, DISK_LABEL, ZONE_LABEL)))
        values = {TIER_LABEL: _TIERS, DISK_LABEL: _DISKS, ZONE_LABEL: ZONES}[key]
        selector = ((key, draw(st.sampled_from(values))),)
    required: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    if draw(st.integers(0, 3)) == 0:
        required = tuple(draw(st.lists(st.one_of(
            _expression(TIER_LABEL, _TIERS), _expression(DISK_LABEL, _DISKS),
            _expression(ZONE_LABEL, ZONES), _GEN_COMPARE,
        ), min_size=1, max_size=2, unique_by=lambda e: e[0])))
    preferred: tuple[tuple[str, str], ...] = ()
    if draw(st.integers(0, 4)) == 0:
        preferred = ((TIER_LABEL, draw(st.sampled_from(_TIERS))),)
    terms = st.builds(PodTerm, st.sampled_from(APPS), _TOPOLOGY)
    affinity = tuple(draw(st.lists(terms, max_size=1))) if draw(st.integers(0, 4)) == 0 else ()
    anti = tuple(draw(st.lists(terms, max_size=1))) if draw(st.integers(0, 3)) == 0 else ()
    soft = tuple(draw(st.lists(terms, max_size=1))) if draw(st.integers(0, 5)) == 0 else ()
    spread: tuple[Spread, ...] = ()
    if draw(st.integers(0, 2)) == 0:
        spread = tuple(draw(st.lists(spreads(app), min_size=1, max_size=2,
                                     unique_by=lambda s: s.topology_key)))
    tolerations: list[tuple[str, str, str, str]] = []
    if draw(st.integers(0, 2)) == 0:
        effect = draw(st.sampled_from(("NoSchedule", "NoExecute")))
        if draw(st.booleans()):
            tolerations.append((DEDICATED_TAINT, "Exists", "", effect))
        else:
            tolerations.append((DEDICATED_TAINT, "Equal", draw(st.sampled_from(_DEDICATED)),
                                effect))
    return PodSpec(
        name, app, cpu, memory, widgets=widgets, node_selector=selector, required=required,
        preferred=preferred, affinity=affinity, anti_affinity=anti, preferred_affinity=soft,
        spread=spread, tolerations=tuple(tolerations), host_port=host_port,
        priority_class=priority,
    )


def _features(workload: Workload) -> frozenset[str]:
    found: set[str] = {"cpu", "memory"}
    shapes_ = [g.shape for g in workload.groups] + [n.shape for n in workload.existing]
    pods = list(workload.pending)
    if any(s.pods < 110 for s in shapes_):
        found.add("pod-slots")
    if any(p.widgets for p in pods):
        found.add("extended-resource")
    if any(s.labels for s in shapes_):
        found.add("node-labels")
    if any(s.zone for s in shapes_):
        found.add("zones")
    if any(s.taints for s in shapes_):
        found.add("taints")
    if any(t[2] == "NoExecute" for s in shapes_ for t in s.taints):
        found.add("no-execute-taint")
    if workload.existing:
        found.add("existing-nodes")
    if len(workload.groups) > 1:
        found.add("several-groups")
    all_pods = pods + [p for n in workload.existing for p in n.pods]
    if any(p.host_port is not None for p in all_pods):
        found.add("host-ports")
    if any(p.priority_class is not None for p in all_pods):
        found.add("priorities")
    used = {p.claim for p in pods if p.claim is not None}
    claims = [c for c in workload.claims if c.name in used]
    if any(c.volume for c in claims):
        found.add("pvc-pre-bound")
    if any(not c.volume for c in claims):
        found.add("pvc-wait-for-first-consumer")
    if claims:
        # The volumes the pods' claims are bound to, or may bind to.
        waiting = any(not c.volume for c in claims)
        named = {c.volume for c in claims if c.volume}
        for v in workload.volumes:
            if v.name in named or (waiting and not any(c.volume == v.name
                                                       for c in workload.claims)):
                found.add("pv-pinned-to-node" if v.node else "pv-pinned-to-zone")
    for p in pods:
        if p.node_selector:
            found.add("node-selector")
        if p.required:
            found.add("required-node-affinity")
        if p.preferred:
            found.add("preferred-node-affinity")
        if p.tolerations:
            found.add("tolerations")
        if p.preferred_affinity:
            found.add("preferred-pod-affinity")
        for kind, terms in (("pod-affinity", p.affinity), ("pod-anti-affinity", p.anti_affinity)):
            for t in terms:
                found.add(f"{kind}-{'hostname' if t.topology_key == HOSTNAME_LABEL else 'zone'}")
        for s in p.spread:
            found.add(f"spread-{'hostname' if s.topology_key == HOSTNAME_LABEL else 'zone'}")
            found.add("spread-do-not-schedule" if s.when_unsatisfiable == "DoNotSchedule"
                      else "spread-schedule-anyway")
            if s.min_domains is not None:
                found.add("spread-min-domains")
            if s.node_affinity_policy is not None:
                found.add("spread-node-affinity-policy")
            if s.node_taints_policy is not None:
                found.add("spread-node-taints-policy")
    return frozenset(found)


def admitted(shape: Shape, pods: Sequence[PodSpec]) -> tuple[PodSpec, ...]:
    """The running pods a kubelet would admit on a node of `shape`, in order: each fits what
    the pods before it left (CPU, memory, widgets, pod slots) and uses no host port in use.
    Pods are bound to existing nodes by name, past kube-scheduler, and kwok admits anything;
    a node holding two pods on one host port is a state no real node reaches, where
    kube-scheduler's port accounting (a set per node) forgets the port once either pod
    goes."""
    kept: list[PodSpec] = []
    cpu, memory, widgets, ports = 0, 0, 0, set()
    for pod in pods:
        if (len(kept) + 1 > shape.pods or cpu + pod.cpu > shape.cpu
                or memory + pod.memory > shape.memory or widgets + pod.widgets > shape.widgets
                or (pod.host_port is not None and pod.host_port in ports)):
            continue
        kept.append(pod)
        cpu, memory, widgets = cpu + pod.cpu, memory + pod.memory, widgets + pod.widgets
        if pod.host_port is not None:
            ports.add(pod.host_port)
    return tuple(kept)


@st.composite
def local_volumes(draw: st.DrawFn, existing: Sequence[ExistingNode]) -> tuple[LocalVolume, ...]:
    """One to three static local volumes, each pinned to one of the `existing` nodes or to
    a zone."""
    volumes = []
    for i in range(draw(st.integers(1, 3))):
        size = draw(st.sampled_from((1, 2, 5)))
        on_node = draw(st.booleans())
        if existing and on_node:
            volumes.append(LocalVolume(f"pv{i}", size,
                                       node=draw(st.sampled_from(existing)).name))
        else:
            volumes.append(LocalVolume(f"pv{i}", size, zone=draw(st.sampled_from(ZONES))))
    return tuple(volumes)


@st.composite
def claimed(draw: st.DrawFn, pending: Sequence[PodSpec],
            volumes: Sequence[LocalVolume]) -> tuple[tuple[PodSpec, ...], tuple[Claim, ...]]:
    """Some of the `pending` pods, each with a claim of its own: pre-bound to a volume no
    other claim has, or unbound (kube-scheduler's to bind)."""
    out: list[PodSpec] = []
    claims: list[Claim] = []
    free = list(volumes)
    for pod in pending:
        if not draw(st.booleans()):
            out.append(pod)
            continue
        name = f"claim-{len(claims)}"
        pre_bound = draw(st.booleans())
        if free and pre_bound:
            volume = free.pop(draw(st.integers(0, len(free) - 1)))
            claims.append(Claim(name, draw(st.sampled_from(
                [s for s in (1, 2, 5) if s <= volume.size])), volume=volume.name))
        else:
            claims.append(Claim(name, draw(st.sampled_from((1, 2)))))
        out.append(replace(pod, claim=name))
    return tuple(out), tuple(claims)


@st.composite
def workloads(draw: st.DrawFn, *, max_pending: int = 4) -> Workload:
    """One workload: one to three node groups, up to two existing nodes with up to three
    running pods each, one to `max_pending` pending pods, and in about a third of them
    local volumes that some pending pods claim."""
    n_groups = draw(st.integers(1, 3))
    groups = tuple(
        Group(f"g{i}", draw(shapes()), max_count=draw(st.integers(3, 6))) for i in range(n_groups)
    )
    existing = []
    for i in range(draw(st.integers(0, 2))):
        shape = draw(shapes())
        drawn = [draw(pod_specs(f"run-{i}-{j}", running=True))
                 for j in range(draw(st.integers(0, 3)))]
        existing.append(ExistingNode(f"n{i}", shape, admitted(shape, drawn)))
    pending = tuple(
        draw(pod_specs(f"pod-{i}")) for i in range(draw(st.integers(1, max_pending)))
    )
    volumes: tuple[LocalVolume, ...] = ()
    claims: tuple[Claim, ...] = ()
    if draw(st.integers(0, 2)) == 0:
        volumes = draw(local_volumes(existing))
        pending, claims = draw(claimed(pending, volumes))
    workload = Workload(groups, tuple(existing), pending, volumes=volumes, claims=claims)
    return replace(workload, features=_features(workload))


def workload_batches(size: int) -> st.SearchStrategy[list[Workload]]:
    """`size` workloads, to run side by side on one control plane."""
    return st.lists(workloads(), min_size=size, max_size=size)
