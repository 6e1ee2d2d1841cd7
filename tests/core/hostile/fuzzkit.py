"""Hostile input for the fuzz targets: seed objects of every kind the model reads, hostile
values (wrong types, numbers beyond int64 and float, quantities with hostile exponents,
odd strings, deep nesting), objects mutated with them, and the settings every target uses.

A mutated object is a seed with one to three of its fields (at any depth, the top-level
`metadata`, `spec` and `status` included) replaced by a hostile value, deleted, or joined by
an unknown field: what a careless script, an old client or a buggy controller can write, and
what a snapshot edited by hand can hold.

Settings: the `fuzz` profile (tests/conftest.py) runs each target long, with random examples
(`pytest -m fuzz --hypothesis-profile=fuzz -o timeout=0`); the `properties` profile, when
loaded, gives 2,000 derandomized examples each; any other run, the normal suite and CI's,
gives each target a short derandomized pass of `QUICK_EXAMPLES` (20 for the loop), so it
stays fast and reproducible.
"""

from __future__ import annotations

import copy
import gc
import json
import re
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
QUICK_EXAMPLES = 60


def fuzz_settings(quick: int = QUICK_EXAMPLES) -> settings:
    """The loaded profile when it is `fuzz` or `properties`; else `quick` derandomized
    examples. Health checks are off: hostile examples are large and slow to draw on purpose.
    Every profile but `fuzz` gets a deadline of 10 seconds per example."""
    current = settings.get_current_profile_name()
    if current == "fuzz":
        # The long run: at the lowest priority on a shared machine, where an example's wall
        # time says more about the load than about the reader. `bounded` bounds each
        # example's CPU time and memory instead, whatever the load.
        return settings(settings.get_profile(current), suppress_health_check=list(HealthCheck),
                        deadline=None)
    if current == "properties":
        base = settings.get_profile(current)
    else:
        base = settings(
            settings.get_profile("properties"),
            max_examples=quick,
            derandomize=True,
            database=None,
        )
    # Bounded time: an example is milliseconds (a YAML snapshot, a few hundred); one that
    # takes seconds is a reader gone quadratic or worse on hostile input, and fails.
    return settings(
        base, suppress_health_check=list(HealthCheck), deadline=timedelta(seconds=10)
    )


FUZZ = fuzz_settings()
QUICK_FUZZ = fuzz_settings(20)


# Per example, what reading an input of `size` bytes may cost at most: CPU seconds and
# bytes allocated at the peak. Linear in the size, with room for YAML's nodes (about 100
# bytes of them per byte of text) and for a loaded machine; a reader that goes super-linear
# on hostile input (aliases of aliases, quadratic nesting) passes these by orders of
# magnitude on inputs of a few kilobytes.
CPU_SECONDS = 1.0
CPU_SECONDS_PER_MB = 15.0
PEAK_BYTES = 64 << 20
PEAK_BYTES_PER_BYTE = 200
# An object the input asks the reader to build (a scenario's `replicas: 20000` is 20,000
# pods from a few bytes) counts as this much input: about a pod as a snapshot writes it.
OBJECT_BYTES = 1_000


# CPU seconds the cyclic garbage collector has spent, all passes together.
_gc_seconds = 0.0
_gc_pass_started = 0.0


def _count_gc_time(phase: str, info: dict[str, int]) -> None:
    global _gc_seconds, _gc_pass_started
    if phase == "start":
        _gc_pass_started = time.process_time()
    else:
        _gc_seconds += time.process_time() - _gc_pass_started


gc.callbacks.append(_count_gc_time)


