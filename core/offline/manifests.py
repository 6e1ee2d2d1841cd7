"""`--apply FILE`: Kubernetes manifests applied to the in-memory cluster as the API server
and the controllers would act on them.

(Long on purpose: one job, with a step per kind doing what its controller does, and the
checks the API server makes on each, so that a bad manifest is named field by field.)

A file holds Deployments, ReplicaSets, StatefulSets, Jobs, Pods, PodDisruptionBudgets,
DaemonSets and DRA objects, in YAML (one or more `---` documents) or JSON, each document an object or a
`List` of them. Each object is applied in file order:

- a Deployment creates its ReplicaSet `<deployment>-<pod-template-hash>` (the hash computed
  from the pod template as the Deployment controller does, and added to the pods' labels and
  the ReplicaSet's selector), which creates `replicas` pods `<replicaset>-<5 characters>`;
  applying a Deployment that the cluster has already ends as its rollout would: the new
  ReplicaSet has every replica and the old ones none;
- a ReplicaSet creates `replicas` pods `<replicaset>-<5 characters>`;
- a StatefulSet creates the pods `<statefulset>-0` to `<statefulset>-<replicas-1>`, each with
  the claims of its `volumeClaimTemplates` (`<template>-<statefulset>-<ordinal>`: a claim the
  cluster holds is checked by the scheduler as any other, a new one is not modelled);
- a Job creates `min(parallelism, completions)` pods `<job>-<5 characters>` (none when
  suspended; `<job>-<index>-<5 characters>` when indexed), labelled with the job's name and
  uid as the Job controller does;
- a DaemonSet creates one pod `<daemonset>-<5 characters>` on each node its node selector,
  affinity and taints allow (with the tolerations the DaemonSet controller adds), and on each
  node added later;
- a Pod is created as given (`generateName` honoured): pending, or bound to its `nodeName`;
- a PodDisruptionBudget is created with the status the disruption controller would compute
  (healthy pods, disruptions allowed), refreshed once the scheduler has placed new pods;
- a DeviceClass, ResourceClaimTemplate, ResourceClaim or ResourceSlice (`resource.k8s.io`
  v1, v1beta2 or v1beta1) is added as DRA reads it: a claim unallocated (its status is the
  scheduler's to write), a slice as its driver would publish it;
- a PodTemplate or a ProvisioningRequest (`autoscaling.x-k8s.io` v1 or v1beta1) is added as
  created: a request without conditions, for the loop to answer
  (`--enable-provisioning-requests`);
- a CapacityBuffer (`autoscaling.x-k8s.io` v1beta1 or v1alpha1) is added as created, without
  status: the loop's buffer controller gives it one (`--capacity-buffer-controller-enabled`)
  and its placeholder pods are injected (`--capacity-buffer-pod-injection-enabled`).

A `priorityClassName` without a `priority` resolves to the built-in classes' priorities and
to those of the cluster's pods of that class (a snapshot holds no PriorityClass objects).

Every created pod carries the owner references a controller sets, so drains, `--scale` and
scale-down treat it as they treat the snapshot's own. An object the cluster has already is
replaced (its pods deleted), except a Pod (a Pod's spec cannot be changed in place). The
generated names are derived from the objects, so a run is repeatable.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from clusterscaler.model import (
    Controller,
    DaemonSet,
    LabelSelector,
    ModelError,
    OwnerRef,
    Pod,
    PodDisruptionBudget,
    parse_controller,
    parse_daemonset,
    parse_label_selector,
    parse_pdb,
    parse_pod,
)
from clusterscaler.model.capacitybuffer import parse_capacity_buffer
from clusterscaler.model.capacityquota import CAPACITY_QUOTA_API_VERSION, parse_capacity_quota
from clusterscaler.model.common import clip_text, describe_value
from clusterscaler.model.dra import (
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from clusterscaler.model.provisioning import (
    PodTemplate,
    ProvisioningRequest,
    parse_pod_template,
    parse_provisioning_request,
)
from clusterscaler.model.yamltext import YamlFileError, load_yaml_documents, read_parsed_file
from clusterscaler.offline.loader import MAX_COUNT, InputError
from clusterscaler.offline.simulatedcluster import SimulatedCluster, SimulationError, controller_key

APPLY = "--apply"
# The DRA kinds, by their index in `SimulatedCluster.dra_objects`.
DRA_KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate")
_CLUSTER_SCOPED = frozenset({"ResourceSlice", "DeviceClass", "CapacityQuota"})
_DRA_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")
_DRA_PARSERS: tuple[Callable[[Mapping[str, Any]], Any], ...] = (
    parse_resource_slice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
)
KINDS = (
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "Job",
    "DaemonSet",
    "Pod",
    "PodDisruptionBudget",
    *DRA_KINDS,
    "PodTemplate",
    "ProvisioningRequest",
    "CapacityQuota",
    "CapacityBuffer",
)
_API_VERSIONS = {
    "Deployment": ("apps/v1",),
    "ReplicaSet": ("apps/v1",),
    "StatefulSet": ("apps/v1",),
    "DaemonSet": ("apps/v1",),
    "Job": ("batch/v1",),
    "Pod": ("v1",),
    "PodDisruptionBudget": ("policy/v1", "policy/v1beta1"),
    **dict.fromkeys(DRA_KINDS, _DRA_VERSIONS),
    "PodTemplate": ("v1",),
    "ProvisioningRequest": ("autoscaling.x-k8s.io/v1", "autoscaling.x-k8s.io/v1beta1"),
    "CapacityQuota": (CAPACITY_QUOTA_API_VERSION,),
    "CapacityBuffer": ("autoscaling.x-k8s.io/v1beta1", "autoscaling.x-k8s.io/v1alpha1"),
}
# The characters Kubernetes generates names and hashes from (no vowels, no look-alikes).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# What the DaemonSet controller adds to every DaemonSet pod.
_DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
_BUILTIN_PRIORITIES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
_HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


@dataclass(slots=True)
class Applied:
    """What applying one file did."""

    # One line per object, e.g. "Deployment shop/web: ReplicaSet web-5d8f7c9b4b, 3 pods".
    objects: list[str] = field(default_factory=list)
    # The pods created, by key, in creation order.
    pods: list[str] = field(default_factory=list)
    # The PodDisruptionBudgets created, by key, with the index of their line in `objects`
    # (their status is brought up to date by `refresh_pdb` once pods are placed).
    pdbs: list[tuple[str, int]] = field(default_factory=list)


# --------------------------------------------------------------------------- reading


def load_manifests(path: str) -> list[Mapping[str, Any]]:
    """The objects of `path`, in file order. Raises `InputError` naming the file and the
    document for anything that is not a Kubernetes object of a kind `--apply` creates."""
    where = f"--apply {path!r}"
    try:
        read = read_parsed_file(
            path, where, "Kubernetes objects in YAML or JSON", load_yaml_documents
        )
    except YamlFileError as exc:
        raise InputError(str(exc)) from None
    docs = [d for d in read if d is not None]
    if not docs:
        raise InputError(f"{where}: expected Kubernetes objects in YAML or JSON, got an empty file")
    objects: list[Mapping[str, Any]] = []
    for i, doc in enumerate(docs, 1):
        items = doc.get("items") if isinstance(doc, Mapping) else None
        if (
            isinstance(doc, Mapping)
            and str(doc.get("kind", "")).endswith("List")
            and isinstance(items, list)
        ):
            entries = [(f"document {i}, items[{j}]", item) for j, item in enumerate(items)]
        else:
            entries = [(f"document {i}", doc)]
        for at, item in entries:
            objects.append(_checked_object(item, f"{where}: {at}"))
    return objects


def _checked_object(item: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise InputError(
            f"{where}: expected a Kubernetes object (apiVersion, kind, metadata, spec), "
            f"got {describe_value(item)}"
        )
    kind = item.get("kind")
    meta = item.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    named = where
    if isinstance(name, str) and isinstance(kind, str):
        named = f"{where} ({_clip(kind)} {_clip(name)})"
    if kind not in KINDS:
        raise InputError(
            f"{named}: kind: expected one of {', '.join(KINDS)}, got {describe_value(kind)}"
        )
    if not isinstance(meta, Mapping):
        raise InputError(
            f"{named}: metadata: expected an object with a name, got {describe_value(meta)}"
        )
    if not (isinstance(name, str) and name) and not (
        kind == "Pod" and isinstance(meta.get("generateName"), str)
    ):
        raise InputError(
            f"{named}: metadata.name: expected a non-empty string, got {describe_value(name)}"
        )
    api = item.get("apiVersion")
    if api not in _API_VERSIONS[kind]:
        raise InputError(
            f"{named}: apiVersion: expected {' or '.join(_API_VERSIONS[kind])}, "
            f"got {describe_value(api)}"
        )
    namespace = meta.get("namespace", "default")
    if not isinstance(namespace, str) or not namespace:
        raise InputError(
            f"{named}: metadata.namespace: expected a non-empty string, "
            f"got {describe_value(namespace)}"
        )
    return item


# --------------------------------------------------------------------------- names


def _encode(text: str) -> str:
    """Kubernetes' `rand.SafeEncodeString`: each character mapped into the alphabet."""
    return "".join(_ALPHABET[ord(c) % len(_ALPHABET)] for c in text)


