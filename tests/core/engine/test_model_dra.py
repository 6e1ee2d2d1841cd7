"""Dynamic Resource Allocation objects (resource.k8s.io): ResourceSlices, DeviceClasses,
ResourceClaims and ResourceClaimTemplates in each form the API server serves (v1 and
v1beta2 with devices' fields on the device and a request's under `exactly`, v1beta1 with
them under `basic` and on the request), pods' claims through both pod routes, snapshots
holding them, and malformed input refused with a `ModelError` naming object and field."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from typing import Any

import pytest
import yaml
from clusterscaler.model import (
    AllocatedDevice,
    Allocation,
    ClaimSpec,
    ClusterObjects,
    ConsumerRef,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    ModelError,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    PodResourceClaim,
    Pool,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    Taint,
    Toleration,
    Version,
    is_unread_kind,
    parse_device_class,
    parse_object,
    parse_pod,
    parse_pod_json,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from clusterscaler.offline.loader import InputError, parse_snapshot_text

GI = 1 << 30
DRIVER = "gpu.example.com"
V1, V1BETA2, V1BETA1 = "resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1"
MODEL_SELECTOR = "device.attributes['gpu.example.com'].model == 'LATEST-GPU-MODEL'"
DELETE = object()


def at(base: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of `base` with the field at `path` set to `value` (removed: DELETE; a
    list index one past the end appends)."""
    out = copy.deepcopy(base)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    last = path[-1]
    if value is DELETE:
        del target[last]
    elif isinstance(target, list) and last == len(target):
        target.append(value)
    else:
        target[last] = value
    return out


def version(obj: dict[str, Any], api_version: str | None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    if api_version is None:
        del out["apiVersion"]
    else:
        out["apiVersion"] = api_version
    return out


# --------------------------------------------------------------------------- ResourceSlice

# As the example driver of the Kubernetes docs publishes them: one slice per node.
GPU_ATTRIBUTES = {
    "model": {"string": "LATEST-GPU-MODEL"},
    "driverVersion": {"version": "1.0.0"},
    "index": {"int": 0},
    "dra.example.com/pcieRoot": {"string": "pci0000:00"},
    "virtual": {"bool": False},
}
SLICE_V1: dict[str, Any] = {
    "apiVersion": V1,
    "kind": "ResourceSlice",
    "metadata": {"name": "worker-1-gpu.example.com-k7x2p"},
    "spec": {
        "driver": DRIVER,
        "pool": {"name": "worker-1", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "worker-1",
        "devices": [
            {
                "name": "gpu-0",
                "attributes": GPU_ATTRIBUTES,
                "capacity": {"memory": {"value": "40Gi"}},
            },
            {
                "name": "gpu-1",
                "attributes": {**GPU_ATTRIBUTES, "index": {"int": 1}},
                "capacity": {"memory": {"value": "40Gi"}},
                "taints": [
                    {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}
                ],
            },
        ],
    },
}
SLICE_V1BETA1: dict[str, Any] = {
    "apiVersion": V1BETA1,
    "kind": "ResourceSlice",
    "metadata": {"name": "worker-1-gpu.example.com-k7x2p"},
    "spec": {
        "driver": DRIVER,
        "pool": {"name": "worker-1", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "worker-1",
        "devices": [
            {
                "name": "gpu-0",
                "basic": {
                    "attributes": GPU_ATTRIBUTES,
                    "capacity": {"memory": {"value": "40Gi"}},
                },
            },
            {
                "name": "gpu-1",
                "basic": {
                    "attributes": {**GPU_ATTRIBUTES, "index": {"int": 1}},
                    "capacity": {"memory": {"value": "40Gi"}},
                    "taints": [
                        {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}
                    ],
                },
            },
        ],
    },
}
# v1alpha3 (and early v1beta1 manifests) wrote capacities as plain quantities.
SLICE_PLAIN_CAPACITY = at(
    at(SLICE_V1BETA1, ("spec", "devices", 0, "basic", "capacity"), {"memory": "40Gi"}),
    ("spec", "devices", 1, "basic", "capacity"),
    {"memory": "40Gi"},
)


def gpu(index: int) -> Device:
    return Device(
        f"gpu-{index}",
        {
            "gpu.example.com/model": "LATEST-GPU-MODEL",
            "gpu.example.com/driverVersion": Version("1.0.0"),
            "gpu.example.com/index": index,
            "dra.example.com/pcieRoot": "pci0000:00",
            "gpu.example.com/virtual": False,
        },
        {"gpu.example.com/memory": Fraction(40 * GI)},
    )


GPU_SLICE = ResourceSlice(
    name="worker-1-gpu.example.com-k7x2p",
    driver=DRIVER,
    pool=Pool("worker-1", 1, 1),
    node_name="worker-1",
    devices=(gpu(0), gpu(1)),
    device_taints={"gpu-1": (Taint("example.com/unhealthy", "ecc", "NoSchedule"),)},
)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(SLICE_V1, id="v1"),
        pytest.param(version(SLICE_V1, V1BETA2), id="v1beta2"),
        pytest.param(SLICE_V1BETA1, id="v1beta1"),
        pytest.param(version(SLICE_PLAIN_CAPACITY, "resource.k8s.io/v1alpha3"), id="v1alpha3"),
        pytest.param(version(SLICE_V1, None), id="no-api-version-v1-shape"),
        pytest.param(version(SLICE_V1BETA1, None), id="no-api-version-v1beta1-shape"),
    ],
)
def test_gpu_slice_in_every_form(raw: dict[str, Any]) -> None:
    assert parse_resource_slice(raw) == GPU_SLICE
    assert parse_object(raw) == GPU_SLICE


NETWORK_SLICE_SPEC: dict[str, Any] = {
    "driver": "nic.example.com",
    "pool": {"name": "rack-7", "generation": 3, "resourceSliceCount": 2},
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "example.com/rack", "operator": "In", "values": ["7"]}]}
        ]
    },
    "sharedCounters": [
        {
            "name": "nic-0-counters",
            "counters": {"bandwidth": {"value": "100G"}, "vfs": {"value": 8}},
        }
    ],
    "devices": [
        {
            "name": "vf-0",
            "attributes": {"example.com/rack": {"string": "7"}},
            "consumesCounters": [
                {
                    "counterSet": "nic-0-counters",
                    "counters": {"bandwidth": {"value": "25G"}, "vfs": {"value": 1}},
                }
            ],
        }
    ],
}
RACK_TERMS = (NodeSelectorTerm((NodeSelectorRequirement("example.com/rack", "In", ("7",)),)),)
NETWORK_SLICE = ResourceSlice(
    name="rack-7-nics",
    driver="nic.example.com",
    pool=Pool("rack-7", 3, 2),
    node_selector=RACK_TERMS,
    devices=(Device("vf-0", {"example.com/rack": "7"}, {}),),
    shared_counters={"nic-0-counters": {"bandwidth": Fraction(10**11), "vfs": Fraction(8)}},
    device_counters={
        "vf-0": {"nic-0-counters": {"bandwidth": Fraction(25 * 10**9), "vfs": Fraction(1)}}
    },
)


