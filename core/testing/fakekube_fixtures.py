"""pytest fixtures for the fake Kubernetes API server (registered by the clusterscaler plugin)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .fakekube import FakeKubeServer

__all__ = ["fake_kube", "fake_kube_client"]


@pytest.fixture
def fake_kube() -> Iterator[FakeKubeServer]:
    """A started FakeKubeServer on 127.0.0.1, stopped after the test."""
    with FakeKubeServer() as server:
        yield server


@pytest.fixture
def fake_kube_client(fake_kube: FakeKubeServer) -> Iterator[Any]:
    """An official ``kubernetes.client.ApiClient`` talking to ``fake_kube``."""
    client = fake_kube.api_client()
    try:
        yield client
    finally:
        client.close()