def template_hash(template: Mapping[str, Any]) -> str:
    """A pod template's `pod-template-hash`: its FNV-1a 32-bit hash, encoded as the
    Deployment controller encodes it."""
    h = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True, separators=(",", ":")).encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return _encode(str(h))


def _suffixes(seed: str) -> Iterator[str]:
    """Five-character name suffixes, as `generateName` makes them, derived from `seed`."""
    for attempt in itertools.count():
        digest = hashlib.sha256(f"{seed}#{attempt}".encode()).digest()
        yield "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _generated_name(cluster: SimulatedCluster, namespace: str, prefix: str) -> str:
    """`<prefix><5 characters>`, a name no pod of the namespace has."""
    for suffix in _suffixes(f"{namespace}/{prefix}"):
        if f"{namespace}/{prefix}{suffix}" not in cluster.pods:
            return f"{prefix}{suffix}"
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------- helpers


def _clip(name: object) -> str:
    """A name from the file in an error: whole when short and printable, else quoted,
    escaped and cut to a line (a 5,000-character name is named in a line, not a page; a
    newline in it does not break the error's line)."""
    text = str(name) if isinstance(name, str) else describe_value(name)
    return text if 0 < len(text.strip()) <= 80 and text.isprintable() else describe_value(text)


def _describe(raw: Mapping[str, Any]) -> str:
    meta = raw["metadata"]
    name = _clip(meta.get("name")) if meta.get("name") else f"{_clip(meta.get('generateName'))}*"
    if raw["kind"] in _CLUSTER_SCOPED:
        return f"{raw['kind']} {name}"
    return f"{raw['kind']} {_clip(meta.get('namespace') or 'default')}/{name}"