def network_slice(api_version: str) -> dict[str, Any]:
    spec = copy.deepcopy(NETWORK_SLICE_SPEC)
    if api_version == V1BETA1:
        device = spec["devices"][0]
        device["basic"] = {k: device.pop(k) for k in ("attributes", "consumesCounters")}
    return {
        "apiVersion": api_version,
        "kind": "ResourceSlice",
        "metadata": {"name": "rack-7-nics"},
        "spec": spec,
    }


@pytest.mark.parametrize("api_version", [V1, V1BETA2, V1BETA1])
def test_slice_with_node_selector_and_counters(api_version: str) -> None:
    assert parse_resource_slice(network_slice(api_version)) == NETWORK_SLICE


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"allNodes": True},
            {"all_nodes": True, "node_name": "", "node_selector": None},
            id="all-nodes",
        ),
        pytest.param(
            {
                "perDeviceNodeSelection": True,
                "devices": [
                    {"name": "a", "nodeName": "worker-1"},
                    {"name": "b", "allNodes": True},
                    {"name": "c", "nodeSelector": {"nodeSelectorTerms": []}},
                ],
            },
            {"per_device_node_selection": True,
             "devices": (Device("a", node_name="worker-1"), Device("b", all_nodes=True),
                         Device("c", node_selector=()))},
            id="per-device-node-selection",
        ),
        pytest.param(
            {"devices": []},
            {"devices": ()},
            id="no-devices",
        ),
    ],
)
def test_slice_node_selection(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    raw = {
        "apiVersion": V1,
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": DRIVER, "pool": {"name": "p", "generation": 0}, **spec},
    }
    parsed = parse_resource_slice(raw)
    for name, value in expected.items():
        assert getattr(parsed, name) == value, name


def test_device_taint_effects_kubernetes_may_add_are_kept_as_written() -> None:
    """The API: "More effects may get added in the future. Consumers must treat unknown
    effects like None." A slice written by a newer cluster still parses."""
    taints = [
        {"key": "example.com/maintenance", "effect": "None"},
        {"key": "example.com/degraded", "value": "slow", "effect": "PreferNoAllocation"},
    ]
    parsed = parse_resource_slice(at(SLICE_V1, ("spec", "devices", 0, "taints"), taints))
    assert parsed.device_taints["gpu-0"] == (
        Taint("example.com/maintenance", "", "None"),
        Taint("example.com/degraded", "slow", "PreferNoAllocation"),
    )


# --------------------------------------------------------------------------- DeviceClass

CLASS_V1: dict[str, Any] = {
    "apiVersion": V1,
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
        "extendedResourceName": "example.com/gpu",
    },
}
GPU_CLASS = DeviceClass(
    "gpu.example.com", ("device.driver == 'gpu.example.com'",), "example.com/gpu"
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(CLASS_V1, GPU_CLASS, id="v1"),
        pytest.param(version(CLASS_V1, V1BETA2), GPU_CLASS, id="v1beta2"),
        pytest.param(
            version(at(CLASS_V1, ("spec", "extendedResourceName"), DELETE), V1BETA1),
            DeviceClass("gpu.example.com", ("device.driver == 'gpu.example.com'",)),
            id="v1beta1-without-extended-resource",
        ),
        pytest.param(at(CLASS_V1, ("spec",), DELETE), DeviceClass("gpu.example.com"), id="no-spec"),
    ],
)
def test_device_class(raw: dict[str, Any], expected: DeviceClass) -> None:
    assert parse_device_class(raw) == expected
    assert parse_object(raw) == expected


# --------------------------------------------------------------------------- claims

ONE_GPU_V1 = {
    "devices": {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": "gpu.example.com",
                    "selectors": [{"cel": {"expression": MODEL_SELECTOR}}],
                },
            }
        ]
    }
}
ONE_GPU_V1BETA1 = {
    "devices": {
        "requests": [
            {
                "name": "gpu",
                "deviceClassName": "gpu.example.com",
                "selectors": [{"cel": {"expression": MODEL_SELECTOR}}],
            }
        ]
    }
}
ONE_GPU = ClaimSpec((DeviceRequest("gpu", "gpu.example.com", (MODEL_SELECTOR,)),))


def template(api_version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu", "namespace": "ml"},
        "spec": {"spec": spec},
    }


