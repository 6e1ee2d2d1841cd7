"""The names the gce provider's tests share: the fake project, zone and region the fake
Compute API serves, the type of the `make_provider` fixture (`conftest.py`), and the Node
kubelet registers for a GKE instance.

Imported by module name (`from gcekit import ...`): pytest puts this folder on `sys.path`,
and a name no other test folder uses resolves to this file whatever folders one run collects,
which `from conftest import ...` did not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clusterscaler.testing.kubeobjects import CREATED, node_json
from clusterscaler_gce.provider import GceCloudProvider

PROJECT = "test-project"
ZONE = "us-central1-b"
REGION = "us-central1"

ProviderFactory = Callable[..., GceCloudProvider]


def gke_node(
    provider_id: str, *, zone: str = ZONE, pool: str = "pool", created: str = CREATED
) -> dict[str, Any]:
    """The Node kubelet registers for an n1-standard-4 instance `provider_id` of the GKE
    node pool `pool`, named after the instance."""
    return node_json(
        provider_id.rsplit("/", 1)[-1],
        provider_id=provider_id,
        labels={"cloud.google.com/gke-nodepool": pool,
                "node.kubernetes.io/instance-type": "n1-standard-4",
                "topology.kubernetes.io/zone": zone},
        allocatable={"cpu": "3920m", "memory": "13Gi", "pods": "110"},
        created=created,
    )  # fmt: skip
