"""clusterscaler-azure: the `azure` cloud provider (Virtual Machine Scale Sets through
azure-mgmt-compute)."""

from __future__ import annotations

from clusterscaler_azure.provider import PROVIDER_NAME, AzureCloudProvider, AzureNodeGroup

__all__ = ["PROVIDER_NAME", "AzureCloudProvider", "AzureNodeGroup"]
