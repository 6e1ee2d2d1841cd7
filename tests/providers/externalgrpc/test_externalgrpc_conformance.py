"""The externalgrpc provider keeps the CloudProvider contract, against a provider service
of ours over gRPC: new instances stay Creating until the service is told otherwise, so
requested capacity can be cancelled, and a group out of capacity lists its new instances
with an out-of-resources error."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.api import CloudProvider
from clusterscaler.simulator.builders import make_node
from clusterscaler.testing.conformance import CloudProviderConformance, ConformanceCloud
from externalgrpc_fakes import FakeService


class ExternalGrpcCloud(ConformanceCloud):
    def __init__(self, service: FakeService, make_provider: Any) -> None:
        self._service = service
        self._make = make_provider

    def add_group(self, name: str, *, min_size: int, max_size: int, size: int) -> None:
        template = make_node(f"{name}-template", cpu="4", memory="16Gi")
        with self._service.lock:
            self._service.add_group(name, min_size, max_size, template=template, target=size)

    def build(self) -> CloudProvider:
        provider: CloudProvider = self._make()
        provider.refresh()
        return provider

    def group_id(self, name: str) -> str:
        return name

    def hold_creation(self, name: str) -> bool:
        # The service's new instances stay Creating until a test registers them.
        return True

    def stockout(self, name: str) -> bool:
        with self._service.lock:
            self._service.stockouts.add(name)
        return True


class TestExternalGrpcConformance(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, service: FakeService, make_provider: Any) -> ExternalGrpcCloud:
        return ExternalGrpcCloud(service, make_provider)