@contextmanager
def bounded(size: int = 0, objects: int = 0) -> Iterator[None]:
    """Fails the example when reading an input of `size` bytes, which asks the reader to
    build `objects` objects (pods of a scenario's replicas), took more CPU time or more
    memory (traced allocations, at their peak) than `CPU_SECONDS`, `PEAK_BYTES` and their
    per-size terms allow, each object counting as `OBJECT_BYTES` of input: every target runs
    its reader inside this.

    The collector's passes are not the reader's time: a full pass walks the whole heap of
    the test process, which Hypothesis's record of the examples drawn grows all through a
    long run (in one, an 817-byte scenario was charged 1.02 CPU seconds, which its own
    replay did not repeat). The objects an input asks for are its size too: a 570-byte
    scenario of 1,159 replicas took 0.55 to 1.08 CPU seconds, the more when the process's
    heap had to grow for them (a page fault a page, kernel time), which a replay, on the
    heap the first run left, did not repeat (docs/testing.md, "Running them")."""
    weight = size + OBJECT_BYTES * objects
    started_tracing = not tracemalloc.is_tracing()
    if started_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    gc_before = _gc_seconds
    started = time.process_time()
    try:
        yield
    finally:
        # Checked whether the reader returned or raised: a slow refusal is as bad as a slow
        # read.
        cpu = time.process_time() - started - (_gc_seconds - gc_before)
        peak = tracemalloc.get_traced_memory()[1] - base
        if started_tracing:
            tracemalloc.stop()
        cpu_limit = CPU_SECONDS + CPU_SECONDS_PER_MB * weight / 1e6
        peak_limit = PEAK_BYTES + PEAK_BYTES_PER_BYTE * weight
        asked = f" asking for {objects:,} objects" if objects else ""
        assert cpu <= cpu_limit, (
            f"{cpu:.2f} CPU seconds for {size:,} bytes of input{asked} (at most {cpu_limit:.2f})"
        )
        assert peak <= peak_limit, (
            f"{peak:,} bytes at the peak for {size:,} bytes of input{asked} "
            f"(at most {peak_limit:,})"
        )