# The prioritized list of the docs: either one large device or two small ones.
FIRST_AVAILABLE = {
    "devices": {
        "requests": [
            {
                "name": "req-0",
                "firstAvailable": [
                    {
                        "name": "large-black",
                        "deviceClassName": "resource.example.com",
                        "selectors": [
                            {
                                "cel": {
                                    "expression": "device.attributes['resource-driver.example.com'].color == 'black'"
                                }
                            },
                            {
                                "cel": {
                                    "expression": "device.attributes['resource-driver.example.com'].size == 'large'"
                                }
                            },
                        ],
                    },
                    {
                        "name": "small-white",
                        "deviceClassName": "resource.example.com",
                        "allocationMode": "ExactCount",
                        "count": 2,
                        "tolerations": [
                            {
                                "key": "example.com/unhealthy",
                                "operator": "Exists",
                                "effect": "NoSchedule",
                            }
                        ],
                    },
                ],
            }
        ]
    }
}
FIRST_AVAILABLE_SPEC = ClaimSpec(
    (
        DeviceRequest(
            "req-0",
            first_available=(
                DeviceSubRequest(
                    "large-black",
                    "resource.example.com",
                    (
                        "device.attributes['resource-driver.example.com'].color == 'black'",
                        "device.attributes['resource-driver.example.com'].size == 'large'",
                    ),
                ),
                DeviceSubRequest(
                    "small-white",
                    "resource.example.com",
                    count=2,
                    tolerations=(
                        Toleration("example.com/unhealthy", "Exists", effect="NoSchedule"),
                    ),
                ),
            ),
        ),
    )
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(template(V1, ONE_GPU_V1), ONE_GPU, id="v1"),
        pytest.param(template(V1BETA2, ONE_GPU_V1), ONE_GPU, id="v1beta2"),
        pytest.param(template(V1BETA1, ONE_GPU_V1BETA1), ONE_GPU, id="v1beta1"),
        pytest.param(version(template(V1, ONE_GPU_V1), None), ONE_GPU, id="no-version-v1-shape"),
        pytest.param(
            version(template(V1, ONE_GPU_V1BETA1), None), ONE_GPU, id="no-version-v1beta1-shape"
        ),
        pytest.param(template(V1, FIRST_AVAILABLE), FIRST_AVAILABLE_SPEC, id="v1-first-available"),
        pytest.param(
            template(V1BETA2, FIRST_AVAILABLE), FIRST_AVAILABLE_SPEC, id="v1beta2-first-available"
        ),
        pytest.param(
            template(V1BETA1, FIRST_AVAILABLE), FIRST_AVAILABLE_SPEC, id="v1beta1-first-available"
        ),
    ],
)
def test_claim_template(raw: dict[str, Any], expected: ClaimSpec) -> None:
    parsed = parse_resource_claim_template(raw)
    assert parsed == ResourceClaimTemplate("ml", "single-gpu", expected)
    assert parse_object(raw) == parsed


ALLOCATED_STATUS = {
    "allocation": {
        "devices": {
            "results": [
                {"request": "gpus", "driver": DRIVER, "pool": "worker-1", "device": "gpu-0"},
                {"request": "gpus", "driver": DRIVER, "pool": "worker-1", "device": "gpu-1"},
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["worker-1"]}
                    ]
                }
            ]
        },
    },
    "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "pod-uid-1"}],
}


def claim(api_version: str) -> dict[str, Any]:
    """A claim generated for pod `trainer` from a template: two GPUs of one model,
    allocated on worker-1 and reserved for the pod."""
    if api_version == V1BETA1:
        request: dict[str, Any] = {
            "name": "gpus",
            "deviceClassName": "gpu.example.com",
            "allocationMode": "ExactCount",
            "count": 2,
            "adminAccess": None,
        }
    else:
        request = {
            "name": "gpus",
            "exactly": {
                "deviceClassName": "gpu.example.com",
                "allocationMode": "ExactCount",
                "count": 2,
            },
        }
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaim",
        "metadata": {
            "name": "trainer-gpus-x8k2d",
            "namespace": "ml",
            "uid": "claim-uid-1",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpus"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "trainer",
                    "uid": "pod-uid-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "devices": {
                "requests": [request],
                "constraints": [{"requests": ["gpus"], "matchAttribute": "gpu.example.com/model"}],
            }
        },
        "status": ALLOCATED_STATUS,
    }


ALLOCATED_CLAIM = ResourceClaim(
    namespace="ml",
    name="trainer-gpus-x8k2d",
    uid="claim-uid-1",
    spec=ClaimSpec(
        (DeviceRequest("gpus", "gpu.example.com", count=2),),
        (DeviceConstraint(("gpus",), "gpu.example.com/model"),),
    ),
    allocation=Allocation(
        (
            AllocatedDevice("gpus", DRIVER, "worker-1", "gpu-0"),
            AllocatedDevice("gpus", DRIVER, "worker-1", "gpu-1"),
        ),
        (
            NodeSelectorTerm(
                match_fields=(NodeSelectorRequirement("metadata.name", "In", ("worker-1",)),)
            ),
        ),
    ),
    reserved_for=(ConsumerRef("pods", "trainer", "pod-uid-1"),),
    owners=(OwnerRef("Pod", "trainer", "pod-uid-1", True, "v1"),),
    annotations={"resource.kubernetes.io/pod-claim-name": "gpus"},
)


@pytest.mark.parametrize("api_version", [V1, V1BETA2, V1BETA1])
def test_allocated_claim(api_version: str) -> None:
    parsed = parse_resource_claim(claim(api_version))
    assert parsed == ALLOCATED_CLAIM
    assert parsed.owner_uid == "pod-uid-1"
    assert parsed.key == "ml/trainer-gpus-x8k2d"
    assert parse_object(claim(api_version)) == parsed


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {
                "apiVersion": V1,
                "kind": "ResourceClaim",
                "metadata": {"name": "c"},
                "spec": ONE_GPU_V1,
            },
            ResourceClaim("default", "c", spec=ONE_GPU),
            id="pending-default-namespace",
        ),
        pytest.param(
            {
                "apiVersion": V1,
                "kind": "ResourceClaim",
                "metadata": {"name": "c", "namespace": "ml"},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "all-nics",
                                "exactly": {
                                    "deviceClassName": "nic.example.com",
                                    "allocationMode": "All",
                                    "adminAccess": True,
                                },
                            }
                        ]
                    }
                },
                "status": {"allocation": {"devices": {"results": []}}, "reservedFor": []},
            },
            ResourceClaim(
                "ml",
                "c",
                spec=ClaimSpec(
                    (
                        DeviceRequest(
                            "all-nics", "nic.example.com", allocation_mode="All", admin_access=True
                        ),
                    )
                ),
                allocation=Allocation(),
            ),
            id="all-admin-allocated-anywhere",
        ),
    ],
)
def test_other_claims(raw: dict[str, Any], expected: ResourceClaim) -> None:
    parsed = parse_resource_claim(raw)
    assert parsed == expected
    assert parsed.owner is None and parsed.owner_uid == ""


# --------------------------------------------------------------------------- malformed input

