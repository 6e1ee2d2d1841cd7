"""The names the azure provider's tests share: the discovery tag, the client settings that
keep the fake ARM's polls and retries short, azure.json pointing at a fake ARM, and the type
of the `make_provider` fixture (`conftest.py`).

Imported by module name (`from azurekit import ...`): pytest puts this folder on `sys.path`,
and a name no other test folder uses resolves to this file whatever folders one run collects,
which `from conftest import ...` did not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clusterscaler_azure.provider import AzureCloudProvider
from clusterscaler_azure.service import ClientSettings
from clusterscaler_azure.testing.fakearm import FakeArm

ProviderFactory = Callable[..., AzureCloudProvider]
FAST = ClientSettings(polling_interval=0.01, retry_total=3, retry_backoff_factor=0.01,
                      retry_backoff_max=0.05, timeout=10)
ENABLED = "cluster-autoscaler-enabled"


def azure_json(arm: FakeArm, **extra: Any) -> dict[str, Any]:
    return {
        "cloud": "AzurePublicCloud",
        "tenantId": "tenant",
        "subscriptionId": arm.subscription,
        "resourceGroup": arm.resource_group,
        "location": arm.location,
        "vmType": "vmss",
        "resourceManagerEndpoint": arm.url,
        **extra,
    }
