"""clusterscaler-aws: the `aws` cloud provider (EC2 Auto Scaling groups through boto3)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterscaler_aws.provider import AwsCloudProvider, AwsNodeGroup

PROVIDER_NAME = "aws"

__all__ = ["PROVIDER_NAME", "AwsCloudProvider", "AwsNodeGroup"]


def __getattr__(name: str) -> Any:
    # The plugin module, loaded for every command, imports this package: the provider's
    # modules are imported when the provider is first used.
    if name in ("AwsCloudProvider", "AwsNodeGroup"):
        from clusterscaler_aws import provider

        return getattr(provider, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