SLICE_NAME = "ResourceSlice worker-1-gpu.example.com-k7x2p"
CLAIM_NAME = "ResourceClaim ml/trainer-gpus-x8k2d"
TEMPLATE_NAME = "ResourceClaimTemplate ml/single-gpu"
V1_TEMPLATE = template(V1, ONE_GPU_V1)
V1BETA1_TEMPLATE = template(V1BETA1, ONE_GPU_V1BETA1)
DEVICE = ("spec", "devices", 0)
BETA_DEVICE = ("spec", "devices", 0, "basic")
REQUEST = ("spec", "devices", "requests", 0)
TEMPLATE_REQUEST = ("spec", "spec", "devices", "requests", 0)

# (base object, path, value there, object named, field named, expected form in the message)
MALFORMED = [
    # ResourceSlice
    pytest.param(SLICE_V1, ("apiVersion",), "resource.k8s.io/v9", SLICE_NAME, "apiVersion", "resource.k8s.io/v1, ", id="slice-unknown-version"),
    pytest.param(SLICE_V1, ("metadata", "name"), DELETE, "ResourceSlice", "metadata.name", "a non-empty string", id="slice-no-name"),
    pytest.param(SLICE_V1, ("spec",), ["x"], SLICE_NAME, "spec", "an object with driver", id="slice-spec-not-object"),
    pytest.param(SLICE_V1, ("spec", "driver"), DELETE, SLICE_NAME, "spec.driver", "a non-empty string", id="slice-no-driver"),
    pytest.param(SLICE_V1, ("spec", "pool"), DELETE, SLICE_NAME, "spec.pool", "an object with name", id="slice-no-pool"),
    pytest.param(SLICE_V1, ("spec", "pool", "generation"), "1", SLICE_NAME, "spec.pool.generation", "an integer", id="slice-generation-string"),
    pytest.param(SLICE_V1, ("spec", "nodeName"), 7, SLICE_NAME, "spec.nodeName", "a string", id="slice-node-name-number"),
    pytest.param(SLICE_V1, ("spec", "allNodes"), "true", SLICE_NAME, "spec.allNodes", "true or false", id="slice-all-nodes-string"),
    pytest.param(SLICE_V1, ("spec", "nodeSelector"), "zone=a", SLICE_NAME, "spec.nodeSelector", "a node selector object", id="slice-node-selector-string"),
    pytest.param(SLICE_V1, ("spec", "nodeSelector"), {"nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "Near"}]}]}, SLICE_NAME, "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator", "one of In", id="slice-node-selector-operator"),
    pytest.param(SLICE_V1, ("spec", "devices"), {"gpu-0": {}}, SLICE_NAME, "spec.devices", "a list", id="slice-devices-not-list"),
    pytest.param(SLICE_V1, DEVICE, 3, SLICE_NAME, "spec.devices[0]", "a device object", id="device-not-object"),
    pytest.param(SLICE_V1, (*DEVICE, "name"), DELETE, SLICE_NAME, "spec.devices[0].name", "a non-empty string", id="device-no-name"),
    pytest.param(SLICE_V1, (*DEVICE, "name"), "gpu-1", SLICE_NAME, "spec.devices[1].name", "unique", id="device-name-twice"),
    pytest.param(SLICE_V1, (*DEVICE, "attributes"), [], SLICE_NAME, "spec.devices[0].attributes", "an object", id="attributes-list"),
    pytest.param(SLICE_V1, (*DEVICE, "attributes", "model"), "A100", SLICE_NAME, "spec.devices[0].attributes.model", "exactly one of bool, int, string or version", id="attribute-untyped"),
    pytest.param(SLICE_V1, (*DEVICE, "attributes", "model"), {"string": "a", "int": 1}, SLICE_NAME, "spec.devices[0].attributes.model", "exactly one of", id="attribute-two-types"),
    pytest.param(SLICE_V1, (*DEVICE, "attributes", "model"), {"float": 1.5}, SLICE_NAME, "spec.devices[0].attributes.model", "exactly one of", id="attribute-unknown-type"),
    pytest.param(SLICE_V1, (*DEVICE, "attributes", "index"), {"int": "0"}, SLICE_NAME, "spec.devices[0].attributes.index.int", "an integer", id="attribute-int-string"),
    pytest.param(SLICE_V1, (*DEVICE, "attributes", "index"), {"int": True}, SLICE_NAME, "spec.devices[0].attributes.index.int", "an integer", id="attribute-int-bool"),
    pytest.param(SLICE_V1, (*DEVICE, "attributes", "virtual"), {"bool": "no"}, SLICE_NAME, "spec.devices[0].attributes.virtual.bool", "true or false", id="attribute-bool-string"),
    pytest.param(SLICE_V1, (*DEVICE, "attributes", "model"), {"string": 5}, SLICE_NAME, "spec.devices[0].attributes.model.string", "a string", id="attribute-string-number"),
    pytest.param(SLICE_V1, (*DEVICE, "attributes", "driverVersion"), {"version": "v1.0"}, SLICE_NAME, "spec.devices[0].attributes.driverVersion.version", "a semantic version", id="attribute-version-not-semver"),
    pytest.param(SLICE_V1, (*DEVICE, "capacity", "memory"), {"value": "lots"}, SLICE_NAME, "spec.devices[0].capacity.memory.value", "a Kubernetes quantity", id="capacity-not-quantity"),
    pytest.param(SLICE_V1, (*DEVICE, "capacity", "memory"), {}, SLICE_NAME, "spec.devices[0].capacity.memory.value", "a Kubernetes quantity", id="capacity-no-value"),
    pytest.param(SLICE_V1, (*DEVICE, "capacity", "memory"), {"value": "-1Gi"}, SLICE_NAME, "spec.devices[0].capacity.memory.value", "a non-negative quantity", id="capacity-negative"),
    pytest.param(SLICE_V1, (*DEVICE, "capacity"), "40Gi", SLICE_NAME, "spec.devices[0].capacity", "an object", id="capacity-not-map"),
    pytest.param(SLICE_V1, (*DEVICE, "basic"), {"attributes": {}}, SLICE_NAME, "spec.devices[0].basic", "on the device itself", id="v1-device-with-basic"),
    pytest.param(SLICE_V1, (*DEVICE, "taints"), [{"key": "k", "effect": 5}], SLICE_NAME, "spec.devices[0].taints[0].effect", "one of NoSchedule, NoExecute, None", id="device-taint-effect-number"),
    pytest.param(SLICE_V1, (*DEVICE, "taints"), [{"key": "k"}], SLICE_NAME, "spec.devices[0].taints[0].effect", "one of NoSchedule, NoExecute, None", id="device-taint-no-effect"),
    pytest.param(SLICE_V1, (*DEVICE, "taints"), [{"effect": "NoSchedule"}], SLICE_NAME, "spec.devices[0].taints[0].key", "a non-empty string", id="device-taint-no-key"),
    pytest.param(SLICE_V1, (*DEVICE, "taints"), {"key": "k"}, SLICE_NAME, "spec.devices[0].taints", "a list", id="device-taints-not-list"),
    pytest.param(SLICE_V1, (*DEVICE, "consumesCounters"), [{"counters": {}}], SLICE_NAME, "spec.devices[0].consumesCounters[0].counterSet", "a non-empty string", id="consumes-no-counter-set"),
    pytest.param(SLICE_V1, (*DEVICE, "consumesCounters"), [{"counterSet": "s", "counters": {"c": {"value": "x"}}}], SLICE_NAME, "spec.devices[0].consumesCounters[0].counters.c.value", "a Kubernetes quantity", id="consumes-bad-quantity"),
    pytest.param(SLICE_V1, ("spec", "sharedCounters"), [{"name": "s", "counters": []}], SLICE_NAME, "spec.sharedCounters[0].counters", "an object", id="shared-counters-list"),
    pytest.param(SLICE_V1, ("spec", "sharedCounters"), ["s"], SLICE_NAME, "spec.sharedCounters[0]", "an object with name and counters", id="shared-counter-set-string"),
    pytest.param(SLICE_V1, (*DEVICE, "nodeSelector"), "x", SLICE_NAME, "spec.devices[0].nodeSelector", "a node selector object", id="per-device-node-selector-string"),
    pytest.param(SLICE_V1BETA1, (*DEVICE, "attributes"), {}, SLICE_NAME, "spec.devices[0]", "under basic", id="v1beta1-device-without-basic"),
    pytest.param(SLICE_V1BETA1, BETA_DEVICE, "basic", SLICE_NAME, "spec.devices[0].basic", "an object", id="v1beta1-basic-string"),
    pytest.param(SLICE_V1BETA1, (*BETA_DEVICE, "capacity", "memory"), "lots", SLICE_NAME, "spec.devices[0].basic.capacity.memory", "a Kubernetes quantity", id="v1beta1-capacity-plain-bad"),
    pytest.param(SLICE_V1BETA1, (*BETA_DEVICE, "attributes", "index"), {"int": 1.5}, SLICE_NAME, "spec.devices[0].basic.attributes.index.int", "an integer", id="v1beta1-attribute-float"),
    # DeviceClass
    pytest.param(CLASS_V1, ("spec", "selectors"), "device.driver == 'x'", "DeviceClass gpu.example.com", "spec.selectors", "a list", id="class-selectors-string"),
    pytest.param(CLASS_V1, ("spec", "selectors", 0), {"expression": "true"}, "DeviceClass gpu.example.com", "spec.selectors[0].cel", "an object with expression", id="class-selector-without-cel"),
    pytest.param(CLASS_V1, ("spec", "selectors", 0, "cel", "expression"), "", "DeviceClass gpu.example.com", "spec.selectors[0].cel.expression", "a non-empty string", id="class-expression-empty"),
    pytest.param(CLASS_V1, ("spec", "extendedResourceName"), 5, "DeviceClass gpu.example.com", "spec.extendedResourceName", "a string", id="class-extended-resource-number"),
    pytest.param(CLASS_V1, ("spec",), "gpu", "DeviceClass gpu.example.com", "spec", "an object", id="class-spec-string"),
    # ResourceClaim
    pytest.param(claim(V1), ("spec", "devices", "requests"), {"name": "gpus"}, CLAIM_NAME, "spec.devices.requests", "a list", id="claim-requests-object"),
    pytest.param(claim(V1), REQUEST, "gpus", CLAIM_NAME, "spec.devices.requests[0]", "a request object", id="claim-request-string"),
    pytest.param(claim(V1), (*REQUEST, "name"), DELETE, CLAIM_NAME, "spec.devices.requests[0].name", "a non-empty string", id="claim-request-no-name"),
    pytest.param(claim(V1), (*REQUEST, "deviceClassName"), "gpu.example.com", CLAIM_NAME, "spec.devices.requests[0].deviceClassName", "exactly.deviceClassName", id="v1-request-flat-class"),
    pytest.param(claim(V1), (*REQUEST, "exactly"), DELETE, CLAIM_NAME, "spec.devices.requests[0].exactly", "an object with deviceClassName", id="v1-request-neither-form"),
    pytest.param(claim(V1), (*REQUEST, "exactly"), "gpu.example.com", CLAIM_NAME, "spec.devices.requests[0].exactly", "an object with deviceClassName", id="v1-exactly-string"),
    pytest.param(claim(V1), (*REQUEST, "firstAvailable"), [{"name": "a", "deviceClassName": "c"}], CLAIM_NAME, "spec.devices.requests[0]", "not both", id="v1-exactly-and-first-available"),
    pytest.param(claim(V1), (*REQUEST, "exactly", "deviceClassName"), DELETE, CLAIM_NAME, "spec.devices.requests[0].exactly.deviceClassName", "a non-empty string", id="v1-exactly-no-class"),
    pytest.param(claim(V1), (*REQUEST, "exactly", "allocationMode"), "Some", CLAIM_NAME, "spec.devices.requests[0].exactly.allocationMode", "ExactCount or All", id="v1-allocation-mode"),
    pytest.param(claim(V1), (*REQUEST, "exactly", "count"), 0, CLAIM_NAME, "spec.devices.requests[0].exactly.count", "an integer >= 1", id="v1-count-zero"),
    pytest.param(claim(V1), (*REQUEST, "exactly", "count"), "2", CLAIM_NAME, "spec.devices.requests[0].exactly.count", "an integer", id="v1-count-string"),
    pytest.param(claim(V1), (*REQUEST, "exactly", "adminAccess"), "yes", CLAIM_NAME, "spec.devices.requests[0].exactly.adminAccess", "true or false", id="v1-admin-access-string"),
    pytest.param(claim(V1), (*REQUEST, "exactly", "selectors"), [{"cel": "device.driver"}], CLAIM_NAME, "spec.devices.requests[0].exactly.selectors[0].cel", "an object with expression", id="v1-selector-cel-string"),
    pytest.param(claim(V1), (*REQUEST, "exactly", "tolerations"), [{"key": "k", "operator": "Maybe"}], CLAIM_NAME, "spec.devices.requests[0].exactly.tolerations[0].operator", "Equal or Exists", id="v1-toleration-operator"),
    pytest.param(claim(V1), ("spec", "devices", "requests", 1), {"name": "gpus", "exactly": {"deviceClassName": "c"}}, CLAIM_NAME, "spec.devices.requests[1].name", "unique", id="claim-request-name-twice"),
    pytest.param(claim(V1BETA1), (*REQUEST, "exactly"), {"deviceClassName": "c"}, CLAIM_NAME, "spec.devices.requests[0].exactly", "on the request itself", id="v1beta1-request-with-exactly"),
    pytest.param(claim(V1BETA1), (*REQUEST, "count"), -1, CLAIM_NAME, "spec.devices.requests[0].count", "an integer >= 1", id="v1beta1-count-negative"),
    pytest.param(claim(V1BETA1), (*REQUEST, "deviceClassName"), 5, CLAIM_NAME, "spec.devices.requests[0].deviceClassName", "a non-empty string", id="v1beta1-class-number"),
    pytest.param(claim(V1BETA1), REQUEST, {"name": "gpus"}, CLAIM_NAME, "spec.devices.requests[0].deviceClassName", "a device class name", id="v1beta1-request-empty"),
    pytest.param(claim(V1BETA1), REQUEST, {"name": "g", "firstAvailable": [{"name": "a"}]}, CLAIM_NAME, "spec.devices.requests[0].firstAvailable[0].deviceClassName", "a non-empty string", id="sub-request-no-class"),
    pytest.param(claim(V1BETA1), REQUEST, {"name": "g", "firstAvailable": "a"}, CLAIM_NAME, "spec.devices.requests[0].firstAvailable", "a list", id="first-available-string"),
    pytest.param(claim(V1), ("spec", "devices", "constraints", 0, "requests"), [1], CLAIM_NAME, "spec.devices.constraints[0].requests[0]", "a non-empty string", id="constraint-request-number"),
    pytest.param(claim(V1), ("spec", "devices", "constraints", 0, "matchAttribute"), ["model"], CLAIM_NAME, "spec.devices.constraints[0].matchAttribute", "a string", id="constraint-attribute-list"),
    pytest.param(claim(V1), ("spec", "devices", "constraints", 0), "gpus", CLAIM_NAME, "spec.devices.constraints[0]", "a constraint object", id="constraint-string"),
    pytest.param(claim(V1), ("status", "allocation"), "worker-1", CLAIM_NAME, "status.allocation", "an allocation object", id="allocation-string"),
    pytest.param(claim(V1), ("status", "allocation", "devices", "results", 0, "device"), DELETE, CLAIM_NAME, "status.allocation.devices.results[0].device", "a non-empty string", id="allocation-result-no-device"),
    pytest.param(claim(V1), ("status", "allocation", "devices", "results", 1), None, CLAIM_NAME, "status.allocation.devices.results[1]", "an object with request", id="allocation-result-null"),
    pytest.param(claim(V1), ("status", "allocation", "nodeSelector", "nodeSelectorTerms"), {}, CLAIM_NAME, "status.allocation.nodeSelector.nodeSelectorTerms", "a list", id="allocation-terms-object"),
    pytest.param(claim(V1), ("status", "reservedFor", 0, "name"), DELETE, CLAIM_NAME, "status.reservedFor[0].name", "a non-empty string", id="reserved-for-no-name"),
    pytest.param(claim(V1), ("status", "reservedFor"), "trainer", CLAIM_NAME, "status.reservedFor", "a list", id="reserved-for-string"),
    pytest.param(claim(V1), ("status",), ["x"], CLAIM_NAME, "status", "an object", id="claim-status-list"),
    pytest.param(claim(V1), ("metadata", "ownerReferences"), [{"kind": "Pod"}], CLAIM_NAME, "metadata.ownerReferences[0]", "an object with kind and name", id="claim-owner-no-name"),
    pytest.param(claim(V1), ("metadata", "annotations"), ["a"], CLAIM_NAME, "metadata.annotations", "a map of string to string", id="claim-annotations-list"),
    pytest.param(claim(V1), ("metadata", "uid"), 1, CLAIM_NAME, "metadata.uid", "a string", id="claim-uid-number"),
    # ResourceClaimTemplate
    pytest.param(V1_TEMPLATE, ("spec", "spec"), "gpu", TEMPLATE_NAME, "spec.spec", "an object", id="template-spec-string"),
    pytest.param(V1_TEMPLATE, ("spec", "spec", "devices"), [], TEMPLATE_NAME, "spec.spec.devices", "an object", id="template-devices-list"),
    pytest.param(V1_TEMPLATE, (*TEMPLATE_REQUEST, "exactly", "count"), 1.5, TEMPLATE_NAME, "spec.spec.devices.requests[0].exactly.count", "an integer", id="template-count-float"),
    pytest.param(V1BETA1_TEMPLATE, (*TEMPLATE_REQUEST, "selectors", 0, "cel", "expression"), None, TEMPLATE_NAME, "spec.spec.devices.requests[0].selectors[0].cel.expression", "a non-empty string", id="v1beta1-template-expression-null"),
    pytest.param(V1BETA1_TEMPLATE, ("apiVersion",), "resource.k8s.io/v1alpha2", TEMPLATE_NAME, "apiVersion", "resource.k8s.io/v1", id="template-old-alpha"),
]  # fmt: skip


@pytest.mark.parametrize(("base", "path", "value", "obj", "field", "expected"), MALFORMED)
@pytest.mark.parametrize("route", ["parser", "from_list", "json_list"])
def test_malformed_is_refused_naming_object_and_field(
    base: dict[str, Any],
    path: tuple[Any, ...],
    value: Any,
    obj: str,
    field: str,
    expected: str,
    route: str,
) -> None:
    raw = at(base, path, value)
    with pytest.raises(ModelError) as info:
        if route == "parser":
            parse_object(raw)
        elif route == "from_list":
            ClusterObjects.from_list({"kind": "List", "items": [raw]})
        else:
            ClusterObjects.from_json_list(json.dumps({"kind": "List", "items": [raw]}))
    assert (info.value.obj, info.value.field) == (obj, field), str(info.value)
    assert expected in info.value.expected, str(info.value)


VALID = [
    SLICE_V1,
    SLICE_V1BETA1,
    network_slice(V1),
    network_slice(V1BETA1),
    CLASS_V1,
    claim(V1),
    claim(V1BETA1),
    template(V1, FIRST_AVAILABLE),
    template(V1BETA1, ONE_GPU_V1BETA1),
]
PARSERS: dict[str, Any] = {
    "ResourceSlice": parse_resource_slice,
    "DeviceClass": parse_device_class,
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
}
JUNK = [
    None, 3, -1, 1.5, True, "", "x", [], [3], [None], {}, {"value": "1"}, {"int": 1},
    {"cel": {"expression": 3}}, {"nodeSelectorTerms": [3]}, {"name": ["x"]},
]  # fmt: skip


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every field and list entry of a JSON value, by path."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(paths(v, (*prefix, i)))
    return out


@pytest.mark.parametrize(
    "base",
    VALID,
    ids=[f"{v['kind']}-{v['apiVersion'].rpartition('/')[2]}-{i}" for i, v in enumerate(VALID)],
)
def test_any_field_replaced_by_junk_parses_or_is_a_model_error(base: dict[str, Any]) -> None:
    """Bad shapes anywhere are a ModelError naming the object, never another exception:
    every field and list entry of valid objects, replaced by each junk value in turn."""
    parse = PARSERS[base["kind"]]
    for path in paths(base):
        if path == ("kind",):
            continue
        for junk in JUNK:
            raw = at(base, path, junk)
            try:
                parse(raw)
            except ModelError as exc:
                assert exc.obj.split(" ")[0] == base["kind"], (path, junk, str(exc))
            except Exception as exc:
                raise AssertionError(f"{path} = {junk!r}: {exc!r}") from exc


# --------------------------------------------------------------------------- pods

POD_WITH_CLAIMS: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer", "namespace": "ml", "uid": "pod-uid-1"},
    "spec": {
        "containers": [
            {
                "name": "train",
                "image": "trainer:1",
                "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpus"}]},
            }
        ],
        "resourceClaims": [
            {"name": "gpus", "resourceClaimTemplateName": "two-gpus"},
            {"name": "scratch", "resourceClaimTemplateName": "scratch"},
            {"name": "shared", "resourceClaimName": "shared-nic"},
        ],
    },
    "status": {
        "phase": "Pending",
        "resourceClaimStatuses": [
            {"name": "gpus", "resourceClaimName": "trainer-gpus-x8k2d"},
            {"name": "scratch"},
        ],
    },
}
CLAIMS = (
    PodResourceClaim("gpus", template_name="two-gpus"),
    PodResourceClaim("scratch", template_name="scratch"),
    PodResourceClaim("shared", claim_name="shared-nic"),
)


