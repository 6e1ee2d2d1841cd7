"""Scenario files: a snapshot, a cloud-config, flags and timed events in one YAML file.

```yaml
name: burst
description: A batch of 40 pods arrives; the cluster grows, then shrinks.
duration: 1h
cloudConfig: ../cloud-configs/two-groups.yaml   # a path (relative to this file) or inline
snapshot: ../snapshots/small.json               # optional, a Kubernetes List
objects: []                                     # optional, more Kubernetes objects inline
initialNodes: {general: 2}                      # nodes provisioned before the start
flags: {scale-down-unneeded-time: 5m, expander: least-waste}
workloads:                                      # ReplicaSets (or StatefulSets, Jobs) and their pods
  - {name: web, replicas: 4, cpu: 500m, memory: 512Mi}
events:
  - {at: 2m, scale: {workload: default/web, replicas: 40}}
  - {at: 20m, addPods: {name: batch, count: 5, cpu: "1", memory: 1Gi}}
  - {at: 25m, deletePods: [default/batch-1]}
  - {at: 30m, cordon: general-00001}
  - {at: 31m, uncordon: general-00001}
  - {at: 40m, failGroup: {nodeGroup: spot, errorCode: OutOfCapacity}}
  - {at: 50m, recoverGroup: spot}
```

Errors name the file, the field path and the expected form.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from clusterscaler.framework.durations import DURATION_FORM, parse_duration
from clusterscaler.framework.options import flag_specs
from clusterscaler.model import ClusterObjects, ModelError, Pod
from clusterscaler.model.common import describe_value
from clusterscaler.model.yamltext import YamlFileError, read_yaml_file
from clusterscaler.offline.loader import (
    MAX_COUNT,
    InputError,
    load_snapshot,
    merge,
    parse_snapshot_doc,
    path_label,
)
from clusterscaler.offline.output import plural
from clusterscaler.offline.simulatedcluster import controller_key

WORKLOAD_KINDS = ("ReplicaSet", "StatefulSet", "Job")
_WORKLOAD_API = {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}
_SCENARIO_KEYS = frozenset(
    {
        "name",
        "description",
        "duration",
        "cloudConfig",
        "snapshot",
        "objects",
        "initialNodes",
        "flags",
        "workloads",
        "events",
    }
)
_POD_KEYS = frozenset(
    {
        "cpu",
        "memory",
        "gpu",
        "labels",
        "annotations",
        "nodeSelector",
        "tolerations",
        "affinity",
        "topologySpreadConstraints",
        "priority",
    }
)
_WORKLOAD_KEYS = _POD_KEYS | {"name", "namespace", "kind", "replicas", "pdb"}
_ADD_PODS_KEYS = _POD_KEYS | {"name", "namespace", "count"}
_EVENT_ACTIONS = (
    "scale",
    "addPods",
    "deletePods",
    "cordon",
    "uncordon",
    "failGroup",
    "recoverGroup",
)


@dataclass(frozen=True, slots=True)
class ScaleWorkload:
    workload: str
    replicas: int


@dataclass(frozen=True, slots=True)
class AddPods:
    pods: tuple[Pod, ...]


@dataclass(frozen=True, slots=True)
class DeletePods:
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Cordon:
    node: str
    unschedulable: bool = True


@dataclass(frozen=True, slots=True)
class FailGroup:
    node_group: str
    error_code: str = "OutOfCapacity"
    message: str = ""
    out_of_resources: bool = True


@dataclass(frozen=True, slots=True)
class RecoverGroup:
    node_group: str


Action = ScaleWorkload | AddPods | DeletePods | Cordon | FailGroup | RecoverGroup


@dataclass(frozen=True, slots=True)
class ScenarioEvent:
    """One timed event: at `at` after the start, do `action`; `text` for the timeline;
    `field` the file's field naming the workload or node group it acts on
    (`events[2].failGroup.nodeGroup`), for an error found when the scenario's cluster is
    built."""

    at: timedelta
    action: Action
    text: str
    field: str = ""


@dataclass
class Scenario:
    """A parsed scenario file."""

    name: str
    source: str
    description: str = ""
    duration: timedelta | None = None
    objects: ClusterObjects = field(default_factory=ClusterObjects)
    # Either a path to a cloud-config file or the inline document.
    cloud_config_path: str = ""
    cloud_config: Mapping[str, Any] | None = None
    initial_nodes: dict[str, int] = field(default_factory=dict)
    # Flag name (without dashes) -> value as written in the file.
    flags: dict[str, Any] = field(default_factory=dict)
    events: list[ScenarioEvent] = field(default_factory=list)
    # Pod templates of the declared workloads, by `controller_key` (for scaling from zero).
    templates: dict[str, Pod] = field(default_factory=dict)


def _fail(source: str, where: str, expected: str, value: Any = ...) -> InputError:
    got = "" if value is ... else f", got {describe_value(value)}"
    return InputError(f"{source}: {where}: expected {expected}{got}")


def _key(key: object) -> str:
    """A name from the file as part of a field path: whole when short and printable, else
    quoted, escaped and cut to a line (a 5,000-character key is named in a line, not a
    page; a newline in it does not break the error's line)."""
    text = str(key)
    return text if 0 < len(text.strip()) <= 80 and text.isprintable() else describe_value(text)


def _mapping(value: Any, source: str, where: str, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(source, where, what, value)
    return value


def _check_keys(value: Mapping[str, Any], allowed: frozenset[str], source: str, where: str) -> None:
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        raise InputError(
            f"{source}: {where}.{_key(unknown[0])}: unknown field; expected one of "
            f"{', '.join(sorted(allowed))}"
        )


def _name(value: Any, source: str, where: str) -> str:
    if not isinstance(value, str) or not value or "/" in value:
        raise _fail(source, where, "a non-empty name without '/'", value)
    return value


def _count(value: Any, source: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise _fail(source, where, f"a non-negative integer of at most {MAX_COUNT:,}", value)
    return value


def _duration(value: Any, source: str, where: str) -> timedelta:
    if isinstance(value, int) and not isinstance(value, bool) and value == 0:
        return timedelta(0)
    if not isinstance(value, str):
        raise _fail(source, where, DURATION_FORM, value)
    try:
        return parse_duration(value)
    except ValueError:
        raise _fail(source, where, DURATION_FORM, value) from None


def _pod_doc(
    spec: Mapping[str, Any],
    *,
    name: str,
    namespace: str,
    owner: dict[str, Any] | None,
) -> dict[str, Any]:
    """A Kubernetes Pod object from a scenario's short pod description."""
    requests: dict[str, Any] = {}
    for key in ("cpu", "memory"):
        if spec.get(key) is not None:
            requests[key] = str(spec[key])
    if spec.get("gpu") is not None:
        requests["nvidia.com/gpu"] = str(spec["gpu"])
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.9"}
    if requests:
        container["resources"] = {"requests": requests}
    pod_spec: dict[str, Any] = {"containers": [container]}
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "priority"):
        if spec.get(key) is not None:
            pod_spec[key] = spec[key]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(spec.get("labels") or {}),
        "annotations": dict(spec.get("annotations") or {}),
    }
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": pod_spec,
        "status": {"phase": "Pending"},
    }


