"""Standard expanders: random, most-pods, least-waste, least-nodes, price, priority, grpc."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterscaler.api import hookimpl
from clusterscaler.plugins.expanders import grpc_plugin
from clusterscaler.plugins.expanders.grpc_plugin import GrpcExpander
from clusterscaler.plugins.expanders.least_nodes import LeastNodesExpander
from clusterscaler.plugins.expanders.least_waste import LeastWasteExpander
from clusterscaler.plugins.expanders.most_pods import MostPodsExpander
from clusterscaler.plugins.expanders.price import PriceExpander
from clusterscaler.plugins.expanders.priority import PriorityExpander
from clusterscaler.plugins.expanders.random import RandomExpander

if TYPE_CHECKING:
    from clusterscaler.api import Registry

__all__ = [
    "GrpcExpander",
    "LeastNodesExpander",
    "LeastWasteExpander",
    "MostPodsExpander",
    "PriceExpander",
    "PriorityExpander",
    "RandomExpander",
    "clusterscaler_register_expanders",
]


@hookimpl
def clusterscaler_register_expanders(registry: Registry) -> None:
    registry.add_expander(
        "random", RandomExpander, final_only=True, description="Pick one option at random."
    )
    registry.add_expander(
        "most-pods", MostPodsExpander, description="Options that schedule the most pods."
    )
    registry.add_expander(
        "least-waste",
        LeastWasteExpander,
        description="Options leaving the least idle CPU and memory on the new nodes.",
    )
    registry.add_expander(
        "least-nodes", LeastNodesExpander, description="Options that add the fewest nodes."
    )
    registry.add_expander(
        "price",
        PriceExpander,
        description="Cheapest option, nudged towards a node size suiting the cluster size.",
    )
    registry.add_expander(
        "priority",
        PriorityExpander,
        description="User priorities by node group name from the priority expander ConfigMap.",
    )
    registry.add_expander(
        "grpc",
        GrpcExpander,
        description="Options an external service keeps, over Cluster Autoscaler's gRPC "
        "expander protocol (--grpc-expander-url, --grpc-expander-cert).",
        check_options=grpc_plugin.check_options,
    )
