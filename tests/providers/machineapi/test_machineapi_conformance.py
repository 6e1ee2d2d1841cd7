"""The machineapi provider keeps the CloudProvider contract, against the fake API server
with a MachineSet controller: OpenShift MachineSets with their limits and capacity in
annotations; requested capacity is Machines still provisioning."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.api import CloudProvider
from clusterscaler.testing.conformance import CloudProviderConformance, ConformanceCloud
from clusterscaler.testing.fakekube import FakeKubeServer
from machineapi_builders import OPENSHIFT, OPENSHIFT_NS, MachineController, limits, scalable

CAPACITY = {f"{OPENSHIFT}/vCPU": "4", f"{OPENSHIFT}/memoryMb": "16384"}


class MachineApiCloud(ConformanceCloud):
    def __init__(self, kube: FakeKubeServer, make_provider: Any) -> None:
        self._kube = kube
        self._make = make_provider
        self._controller = MachineController(kube)
        self._held = False

    def add_group(self, name: str, *, min_size: int, max_size: int, size: int) -> None:
        annotations = {**limits(OPENSHIFT, min_size, max_size), **CAPACITY}
        self._kube.create(scalable(name, replicas=size, annotations=annotations))
        self._controller.reconcile()

    def build(self) -> CloudProvider:
        provider: CloudProvider = self._make()
        return provider

    def group_id(self, name: str) -> str:
        return f"MachineSet/{OPENSHIFT_NS}/{name}"

    def refresh(self, provider: CloudProvider) -> None:
        # The controllers act on what the provider asked for before the next loop reads.
        self._controller.reconcile(register_nodes=not self._held)
        provider.refresh()

    def hold_creation(self, name: str) -> bool:
        # New Machines stay provisioning: no providerID, no Node.
        self._held = True
        return True


class TestMachineApiConformance(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, kube: FakeKubeServer, make_provider: Any) -> MachineApiCloud:
        return MachineApiCloud(kube, make_provider)