def _workload_docs(
    raw: Any, index: int, source: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The workload's controller, pods and PDB, and its pod template as a Pod object."""
    where = f"workloads[{index}]"
    spec = _mapping(raw, source, where, "an object with name, replicas, cpu and memory")
    _check_keys(spec, _WORKLOAD_KEYS, source, where)
    name = _name(spec.get("name"), source, f"{where}.name")
    where = f"{where} ({_key(name)})"
    namespace = _name(spec.get("namespace", "default"), source, f"{where}.namespace")
    kind = spec.get("kind", "ReplicaSet")
    if kind not in WORKLOAD_KINDS:
        raise _fail(source, f"{where}.kind", "one of " + ", ".join(WORKLOAD_KINDS), kind)
    if "replicas" not in spec:
        raise InputError(f"{source}: {where}.replicas: required field is missing")
    replicas = _count(spec["replicas"], source, f"{where}.replicas")
    labels = dict(spec.get("labels") or {"app": name})
    if not isinstance(spec.get("labels", {}), Mapping):
        raise _fail(source, f"{where}.labels", "a map of label names to values", spec.get("labels"))
    uid = f"sim-{kind.lower()}-{namespace}-{name}"
    controller: dict[str, Any] = {
        "apiVersion": _WORKLOAD_API[kind],
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": labels},
        "spec": {"selector": {"matchLabels": labels}},
    }
    if kind == "Job":
        controller["spec"]["parallelism"] = replicas
    else:
        controller["spec"]["replicas"] = replicas
    owner = {
        "apiVersion": _WORKLOAD_API[kind],
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
    }
    pod_spec = {**spec, "labels": labels}
    template = _pod_doc(pod_spec, name=f"{name}-template", namespace=namespace, owner=owner)
    docs = [controller]
    for i in range(replicas):
        pod_name = f"{name}-{i}" if kind == "StatefulSet" else f"{name}-{i:05d}"
        docs.append(_pod_doc(pod_spec, name=pod_name, namespace=namespace, owner=owner))
    pdb = spec.get("pdb")
    if pdb is not None:
        pdb = _mapping(pdb, source, f"{where}.pdb", "an object with minAvailable or maxUnavailable")
        _check_keys(pdb, frozenset({"minAvailable", "maxUnavailable"}), source, f"{where}.pdb")
        docs.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"selector": {"matchLabels": labels}, **pdb},
            }
        )
    return docs, template


