"""Scenarios of real-shaped pods (`bench.scenarios.realpods`): issue 21's targets 2 and 3.

- `scale_up(pods)`: pending pods of 20 Deployments in 5 namespaces, every pod of 450m /
  900Mi plus a 50m / 64Mi sidecar, onto three empty node groups of 16 cpu / 64 GiB / 110
  pods (one per zone): 32 pods to a node, so +ceil(pods / 32) nodes.
- `scale_down(nodes)`: `nodes` nodes of 16 cpu / 64 GiB, each running 40 pods of 50
  Deployments (100m / 256Mi plus the sidecar: 37.5% of the node), one in four Deployments
  covered by a PodDisruptionBudget; the default flags, so the loop finds unneeded nodes
  and removes none (--scale-down-unneeded-time is 10 minutes).
"""

from __future__ import annotations

import random
from typing import Any

from bench.scenarios.common import (
    HOSTNAME_LABEL,
    NODE_GROUP_LABEL,
    POD_CREATED,
    node_group,
    snapshot,
)
from bench.scenarios.model import Expected, Scenario
from bench.scenarios.realpods import Deployment, ip, real_node

ZONES = ("zone-a", "zone-b", "zone-c")
NODE_CPU = "16"
NODE_MEMORY = "64Gi"
NODE_PODS = 110
INSTANCE_TYPE = "m5.4xlarge"
MAX_GROUP_SIZE = 20_000
PENDING_CREATED = "2024-05-01T10:00:00Z"
SCALE_UP_PODS_PER_NODE = 32
NAMESPACES = ("payments", "search", "checkout", "catalog", "platform")


def _group(zone: str) -> str:
    return f"workers-{zone}"


def _node(i: int) -> dict[str, Any]:
    zone = ZONES[i % len(ZONES)]
    address = ip(i, 10)
    return real_node(
        f"ip-{address.replace('.', '-')}",
        _group(zone),
        NODE_CPU,
        NODE_MEMORY,
        NODE_PODS,
        zone=zone,
        instance_type=INSTANCE_TYPE,
        internal_ip=address,
    )


def _cloud_config(extra_groups: tuple[str, ...] = ()) -> dict[str, Any]:
    """One group per zone; each template is what its nodes register as. Each of
    `extra_groups` is one more group like the first zone's, whose nodes are also labelled
    `workload=<name>`."""
    groups = []
    for z, zone in enumerate(ZONES):
        live = _node(z)
        labels = {k: v for k, v in live["metadata"]["labels"].items() if k != HOSTNAME_LABEL}
        status = live["status"]
        template = {
            "metadata": {"labels": labels},
            "status": {"capacity": status["capacity"], "allocatable": status["allocatable"]},
        }
        groups.append(node_group(_group(zone), template, max_size=MAX_GROUP_SIZE))
    for name in extra_groups:
        live = _node(0)
        labels = {k: v for k, v in live["metadata"]["labels"].items() if k != HOSTNAME_LABEL}
        labels[NODE_GROUP_LABEL] = name
        labels["workload"] = name
        status = live["status"]
        template = {
            "metadata": {"labels": labels},
            "status": {"capacity": status["capacity"], "allocatable": status["allocatable"]},
        }
        groups.append(node_group(name, template, max_size=MAX_GROUP_SIZE))
    return {"nodeGroups": groups}


def _deployments(count: int, total_pods: int, cpu: str, memory: str, seed: int, *, pdb_every: int = 0) -> list[Deployment]:
    per, extra = divmod(total_pods, count)
    return [
        Deployment(
            name=f"svc-{d:02d}",
            namespace=NAMESPACES[d % len(NAMESPACES)],
            cpu=cpu,
            memory=memory,
            replicas=per + (1 if d < extra else 0),
            seed=seed,
            pdb=bool(pdb_every) and d % pdb_every == 0,
        )
        for d in range(count)
    ]


def scale_up(pods: int, seed: int) -> Scenario:
    """`pods` real-shaped pending pods onto three empty node groups: +ceil(pods/32) nodes."""
    if pods <= 0:
        raise ValueError(f"real scale_up: pods: expected a positive number, got {pods}")
    rng = random.Random(seed)
    deployments = _deployments(20, pods, "450m", "900Mi", seed)
    items: list[dict[str, Any]] = [d.replica_set() for d in deployments]
    rv = 10_000
    for d in deployments:
        for _ in range(d.replicas):
            rv += 1
            items.append(d.pod(rng, rv, PENDING_CREATED))
    nodes = -(-pods // SCALE_UP_PODS_PER_NODE)
    return Scenario(
        name=f"real-scale-up-{pods}",
        title=f"(21.2) {pods:,} real-shaped pending pods of 20 Deployments, three groups from zero",
        nodes=0,
        pods=pods,
        snapshot=snapshot(items),
        cloud_config=_cloud_config(),
        flags=(
            "--expander=least-waste",
            f"--max-nodes-total={MAX_GROUP_SIZE}",
            f"--max-nodes-per-scaleup={MAX_GROUP_SIZE}",
            "--max-nodegroup-binpacking-duration=60s",
            "--max-binpacking-time=60s",
        ),
        expected=Expected(scale_up_nodes=nodes, all_pods_fit=True),
    )


def steady_cluster(
    nodes: int, pods_per_node: int, cpu: str, memory: str, seed: int, *, deployments: int = 50
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes in three zone groups and `pods_per_node` running real-shaped pods on each
    (pod i on node i % nodes, so each node runs pods of many Deployments, as the
    scheduler's spreading leaves them). Returns nodes, pods, ReplicaSets and PDBs."""
    rng = random.Random(seed)
    deps = _deployments(deployments, nodes * pods_per_node, cpu, memory, seed, pdb_every=4)
    node_items = [_node(i) for i in range(nodes)]
    names = [n["metadata"]["name"] for n in node_items]
    host_ips = [ip(i, 10) for i in range(nodes)]
    pods: list[dict[str, Any]] = []
    rv = 10_000
    j = 0
    for d in deps:
        for _ in range(d.replicas):
            rv += 1
            n = j % nodes
            pods.append(d.pod(rng, rv, POD_CREATED, node_name=names[n], pod_ip=ip(j, 100), host_ip=host_ips[n]))
            j += 1
    replica_sets = [d.replica_set() for d in deps]
    pdbs = [d.pod_disruption_budget() for d in deps if d.pdb]
    return node_items, pods, replica_sets, pdbs


def scale_down(nodes: int, seed: int) -> Scenario:
    """`nodes` nodes x 40 real-shaped running pods at 37.5%, default flags."""
    if nodes <= 0:
        raise ValueError(f"real scale_down: nodes: expected a positive number, got {nodes}")
    node_items, pods, replica_sets, pdbs = steady_cluster(nodes, 40, "100m", "256Mi", seed)
    return Scenario(
        name=f"scale-down-{nodes}-real",
        title=f"(21.3) {nodes:,} nodes x 40 real-shaped pods at 37.5%, default flags",
        nodes=nodes,
        pods=len(pods),
        snapshot=snapshot([*replica_sets, *pdbs, *node_items, *pods]),
        cloud_config=_cloud_config(),
        flags=(),
        expected=Expected(deleted_nodes=0, min_unneeded_nodes=1),
    )