def test_pod_claims_and_the_claims_they_name() -> None:
    pod = parse_pod(POD_WITH_CLAIMS)
    assert pod.resource_claims == CLAIMS
    assert pod.claim_statuses == {"gpus": "trainer-gpus-x8k2d"}
    assert [pod.claim_name(c) for c in pod.resource_claims] == [
        "trainer-gpus-x8k2d",
        None,  # not generated yet
        "shared-nic",
    ]
    # A pod without claims.
    plain = parse_pod(
        at(at(POD_WITH_CLAIMS, ("spec", "resourceClaims"), DELETE), ("status",), DELETE)
    )
    assert plain.resource_claims == () and plain.claim_statuses == {}


def test_pod_claims_survive_to_k8s() -> None:
    pod = parse_pod(POD_WITH_CLAIMS)
    again = parse_pod(pod.to_k8s())
    assert (again.resource_claims, again.claim_statuses) == (
        pod.resource_claims,
        pod.claim_statuses,
    )


POD_VARIANTS = [
    pytest.param(POD_WITH_CLAIMS, id="claims-and-statuses"),
    pytest.param(at(POD_WITH_CLAIMS, ("status",), {"phase": "Pending"}), id="claims-no-statuses"),
    pytest.param(at(POD_WITH_CLAIMS, ("spec", "resourceClaims"), []), id="empty-claims"),
    pytest.param(at(POD_WITH_CLAIMS, ("spec", "resourceClaims"), None), id="null-claims"),
    pytest.param(at(POD_WITH_CLAIMS, ("status", "resourceClaimStatuses"), None), id="null-statuses"),
    pytest.param(at(POD_WITH_CLAIMS, ("spec", "resourceClaims", 0, "resourceClaimName"), "x"), id="bad-both-names"),
    pytest.param(at(POD_WITH_CLAIMS, ("spec", "resourceClaims", 0, "resourceClaimTemplateName"), DELETE), id="bad-neither-name"),
    pytest.param(at(POD_WITH_CLAIMS, ("status", "resourceClaimStatuses", 0), "gpus"), id="bad-status-string"),
]  # fmt: skip


