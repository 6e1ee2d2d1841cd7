"""Pending pods that claim devices (DRA) against the same pods without claims.

Two rows of the same shape, measured in the same `python -m bench` run so that their
ratio is taken on the same machine load: pending replicas of ten ReplicaSets onto one
empty node group of 8-cpu nodes that publish eight GPUs each (a node-local ResourceSlice
of driver `gpu.example.com` in the group's `resourceSlices`).

- `claims`: each pod asks for 100m and claims one GPU through a ResourceClaimTemplate of
  DeviceClass `gpu.example.com` (whose CEL selector checks the driver and the model
  attribute): eight pods to a node, by their devices.
- `plain`: each pod asks for one cpu and claims nothing: eight pods to a node, by cpu.

Both decide +pods/8 nodes; the claim path's cost is the difference.
"""

from __future__ import annotations

from typing import Any

from bench.scenarios.common import node_group, node_template, owner_ref, pod, replica_set, snapshot
from bench.scenarios.model import Expected, Scenario

GROUP = "gpu"
DRIVER = "gpu.example.com"
NODE_CPU = "8"
NODE_MEMORY = "64Gi"
NODE_PODS = 110
GPUS_PER_NODE = 8
WORKLOADS = 10
MAX_GROUP_SIZE = 100_000

FLAGS = (
    "--expander=least-waste",
    "--estimator=binpacking",
    f"--max-nodes-total={MAX_GROUP_SIZE}",
    f"--max-nodes-per-scaleup={MAX_GROUP_SIZE}",
    "--max-nodegroup-binpacking-duration=60s",
    "--max-binpacking-time=60s",
    "--scale-up-from-zero=true",
)


def _slice() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "gpus"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": "gpus", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"model": {"string": "a100"}, "index": {"int": i}},
                    "capacity": {"memory": {"value": "40Gi"}},
                }
                for i in range(GPUS_PER_NODE)
            ],
        },
    }


def _cloud_config(devices: bool) -> dict[str, Any]:
    group = node_group(
        GROUP, node_template({}, NODE_CPU, NODE_MEMORY, NODE_PODS), max_size=MAX_GROUP_SIZE
    )
    if devices:
        group["resourceSlices"] = [_slice()]
    return {"nodeGroups": [group]}


def _dra_objects() -> list[dict[str, Any]]:
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f'device.driver == "{DRIVER}" && '
                        f'device.attributes["{DRIVER}"].model == "a100"'
                    }
                }
            ]
        },
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]
                }
            }
        },
    }
    return [device_class, template]


def scale_up(pods: int, *, claims: bool) -> Scenario:
    """`pods` pending replicas, eight to a node of one empty group: by one GPU claimed
    each (`claims`), else by one cpu each."""
    if pods <= 0 or pods % (WORKLOADS * GPUS_PER_NODE):
        raise ValueError(
            f"scale_up: pods: expected a positive multiple of {WORKLOADS * GPUS_PER_NODE}, "
            f"got {pods}"
        )
    per_workload = pods // WORKLOADS
    workloads = [f"train-{w}" for w in range(WORKLOADS)]
    items: list[dict[str, Any]] = _dra_objects() if claims else []
    items.extend(replica_set(w, per_workload, {"app": w}) for w in workloads)
    for i in range(pods):
        w = workloads[i % WORKLOADS]
        doc = pod(
            f"{w}-{i // WORKLOADS}",
            "100m" if claims else "1",
            "1Gi",
            labels={"app": w},
            owner=owner_ref("ReplicaSet", w),
        )
        if claims:
            doc["spec"]["resourceClaims"] = [
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}
            ]
            doc["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        items.append(doc)
    what = "claiming one GPU each (DRA)" if claims else "asking one cpu each, no claims"
    return Scenario(
        name=f"{'claims' if claims else 'plain'}-{pods}",
        title=f"DRA: {pods:,} pending pods {what}, 8 to a node, one group from zero",
        nodes=0,
        pods=pods,
        snapshot=snapshot(items),
        cloud_config=_cloud_config(claims),
        flags=FLAGS,
        expected=Expected(scale_up_nodes=pods // GPUS_PER_NODE),
    )
