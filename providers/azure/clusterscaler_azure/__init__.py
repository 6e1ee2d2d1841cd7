"""clusterscaler-azure: the `azure` cloud provider (Virtual Machine Scale Sets through
azure-mgmt-compute).

The entry module is `clusterscaler_azure.plugin`; the provider itself is
`clusterscaler_azure.provider.AzureCloudProvider`. Importing this package does not import
the Azure SDK, so that commands which never build an `azure` provider stay fast.
"""

from __future__ import annotations

PROVIDER_NAME = "azure"

__all__ = ["PROVIDER_NAME"]