def yaml_text(doc: Any, *, documents: bool = False) -> str:
    """`doc` as YAML text (each item of the list `doc` a document, when `documents`), as
    PyYAML's `safe_dump` writes it, through libyaml's emitter: a few times faster on the
    large hostile inputs. Raises what `safe_dump` raises on what YAML cannot write."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    if documents:
        return str(yaml.dump_all(doc, Dumper=dumper))
    return str(yaml.dump(doc, Dumper=dumper))


def size_of(value: Any) -> int:
    """The size of `value` as input: its length when text or bytes, else its JSON text's
    (0 when it has none, nested too deep to write)."""
    if isinstance(value, str | bytes):
        return len(value)
    try:
        return len(json.dumps(value, default=str))
    except (RecursionError, ValueError):
        return 0


# --------------------------------------------------------------------------- hostile values

INT64_MAX = (1 << 63) - 1

# Strings shaped like quantities, durations, percentages and names, and strings no parser
# expects: what a value the API server keeps as a string (annotations, labels, int-or-string
# fields) can hold.
QUANTITY_TEXT = st.from_regex(
    r"[+-]?[0-9]{0,25}(\.[0-9]{0,25})?([eE][+-]?[0-9]{1,6}|[KMGTPE]i?|[munkMGTPE])?",
    fullmatch=True,
)
ODD_STRINGS = st.sampled_from(
    [
        "", " ", "-1", "0", "1e400", "-1e400", "1e-400", "10e399", "9" * 5000, "0x10", "1_000",
        "NaN", "nan", "Inf", "-Inf", "infinity", "1.5", "150%", "-5%", "100%", "0%", "1e3%",
        "%", "abc%", "true", "false", "True", "maybe", "yes", "1", "null", "[]", "{}",
        "1h", "-1s", "99999999999999999h", "1y", "PT5M", "\x00", "é", "a" * 300, "a/b/c",
        "Exists", "In", "NoSchedule", "Sometimes", "metadata.name", "kube-system",
        "2024-01-02T03:04:05Z", "2024-13-45T99:99:99Z", "not-a-time",
    ]
)
HOSTILE_STRINGS = st.one_of(ODD_STRINGS, QUANTITY_TEXT, st.text(max_size=20))
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, INT64_MAX, INT64_MAX + 1, -(1 << 63) - 1, 10**400, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, HOSTILE_STRINGS)


def nested(depth: int) -> Any:
    """A list nested `depth` levels deep (JSON `[[[...]]]`)."""
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


HOSTILE_VALUES: st.SearchStrategy[Any] = st.one_of(
    SCALARS,
    st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=3)
        | st.dictionaries(st.one_of(HOSTILE_STRINGS, st.sampled_from(["name", "key"])), inner, max_size=3),
        max_leaves=6,
    ),
    st.integers(min_value=50, max_value=500).map(nested),
)


# --------------------------------------------------------------------------- seeds


def _example_items() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for path in sorted((EXAMPLES / "snapshots").glob("*.json")):
        items.extend(json.loads(path.read_text())["items"])
    return items


_META = {"name": "web-0", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"}}
_OWNER = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u-ss",
          "controller": True}
_SELECTOR = {"matchLabels": {"app": "web"},
             "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
_TERMS = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]},
    {"key": "cpus", "operator": "Gt", "values": ["2"]}]}]}

# A pod using most of what the model reads: every container list, affinity of each kind,
# spread, tolerations, volumes of each kind the drain rules and predicates look at, claims.
RICH_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        **_META,
        "annotations": {
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
            "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes": "cache",
            "cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "30s",
        },
        "ownerReferences": [_OWNER],
        "creationTimestamp": "2024-01-02T03:04:05Z",
    },
    "spec": {
        "nodeName": "node-1",
        "priority": 100,
        "schedulerName": "default-scheduler",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "overhead": {"cpu": "10m"},
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "1"}},
                            "restartPolicy": "Always"}],
        "containers": [
            {
                "name": "app",
                "resources": {
                    "requests": {"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": "1",
                                 "ephemeral-storage": "2Gi"},
                    "limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"},
                },
                "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
            }
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": _TERMS,
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": _TERMS["nodeSelectorTerms"][0]}
                ],
            },
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": _SELECTOR, "topologyKey": "kubernetes.io/hostname",
                 "namespaceSelector": {}}]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": _SELECTOR, "topologyKey": "topology.kubernetes.io/zone",
                 "namespaces": ["shop"]}]},
        },
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
             "whenUnsatisfiable": "DoNotSchedule", "labelSelector": _SELECTOR,
             "minDomains": 2, "matchLabelKeys": ["pod-template-hash"]}
        ],
        "tolerations": [
            {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "volumes": [
            {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
            {"name": "host", "hostPath": {"path": "/var/log"}},
            {"name": "ebs", "awsElasticBlockStore": {"volumeID": "vol-1"}},
            {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        ],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
    },
    "status": {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "nominatedNodeName": "",
        "startTime": "2024-01-02T03:04:06Z",
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-0-gpu-x"}],
    },
}

PENDING_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "pending-0", "namespace": "shop", "uid": "u-p",
                 "ownerReferences": [{**_OWNER, "kind": "ReplicaSet", "name": "api"}],
                 "creationTimestamp": "2024-01-01T00:00:00Z"},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]},
    "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
}

RICH_NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "node-1",
        "labels": {"kubernetes.io/hostname": "node-1", "topology.kubernetes.io/zone": "z1",
                   "node.kubernetes.io/instance-type": "m5.large"},
        "annotations": {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "false"},
        "creationTimestamp": "2024-01-01T00:00:00Z",
    },
    "spec": {
        "providerID": "aws:///z1/i-1",
        "unschedulable": False,
        "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"},
                   {"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000",
                    "effect": "NoSchedule"}],
    },
    "status": {
        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "1",
                     "ephemeral-storage": "100Gi", "hugepages-2Mi": "0"},
        "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110",
                        "nvidia.com/gpu": "1", "ephemeral-storage": "90Gi"},
        "conditions": [{"type": "Ready", "status": "True",
                        "lastTransitionTime": "2024-01-01T00:00:00Z"}],
        "volumesAttached": [{"name": "kubernetes.io/csi/ebs^vol-1", "devicePath": ""}],
    },
}

PDB: dict[str, Any] = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"maxUnavailable": "25%", "selector": _SELECTOR},
    "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2,
               "expectedPods": 3},
}

DAEMONSET: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "agent", "namespace": "kube-system", "uid": "u-ds"},
    "spec": {"selector": {"matchLabels": {"app": "agent"}},
             "template": {"metadata": {"labels": {"app": "agent"}}, "spec": RICH_POD["spec"]}},
}

STATEFULSET: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "web", "namespace": "shop", "uid": "u-ss"},
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}}, "spec": RICH_POD["spec"]}},
    "status": {"replicas": 3, "readyReplicas": 3},
}

RC: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ReplicationController",
    "metadata": {"name": "old", "namespace": "shop", "uid": "u-rc"},
    "spec": {"replicas": 2, "selector": {"app": "old"}},
}

PV: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "pv-1"},
    "spec": {
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "gp3",
        "claimRef": {"namespace": "shop", "name": "data-web-0"},
        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
        "nodeAffinity": {"required": _TERMS},
    },
    "status": {"phase": "Bound"},
}

PVC: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data-web-0", "namespace": "shop",
                 "annotations": {"volume.kubernetes.io/selected-node": "node-1"}},
    "spec": {"volumeName": "pv-1", "storageClassName": "gp3",
             "resources": {"requests": {"storage": "10Gi"}}},
    "status": {"phase": "Bound"},
}

STORAGE_CLASS: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "gp3"},
    "provisioner": "ebs.csi.aws.com",
    "volumeBindingMode": "WaitForFirstConsumer",
    "allowedTopologies": [{"matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["z1"]}]}],
}

CSINODE: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSINode",
    "metadata": {"name": "node-1"},
    "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1",
                          "allocatable": {"count": 25}, "topologyKeys": ["zone"]}]},
}

CONFIGMAP: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
    "data": {"priorities": "10:\n  - .*spot.*\n50:\n  - .*gpu.*\n"},
}

NAMESPACE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "shop", "labels": {"kubernetes.io/metadata.name": "shop"}},
}

_GPU_ATTRIBUTES = {"model": {"string": "A100"}, "driverVersion": {"version": "1.0.0"},
                   "index": {"int": 0}, "virtual": {"bool": False}}
RESOURCE_SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpu"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node-1",
        "devices": [{"name": "gpu-0", "attributes": _GPU_ATTRIBUTES,
                     "capacity": {"memory": {"value": "40Gi"}},
                     "taints": [{"key": "ecc", "effect": "NoSchedule"}]}],
    },
}
DEVICE_CLASS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
             "extendedResourceName": "example.com/gpu"},
}
_CLAIM_SPEC = {"devices": {
    "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.example.com",
                                              "allocationMode": "ExactCount", "count": 2}}],
    "constraints": [{"requests": ["gpus"], "matchAttribute": "gpu.example.com/model"}]}}
RESOURCE_CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "web-0-gpu-x", "namespace": "shop", "uid": "u-c"},
    "spec": _CLAIM_SPEC,
    "status": {
        "allocation": {
            "devices": {"results": [{"request": "gpus", "driver": "gpu.example.com",
                                     "pool": "node-1", "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": "web-0", "uid": "u-1"}],
    },
}
RESOURCE_CLAIM_TEMPLATE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "shop"},
    "spec": {"spec": _CLAIM_SPEC},
}

# upstream's autoscaling.x-k8s.io kinds, and what they refer to.
CAPACITY_BUFFER: dict[str, Any] = {
    "apiVersion": "autoscaling.x-k8s.io/v1beta1",
    "kind": "CapacityBuffer",
    "metadata": {"name": "spare", "namespace": "shop", "uid": "u-b", "generation": 3},
    "spec": {"podTemplateRef": {"name": "worker"}, "replicas": 4,
             "limits": {"cpu": "2", "memory": "4Gi"}},
    "status": {"podTemplateRef": {"name": "capacitybuffer-spare-pod-template"}, "replicas": 3,
               "podTemplateGeneration": 2, "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
               "conditions": [{"type": "ReadyForProvisioning", "status": "True",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
}
SCALABLE_BUFFER: dict[str, Any] = {
    **CAPACITY_BUFFER,
    "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
    "spec": {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "api"},
             "percentage": 20},
}
RESOURCE_QUOTA: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "compute", "namespace": "shop", "uid": "u-q"},
    "spec": {"scopes": ["NotTerminating"], "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
    "status": {"hard": {"requests.cpu": "4", "limits.memory": "8Gi",
                        "requests.nvidia.com/gpu": "2", "pods": "10"},
               "used": {"requests.cpu": "500m"}},
}
PROVISIONING_REQUEST: dict[str, Any] = {
    "apiVersion": "autoscaling.x-k8s.io/v1",
    "kind": "ProvisioningRequest",
    "metadata": {"name": "train", "namespace": "shop", "uid": "u-pr", "generation": 2,
                 "resourceVersion": "17", "creationTimestamp": "2026-01-02T03:04:05Z"},
    "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
             "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 4}],
             "parameters": {"noRetry": "true"}},
    "status": {"conditions": [{"type": "Provisioned", "status": "True",
                               "lastTransitionTime": "2026-01-02T03:05:00Z"}]},
}
POD_TEMPLATE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PodTemplate",
    "metadata": {"name": "worker", "namespace": "shop"},
    "template": {"metadata": {"labels": {"app": "train"}}, "spec": RICH_POD["spec"]},
}
CAPACITY_QUOTA: dict[str, Any] = {
    "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
    "kind": "CapacityQuota",
    "metadata": {"name": "team-a", "uid": "u-cq", "resourceVersion": "7", "generation": 2},
    "spec": {"limits": {"resources": {"nodes": 3, "cpu": "64", "memory": "256Gi",
                                      "nvidia-tesla-t4": "2"}},
             "selector": {"matchLabels": {"pool": "a"}}},
}

HAND_WRITTEN = [
    RICH_POD, PENDING_POD, RICH_NODE, PDB, DAEMONSET, STATEFULSET, RC, PV, PVC, STORAGE_CLASS,
    CSINODE, CONFIGMAP, NAMESPACE, RESOURCE_SLICE, DEVICE_CLASS, RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE, CAPACITY_BUFFER, SCALABLE_BUFFER, RESOURCE_QUOTA,
    PROVISIONING_REQUEST, POD_TEMPLATE, CAPACITY_QUOTA,
]


def seeds_by_kind(kinds: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    """Seeds of each kind: the hand-written ones, and every object of that kind in the
    example snapshots (real clusters' shapes)."""
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    for item in [*HAND_WRITTEN, *_example_items()]:
        if item.get("kind") in out:
            out[item["kind"]].append(item)
    return out


# --------------------------------------------------------------------------- mutations

Path_ = tuple[Any, ...]


def paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every path into `value` (keys and list indexes), the root's children included, down
    to 12 levels (below lie only hostile values, already nested)."""
    if len(prefix) >= 12:
        return
    if isinstance(value, Mapping):
        for key, child in value.items():
            yield (*prefix, key)
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield (*prefix, i)
            yield from paths(child, (*prefix, i))


def _parent(obj: Any, path: Path_) -> Any:
    for step in path[:-1]:
        obj = obj[step]
    return obj


def _mutate(
    draw: st.DrawFn,
    seeds: list[dict[str, Any]],
    keep: Callable[[Path_], bool],
    values: st.SearchStrategy[Any],
) -> tuple[dict[str, Any], list[Path_]]:
    obj = copy.deepcopy(draw(st.sampled_from(seeds)))
    changed: list[Path_] = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        choices = [p for p in paths(obj) if keep(p)]
        if not choices:
            break
        path = draw(st.sampled_from(choices))
        parent = _parent(obj, path)
        operation = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if operation == "replace":
            parent[path[-1]] = draw(values)
            changed.append(path)
        elif operation == "delete":
            del parent[path[-1]]
            changed.append(path)
        elif isinstance(parent, dict):
            key = draw(HOSTILE_STRINGS)
            parent[key] = draw(values)
            changed.append((*path[:-1], key))
        else:
            parent.append(draw(values))
            changed.append((*path[:-1], len(parent) - 1))
    return obj, changed


@st.composite
def mutated(
    draw: st.DrawFn,
    seeds: list[dict[str, Any]],
    *,
    keep: Callable[[Path_], bool] = lambda path: True,
    values: st.SearchStrategy[Any] = HOSTILE_VALUES,
) -> dict[str, Any]:
    """A copy of one of `seeds` with one to three mutations at paths `keep` allows:
    a field replaced by a hostile value, a field deleted, or an unknown field added."""
    return _mutate(draw, seeds, keep, values)[0]


@st.composite
def mutations(
    draw: st.DrawFn,
    seeds: list[dict[str, Any]],
    *,
    keep: Callable[[Path_], bool] = lambda path: True,
    values: st.SearchStrategy[Any] = HOSTILE_VALUES,
) -> tuple[dict[str, Any], list[Path_]]:
    """`mutated`, drawn alike, with the paths it changed (a field replaced or deleted, the
    field or list item added): what a reader's error may name."""
    return _mutate(draw, seeds, keep, values)


def names_a_changed_field(message: str, changed: list[Path_]) -> bool:
    """Whether `message` names the field of one of the `changed` paths: its last key, or
    the key of the object holding it (an item added to a list, a field of an object that is
    itself named), as a whole word (`cluster` is not named by `clusters`), or cut as an
    error clips a long key, or escaped when it holds a character that is not printable. A
    path of list indexes alone is named by its first `[i]`."""
    for path in changed:
        keys = [step for step in path if isinstance(step, str)]
        if not keys:
            if path and f"[{path[0]}]" in message:
                return True
            continue
        for key in keys[-2:]:
            if not key.strip() and repr(key) in message:  # a blank key, quoted
                return True
            if not key.isprintable():  # shown escaped
                key = repr(key)[1:-1]
            shown = key if len(key) <= 80 else key[:20]
            if shown.strip() and re.search(
                rf"(?<![\w-]){re.escape(shown)}(?![\w-])" if len(key) <= 80 else re.escape(shown),
                message,
            ):
                return True
    return False


def readable_name(raw: Any) -> tuple[str, str] | None:
    """(namespace, name) when the object's metadata still says who it is, else None."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return None
    namespace = meta.get("namespace")
    return (namespace if isinstance(namespace, str) else "", meta["name"])