@pytest.mark.parametrize("raw", POD_VARIANTS)
def test_pod_with_claims_same_through_both_routes(raw: dict[str, Any]) -> None:
    text = json.dumps(raw).encode()
    # The JSON route gives the pod `parse_pod` gives, or leaves a bad one to it...
    fast_pod = parse_pod_json(text)
    if fast_pod is not None:
        assert fast_pod[0] == parse_pod(raw)
        assert fast_pod[0].claim_statuses == parse_pod(raw).claim_statuses
    # ...so a List of them gives the pods (or the error) `from_list` gives.
    doc = {"kind": "List", "items": [raw, at(raw, ("metadata", "name"), "trainer-2")]}

    def outcome(fn: Any) -> tuple[str, Any]:
        try:
            return "ok", fn().pods
        except ModelError as exc:
            return "error", str(exc)

    fast = outcome(lambda: ClusterObjects.from_json_list(json.dumps(doc)))
    assert fast == outcome(lambda: ClusterObjects.from_list(doc))
    if fast[0] == "ok":
        assert fast[1][0] == parse_pod(raw)


@pytest.mark.parametrize(
    ("path", "value", "field", "expected"),
    [
        pytest.param(("spec", "resourceClaims"), {"gpus": "x"}, "spec.resourceClaims", "a list", id="not-list"),
        pytest.param(("spec", "resourceClaims", 0), "gpus", "spec.resourceClaims[0]", "an object with name", id="entry-string"),
        pytest.param(("spec", "resourceClaims", 0, "name"), DELETE, "spec.resourceClaims[0].name", "a non-empty string", id="no-name"),
        pytest.param(("spec", "resourceClaims", 1, "name"), "gpus", "spec.resourceClaims[1].name", "unique", id="name-twice"),
        pytest.param(("spec", "resourceClaims", 0, "resourceClaimName"), "x", "spec.resourceClaims[0]", "exactly one of resourceClaimName and resourceClaimTemplateName", id="both-names"),
        pytest.param(("spec", "resourceClaims", 0, "resourceClaimTemplateName"), DELETE, "spec.resourceClaims[0]", "exactly one of", id="neither-name"),
        pytest.param(("spec", "resourceClaims", 0, "resourceClaimTemplateName"), 5, "spec.resourceClaims[0].resourceClaimTemplateName", "a non-empty string", id="template-number"),
        pytest.param(("status", "resourceClaimStatuses"), "x", "status.resourceClaimStatuses", "a list", id="statuses-string"),
        pytest.param(("status", "resourceClaimStatuses", 0, "name"), None, "status.resourceClaimStatuses[0].name", "a non-empty string", id="status-no-name"),
        pytest.param(("status", "resourceClaimStatuses", 0, "resourceClaimName"), 5, "status.resourceClaimStatuses[0].resourceClaimName", "a string", id="status-claim-number"),
    ],
)  # fmt: skip
def test_bad_pod_claims_are_refused(
    path: tuple[Any, ...], value: Any, field: str, expected: str
) -> None:
    raw = at(POD_WITH_CLAIMS, path, value)
    for parse in (
        lambda: parse_pod(raw),
        lambda: ClusterObjects.from_json_list(json.dumps({"kind": "List", "items": [raw]})),
    ):
        with pytest.raises(ModelError) as info:
            parse()
        assert (info.value.obj, info.value.field) == ("Pod ml/trainer", field)
        assert expected in info.value.expected


