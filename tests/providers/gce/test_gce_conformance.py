"""The gce provider keeps the CloudProvider contract, against the fake Compute API: MIGs
named by `--nodes`, a stockout told by the instances' creation errors."""

from __future__ import annotations

import pytest
from clusterscaler.api import CloudProvider
from clusterscaler.testing.conformance import CloudProviderConformance, ConformanceCloud
from clusterscaler_gce.provider import GceCloudProvider
from clusterscaler_gce.testing.fakecompute import FakeComputeServer
from gcekit import PROJECT, ZONE, ProviderFactory

URL = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/instanceGroups/"


class GceCloud(ConformanceCloud):
    def __init__(self, gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
        self._gce = gce
        self._make = make_provider
        self._specs: list[str] = []
        gce.add_template(PROJECT, "tpl")

    def add_group(self, name: str, *, min_size: int, max_size: int, size: int) -> None:
        self._gce.add_mig(PROJECT, ZONE, name, template="tpl", size=size)
        self._specs.append(f"{min_size}:{max_size}:{PROJECT}/{ZONE}/{name}")

    def build(self) -> CloudProvider:
        return self._make(nodes=self._specs)

    def group_id(self, name: str) -> str:
        return URL + name

    def refresh(self, provider: CloudProvider) -> None:
        assert isinstance(provider, GceCloudProvider)
        provider.cache.refresh(force=True)

    def hold_creation(self, name: str) -> bool:
        self._gce.hold(PROJECT, ZONE, name)
        return True

    def stockout(self, name: str) -> bool:
        self._gce.stockout(PROJECT, ZONE, name)
        return True


class TestGceConformance(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, gce: FakeComputeServer, make_provider: ProviderFactory) -> GceCloud:
        return GceCloud(gce, make_provider)
