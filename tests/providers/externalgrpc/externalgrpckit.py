"""The names the externalgrpc provider's tests share: the type of the `make_provider`
fixture (`conftest.py`) and the cloud-config file a provider is built from.

Imported by module name (`from externalgrpckit import ...`): pytest puts this folder on
`sys.path`, and a name no other test folder uses resolves to this file whatever folders one
run collects, which `from conftest import ...` did not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from clusterscaler_externalgrpc.provider import ExternalGrpcCloudProvider

ProviderFactory = Callable[..., ExternalGrpcCloudProvider]


def write_config(tmp_path: Path, config: dict[str, Any]) -> str:
    """`config` written as the YAML cloud-config file in `tmp_path`; its path."""
    path = tmp_path / "cloud-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)
