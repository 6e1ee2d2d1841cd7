"""Scenario (3): Cluster Autoscaler's scalability test shapes.

Upstream declares that CA scales to 1,000 nodes running 30 pods each. The cluster here is
that: nodes of 3 cpu full with 30 replicated pods of 100m each, owned by ten ReplicaSets.
`burst` adds as many pending replicas again (30 per node); `empty_nodes` adds empty nodes
of the same group, which the loop must remove.
"""

from __future__ import annotations

from typing import Any

from bench.scenarios.common import (
    node,
    node_group,
    node_template,
    owner_ref,
    pod,
    replica_set,
    snapshot,
)
from bench.scenarios.model import Expected, Scenario

GROUP = "pool"
NODE_CPU = "3"
NODE_MEMORY = "12Gi"
NODE_PODS = 110
PODS_PER_NODE = 30
POD_CPU = "100m"
POD_MEMORY = "256Mi"
WORKLOADS = 10
MAX_GROUP_SIZE = 20_000


def _cloud_config() -> dict[str, Any]:
    template = node_template({}, NODE_CPU, NODE_MEMORY, NODE_PODS)
    return {"nodeGroups": [node_group(GROUP, template, max_size=MAX_GROUP_SIZE)]}


def _cluster(nodes: int, pending: int, empty: int) -> list[dict[str, Any]]:
    """Full nodes, then `empty` empty nodes, then `pending` pending replicas."""
    per_workload_running = -(-nodes * PODS_PER_NODE // WORKLOADS)
    per_workload_pending = -(-pending // WORKLOADS)
    workloads = [f"app-{w}" for w in range(WORKLOADS)]
    items: list[dict[str, Any]] = [
        replica_set(w, per_workload_running + per_workload_pending, {"app": w}) for w in workloads
    ]
    names = [f"{GROUP}-{i:05d}" for i in range(nodes + empty)]
    items.extend(node(n, GROUP, NODE_CPU, NODE_MEMORY, NODE_PODS) for n in names)
    for i in range(nodes * PODS_PER_NODE):
        w = workloads[i % WORKLOADS]
        items.append(
            pod(
                f"{w}-{i // WORKLOADS}",
                POD_CPU,
                POD_MEMORY,
                node_name=names[i // PODS_PER_NODE],
                labels={"app": w},
                owner=owner_ref("ReplicaSet", w),
            )
        )
    for i in range(pending):
        w = workloads[i % WORKLOADS]
        items.append(
            pod(
                f"{w}-p{i // WORKLOADS}",
                POD_CPU,
                POD_MEMORY,
                labels={"app": w},
                owner=owner_ref("ReplicaSet", w),
            )
        )
    return items


def burst(nodes: int) -> Scenario:
    """`nodes` full nodes and a burst of 30 pending replicas per node: +`nodes` nodes."""
    if nodes <= 0:
        raise ValueError(f"burst: nodes: expected a positive number, got {nodes}")
    pending = nodes * PODS_PER_NODE
    return Scenario(
        name=f"burst-{nodes}",
        title=f"(3) scalability: {nodes:,} nodes x 30 pods, burst of {pending:,} pending pods",
        nodes=nodes,
        pods=nodes * PODS_PER_NODE + pending,
        snapshot=snapshot(_cluster(nodes, pending, 0)),
        cloud_config=_cloud_config(),
        flags=(
            "--expander=least-waste",
            f"--max-nodes-per-scaleup={MAX_GROUP_SIZE}",
            f"--max-nodes-total={MAX_GROUP_SIZE}",
        ),
        expected=Expected(scale_up_nodes=nodes),
    )


def empty_nodes(nodes: int, empty: int) -> Scenario:
    """`nodes` full nodes and `empty` empty ones: the `empty` nodes are removed."""
    if nodes <= 0 or empty <= 0:
        raise ValueError(
            f"empty_nodes: nodes, empty: expected positive numbers, got {nodes}, {empty}"
        )
    total = nodes + empty
    return Scenario(
        name=f"empty-{empty}",
        title=f"(3) scalability: {nodes:,} nodes x 30 pods and {empty:,} empty nodes to remove",
        nodes=total,
        pods=nodes * PODS_PER_NODE,
        snapshot=snapshot(_cluster(nodes, 0, empty)),
        cloud_config=_cloud_config(),
        flags=(
            "--expander=least-waste",
            "--scale-down-unneeded-time=0s",
            "--scale-down-delay-after-add=0s",
            f"--max-scale-down-parallelism={total}",
            f"--max-drain-parallelism={total}",
        ),
        expected=Expected(deleted_nodes=empty),
    )
