"""Builders of the Kubernetes objects the scenarios are made of, as plain JSON documents.

The documents are what `kubectl get nodes,pods,rs -A -o json` prints, so the benchmark
exercises the same parsing path as a user's own snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NODE_GROUP_LABEL = "clusterscaler.io/node-group"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"

# Every generated object is older than the snapshot's time, which is the newest of them.
NODE_CREATED = "2024-05-01T08:00:00Z"
POD_CREATED = "2024-05-01T09:00:00Z"
PENDING_CREATED = "2024-05-01T10:00:00Z"


def resources(cpu: str, memory: str, pods: int) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory, "pods": str(pods)}


def node_template(labels: Mapping[str, str], cpu: str, memory: str, pods: int) -> dict[str, Any]:
    """A node group template for the `sim` cloud-config."""
    res = resources(cpu, memory, pods)
    return {
        "metadata": {"labels": dict(labels)},
        "status": {"capacity": res, "allocatable": dict(res)},
    }


def node_group(
    name: str,
    template: dict[str, Any],
    *,
    min_size: int = 0,
    max_size: int,
    price: float | None = None,
) -> dict[str, Any]:
    """One entry of the `sim` cloud-config's `nodeGroups`."""
    group: dict[str, Any] = {
        "name": name,
        "minSize": min_size,
        "maxSize": max_size,
        "template": template,
    }
    if price is not None:
        group["price"] = price
    return group


def node(
    name: str,
    group: str,
    cpu: str,
    memory: str,
    pods: int,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ready node of the `sim` node group `group`."""
    res = resources(cpu, memory, pods)
    all_labels = {
        HOSTNAME_LABEL: name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        NODE_GROUP_LABEL: group,
        **(labels or {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-node-{name}",
            "labels": all_labels,
            "creationTimestamp": NODE_CREATED,
        },
        "spec": {"providerID": f"sim://{group}/{name}"},
        "status": {
            "capacity": res,
            "allocatable": dict(res),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastTransitionTime": NODE_CREATED,
                }
            ],
        },
    }


def owner_ref(kind: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": name,
        "uid": f"uid-{kind.lower()}-{name}",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def replica_set(name: str, replicas: int, labels: Mapping[str, str], namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-replicaset-{name}",
            "labels": dict(labels),
            "creationTimestamp": POD_CREATED,
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
        },
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }


def pod(
    name: str,
    cpu: str,
    memory: str,
    *,
    namespace: str = "default",
    node_name: str = "",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    affinity: dict[str, Any] | None = None,
    spread: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A pod: running on `node_name`, or pending and marked unschedulable by the scheduler."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-pod-{namespace}-{name}",
        "creationTimestamp": POD_CREATED if node_name else PENDING_CREATED,
    }
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.9",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
        "schedulerName": "default-scheduler",
        "priority": 0,
    }
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = list(spread)
    status: dict[str, Any]
    if node_name:
        spec["nodeName"] = node_name
        status = {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
        }
    else:
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/0 nodes are available",
                    "lastTransitionTime": PENDING_CREATED,
                }
            ],
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def snapshot(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A `kubectl get ... -o json` List."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
