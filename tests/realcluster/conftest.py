"""The `kwok_env` fixture: the kwok provider's setup on the real control plane, per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterscaler.testing.kwokenv import KwokEnv
from clusterscaler.testing.realcluster import RealCluster

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kwok"


@pytest.fixture
def kwok_env(kwok_cluster: RealCluster, tmp_path: Path) -> Iterator[KwokEnv]:
    env = KwokEnv.for_cluster(kwok_cluster, tmp_path, DEPLOY)
    try:
        yield env
    finally:
        env.stop_all()
        for process in env.runs:
            print(f"--- {process.log.name} (last lines)\n{process.tail(4000)}")
