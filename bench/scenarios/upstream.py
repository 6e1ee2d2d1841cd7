"""Scenarios (1) and (2): upstream Cluster Autoscaler's RunOnce benchmarks.

Upstream builds one node group of 10 cpu, 10,000 bytes of memory and 100 pods, then either
pending bare pods sized so that 50 fit a node (scale-up from zero), or nodes each running
40 bare pods of 1% of the node, annotated safe-to-evict (scale-down: the pods fit on 40% of
the nodes, so 60% are removed). The flags are the ones upstream's benchmark sets.
"""

from __future__ import annotations

from typing import Any

from bench.scenarios.common import SAFE_TO_EVICT, node, node_group, node_template, pod, snapshot
from bench.scenarios.model import Expected, Scenario

GROUP = "ng1"
NODE_CPU_MILLI = 10_000
NODE_MEMORY = 10_000  # bytes, as upstream
NODE_PODS = 100
MAX_GROUP_SIZE = 10_000
PODS_PER_NEW_NODE = 50
PODS_PER_NODE_SCALE_DOWN = 40

# Upstream's defaults for these benchmarks: least-waste, long binpacking budgets, and a
# node limit no scenario reaches.
COMMON_FLAGS = (
    "--expander=least-waste",
    "--estimator=binpacking",
    f"--max-nodes-total={MAX_GROUP_SIZE}",
    "--max-nodegroup-binpacking-duration=60s",
    "--max-binpacking-time=60s",
    "--scale-down-utilization-threshold=0.5",
    "--max-node-provision-time=10m",
)


def _cloud_config() -> dict[str, Any]:
    template = node_template({}, f"{NODE_CPU_MILLI // 1000}", str(NODE_MEMORY), NODE_PODS)
    return {"nodeGroups": [node_group(GROUP, template, max_size=MAX_GROUP_SIZE)]}


def scale_up(pods: int) -> Scenario:
    """`pods` pending bare pods, 50 to a node, onto one empty node group: +pods/50 nodes."""
    if pods <= 0 or pods % PODS_PER_NEW_NODE:
        raise ValueError(f"scale_up: pods: expected a positive multiple of 50, got {pods}")
    cpu = f"{NODE_CPU_MILLI // PODS_PER_NEW_NODE}m"
    memory = str(NODE_MEMORY // PODS_PER_NEW_NODE)
    items = [pod(f"pod-{i}", cpu, memory) for i in range(pods)]
    nodes = pods // PODS_PER_NEW_NODE
    return Scenario(
        name=f"scale-up-{pods}",
        title=f"(1) upstream RunOnce scale-up: {pods:,} pending bare pods, one group from zero",
        nodes=0,
        pods=pods,
        snapshot=snapshot(items),
        cloud_config=_cloud_config(),
        flags=(
            *COMMON_FLAGS,
            f"--max-nodes-per-scaleup={MAX_GROUP_SIZE}",
            "--scale-up-from-zero=true",
        ),
        expected=Expected(scale_up_nodes=nodes),
    )


def scale_down(nodes: int, *, whole_pool: bool = False) -> Scenario:
    """`nodes` nodes at 40% with safe-to-evict bare pods: 60% of them are removed.

    Upstream's benchmark leaves the candidates pool options at Go's zero values, and its
    planner simulates every candidate. With `whole_pool` the pool heuristic is turned off
    the documented way (`--scale-down-candidates-pool-ratio=1.0`); without it the flag
    defaults apply.
    """
    if nodes <= 0 or nodes % 5:
        raise ValueError(f"scale_down: nodes: expected a positive multiple of 5, got {nodes}")
    names = [f"{GROUP}-{i:05d}" for i in range(nodes)]
    items = [
        node(name, GROUP, f"{NODE_CPU_MILLI // 1000}", str(NODE_MEMORY), NODE_PODS)
        for name in names
    ]
    cpu = f"{NODE_CPU_MILLI // 100}m"
    memory = str(NODE_MEMORY // 100)
    annotations = {SAFE_TO_EVICT: "true"}
    # Upstream spreads pod i onto node i % nodes.
    items.extend(
        pod(f"pod-{i}", cpu, memory, node_name=names[i % nodes], annotations=annotations)
        for i in range(nodes * PODS_PER_NODE_SCALE_DOWN)
    )
    return Scenario(
        name=f"scale-down-{nodes}",
        title=f"(2) upstream RunOnce scale-down: {nodes:,} nodes x 40 safe-to-evict pods at 40%"
        + (", whole candidates pool" if whole_pool else ""),
        nodes=nodes,
        pods=nodes * PODS_PER_NODE_SCALE_DOWN,
        snapshot=snapshot(items),
        cloud_config=_cloud_config(),
        flags=(
            *COMMON_FLAGS,
            "--scale-down-enabled=true",
            "--scale-down-unneeded-time=0s",
            "--scale-down-delay-after-add=0s",
            f"--max-scale-down-parallelism={nodes}",
            f"--max-drain-parallelism={nodes}",
            f"--scale-down-non-empty-candidates-count={nodes}",
            "--scale-down-simulation-timeout=60s",
            "--scale-down-unready-enabled=true",
            *(("--scale-down-candidates-pool-ratio=1.0",) if whole_pool else ()),
        ),
        expected=Expected(deleted_nodes=nodes * 3 // 5),
    )
