"""The azure provider keeps the CloudProvider contract, against the fake ARM: scale sets
named by `--nodes`, capacity held without VMs, a stockout told by a failed
allocation."""

from __future__ import annotations

import pytest
from azurekit import ProviderFactory
from clusterscaler.api import CloudProvider
from clusterscaler.testing.conformance import CloudProviderConformance, ConformanceCloud
from clusterscaler_azure.provider import AzureCloudProvider
from clusterscaler_azure.testing.fakearm import AllocationFailure, FakeArm


class AzureCloud(ConformanceCloud):
    def __init__(self, arm: FakeArm, make_provider: ProviderFactory) -> None:
        self._arm = arm
        self._make = make_provider
        self._specs: list[str] = []

    def add_group(self, name: str, *, min_size: int, max_size: int, size: int) -> None:
        self._arm.add_vmss(name, capacity=size)
        self._specs.append(f"{min_size}:{max_size}:{name}")

    def build(self) -> CloudProvider:
        return self._make(nodes=self._specs)

    def group_id(self, name: str) -> str:
        return name

    def refresh(self, provider: CloudProvider) -> None:
        assert isinstance(provider, AzureCloudProvider)
        assert provider.wait_for_operations(5)
        provider.cache.refresh(force=True)

    def hold_creation(self, name: str) -> bool:
        self._arm.hold_capacity(name)
        return True

    def stockout(self, name: str) -> bool:
        self._arm.fail_allocation(name, AllocationFailure(code="ZonalAllocationFailed", keep_capacity=True))
        return True


class TestAzureConformance(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, arm: FakeArm, make_provider: ProviderFactory) -> AzureCloud:
        return AzureCloud(arm, make_provider)