def _fail(obj: str, where: str, field_path: str, expected: str, value: Any = ...) -> InputError:
    # The path may hold keys from the file (a resource name of 5,000 digits): cut to a line.
    got = "" if value is ... else f", got {describe_value(value)}"
    return InputError(f"{where}: {obj}: {clip_text(field_path)}: expected {expected}{got}")


def _model(exc: ModelError, where: str, obj: str, prefix: str = "") -> InputError:
    field_path = f"{prefix}{exc.field}" if prefix else exc.field
    return InputError(f"{where}: {obj}: {clip_text(field_path)}: expected {exc.expected}")


def _mapping(value: Any, obj: str, where: str, field_path: str, expected: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(obj, where, field_path, expected, value)
    return dict(value)


def _count(
    value: Any, obj: str, where: str, field_path: str, default: int, *, built: bool = True
) -> int:
    """A non-negative integer; when `built` (a count of pods created one by one), at most
    `MAX_COUNT`."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(obj, where, field_path, "a non-negative integer", value)
    if built and value > MAX_COUNT:
        raise _fail(
            obj, where, field_path, f"a non-negative integer of at most {MAX_COUNT:,}", value
        )
    return value


def _uid(kind: str, namespace: str, name: str) -> str:
    return f"sim-{kind.lower()}-{namespace}-{name}"


@dataclass(frozen=True, slots=True)
class _Template:
    """A workload's pod template: its metadata and spec, as given."""

    labels: dict[str, str]
    annotations: dict[str, Any]
    spec: dict[str, Any]
    raw: dict[str, Any]


def _template(raw: Mapping[str, Any], obj: str, where: str) -> _Template:
    spec = _mapping(raw.get("spec"), obj, where, "spec", "an object with a pod template")
    if "template" not in spec:
        raise _fail(
            obj, where, "spec.template", "a pod template (metadata.labels and spec.containers)"
        )
    template = _mapping(
        spec["template"], obj, where, "spec.template", "a pod template (metadata and spec)"
    )
    meta = _mapping(template.get("metadata"), obj, where, "spec.template.metadata", "an object")
    labels = _mapping(
        meta.get("labels"),
        obj,
        where,
        "spec.template.metadata.labels",
        "a map of label names to values",
    )
    if any(not isinstance(v, str) for v in labels.values()):
        raise _fail(
            obj,
            where,
            "spec.template.metadata.labels",
            "a map of label names to string values",
            labels,
        )
    annotations = _mapping(
        meta.get("annotations"), obj, where, "spec.template.metadata.annotations", "a map"
    )
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, Mapping) or not pod_spec.get("containers"):
        raise _fail(obj, where, "spec.template.spec", "an object with containers", pod_spec)
    return _Template(labels, annotations, copy.deepcopy(dict(pod_spec)), dict(template))


