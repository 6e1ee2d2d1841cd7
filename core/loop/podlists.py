"""The pod-list processors of the loop: built from the registry, run before scale-up.

`build_pod_list_processors` makes every registered processor and sorts them by `order`,
then name (see `PodListProcessor`); `process_pod_list` hands each the pods the one before
returned, starting with the pods of the cluster waiting for a node.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.podlistprocessor import PodListContext, PodListProcessor
from clusterscaler.interfaces.registry import Registry, build_in_order
from clusterscaler.model import Pod

__all__ = ["build_pod_list_processors", "process_pod_list", "waiting_for_a_node"]


def build_pod_list_processors(
    registry: Registry, options: AutoscalingOptions
) -> list[PodListProcessor]:
    """Instantiate every registered pod-list processor, sorted by `order` then name."""
    return build_in_order(
        "pod-list processor",
        registry.pod_list_processors,
        options,
        PodListProcessor,
        "an object with name, order and process(pods, context)",
    )


def waiting_for_a_node(pods: Sequence[Pod]) -> list[Pod]:
    """The pods not bound to a node and not finished, in the cluster's order."""
    return [p for p in pods if not p.node_name and not p.is_terminal]


def process_pod_list(
    processors: Sequence[PodListProcessor], pods: Sequence[Pod], context: PodListContext
) -> list[Pod]:
    """What the processors, one after the other, make of `pods`."""
    out = list(pods)
    for processor in processors:
        out = processor.process(out, context)
    return out
