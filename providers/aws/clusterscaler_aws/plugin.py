"""The clusterscaler plugin of `clusterscaler-aws`: the `aws` cloud provider and its flag."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
from clusterscaler.api import (
    BoolFlag,
    ProviderContext,
    cloud_provider_hook,
    hookimpl,
)

from clusterscaler_aws import PROVIDER_NAME
from clusterscaler_aws.cloud_config import CloudConfig, load_cloud_config, resolve_region
from clusterscaler_aws.specs import NODE_GROUP_FLAGS, DiscoverySpec, NodeGroupSpec

if TYPE_CHECKING:
    # The provider's modules are imported when it is built: this module is loaded for
    # every command, whatever --cloud-provider says.
    from clusterscaler.api import AutoscalingOptions

    from clusterscaler_aws.provider import AwsCloudProvider

log = structlog.get_logger()

STATIC_LIST = BoolFlag(
    "--aws-use-static-instance-list",
    "Should CA fetch instance types in runtime or use a static list. AWS only "
    "(default false: ask DescribeInstanceTypes, with the bundled list as fallback).",
)


@hookimpl
def clusterscaler_add_options(parser: argparse.ArgumentParser) -> None:
    STATIC_LIST.add_to(parser)


@dataclass(frozen=True, slots=True)
class AwsSettings:
    """What the `aws` provider reads from the options, parsed: no AWS call needed."""

    explicit: list[NodeGroupSpec]
    discovery: list[DiscoverySpec]
    cloud_config: CloudConfig
    region: str
    static_only: bool


def settings_from_options(options: AutoscalingOptions) -> AwsSettings:
    """`--nodes`, `--node-group-auto-discovery`, `--cloud-config` (read and parsed), the
    region and `--aws-use-static-instance-list`; `ConfigurationError` naming the flag, the
    value and the expected form when one is wrong."""
    explicit, discovery = NODE_GROUP_FLAGS.read(options)
    cloud_config = load_cloud_config(options.cloud_config)
    return AwsSettings(
        explicit=explicit,
        discovery=discovery,
        cloud_config=cloud_config,
        region=resolve_region(cloud_config),
        static_only=STATIC_LIST.value(options),
    )


def check_options(options: AutoscalingOptions) -> None:
    """The `check_options` of the `aws` provider: its options parse (see
    `settings_from_options`)."""
    settings_from_options(options)


def build_provider(context: ProviderContext) -> AwsCloudProvider:
    """The factory registered as `aws`: parses the flags and discovers the ASGs once."""
    from clusterscaler_aws.asg_cache import AsgCache
    from clusterscaler_aws.instance_types import InstanceTypeCatalogue
    from clusterscaler_aws.provider import AwsCloudProvider
    from clusterscaler_aws.service import AwsService

    settings = settings_from_options(context.options)
    service = AwsService(settings.region, settings.cloud_config)
    catalogue = InstanceTypeCatalogue(
        service.describe_instance_types, static_only=settings.static_only
    )
    cache = AsgCache(service, settings.explicit, settings.discovery)
    provider = AwsCloudProvider(service, cache, catalogue)
    cache.refresh(force=True)
    log.info(
        "aws_provider_ready",
        region=settings.region,
        node_groups=[g.id for g in provider.node_groups()],
        static_instance_list=settings.static_only,
    )
    return provider


clusterscaler_register_cloud_providers = cloud_provider_hook(
    PROVIDER_NAME,
    build_provider,
    description="AWS Auto Scaling groups (--nodes, --node-group-auto-discovery=asg:tag=...)",
    check_options=check_options,
)