def _selector(
    raw: Mapping[str, Any], obj: str, where: str, labels: Mapping[str, str]
) -> LabelSelector:
    """The workload's selector, which the API server requires to match its template."""
    spec = raw.get("spec") or {}
    given = spec.get("selector")
    if not given:
        raise _fail(
            obj,
            where,
            "spec.selector",
            f"a label selector matching spec.template.metadata.labels {dict(labels)}",
        )
    try:
        selector = parse_label_selector(given, obj, "spec.selector")
    except ModelError as exc:
        raise _model(exc, where, obj) from None
    if selector is None or not selector.matches(labels):
        raise _fail(
            obj, where, "spec.selector",
            f"a label selector matching spec.template.metadata.labels {dict(labels)}", given,
        )  # fmt: skip
    return selector


def _pod(
    obj: str,
    where: str,
    template: _Template,
    *,
    namespace: str,
    name: str,
    owner: OwnerRef | None,
    labels: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> Pod:
    """A pod from `template`, owned by `owner`; errors name the template's fields."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"sim-{namespace}-{name}",
        "labels": dict(labels if labels is not None else template.labels),
        "annotations": dict(template.annotations),
    }
    if owner is not None:
        meta["ownerReferences"] = [owner.to_k8s()]
    try:
        pod = parse_pod(
            {"metadata": meta, "spec": dict(spec if spec is not None else template.spec)}
        )
    except ModelError as exc:
        raise _model(exc, where, obj, "spec.template.") from None
    return pod


# --------------------------------------------------------------------------- applying


class _Applier:
    def __init__(self, cluster: SimulatedCluster, path: str) -> None:
        self.cluster = cluster
        self.where = f"--apply {path!r}"
        self.applied = Applied()
        # What the priority admission plugin would resolve `priorityClassName` to: the
        # built-in classes, and the classes of the cluster's pods (the snapshot has no
        # PriorityClass objects). An unknown class leaves the priority unset (0).
        self.priorities: dict[str, int] = dict(_BUILTIN_PRIORITIES)
        for pod in cluster.pods.values():
            if pod.priority_class_name and pod.priority is not None:
                self.priorities.setdefault(pod.priority_class_name, pod.priority)

    def _with_priority(self, spec: dict[str, Any]) -> dict[str, Any]:
        name = spec.get("priorityClassName")
        if spec.get("priority") is None and isinstance(name, str) and name in self.priorities:
            return {**spec, "priority": self.priorities[name]}
        return spec

    def _template(self, raw: Mapping[str, Any], obj: str) -> _Template:
        template = _template(raw, obj, self.where)
        return dataclasses.replace(template, spec=self._with_priority(template.spec))

    # ------------------------------------------------------------------ shared steps

    def _delete_owned(self, kind: str, namespace: str, name: str) -> int:
        keys = [
            p.key
            for p in list(self.cluster.pods.values())
            if p.namespace == namespace
            and p.owner is not None
            and p.owner.kind == kind
            and p.owner.name == name
        ]
        self.cluster.delete_pods(keys)
        return len(keys)

    def _replace_controller(self, controller: Controller, template: Pod) -> bool:
        """Put `controller` in the cluster (replacing the one of its kind and name, whose
        pods are deleted); whether it replaced one."""
        cluster = self.cluster
        old = [
            c
            for c in cluster.controllers
            if (c.kind, c.namespace, c.name)
            == (controller.kind, controller.namespace, controller.name)
        ]
        if old:
            self._delete_owned(controller.kind, controller.namespace, controller.name)
        cluster.controllers = [c for c in cluster.controllers if c not in old] + [controller]
        cluster.templates[
            controller_key(controller.kind, controller.namespace, controller.name)
        ] = template
        return bool(old)

    def _create(self, pods: Sequence[Pod]) -> None:
        try:
            self.cluster.add_pods(pods)
        except SimulationError as exc:
            raise InputError(f"{self.where}: {exc}") from None
        self.applied.pods.extend(p.key for p in pods)

    def _generated(self, namespace: str, prefix: str, count: int) -> list[str]:
        """`count` names `<prefix>-<5 characters>` no pod of the namespace has."""
        names: list[str] = []
        taken = set(self.cluster.pods)
        for suffix in _suffixes(f"{namespace}/{prefix}"):
            if len(names) == count:
                break
            name = f"{prefix}-{suffix}"
            if f"{namespace}/{name}" not in taken:
                taken.add(f"{namespace}/{name}")
                names.append(name)
        return names

    # ------------------------------------------------------------------ kinds

    def apply(self, raw: Mapping[str, Any]) -> None:
        kind = raw["kind"]
        obj = _describe(raw)
        if kind == "Deployment":
            self._deployment(raw, obj)
        elif kind in ("ReplicaSet", "StatefulSet", "Job"):
            self._workload(raw, obj)
        elif kind == "DaemonSet":
            self._daemonset(raw, obj)
        elif kind == "Pod":
            self._bare_pod(raw, obj)
        elif kind in DRA_KINDS:
            self._dra(raw, obj)
        elif kind in ("PodTemplate", "ProvisioningRequest"):
            self._provisioning(raw, obj)
        elif kind == "CapacityQuota":
            self._capacity_quota(raw, obj)
        elif kind == "CapacityBuffer":
            self._capacity_buffer(raw, obj)
        else:
            self._pdb(raw, obj)

    def _deployment(self, raw: Mapping[str, Any], obj: str) -> None:
        meta = raw["metadata"]
        namespace, name = meta.get("namespace") or "default", meta["name"]
        template = self._template(raw, obj)
        _selector(raw, obj, self.where, template.labels)
        spec = raw["spec"]
        replicas = _count(spec.get("replicas"), obj, self.where, "spec.replicas", 1)
        pod_hash = template_hash(template.raw)
        rs_name = f"{name}-{pod_hash}"
        uid = meta.get("uid") or _uid("Deployment", namespace, name)
        selector = copy.deepcopy(spec["selector"])
        # `matchLabels: null` is no labels, as the API server reads it.
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}),
                                   "pod-template-hash": pod_hash}
        pod_labels = {**template.labels, "pod-template-hash": pod_hash}
        rs_raw = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": rs_name,
                "namespace": namespace,
                "uid": _uid("ReplicaSet", namespace, rs_name),
                "labels": pod_labels,
                "ownerReferences": [OwnerRef("Deployment", name, uid, True, "apps/v1").to_k8s()],
            },
            "spec": {
                "replicas": replicas,
                "selector": selector,
                "template": {
                    **template.raw,
                    "metadata": {**(template.raw.get("metadata") or {}), "labels": pod_labels},
                },
            },
        }
        # The rollout's end: the ReplicaSets of an earlier template are scaled to zero.
        old = [
            c
            for c in self.cluster.controllers
            if c.kind == "ReplicaSet"
            and c.namespace == namespace
            and c.owner is not None
            and c.owner.kind == "Deployment"
            and c.owner.name == name
            and c.name != rs_name
        ]
        for rs in old:
            self._delete_owned("ReplicaSet", namespace, rs.name)
        self.cluster.controllers = [
            replace(c, replicas=0) if c in old else c for c in self.cluster.controllers
        ]
        created = self._workload(rs_raw, obj, via=True)
        scaled = (
            f", ReplicaSets {', '.join(sorted(c.name for c in old))} scaled to 0" if old else ""
        )
        self.applied.objects.append(f"{obj}: ReplicaSet {rs_name}, {created} pods{scaled}")

    def _workload(self, raw: Mapping[str, Any], obj: str, via: bool = False) -> int:
        """A ReplicaSet, StatefulSet or Job and its pods; the number of pods created."""
        kind = raw["kind"]
        meta = raw["metadata"]
        namespace, name = meta.get("namespace") or "default", meta["name"]
        template = self._template(raw, obj)
        spec = raw["spec"]
        labels = dict(template.labels)
        uid = meta.get("uid") or _uid(kind, namespace, name)
        if kind == "Job":
            parallelism = _count(spec.get("parallelism"), obj, self.where, "spec.parallelism", 1)
            completions = spec.get("completions")
            count = min(
                parallelism,
                _count(completions, obj, self.where, "spec.completions", parallelism, built=False),
            )
            if spec.get("suspend") is True:
                count = 0
            # The Job controller's labels (its selector is generated from them).
            labels.update(
                {
                    "batch.kubernetes.io/controller-uid": uid,
                    "batch.kubernetes.io/job-name": name,
                    "controller-uid": uid,
                    "job-name": name,
                }
            )
            if spec.get("selector") and spec.get("manualSelector") is True:
                _selector(raw, obj, self.where, template.labels)
            indexed = spec.get("completionMode") == "Indexed"
        else:
            count = _count(spec.get("replicas"), obj, self.where, "spec.replicas", 1)
            _selector(raw, obj, self.where, labels)
            indexed = False
        controller_raw = {
            **raw,
            "metadata": {**meta, "namespace": namespace, "uid": uid},
            "spec": {
                **spec,
                "selector": spec.get("selector")
                or {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
            },
        }
        if kind == "Job":
            controller_raw["spec"]["parallelism"] = count
        try:
            controller = parse_controller(controller_raw)
        except ModelError as exc:
            raise _model(exc, self.where, obj) from None
        owner = OwnerRef(kind, name, uid, True, raw.get("apiVersion") or "")
        pod_spec = template.spec
        claims = self._claim_templates(raw, obj) if kind == "StatefulSet" else []
        pods: list[Pod] = []
        if kind == "StatefulSet":
            revision = f"{name}-{template_hash(template.raw)}"
            for i in range(count):
                pod_name = f"{name}-{i}"
                volumes = list(pod_spec.get("volumes") or []) + [
                    {"name": c, "persistentVolumeClaim": {"claimName": f"{c}-{pod_name}"}}
                    for c in claims
                ]
                pod_labels = {
                    **labels,
                    "apps.kubernetes.io/pod-index": str(i),
                    "controller-revision-hash": revision,
                    "statefulset.kubernetes.io/pod-name": pod_name,
                }
                pods.append(
                    _pod(obj, self.where, template, namespace=namespace, name=pod_name, owner=owner,
                         labels=pod_labels, spec={**pod_spec, "volumes": volumes} if claims else pod_spec)
                )  # fmt: skip
        elif indexed:
            for i in range(count):
                prefix = f"{name}-{i}"
                pod_labels = {**labels, "batch.kubernetes.io/job-completion-index": str(i)}
                [pod_name] = self._generated(namespace, prefix, 1)
                pods.append(
                    _pod(
                        obj,
                        self.where,
                        template,
                        namespace=namespace,
                        name=pod_name,
                        owner=owner,
                        labels=pod_labels,
                    )
                )
        else:
            for pod_name in self._generated(namespace, name, count):
                pods.append(
                    _pod(
                        obj,
                        self.where,
                        template,
                        namespace=namespace,
                        name=pod_name,
                        owner=owner,
                        labels=labels,
                    )
                )
        model = (
            pods[0]
            if pods
            else _pod(
                obj,
                self.where,
                template,
                namespace=namespace,
                name=f"{name}-template",
                owner=owner,
                labels=labels,
            )
        )
        replaced = self._replace_controller(controller, model)
        self._create(pods)
        if not via:
            again = " (replaced)" if replaced else ""
            self.applied.objects.append(f"{obj}{again}: {len(pods)} pods")
        return len(pods)

    def _claim_templates(self, raw: Mapping[str, Any], obj: str) -> list[str]:
        names: list[str] = []
        templates = raw["spec"].get("volumeClaimTemplates") or []
        if not isinstance(templates, list):
            raise _fail(
                obj, self.where, "spec.volumeClaimTemplates", "a list of claim templates", templates
            )
        for i, t in enumerate(templates):
            name = (t.get("metadata") or {}).get("name") if isinstance(t, Mapping) else None
            if not isinstance(name, str) or not name:
                raise _fail(
                    obj,
                    self.where,
                    f"spec.volumeClaimTemplates[{i}].metadata.name",
                    "a non-empty string",
                    name,
                )
            names.append(name)
        return names

    def _daemonset(self, raw: Mapping[str, Any], obj: str) -> None:
        meta = raw["metadata"]
        namespace, name = meta.get("namespace") or "default", meta["name"]
        template = self._template(raw, obj)
        _selector(raw, obj, self.where, template.labels)
        pod_spec = dict(template.spec)
        tolerations = list(pod_spec.get("tolerations") or [])
        if not isinstance(pod_spec.get("tolerations") or [], list):
            raise _fail(
                obj,
                self.where,
                "spec.template.spec.tolerations",
                "a list of tolerations",
                pod_spec.get("tolerations"),
            )
        tolerations += [dict(t) for t in _DAEMON_TOLERATIONS]
        if pod_spec.get("hostNetwork") is True:
            tolerations.append(dict(_HOST_NETWORK_TOLERATION))
        pod_spec["tolerations"] = tolerations
        uid = meta.get("uid") or _uid("DaemonSet", namespace, name)
        ds_raw = {
            **raw,
            "metadata": {**meta, "namespace": namespace, "uid": uid},
            "spec": {**raw["spec"], "template": {**template.raw, "spec": pod_spec}},
        }
        try:
            ds = parse_daemonset(ds_raw)
        except ModelError as exc:
            raise _model(exc, self.where, obj) from None
        cluster = self.cluster
        old = [d for d in cluster.daemonsets if (d.namespace, d.name) == (namespace, name)]
        if old:
            self._delete_owned("DaemonSet", namespace, name)
        placed = 0
        nodes = sorted(cluster.list_nodes(), key=lambda n: n.name)
        names = iter(self._generated(namespace, name, len(nodes)))
        for node in nodes:
            pod = cluster.place_daemon_pod(ds, node, next(names))
            if pod is not None:
                placed += 1
                self.applied.pods.append(pod.key)
        cluster.daemonsets = [d for d in cluster.daemonsets if d not in old] + [
            _with_count(ds, placed)
        ]
        again = " (replaced)" if old else ""
        self.applied.objects.append(
            f"{obj}{again}: {placed} pods, on {placed} of {len(nodes)} nodes"
        )

    def _bare_pod(self, raw: Mapping[str, Any], obj: str) -> None:
        meta = dict(raw["metadata"])
        namespace = meta.get("namespace") or "default"
        if not meta.get("name"):
            meta["name"] = _generated_name(self.cluster, namespace, meta["generateName"])
            obj = f"Pod {namespace}/{meta['name']}"
        meta["namespace"] = namespace
        meta.setdefault("uid", f"sim-{namespace}-{meta['name']}")
        node = (
            (raw.get("spec") or {}).get("nodeName")
            if isinstance(raw.get("spec"), Mapping)
            else None
        )
        if node and node not in self.cluster.nodes:
            raise _fail(
                obj,
                self.where,
                "spec.nodeName",
                "the name of a node of the cluster (or none: the scheduler places it)",
                node,
            )
        if f"{namespace}/{meta['name']}" in self.cluster.pods:
            raise _fail(
                obj,
                self.where,
                "metadata.name",
                "a pod the cluster does not have (a Pod's spec cannot be changed in place)",
                meta["name"],
            )
        try:
            spec = raw.get("spec")
            if isinstance(spec, Mapping):
                spec = self._with_priority(dict(spec))
            pod = parse_pod({**raw, "metadata": meta, "spec": spec, "status": {}})
        except ModelError as exc:
            raise _model(exc, self.where, obj) from None
        self._create([pod.with_(phase="Running" if pod.node_name else "Pending")])
        self.applied.objects.append(
            f"{obj}: {'bound to ' + pod.node_name if pod.node_name else 'pending'}"
        )

    def _pdb(self, raw: Mapping[str, Any], obj: str) -> None:
        meta = raw["metadata"]
        namespace = meta.get("namespace") or "default"
        try:
            pdb = parse_pdb({**raw, "metadata": {**meta, "namespace": namespace}, "status": {}})
        except ModelError as exc:
            raise _model(exc, self.where, obj) from None
        if pdb.min_available is not None and pdb.max_unavailable is not None:
            raise _fail(obj, self.where, "spec", "minAvailable or maxUnavailable, not both")
        with self.cluster._lock:
            replaced = pdb.key in self.cluster.pdbs
            self.cluster.pdbs[pdb.key] = pdb
        budget = refresh_pdb(self.cluster, pdb.key)
        self.applied.pdbs.append((pdb.key, len(self.applied.objects)))
        again = " (replaced)" if replaced else ""
        self.applied.objects.append(f"{obj}{again}: {pdb_status(budget)}")


    def _dra(self, raw: Mapping[str, Any], obj: str) -> None:
        index = DRA_KINDS.index(raw["kind"])
        try:
            # A created claim has no status: allocating it is the scheduler's job.
            parsed = _DRA_PARSERS[index]({**raw, "status": {}})
        except ModelError as exc:
            raise _model(exc, self.where, obj) from None
        found: list[Any] = self.cluster.dra_objects[index]
        identity = getattr(parsed, "key", getattr(parsed, "name", ""))
        with self.cluster._lock:
            kept = [o for o in found if getattr(o, "key", getattr(o, "name", "")) != identity]
            replaced = len(kept) != len(found)
            found[:] = [*kept, parsed]
        self.applied.objects.append(f"{obj}{' (replaced)' if replaced else ''}: added")


    def _provisioning(self, raw: Mapping[str, Any], obj: str) -> None:
        template = raw["kind"] == "PodTemplate"
        try:
            # A created request has no status: its conditions are the autoscaler's to write.
            parsed: PodTemplate | ProvisioningRequest = (
                parse_pod_template(raw)
                if template
                else parse_provisioning_request({**raw, "status": {}})
            )
        except ModelError as exc:
            raise _model(exc, self.where, obj) from None
        cluster = self.cluster
        with cluster._lock:
            if isinstance(parsed, PodTemplate):
                kept_templates = [t for t in cluster.pod_templates if t.key != parsed.key]
                replaced = len(kept_templates) != len(cluster.pod_templates)
                cluster.pod_templates = [*kept_templates, parsed]
            else:
                kept = [r for r in cluster.provisioning_requests if r.key != parsed.key]
                replaced = len(kept) != len(cluster.provisioning_requests)
                cluster.provisioning_requests = [*kept, parsed]
        self.applied.objects.append(f"{obj}{' (replaced)' if replaced else ''}: added")

    def _capacity_quota(self, raw: Mapping[str, Any], obj: str) -> None:
        try:
            # A created quota has no status: its usage is the autoscaler's to write.
            parsed = parse_capacity_quota({**raw, "status": {}})
        except ModelError as exc:
            raise _model(exc, self.where, obj) from None
        if parsed.error:
            # Applied by hand, a quota the API server would refuse is a mistake to report,
            # not one to skip silently.
            raise InputError(f"{self.where}: {parsed.error}")
        cluster = self.cluster
        with cluster._lock:
            kept = [q for q in cluster.capacity_quotas if q.name != parsed.name]
            replaced = len(kept) != len(cluster.capacity_quotas)
            cluster.capacity_quotas = [*kept, parsed]
        self.applied.objects.append(f"{obj}{' (replaced)' if replaced else ''}: added")

    def _capacity_buffer(self, raw: Mapping[str, Any], obj: str) -> None:
        try:
            # A created buffer has no status: it is its controller's to write.
            parsed = parse_capacity_buffer({**raw, "status": {}})
        except ModelError as exc:
            raise _model(exc, self.where, obj) from None
        cluster = self.cluster
        with cluster._lock:
            kept = [b for b in cluster.capacity_buffers if b.key != parsed.key]
            replaced = len(kept) != len(cluster.capacity_buffers)
            cluster.capacity_buffers = [*kept, parsed]
        self.applied.objects.append(f"{obj}{' (replaced)' if replaced else ''}: added")


def _with_count(ds: DaemonSet, placed: int) -> DaemonSet:
    return replace(ds, desired_number_scheduled=placed)


def apply_file(cluster: SimulatedCluster, path: str) -> Applied:
    """Apply the objects of `path` to `cluster`, in order. Raises `InputError` naming the
    file, the object, the field and the expected form."""
    applier = _Applier(cluster, path)
    seen: set[tuple[str, str, str]] = set()
    for raw in load_manifests(path):
        meta = raw["metadata"]
        identity = (raw["kind"], meta.get("namespace") or "default", meta.get("name") or "")
        if identity[2] and identity in seen:
            raise InputError(
                f"--apply {path!r}: {_describe(raw)}: given more than once; expected each object once"
            )
        seen.add(identity)
        applier.apply(raw)
    return applier.applied


# --------------------------------------------------------------------------- PDB status


def _scaled(value: int | str, expected: int) -> int:
    """An int-or-percent of `expected`, rounded up as the disruption controller does."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value[:-1]) * expected / 100)


def pdb_status(pdb: PodDisruptionBudget) -> str:
    return (
        f"{pdb.current_healthy} of {pdb.expected_pods} pods healthy, "
        f"{pdb.disruptions_allowed} disruptions allowed"
    )


def refresh_pdb(cluster: SimulatedCluster, key: str) -> PodDisruptionBudget:
    """The budget `key` with the status the disruption controller would give it now: its
    pods, the healthy ones (running on a node), the healthy ones it wants and the
    disruptions that leaves."""
    with cluster._lock:
        pdb = cluster.pdbs[key]
        pods = [p for p in cluster.pods.values() if pdb.matches(p) and not p.is_terminal]
    healthy = sum(1 for p in pods if p.node_name and p.deletion_time is None)
    expected = len(pods)
    if pdb.max_unavailable is not None:
        desired = max(0, expected - _scaled(pdb.max_unavailable, expected))
    elif pdb.min_available is not None:
        desired = _scaled(pdb.min_available, expected)
    else:
        desired = expected
    budget = replace(
        pdb,
        current_healthy=healthy,
        desired_healthy=desired,
        expected_pods=expected,
        disruptions_allowed=max(0, healthy - desired),
    )
    with cluster._lock:
        cluster.pdbs[key] = budget
    return budget
