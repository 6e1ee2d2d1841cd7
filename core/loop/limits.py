"""Cluster-wide resource limits: --max-nodes-total, --cores-total, --memory-total,
--gpu-total, merged with the cloud provider's `ResourceLimiter`.

Limits are counted over node capacity, as Cluster Autoscaler does; memory flags are in GiB.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterscaler.interfaces.cloudprovider import ResourceLimiter
from clusterscaler.model import GPU_RESOURCE, Node

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

GIB = 1024**3
CPU = "cpu"
MEMORY = "memory"
NODES = "nodes"


@dataclass(frozen=True, slots=True)
class Totals:
    """Resources of a set of nodes: cores, memory bytes, node count, GPUs per type."""

    cores: float = 0.0
    memory: int = 0
    nodes: int = 0
    gpus: dict[str, int] = field(default_factory=dict)

    def plus(self, other: Totals, times: int = 1) -> Totals:
        gpus = dict(self.gpus)
        for k, v in other.gpus.items():
            gpus[k] = gpus.get(k, 0) + v * times
        return Totals(
            self.cores + other.cores * times,
            self.memory + other.memory * times,
            self.nodes + other.nodes * times,
            gpus,
        )


def node_totals(node: Node, gpu_label: str) -> Totals:
    gpus = node.capacity.extended.get(GPU_RESOURCE, 0)
    gpu_type = node.labels.get(gpu_label, GPU_RESOURCE) if gpu_label else GPU_RESOURCE
    return Totals(
        cores=node.capacity.cpu / 1000,
        memory=node.capacity.memory,
        nodes=1,
        gpus={gpu_type: gpus} if gpus else {},
    )


def sum_totals(nodes: Iterable[Node], gpu_label: str) -> Totals:
    out = Totals()
    for n in nodes:
        out = out.plus(node_totals(n, gpu_label))
    return out


@dataclass(frozen=True, slots=True)
class Limits:
    """Min and max per resource (`cpu` in cores, `memory` in bytes, `nodes`, GPU types).

    A resource missing from `max` has no upper limit.
    """

    min: dict[str, float] = field(default_factory=dict)
    max: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_options(
        cls, options: AutoscalingOptions, provider: ResourceLimiter | None = None
    ) -> Limits:
        mins: dict[str, float] = {
            CPU: options.cores_total.min,
            MEMORY: options.memory_total.min * GIB,
        }
        maxs: dict[str, float] = {
            CPU: options.cores_total.max,
            MEMORY: options.memory_total.max * GIB,
        }
        if options.max_nodes_total > 0:
            maxs[NODES] = options.max_nodes_total
        for g in options.gpu_total:
            mins[g.gpu_type] = g.min
            maxs[g.gpu_type] = g.max
        if provider is not None:
            # The provider's limiter (e.g. a managed node pool policy) overrides the flags.
            mins.update(provider.min_limits)
            maxs.update(provider.max_limits)
        return cls(mins, maxs)

    def exceeded_by(self, totals: Totals) -> list[str]:
        """Resources for which `totals` goes above the maximum."""
        out = []
        for name, value in self._values(totals).items():
            limit = self.max.get(name)
            if limit is not None and value > limit:
                out.append(name)
        return out

    def max_new_nodes(self, current: Totals, per_node: Totals) -> tuple[int, str]:
        """How many nodes shaped like `per_node` fit under the maxima, and which resource
        limits that (`""` when unlimited, returned as a very large count)."""
        best = 1 << 30
        which = ""
        cur = self._values(current)
        per = self._values(per_node)
        for name, limit in self.max.items():
            step = per.get(name, 0)
            if step <= 0:
                continue
            room = int((limit - cur.get(name, 0)) // step)
            if room < best:
                best, which = max(room, 0), name
        return best, which

    def blocks_removal(self, current: Totals, node: Totals) -> list[str]:
        """Resources whose minimum removing `node` would go below."""
        cur = self._values(current)
        rem = self._values(node)
        out = []
        for name, minimum in self.min.items():
            if minimum > 0 and rem.get(name, 0) > 0 and cur.get(name, 0) - rem[name] < minimum:
                out.append(name)
        return out

    @staticmethod
    def _values(t: Totals) -> dict[str, float]:
        out: dict[str, float] = {CPU: t.cores, MEMORY: float(t.memory), NODES: float(t.nodes)}
        for k, v in t.gpus.items():
            out[k] = float(v)
        return out
