"""The two DRA scenarios users meet first, through `simulate` and `explain` on a snapshot: a
pod claiming a GPU makes the GPU group grow (not the CPU group), and a GPU node whose pod
holds a device is not drained onto a node without devices."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.testing.cliprocess import clusterscaler_command

DRIVER = "gpu.example.com"
GROUP_LABEL = "eks.amazonaws.com/nodegroup"


def node(name: str, group: str, cpu: str = "8") -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {GROUP_LABEL: group, "kubernetes.io/hostname": name},
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def gpu_slice(node_name: str, devices: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER, "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": "a100"}},
                 "capacity": {"memory": {"value": "40Gi"}}}
                for i in range(devices)
            ],
        },
    }


DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
    "metadata": {"name": DRIVER},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {
            "deviceClassName": DRIVER,
            "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "a100"'}}],
        }}]}}},
}


def pod(name: str, node_name: str = "", claim: str = "") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": f"{name}-rs", "uid": f"uid-rs-{name}",
                                          "controller": True}]},
        "spec": {
            "containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}},
                            "image": "app"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        },
        "status": {"phase": "Pending"},
    }
    if node_name:
        doc["spec"]["nodeName"] = node_name
        doc["status"] = {"phase": "Running",
                         "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}
    else:
        doc["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable"}]
    return doc


def allocated_claim(name: str, owner: str, node_name: str, device: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": owner,
                                          "uid": f"uid-{owner}", "controller": True}]},
        "spec": TEMPLATE["spec"]["spec"],
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node_name,
                                         "device": device}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": owner, "uid": f"uid-{owner}"}],
        },
    }


def run(tmp_path: Path, command: str, items: list[dict[str, Any]], *args: str) -> dict[str, Any]:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    proc = subprocess.run([*clusterscaler_command(), command, "--snapshot", str(path), "--json",
                           *args], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout))


def replicaset(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": f"{name}-rs", "namespace": "default", "uid": f"uid-rs-{name}"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}},
        "status": {"replicas": 1},
    }


def base(gpu_nodes: int = 1, devices: int = 1) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [node("cpu-1", "cpu"), DEVICE_CLASS, TEMPLATE,
                                   replicaset("trainer")]
    for i in range(1, gpu_nodes + 1):
        items += [node(f"gpu-{i}", "gpu"), gpu_slice(f"gpu-{i}", devices)]
    items += [pod("trainer", "gpu-1", "trainer-gpu"),
              allocated_claim("trainer-gpu", "trainer", "gpu-1", "gpu-0")]
    return items


def test_a_pod_claiming_a_gpu_grows_the_gpu_group(tmp_path: Path) -> None:
    doc = run(tmp_path, "simulate", [*base(), pod("inference")], "--once")
    assert [(d["nodeGroup"], d["to"]) for d in doc["scaleUp"]] == [("gpu", 2)], doc
    explained = run(tmp_path, "explain", [*base(), pod("inference")])
    [entry] = [e for e in explained["pendingPods"] if e["pod"] == "default/inference"]
    assert entry["nodeGroups"]["gpu"]["helps"] is True
    assert entry["nodeGroups"]["cpu"]["helps"] is False, entry


def test_two_claiming_pods_need_two_new_gpu_nodes(tmp_path: Path) -> None:
    doc = run(tmp_path, "simulate", [*base(), pod("a"), pod("b")], "--once")
    assert [(d["nodeGroup"], d["to"]) for d in doc["scaleUp"]] == [("gpu", 3)], doc


def test_a_gpu_node_whose_pod_holds_a_device_is_kept(tmp_path: Path) -> None:
    # One device of three in use: underutilized, so the removal simulation decides, and
    # the pod's claim cannot be allocated on the CPU node.
    explained = run(tmp_path, "explain", base(devices=3))
    reasons = {u["node"]: u for u in explained["unremovable"]}
    assert "gpu-1" in reasons, explained["unremovable"]
    assert reasons["gpu-1"]["reason"] == "NoPlaceToMovePods", reasons["gpu-1"]


def test_a_node_whose_devices_are_all_in_use_is_not_underutilized(tmp_path: Path) -> None:
    """As CA: a DRA node is as utilized as its busiest device pool, whatever its CPU."""
    explained = run(tmp_path, "explain", base(devices=1))
    reasons = {u["node"]: u for u in explained["unremovable"]}
    assert reasons["gpu-1"]["reason"] == "NotUnderutilized", reasons["gpu-1"]
    assert reasons["gpu-1"]["detail"] == "gpu.example.com/gpu-1 utilization 1.000 >= 0.5"
    # The CPU node is measured by CPU and memory, as before.
    assert "cpu-1" not in reasons, reasons


def test_a_node_whose_device_pool_is_not_fully_published_is_kept(tmp_path: Path) -> None:
    items = base(devices=3)
    [gpu_slice_doc] = [i for i in items if i["kind"] == "ResourceSlice"]
    gpu_slice_doc["spec"]["pool"]["resourceSliceCount"] = 2
    explained = run(tmp_path, "explain", items)
    reasons = {u["node"]: u for u in explained["unremovable"]}
    assert reasons["gpu-1"]["reason"] == "NotUnderutilized", reasons["gpu-1"]
    assert reasons["gpu-1"]["detail"].startswith(
        "device utilization unknown: resource pool gpu.example.com/gpu-1: 1 of 2"), reasons


def test_explain_lists_each_device_with_the_claim_holding_it(tmp_path: Path) -> None:
    explained = run(tmp_path, "explain", base(devices=2))
    assert explained["devices"] == [
        {"node": "gpu-1", "driver": DRIVER, "pool": "gpu-1", "device": "gpu-0",
         "claim": "default/trainer-gpu", "nodeLocal": True},
        {"node": "gpu-1", "driver": DRIVER, "pool": "gpu-1", "device": "gpu-1",
         "claim": None, "nodeLocal": True},
    ]
    path = tmp_path / "snapshot.json"
    text = subprocess.run([*clusterscaler_command(), "explain", "--snapshot", str(path)],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    devices = text[text.index("Devices (DRA)"):]
    assert "default/trainer-gpu" in devices and "free" in devices, devices
    assert "33% gpu.example.com/gpu-1" not in text and "50% gpu.example.com/gpu-1" in text, text


@pytest.mark.parametrize("devices", [3])
def test_a_gpu_node_drains_onto_another_gpu_node_with_a_free_device(
    tmp_path: Path, devices: int
) -> None:
    # gpu-2 is kept (not a candidate itself: a DRA node with idle devices is measured by
    # them, not by its CPU) and has free devices.
    items = base(gpu_nodes=2, devices=devices)
    [gpu2] = [i for i in items if i["kind"] == "Node" and i["metadata"]["name"] == "gpu-2"]
    gpu2["metadata"]["annotations"] = {
        "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
    explained = run(tmp_path, "explain", items)
    reasons = {u["node"]: u["reason"] for u in explained["unremovable"]}
    # gpu-1's pod can take gpu-2's free device: gpu-1 is not kept, it is unneeded.
    assert "gpu-1" not in reasons, explained["unremovable"]
    assert {"node": "gpu-1", "nodeGroup": "gpu", "empty": False} in explained["scaleDown"], explained


def test_many_claiming_pods_take_one_node_each_of_a_one_gpu_group(tmp_path: Path) -> None:
    """Twelve pods of one workload (alike: the estimator's arithmetic path) each take a GPU:
    twelve new nodes, not as many as CPU alone would allow on one."""
    pending = [pod(f"w-{i}") for i in range(12)]
    for p in pending:
        p["metadata"]["ownerReferences"][0].update(name="w-rs", uid="uid-rs-w")
    doc = run(tmp_path, "simulate", [*base(), *pending, replicaset("w")], "--once")
    assert [(d["nodeGroup"], d["to"]) for d in doc["scaleUp"]] == [("gpu", 13)], doc


def cloud_config(tmp_path: Path, slices: list[dict[str, Any]] | None) -> Path:
    gpu_group: dict[str, Any] = {
        "name": "gpu", "minSize": 0, "maxSize": 5,
        "template": {"status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}},
    }
    if slices is not None:
        gpu_group["resourceSlices"] = slices
    doc = {"nodeGroups": [
        {"name": "cpu", "minSize": 1, "maxSize": 5, "nodeSelector": {GROUP_LABEL: "cpu"}},
        gpu_group,
    ]}
    path = tmp_path / "cloud.yaml"
    path.write_text(json.dumps(doc))
    return path


def declared_gpus(devices: int) -> dict[str, Any]:
    doc = gpu_slice("template", devices)
    del doc["spec"]["nodeName"]
    return doc


@pytest.mark.parametrize(("slices", "grows"), [
    pytest.param([declared_gpus(2)], [("gpu", 2)], id="declared-devices"),
    pytest.param(None, [], id="no-declared-devices"),
])
def test_an_empty_gpu_group_grows_from_the_devices_its_cloud_config_declares(
    tmp_path: Path, slices: list[dict[str, Any]] | None, grows: list[tuple[str, int]]
) -> None:
    items = [node("cpu-1", "cpu"), DEVICE_CLASS, TEMPLATE, replicaset("w"),
             *[pod(f"w-{i}") for i in range(3)]]
    doc = run(tmp_path, "simulate", items, "--once", "--cloud-config",
              str(cloud_config(tmp_path, slices)))
    # Two devices per new node: three claiming pods need two.
    assert [(d["nodeGroup"], d["to"]) for d in doc["scaleUp"]] == grows, doc


def test_a_declared_slice_that_is_not_node_local_is_refused_naming_it(tmp_path: Path) -> None:
    bad = declared_gpus(1)
    bad["spec"]["allNodes"] = True
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("cpu-1", "cpu")]}))
    proc = subprocess.run([*clusterscaler_command(), "simulate", "--snapshot", str(path), "--once",
                           "--cloud-config", str(cloud_config(tmp_path, [bad]))],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert ("nodeGroups[1] (gpu): resourceSlices[0]: ResourceSlice template-gpu.example.com: "
            "spec.allNodes: expected a node-local slice") in proc.stderr, proc.stderr


def test_what_if_a_claiming_deployment_and_its_template_are_applied(tmp_path: Path) -> None:
    """`--apply` takes DRA objects too: a new claim template and a Deployment using it."""
    items = [node("cpu-1", "cpu"), node("gpu-1", "gpu"), gpu_slice("gpu-1", 2), DEVICE_CLASS]
    manifest = {"apiVersion": "v1", "kind": "List", "items": [
        TEMPLATE,
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "infer", "namespace": "default"},
         "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "infer"}},
                  "template": {"metadata": {"labels": {"app": "infer"}},
                               "spec": {"containers": [{"name": "c", "image": "i",
                                                        "resources": {"requests": {"cpu": "100m"}}}],
                                        "resourceClaims": [{"name": "gpu",
                                                            "resourceClaimTemplateName": "one-gpu"}]}}}},
    ]}
    path = tmp_path / "apply.json"
    path.write_text(json.dumps(manifest))
    doc = run(tmp_path, "simulate", items, "--once", "--apply", str(path))
    # Two of the five pods fit gpu-1's two devices; three more GPU nodes of two devices.
    assert [(d["nodeGroup"], d["to"]) for d in doc["scaleUp"]] == [("gpu", 3)], doc


def test_what_if_a_malformed_dra_object_is_named(tmp_path: Path) -> None:
    bad = {**DEVICE_CLASS, "metadata": {"name": "broken"},
           "spec": {"selectors": [{"cel": {}}]}}
    path = tmp_path / "apply.json"
    path.write_text(json.dumps(bad))
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                    "items": [node("cpu-1", "cpu")]}))
    proc = subprocess.run([*clusterscaler_command(), "simulate", "--snapshot", str(snapshot),
                           "--once", "--apply", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert "DeviceClass broken: spec.selectors[0].cel.expression" in proc.stderr, proc.stderr
    assert "spec.selectors[0].cel.expression" in proc.stderr, proc.stderr
