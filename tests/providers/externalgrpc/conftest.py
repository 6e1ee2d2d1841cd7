"""Fixtures for the externalgrpc provider: a provider service of ours on 127.0.0.1 (see
`externalgrpc_fakes`) and a provider built as the CLI builds it, from a cloud-config file."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.api import ProviderContext
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler_externalgrpc.plugin import build_provider
from clusterscaler_externalgrpc.provider import ExternalGrpcCloudProvider
from externalgrpc_fakes import FakeService, Served, served
from externalgrpckit import ProviderFactory, write_config


@pytest.fixture
def grpc_service() -> Iterator[Served]:
    yield from served()


@pytest.fixture
def service(grpc_service: Served) -> FakeService:
    return grpc_service.service


@pytest.fixture
def make_provider(grpc_service: Served, tmp_path: Path) -> Iterator[ProviderFactory]:
    built: list[ExternalGrpcCloudProvider] = []

    def make(**config: Any) -> ExternalGrpcCloudProvider:
        config.setdefault("address", grpc_service.address)
        options = dataclasses.replace(AutoscalingOptions(), cloud_provider="externalgrpc",
                                      cloud_config=write_config(tmp_path, config))
        provider = build_provider(ProviderContext(options=options))
        built.append(provider)
        return provider

    yield make
    for provider in built:
        if provider._close is not None:
            provider._close()
