"""The clusterscaler plugin of `clusterscaler-azure`: the `azure` cloud provider.

The provider has no flag of its own: like Cluster Autoscaler's, it reads `--cloud-config`
(azure.json) and the environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
from clusterscaler.api import (
    AutoscalingOptions,
    ProviderContext,
    cloud_provider_hook,
)

from clusterscaler_azure import PROVIDER_NAME
from clusterscaler_azure.config import AzureConfig, load_config
from clusterscaler_azure.specs import NODE_GROUP_FLAGS, DiscoverySpec, NodeGroupSpec

if TYPE_CHECKING:
    # The provider's modules are imported when it is built: this module is loaded for
    # every command, whatever --cloud-provider says.
    from clusterscaler_azure.provider import AzureCloudProvider
    from clusterscaler_azure.service import ClientSettings

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class AzureSettings:
    """What the `azure` provider reads from the options, parsed: no Azure call needed."""

    explicit: list[NodeGroupSpec]
    discovery: list[DiscoverySpec]
    config: AzureConfig


def settings_from_options(options: AutoscalingOptions) -> AzureSettings:
    """`--nodes`, `--node-group-auto-discovery` and `--cloud-config` (read, merged with the
    environment and validated); `ConfigurationError` naming the flag or field, the value and
    the expected form when one is wrong."""
    explicit, discovery = NODE_GROUP_FLAGS.read(options)
    return AzureSettings(
        explicit=explicit, discovery=discovery, config=load_config(options.cloud_config)
    )


def check_options(options: AutoscalingOptions) -> None:
    """The `check_options` of the `azure` provider: its options parse."""
    settings_from_options(options)


def build_provider(
    context: ProviderContext, client_settings: ClientSettings | None = None
) -> AzureCloudProvider:
    """The factory registered as `azure`: parses the options and lists the scale sets once."""
    from clusterscaler_azure.provider import AzureCloudProvider
    from clusterscaler_azure.service import ArmService
    from clusterscaler_azure.skus import SkuCatalogue
    from clusterscaler_azure.vmss_cache import VmssCache

    settings = settings_from_options(context.options)
    config = settings.config
    service = ArmService(config, client_settings)
    catalogue = SkuCatalogue(service.list_skus, dynamic=config.enable_dynamic_instance_list)
    cache = VmssCache(
        service,
        settings.explicit,
        settings.discovery,
        catalogue,
        vmss_ttl=float(config.vmss_cache_ttl_seconds),
        vms_ttl=float(config.vmss_vms_cache_ttl_seconds),
        enable_flex=config.enable_vmss_flex_nodes,
    )
    provider = AzureCloudProvider(service, cache, catalogue)
    cache.refresh(force=True)
    log.info(
        "azure_provider_ready",
        node_groups=[g.id for g in provider.node_groups()],
        **config.describe(),
    )
    return provider


clusterscaler_register_cloud_providers = cloud_provider_hook(
    PROVIDER_NAME,
    build_provider,
    description="Azure Virtual Machine Scale Sets (--nodes, "
    "--node-group-auto-discovery=label:<tag>=<value>,...)",
    check_options=check_options,
)
