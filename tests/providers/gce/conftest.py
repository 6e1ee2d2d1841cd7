"""Fixtures for the gce provider: the fake Compute API on 127.0.0.1 (one per session, reset
per test), a gce.conf pointing at it, and a provider factory built as the CLI builds it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from clusterscaler.api import AutoscalingOptions, ProviderContext
from clusterscaler_gce.plugin import build_provider
from clusterscaler_gce.provider import GceCloudProvider
from clusterscaler_gce.testing.fakecompute import FakeComputeServer
from gcekit import PROJECT, ZONE, ProviderFactory


@pytest.fixture(scope="session")
def gce_server() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(metadata_project=PROJECT, metadata_zone=ZONE) as server:
        yield server


@pytest.fixture
def gce(gce_server: FakeComputeServer) -> FakeComputeServer:
    gce_server.reset()
    return gce_server


@pytest.fixture
def cloud_config(gce: FakeComputeServer, tmp_path: Path) -> Path:
    path = tmp_path / "gce.conf"
    path.write_text(
        f"[global]\nproject-id = {PROJECT}\nlocal-zone = {ZONE}\napi-endpoint = {gce.endpoint}\n"
    )
    return path


@pytest.fixture
def make_provider(gce: FakeComputeServer, cloud_config: Path) -> Iterator[ProviderFactory]:
    built: list[GceCloudProvider] = []

    def make(
        *,
        nodes: list[str] | None = None,
        discovery: list[str] | None = None,
        config: Path | None = None,
        concurrent: int = 1,
        min_wait: timedelta = timedelta(0),
    ) -> GceCloudProvider:
        options = dataclasses.replace(
            AutoscalingOptions(),
            nodes=list(nodes or []),
            node_group_auto_discovery=list(discovery or []),
            cloud_config=str(config or cloud_config),
            extra={
                "gce_concurrent_refreshes": concurrent,
                "gce_mig_instances_min_refresh_wait_time": min_wait,
            },
        )
        provider = build_provider(ProviderContext(options=options))
        built.append(provider)
        return provider

    yield make
    for provider in built:
        provider.cleanup()
