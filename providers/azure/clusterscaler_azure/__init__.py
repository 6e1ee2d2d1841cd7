"""clusterscaler-azure: the `azure` cloud provider (Virtual Machine Scale Sets through
azure-mgmt-compute)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterscaler_azure.provider import AzureCloudProvider, AzureNodeGroup

PROVIDER_NAME = "azure"

__all__ = ["PROVIDER_NAME", "AzureCloudProvider", "AzureNodeGroup"]


def __getattr__(name: str) -> Any:
    # The plugin module, loaded for every command, imports this package: the provider's
    # modules are imported when the provider is first used.
    if name in ("AzureCloudProvider", "AzureNodeGroup"):
        from clusterscaler_azure import provider

        return getattr(provider, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
