"""The names the gce provider's tests share: the fake project, zone and region the fake
Compute API serves, and the type of the `make_provider` fixture (`conftest.py`).

Imported by module name (`from gcekit import ...`): pytest puts this folder on `sys.path`,
and a name no other test folder uses resolves to this file whatever folders one run collects,
which `from conftest import ...` did not."""

from __future__ import annotations

from collections.abc import Callable

from clusterscaler_gce.provider import GceCloudProvider

PROJECT = "test-project"
ZONE = "us-central1-b"
REGION = "us-central1"

ProviderFactory = Callable[..., GceCloudProvider]
