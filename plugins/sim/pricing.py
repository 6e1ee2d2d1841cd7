"""Prices for the `sim` provider, so that `--expander=price` works in simulations.

A node of a group with a `price` costs that much per hour. Anything else (nodes outside the
cloud-config's groups, groups without a price, and pods by their requests) is priced per
resource-hour with on-demand list prices of a general-purpose machine family, so that prices
stay comparable across groups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from clusterscaler.api import GPU_RESOURCE, Node, Pod, Resources

CPU_PRICE_PER_CORE_HOUR = 0.033174
MEMORY_PRICE_PER_GIB_HOUR = 0.004446
GPU_PRICE_PER_HOUR = 0.95
_GIB = 1024**3


def resource_price_per_hour(resources: Resources) -> float:
    """Per-hour price of `resources` at the default per-resource rates."""
    return (
        resources.cpu / 1000 * CPU_PRICE_PER_CORE_HOUR
        + resources.memory / _GIB * MEMORY_PRICE_PER_GIB_HOUR
        + resources.get(GPU_RESOURCE) * GPU_PRICE_PER_HOUR
    )


def _hours(start: datetime, end: datetime) -> float:
    return max((end - start).total_seconds(), 0.0) / 3600.0


@dataclass(frozen=True, slots=True)
class SimPricing:
    """`PricingModel` of the `sim` provider. `group_prices` maps group name to node-hour
    price; `group_of` names a node's group (the provider's ownership rules), by default its
    `group_label`."""

    group_prices: Mapping[str, float] = field(default_factory=dict)
    group_label: str = "clusterscaler.io/node-group"
    group_of: Callable[[Node], str | None] | None = None

    def node_price_per_hour(self, node: Node) -> float:
        group = self.group_of(node) if self.group_of is not None else node.labels.get(self.group_label)
        if group is not None and group in self.group_prices:
            return self.group_prices[group]
        return resource_price_per_hour(node.capacity)

    def node_price(self, node: Node, start: datetime, end: datetime) -> float:
        return self.node_price_per_hour(node) * _hours(start, end)

    def pod_price(self, pod: Pod, start: datetime, end: datetime) -> float:
        return resource_price_per_hour(pod.requests) * _hours(start, end)
