"""The clusterscaler plugin of `clusterscaler-externalgrpc`: the `externalgrpc` cloud
provider, configured by the cloud-config file of `--cloud-config` (see `config`).

The channel connects lazily: a service that is down at start-up fails the first loop's
`Refresh`, and the loop retries at the next one, as upstream's client does. grpc and
protobuf are imported when the provider is built, so that loading the plugin (for any other
`--cloud-provider`) does not load them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
from clusterscaler.api import ProviderContext, cloud_provider_hook, ignored_node_group_flags

from clusterscaler_externalgrpc import PROVIDER_NAME
from clusterscaler_externalgrpc.config import load_config

if TYPE_CHECKING:
    from clusterscaler.api import AutoscalingOptions

    from clusterscaler_externalgrpc.provider import ExternalGrpcCloudProvider

log = structlog.get_logger()


def check_options(options: AutoscalingOptions) -> None:
    """The `check_options` of the `externalgrpc` provider: `--cloud-config` names a
    readable cloud-config whose keys have their expected forms, and its TLS files load."""
    load_config(options.cloud_config)
    for flag, values in ignored_node_group_flags(options).items():
        log.warning(
            "externalgrpc_flag_ignored",
            flag=flag,
            values=values,
            reason="the externalgrpc provider's node groups are the service's",
        )


def build_provider(context: ProviderContext) -> ExternalGrpcCloudProvider:
    """The factory registered as `externalgrpc`."""
    from clusterscaler_externalgrpc.provider import provider_for

    config = load_config(context.options.cloud_config)
    provider = provider_for(config)
    log.info(
        "externalgrpc_provider_ready",
        address=config.address,
        tls=config.tls is not None,
        grpc_timeout=f"{config.timeout.total_seconds():g}s",
    )
    return provider


clusterscaler_register_cloud_providers = cloud_provider_hook(
    PROVIDER_NAME,
    build_provider,
    description="node groups served by a gRPC service speaking Cluster Autoscaler's "
    "externalgrpc.proto (--cloud-config: address, cert, key, cacert, grpc_timeout)",
    check_options=check_options,
)
