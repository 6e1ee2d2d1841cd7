"""Node and Pod documents for tests, as plain dicts shaped as the API server returns them:
for a fake API server to serve (`FakeKubeServer.create`) or for `parse_node` / `parse_pod`.

`node_json` is a Ready node (kubelet's view: hostname label, capacity and allocatable);
`pod_json` is a pod of a ReplicaSet requesting cpu and memory in one container, running on a
node when it is given one, otherwise pending and marked unschedulable by the scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A creation time well in the past; `created=None` leaves it to the server (now).
CREATED = "2026-01-01T00:00:00Z"
NODE_RESOURCES: Mapping[str, str] = {"cpu": "4", "memory": "16Gi", "pods": "110"}
# The owner's apiVersion by kind; the workload kinds not named are apps/v1.
_OWNER_API_VERSION = {"Job": "batch/v1", "CronJob": "batch/v1", "ReplicationController": "v1"}


def node_json(
    name: str,
    *,
    provider_id: str | None = None,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] = NODE_RESOURCES,
    capacity: Mapping[str, str] | None = None,
    ready: bool = True,
    created: str | None = CREATED,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node named `name`, labelled `kubernetes.io/hostname=<name>` and `labels`; its
    capacity is `allocatable` unless given; the Ready condition True or False.
    `spec.providerID`, `metadata.creationTimestamp` and `metadata.annotations` are left out
    when None (no providerID, the server's time, no annotations)."""
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"kubernetes.io/hostname": name, **(labels or {})},
    }
    if created is not None:
        meta["creationTimestamp"] = created
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"providerID": provider_id} if provider_id else {},
        "status": {
            "capacity": dict(allocatable if capacity is None else capacity),
            "allocatable": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod_json(
    name: str,
    *,
    cpu: str,
    memory: str = "1Gi",
    namespace: str = "default",
    node_name: str = "",
    labels: Mapping[str, str] | None = None,
    owner: tuple[str, str, str] | None = ("ReplicaSet", "web", "rs-web"),
    unschedulable: bool | None = None,
    created: str | None = CREATED,
    message: str | None = None,
) -> dict[str, Any]:
    """A Pod with one container requesting `cpu` and `memory`, controlled by `owner` (kind,
    name, uid), if any. With a `node_name` it is Running there; without, it is Pending and,
    when `unschedulable` (by default: when it has no node), carries the scheduler's
    PodScheduled=False/Unschedulable condition, with `message` if given."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = dict(labels)
    if created is not None:
        meta["creationTimestamp"] = created
    if owner is not None:
        kind, owner_name, uid = owner
        meta["ownerReferences"] = [
            {"apiVersion": _OWNER_API_VERSION.get(kind, "apps/v1"), "kind": kind,
             "name": owner_name, "uid": uid, "controller": True}
        ]  # fmt: skip
    requests = {"cpu": cpu, "memory": memory}
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": "app", "resources": {"requests": requests}}]
    }
    status: dict[str, Any] = {"phase": "Pending"}
    if node_name:
        spec["nodeName"] = node_name
        status["phase"] = "Running"
    if unschedulable is None:
        unschedulable = not node_name
    if unschedulable:
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        if message is not None:
            condition["message"] = message
        status["conditions"] = [condition]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
