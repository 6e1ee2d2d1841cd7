"""The `sim` cloud provider: node groups from a YAML cloud-config, nodes as Node objects.

It is the embedded default (`--cloud-provider=sim`): `clusterscaler simulate` runs it
against an in-memory cluster, and `clusterscaler --cloud-provider=sim` against a real API
server, where it creates and deletes Node objects like Cluster Autoscaler's kwok provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterscaler.api import hookimpl
from clusterscaler.plugins.sim.config import (
    DEFAULT_PROVISION_DELAY,
    NODE_GROUP_LABEL,
    NodeGroupSpec,
    SimCloudConfig,
    load_cloud_config,
    parse_cloud_config,
)
from clusterscaler.plugins.sim.pricing import SimPricing
from clusterscaler.plugins.sim.provider import (
    EMBEDDED_CONFIG_KEY,
    PROVIDER_NAME,
    NodeBackend,
    SimCloudProvider,
    SimNodeGroup,
    build_provider,
    check_options,
)

if TYPE_CHECKING:
    from clusterscaler.api import Registry

__all__ = [
    "DEFAULT_PROVISION_DELAY",
    "EMBEDDED_CONFIG_KEY",
    "NODE_GROUP_LABEL",
    "PROVIDER_NAME",
    "NodeBackend",
    "NodeGroupSpec",
    "SimCloudConfig",
    "SimCloudProvider",
    "SimNodeGroup",
    "SimPricing",
    "build_provider",
    "check_options",
    "load_cloud_config",
    "parse_cloud_config",
]


@hookimpl
def clusterscaler_register_cloud_providers(registry: Registry) -> None:
    registry.add_cloud_provider(
        PROVIDER_NAME,
        build_provider,
        description="Simulated node groups from a YAML cloud-config; nodes are Node objects.",
        check_options=check_options,
    )