def _parse_objects(docs: Sequence[Any], source: str, where: str) -> ClusterObjects:
    try:
        return ClusterObjects.from_items(docs)
    except ModelError as exc:
        raise InputError(f"{source}: {where}: {exc}") from None


def _parse_pods(spec: Mapping[str, Any], source: str, where: str) -> tuple[Pod, ...]:
    _check_keys(spec, _ADD_PODS_KEYS, source, where)
    name = _name(spec.get("name"), source, f"{where}.name")
    namespace = _name(spec.get("namespace", "default"), source, f"{where}.namespace")
    count = _count(spec.get("count", 1), source, f"{where}.count")
    docs = [
        _pod_doc(spec, name=name if count == 1 else f"{name}-{i}", namespace=namespace, owner=None)
        for i in range(count)
    ]
    return tuple(_parse_objects(docs, source, where).pods)


def _parse_event(raw: Any, index: int, source: str) -> ScenarioEvent:
    where = f"events[{index}]"
    spec = _mapping(raw, source, where, "an object with at and one action")
    if "at" not in spec:
        raise InputError(f"{source}: {where}.at: required field is missing")
    at = _duration(spec["at"], source, f"{where}.at")
    actions = [k for k in spec if k != "at"]
    if len(actions) != 1 or actions[0] not in _EVENT_ACTIONS:
        raise _fail(
            source,
            where,
            "exactly one action of " + ", ".join(_EVENT_ACTIONS),
            sorted(map(str, actions)),
        )
    kind = actions[0]
    value = spec[kind]
    where = f"{where}.{kind}"
    field_path = ""  # the field naming a workload or a node group, checked with the cluster
    action: Action
    if kind == "scale":
        body = _mapping(value, source, where, "an object with workload and replicas")
        _check_keys(body, frozenset({"workload", "replicas"}), source, where)
        workload = body.get("workload")
        if not isinstance(workload, str) or not workload:
            raise _fail(source, f"{where}.workload", "namespace/name of a workload", workload)
        field_path = where
        action = ScaleWorkload(workload, _count(body.get("replicas"), source, f"{where}.replicas"))
        text = f"scale {workload} to {action.replicas} replicas"
    elif kind == "addPods":
        body = _mapping(value, source, where, "an object with name, count, cpu and memory")
        action = AddPods(_parse_pods(body, source, where))
        text = f"add {plural(len(action.pods), 'pod')}"
    elif kind == "deletePods":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(
            isinstance(v, str) and v.count("/") == 1 for v in value
        ):
            raise _fail(source, where, "a list of namespace/name pod keys", value)
        action = DeletePods(tuple(value))
        text = f"delete {plural(len(value), 'pod')}"
    elif kind in ("cordon", "uncordon"):
        if not isinstance(value, str) or not value:
            raise _fail(source, where, "a node name", value)
        action = Cordon(value, unschedulable=kind == "cordon")
        text = f"{kind} {value}"
    elif kind == "failGroup":
        field_path = where if isinstance(value, str) else f"{where}.nodeGroup"
        if isinstance(value, str):
            value = {"nodeGroup": value}
        body = _mapping(value, source, where, "an object with nodeGroup and errorCode")
        _check_keys(
            body, frozenset({"nodeGroup", "errorCode", "message", "outOfResources"}), source, where
        )
        group = _name(body.get("nodeGroup"), source, f"{where}.nodeGroup")
        code = body.get("errorCode", "OutOfCapacity")
        if not isinstance(code, str) or not code:
            raise _fail(source, f"{where}.errorCode", "a non-empty error code", code)
        oor = body.get("outOfResources", True)
        if not isinstance(oor, bool):
            raise _fail(source, f"{where}.outOfResources", "true or false", oor)
        action = FailGroup(group, code, str(body.get("message", "")), oor)
        text = f"{group} fails to provision ({code})"
    else:
        field_path = where
        action = RecoverGroup(_name(value, source, where))
        text = f"{action.node_group} provisions again"
    return ScenarioEvent(at, action, text, field_path)


