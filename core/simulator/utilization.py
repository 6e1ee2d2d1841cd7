"""Node utilization as scale-down sees it.

A GPU node is measured by GPU alone; any other node by the larger of its CPU and memory
utilization, each the sum of pod requests over allocatable. With
--ignore-daemonsets-utilization (--ignore-mirror-pods-utilization) DaemonSet (mirror) pods
count neither in the requests nor in the allocatable, as in Cluster Autoscaler.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from clusterscaler.model import Node, Pod

GPU_RESOURCE = "nvidia.com/gpu"
_LONG_TERMINATING_EXTRA = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class Utilization:
    """Per-resource utilization of one node; `value` is what thresholds compare."""

    cpu: float
    memory: float
    gpu: float | None
    value: float
    resource: str


def is_gpu_node(node: Node, gpu_label: str) -> bool:
    """A node with the provider's GPU label, or with allocatable GPUs."""
    return (bool(gpu_label) and gpu_label in node.labels) or node.allocatable.extended.get(
        GPU_RESOURCE, 0
    ) > 0


def _long_terminating(pod: Pod, now: datetime) -> bool:
    if pod.deletion_time is None:
        return False
    grace = 30 if pod.termination_grace_seconds is None else pod.termination_grace_seconds
    return pod.deletion_time + timedelta(seconds=grace) + _LONG_TERMINATING_EXTRA < now


def _ratio(used: int, total: int) -> float:
    if total <= 0:
        # Nothing allocatable: anything requested saturates the node, nothing leaves it idle.
        return 1.0 if used > 0 else 0.0
    return used / total


def node_utilization(
    node: Node,
    pods: Iterable[Pod],
    *,
    now: datetime,
    gpu_label: str = "",
    ignore_daemonsets: bool = False,
    ignore_mirror_pods: bool = False,
) -> Utilization:
    cpu = mem = gpu = 0
    skipped_cpu = skipped_mem = skipped_gpu = 0
    for pod in pods:
        if pod.is_terminal or _long_terminating(pod, now):
            continue
        r = pod.requests
        g = r.extended.get(GPU_RESOURCE, 0) if r.extended else 0
        if (ignore_daemonsets and pod.is_daemonset) or (ignore_mirror_pods and pod.is_mirror):
            skipped_cpu += r.cpu
            skipped_mem += r.memory
            skipped_gpu += g
            continue
        cpu += r.cpu
        mem += r.memory
        gpu += g
    alloc = node.allocatable
    cpu_u = _ratio(cpu, alloc.cpu - skipped_cpu)
    mem_u = _ratio(mem, alloc.memory - skipped_mem)
    if is_gpu_node(node, gpu_label):
        alloc_gpu = alloc.extended.get(GPU_RESOURCE, 0)
        if alloc_gpu > 0:
            gpu_u = _ratio(gpu, alloc_gpu - skipped_gpu)
            return Utilization(cpu_u, mem_u, gpu_u, gpu_u, "gpu")
    if mem_u > cpu_u:
        return Utilization(cpu_u, mem_u, None, mem_u, "memory")
    return Utilization(cpu_u, mem_u, None, cpu_u, "cpu")