def test_pod_claims_replaced_by_junk_parse_or_are_a_model_error() -> None:
    for path in paths(POD_WITH_CLAIMS):
        if path[:2] not in (("spec", "resourceClaims"), ("status", "resourceClaimStatuses")):
            continue
        for junk in JUNK:
            raw = at(POD_WITH_CLAIMS, path, junk)
            try:
                parse_pod(raw)
            except ModelError as exc:
                assert exc.obj == "Pod ml/trainer", (path, junk, str(exc))
            except Exception as exc:
                raise AssertionError(f"{path} = {junk!r}: {exc!r}") from exc


# --------------------------------------------------------------------------- snapshots

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "worker-1"},
    "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
}
SNAPSHOT_ITEMS = [
    NODE,
    POD_WITH_CLAIMS,
    SLICE_V1,
    network_slice(V1BETA1),
    CLASS_V1,
    claim(V1),
    template(V1BETA2, ONE_GPU_V1),
    {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
    },
]


def assert_snapshot(objects: ClusterObjects) -> None:
    assert objects.resource_slices == [GPU_SLICE, NETWORK_SLICE]
    assert objects.device_classes == [GPU_CLASS]
    assert objects.resource_claims == [ALLOCATED_CLAIM]
    assert objects.resource_claim_templates == [ResourceClaimTemplate("ml", "single-gpu", ONE_GPU)]
    assert [p.resource_claims for p in objects.pods] == [CLAIMS]
    assert objects.skipped == {"DeviceTaintRule": 1}
    listed = list(objects)
    for item in (GPU_SLICE, GPU_CLASS, ALLOCATED_CLAIM):
        assert item in listed