def _parse_flags(value: Any, source: str) -> dict[str, Any]:
    known = {spec.name for spec in flag_specs()}
    out: dict[str, Any] = {}
    if isinstance(value, list):
        # `["--expander=priority", "--scale-down-unneeded-time=5m"]`
        pairs = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.startswith("--"):
                raise _fail(source, f"flags[{i}]", "--flag=value", item)
            name, sep, text = item[2:].partition("=")
            pairs.append((name, text if sep else "true", f"flags[{i}]"))
    else:
        body = _mapping(value, source, "flags", "a map of flag names to values")
        pairs = [(str(k).lstrip("-"), v, f"flags.{_key(k)}") for k, v in body.items()]
    for name, val, where in pairs:
        if name not in known:
            raise InputError(
                f"{source}: {where}: unknown autoscaler flag {describe_value(name)}; see "
                "`clusterscaler simulate --help`"
            )
        if name in ("cloud-config", "cloud-provider"):
            raise InputError(
                f"{source}: {where}: set the cloud-config with the scenario's cloudConfig field; "
                "simulations use the sim provider"
            )
        out[name] = val
    return out


def parse_scenario(doc: Any, source: str, base_dir: Path | None = None) -> Scenario:
    """Parse a loaded scenario document; relative paths are resolved against `base_dir`."""
    spec = _mapping(doc, source, "<document>", "a scenario object (name, cloudConfig, events, ...)")
    _check_keys(spec, _SCENARIO_KEYS, source, "<scenario>")
    base = base_dir or Path.cwd()
    name = spec.get("name") or Path(source).stem
    if not isinstance(name, str):
        raise _fail(source, "name", "a string", name)
    description = spec.get("description") or ""
    if not isinstance(description, str):
        raise _fail(source, "description", "a string", description)
    scenario = Scenario(name=name, source=source, description=description.strip())
    if spec.get("duration") is not None:
        scenario.duration = _duration(spec["duration"], source, "duration")
    cloud = spec.get("cloudConfig")
    if isinstance(cloud, str):
        if "\x00" in cloud:  # no file is named so (Path.resolve raised ValueError)
            raise _fail(source, "cloudConfig", "a path to a cloud-config file", cloud)
        if not cloud.strip():  # the scenario's own folder, never a file
            raise _fail(source, "cloudConfig", "a path to a cloud-config file", cloud)
        scenario.cloud_config_path = str((base / cloud).resolve())
    elif isinstance(cloud, Mapping):
        scenario.cloud_config = cloud
    elif cloud is not None:
        raise _fail(
            source, "cloudConfig", "a path to a cloud-config file or an inline cloud-config", cloud
        )
    objects = ClusterObjects()
    snap = spec.get("snapshot")
    if snap is not None:
        if not isinstance(snap, str) or "\x00" in snap:
            raise _fail(source, "snapshot", "a path to a Kubernetes List file", snap)
        objects = load_snapshot(base / snap, f"{source}: snapshot {path_label(base / snap)}")
    inline = spec.get("objects")
    if inline is not None:
        if not isinstance(inline, list):
            raise _fail(source, "objects", "a list of Kubernetes objects", inline)
        inline_objects = parse_snapshot_doc({"kind": "List", "items": inline}, f"{source}: objects")
        objects = merge(objects, inline_objects, f"{source}: objects")
    workloads = spec.get("workloads") or []
    if not isinstance(workloads, list):
        raise _fail(source, "workloads", "a list of workloads", workloads)
    docs: list[dict[str, Any]] = []
    template_docs: list[dict[str, Any]] = []
    for i, raw in enumerate(workloads):
        workload_docs, template = _workload_docs(raw, i, source)
        docs.extend(workload_docs)
        template_docs.append(template)
    if docs:
        objects = merge(objects, _parse_objects(docs, source, "workloads"), f"{source}: workloads")
        for pod in _parse_objects(template_docs, source, "workloads").pods:
            if pod.owner is not None:
                key = controller_key(pod.owner.kind, pod.namespace, pod.owner.name)
                scenario.templates[key] = pod
    scenario.objects = objects
    initial = spec.get("initialNodes") or {}
    body = _mapping(initial, source, "initialNodes", "a map of node group name to node count")
    scenario.initial_nodes = {
        _name(k, source, "initialNodes"): _count(v, source, f"initialNodes.{_key(k)}")
        for k, v in body.items()
    }
    if spec.get("flags") is not None:
        scenario.flags = _parse_flags(spec["flags"], source)
    events = spec.get("events") or []
    if not isinstance(events, list):
        raise _fail(source, "events", "a list of timed events", events)
    parsed = [_parse_event(raw, i, source) for i, raw in enumerate(events)]
    # Stable: events at the same time keep the file's order.
    scenario.events = sorted(parsed, key=lambda e: e.at)
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        doc = read_yaml_file(p, f"scenario {str(p)!r}", "a YAML scenario")
    except YamlFileError as exc:
        raise InputError(str(exc)) from None
    scenario = parse_scenario(doc, str(p), p.parent)
    cloud = Path(scenario.cloud_config_path)
    problem = _not_a_file(cloud) if scenario.cloud_config_path else ""
    if problem and isinstance(doc, dict):
        # Named here, with the scenario and its field: the provider reading it later knows
        # only a path.
        raise InputError(
            f"{p}: cloudConfig: expected a path to a cloud-config file, got "
            f"{describe_value(doc.get('cloudConfig'))} ({problem}: {_key(cloud)})"
        )
    return scenario


def _not_a_file(path: Path) -> str:
    """Why `path` names no regular file ("" when it does). Any error of the system counts
    (a name too long for it, a folder not searchable), not only a missing file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return (exc.strerror or type(exc).__name__).lower()
    return "" if stat.S_ISREG(mode) else "not a file"
