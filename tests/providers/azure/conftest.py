"""Fixtures for the azure provider: the fake ARM server on 127.0.0.1 (one per session, reset
per test) and a provider factory built as the CLI builds it, through azure.json's
`resourceManagerEndpoint`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azurekit import FAST, ProviderFactory, azure_json
from clusterscaler.api import AutoscalingOptions, ProviderContext
from clusterscaler_azure.config import ENV_VARS
from clusterscaler_azure.plugin import build_provider
from clusterscaler_azure.provider import AzureCloudProvider
from clusterscaler_azure.testing.fakearm import FakeArm


@pytest.fixture(scope="session")
def arm_server() -> Iterator[FakeArm]:
    with FakeArm() as server:
        yield server


@pytest.fixture
def arm(arm_server: FakeArm, monkeypatch: pytest.MonkeyPatch) -> FakeArm:
    """A clean fake ARM, and an environment without Azure variables."""
    arm_server.reset()
    arm_server.retry_after = None
    for var, _ in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    return arm_server


@pytest.fixture
def make_provider(arm: FakeArm, tmp_path: Path) -> Iterator[ProviderFactory]:
    built: list[AzureCloudProvider] = []

    def make(
        *,
        nodes: list[str] | None = None,
        discovery: list[str] | None = None,
        **config: Any,
    ) -> AzureCloudProvider:
        path = tmp_path / f"azure-{len(built)}.json"
        path.write_text(json.dumps(azure_json(arm, **config)))
        options = dataclasses.replace(
            AutoscalingOptions(),
            nodes=list(nodes or []),
            node_group_auto_discovery=list(discovery or []),
            cloud_config=str(path),
        )
        provider = build_provider(ProviderContext(options=options), FAST)
        built.append(provider)
        return provider

    yield make
    for provider in built:
        provider.wait_for_operations(5)
        provider.cleanup()
