"""Node utilization as scale-down sees it.

A GPU node (allocatable GPUs) is measured by GPU alone; a node with node-local DRA devices
(ResourceSlices) by the busiest of its device pools, as Cluster Autoscaler does, so that a
node whose devices are in use is not underutilized because its CPU is idle; any other node
by the larger of its CPU and memory utilization, each the sum of pod requests over
allocatable. With
--ignore-daemonsets-utilization (--ignore-mirror-pods-utilization) DaemonSet (mirror) pods
count neither in the requests nor in the allocatable, as in Cluster Autoscaler.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from clusterscaler.model import GPU_RESOURCE, Node, Pod
from clusterscaler.simulator.dra import PoolIncomplete, PoolUtilization, highest_pool

if TYPE_CHECKING:
    from clusterscaler.simulator.dra import DraState

_LONG_TERMINATING_EXTRA = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class Utilization:
    """Per-resource utilization of one node; `value` is what thresholds compare.

    For a node with DRA devices, `dra` is the utilization of its busiest device pool and
    `resource` names that pool (`<driver>/<pool>`); `unknown` says why the utilization
    could not be measured (a device pool not fully published): such a node is kept."""

    cpu: float
    memory: float
    gpu: float | None
    value: float
    resource: str
    dra: float | None = None
    pools: tuple[PoolUtilization, ...] = ()
    unknown: str = ""


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
    dra: DraState | None = None,
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
    if dra is not None and dra.node_slices.get(node.name):
        try:
            pools = dra.node_pool_utilization(node.name)
        except PoolIncomplete as exc:
            return Utilization(cpu_u, mem_u, None, 1.0, "dra", unknown=str(exc))
        busiest = highest_pool(pools)
        if busiest is not None:
            return Utilization(
                cpu_u, mem_u, None, busiest.utilization, busiest.name,
                dra=busiest.utilization, pools=tuple(pools),
            )
    if mem_u > cpu_u:
        return Utilization(cpu_u, mem_u, None, mem_u, "memory")
    return Utilization(cpu_u, mem_u, None, cpu_u, "cpu")
