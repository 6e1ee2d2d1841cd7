"""`price`: the cheapest way to run the pods, nudged towards a node size that suits the
cluster's size.

For each option (prices over the next hour):
  price_ratio = (node price x node count + stabilisation) / (sum of pod prices + stabilisation)
  unfitness   = max(preferred cpu / node cpu, node cpu / preferred cpu)
  suppressed  = (unfitness - 1) x (1 - tanh((node count - 1) / 15)) + 1   (1000 for GPU nodes)
  score       = suppressed x price_ratio, doubled when the group does not exist yet
The stabilisation price is that of a 500m / 500Mi pod, so options scheduling pods without
requests still compare sensibly. Lowest score wins; ties are kept. Needs the cloud
provider's pricing model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

import structlog
from clusterscaler.api import (
    GPU_RESOURCE,
    POD_SLOT,
    AutoscalingOptions,
    ExpanderContext,
    Node,
    Option,
    Pod,
    Resources,
    debug_with,
)

log = structlog.get_logger()

MI = 1 << 20
# (largest cluster size, preferred cpu in millis, preferred memory in bytes)
PREFERRED_NODES: tuple[tuple[int, int, int], ...] = (
    (2, 1000, 3750 * MI),
    (6, 2000, 7500 * MI),
    (20, 4000, 15000 * MI),
    (60, 8000, 30000 * MI),
    (200, 16000, 60000 * MI),
)
LARGEST_PREFERRED = (32000, 120000 * MI)
NOT_EXIST_COEFFICIENT = 2.0
GPU_UNFITNESS = 1000.0

STABILIZATION_POD = Pod(
    namespace="default",
    name="stabilization",
    requests=Resources(cpu=500, memory=500 * MI) + POD_SLOT,
)


def preferred_node(cluster_size: int) -> Node:
    """The node shape the cluster's size calls for."""
    cpu, memory = LARGEST_PREFERRED
    for limit, pref_cpu, pref_memory in PREFERRED_NODES:
        if cluster_size <= limit:
            cpu, memory = pref_cpu, pref_memory
            break
    shape = Resources(cpu=cpu, memory=memory)
    return Node(name="preferred", capacity=shape, allocatable=shape)


def node_unfitness(preferred: Node, evaluated: Node) -> float:
    """How far the evaluated node's cpu is from the preferred size, as a ratio >= 1."""
    pref = preferred.capacity.cpu
    ev = evaluated.capacity.cpu
    if pref <= 0 or ev <= 0:
        return GPU_UNFITNESS
    return max(pref / ev, ev / pref)


def has_gpu(node: Node, gpu_label: str) -> bool:
    if gpu_label and gpu_label in node.labels:
        return True
    return node.capacity.extended.get(GPU_RESOURCE, 0) > 0


class PriceExpander:
    name = "price"
    requires_pricing = True

    def __init__(self, options: AutoscalingOptions | None = None) -> None:
        pass

    def best_options(self, options: Sequence[Option], context: ExpanderContext) -> list[Option]:
        pricing = context.pricing
        if pricing is None:
            context.warn(
                self.name,
                "PricingNotAvailable",
                "price expander: the cloud provider has no pricing model; options left unchanged",
            )
            return list(options)
        start = context.now
        end = start + timedelta(hours=1)
        preferred = preferred_node(context.cluster_node_count)
        try:
            stabilization = pricing.pod_price(STABILIZATION_POD, start, end)
        except Exception as exc:  # a provider's pricing failure must not stop scale-up
            log.warning("price_stabilization_failed", error=str(exc))
            stabilization = 0.0
        scored: list[tuple[float, Option]] = []
        for option in options:
            template = option.template
            if template is None:
                log.warning("price_skipped", node_group=option.node_group.id, reason="no template")
                continue
            try:
                node_price = pricing.node_price(template.node, start, end)
                pod_price = sum(pricing.pod_price(p, start, end) for p in option.pods)
            except Exception as exc:
                log.warning("price_skipped", node_group=option.node_group.id, error=str(exc))
                continue
            total_node = node_price * option.node_count
            denominator = pod_price + stabilization
            numerator = total_node + stabilization
            if denominator > 0:
                ratio = numerator / denominator
            else:
                ratio = math.inf if numerator > 0 else 1.0
            unfit = node_unfitness(preferred, template.node)
            suppressed = (unfit - 1.0) * (1.0 - math.tanh((option.node_count - 1) / 15.0)) + 1.0
            if has_gpu(template.node, context.gpu_label):
                suppressed = GPU_UNFITNESS
            score = suppressed * ratio
            if not option.node_group.exist():
                score *= NOT_EXIST_COEFFICIENT
            debug = (
                f"price-expander: all_nodes_price={total_node:f} pods_price={pod_price:f} "
                f"stabilized_ratio={ratio:f} unfitness={unfit:f} suppressed={suppressed:f} "
                f"final_score={score:f}"
            )
            scored.append((score, debug_with(option, debug)))
        if not scored:
            return list(options)
        best = min(s for s, _ in scored)
        return [o for s, o in scored if s == best]