@pytest.mark.parametrize("form", ["json", "yaml", "yaml-stream"])
def test_snapshot_with_dra_objects(form: str) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": SNAPSHOT_ITEMS}
    if form == "json":
        text = json.dumps(doc)
    elif form == "yaml":
        text = yaml.safe_dump(doc)
    else:
        text = "---\n".join(yaml.safe_dump(item) for item in SNAPSHOT_ITEMS)
    assert_snapshot(parse_snapshot_text(text, f"snapshot.{form}"))


def test_snapshot_routes_agree_on_dra_objects() -> None:
    doc = {"kind": "List", "items": SNAPSHOT_ITEMS}
    fast = ClusterObjects.from_json_list(json.dumps(doc))
    assert fast is not None
    assert fast == ClusterObjects.from_list(doc)
    assert_snapshot(fast)


def test_typed_list_items_without_kind() -> None:
    items = [{k: v for k, v in SLICE_V1BETA1.items() if k not in ("kind", "apiVersion")}]
    objects = ClusterObjects.from_list(
        {"kind": "ResourceSliceList", "apiVersion": V1BETA1, "items": items}
    )
    assert objects.resource_slices == [GPU_SLICE]


def test_dra_object_given_twice_is_refused() -> None:
    doc = {"kind": "List", "items": [SLICE_V1, version(SLICE_V1, V1BETA2)]}
    with pytest.raises(
        InputError, match=r"ResourceSlice worker-1-gpu.example.com-k7x2p: given more than once"
    ):
        parse_snapshot_text(json.dumps(doc), "s.json")


@pytest.mark.parametrize(
    "kind", ["ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate"]
)
def test_dra_kinds_are_read_not_skipped(kind: str) -> None:
    assert not is_unread_kind(kind, V1)
    assert is_unread_kind("DeviceTaintRule", "resource.k8s.io/v1alpha3")


def test_strict_accepts_dra_kinds() -> None:
    objects = ClusterObjects.from_list({"kind": "List", "items": SNAPSHOT_ITEMS[:-1]}, strict=True)
    assert len(objects.resource_slices) == 2
