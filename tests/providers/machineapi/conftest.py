from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.testing.fakekube import (
    FakeKubeServer,
    cluster_api_resources,
    openshift_machine_api_resources,
)
from clusterscaler_machineapi.plugin import build_provider
from clusterscaler_machineapi.provider import MachineApiCloudProvider


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    """A fake API server serving both the OpenShift Machine API and Cluster API."""
    resources = [*openshift_machine_api_resources(), *cluster_api_resources()]
    with FakeKubeServer(resources=resources) as server:
        yield server


@pytest.fixture
def api_client(kube: FakeKubeServer) -> Iterator[Any]:
    client = kube.api_client()
    try:
        yield client
    finally:
        client.close()


ProviderFactory = Callable[..., MachineApiCloudProvider]


@pytest.fixture
def make_provider(api_client: Any) -> Iterator[ProviderFactory]:
    """Build the provider as `--cloud-provider=machineapi` does, with the given flags.

    `watch=False` (the default here) lists on every refresh, so a test sees its own
    changes at once; `watch=True` uses the list+watch caches, as in production.
    """
    built: list[MachineApiCloudProvider] = []

    def make(
        discovery: list[str] | None = None,
        environ: dict[str, str] | None = None,
        *,
        watch: bool = False,
    ) -> MachineApiCloudProvider:
        options = dataclasses.replace(
            AutoscalingOptions(), node_group_auto_discovery=list(discovery or [])
        )
        provider = build_provider(
            ProviderContext(options=options, kube_api=api_client),
            environ=environ or {},
            watch=watch,
            sync_timeout=5,
        )
        built.append(provider)
        return provider

    yield make
    for provider in built:
        provider.cleanup()
