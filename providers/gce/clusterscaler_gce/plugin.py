"""The clusterscaler plugin of `clusterscaler-gce`: the `gce` cloud provider and its flags.

This module is loaded for every command (`clusterscaler plugins`, `simulate`, ...), so it
imports nothing of the Google SDK: the provider and its clients are imported when a `gce`
provider is built.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import structlog
from clusterscaler.api import (
    DURATION_FORM,
    AutoscalingOptions,
    ConfigurationError,
    ProviderContext,
    cloud_provider_hook,
    hookimpl,
    parse_duration,
)

from clusterscaler_gce import PROVIDER_NAME
from clusterscaler_gce.cloud_config import (
    CloudConfig,
    Location,
    load_cloud_config,
    resolve_location,
)
from clusterscaler_gce.specs import NODE_GROUP_FLAGS, DiscoverySpec, NodeGroupSpec

if TYPE_CHECKING:
    from clusterscaler_gce.provider import GceCloudProvider

log = structlog.get_logger()

CONCURRENT_REFRESHES_FLAG = "--gce-concurrent-refreshes"
CONCURRENT_REFRESHES_DEST = "gce_concurrent_refreshes"
MIN_REFRESH_WAIT_FLAG = "--gce-mig-instances-min-refresh-wait-time"
MIN_REFRESH_WAIT_DEST = "gce_mig_instances_min_refresh_wait_time"
DEFAULT_CONCURRENT_REFRESHES = 1
DEFAULT_MIN_REFRESH_WAIT = timedelta(seconds=5)


def _positive_int(value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{CONCURRENT_REFRESHES_FLAG}={value!r}: expected a positive integer")
    return number


def _duration(value: str) -> timedelta:
    try:
        return parse_duration(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{MIN_REFRESH_WAIT_FLAG}={value!r}: expected {DURATION_FORM}") from None


@hookimpl
def clusterscaler_add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        CONCURRENT_REFRESHES_FLAG,
        dest=CONCURRENT_REFRESHES_DEST,
        type=_positive_int,
        default=DEFAULT_CONCURRENT_REFRESHES,
        metavar="int",
        help="Maximum number of concurrent refreshes per cloud object type. GCE only (default 1).",
    )
    parser.add_argument(
        MIN_REFRESH_WAIT_FLAG,
        dest=MIN_REFRESH_WAIT_DEST,
        type=_duration,
        default=DEFAULT_MIN_REFRESH_WAIT,
        metavar="duration",
        help="The minimum time which needs to pass before GCE MIG instances from a given MIG "
        "can be refreshed. GCE only (default 5s).",
    )


@dataclass(frozen=True, slots=True)
class GceSettings:
    """What the `gce` provider reads from the options, parsed: no GCE call needed."""

    explicit: list[NodeGroupSpec]
    discovery: list[DiscoverySpec]
    cloud_config: CloudConfig
    concurrent_refreshes: int
    instances_min_wait: timedelta


def settings_from_options(options: AutoscalingOptions) -> GceSettings:
    """`--nodes`, `--node-group-auto-discovery`, `--cloud-config` (read and parsed) and the
    GCE flags; `ConfigurationError` naming the flag, the value and the expected form."""
    explicit, discovery = NODE_GROUP_FLAGS.read(options)
    extra = options.extra
    concurrent = extra.get(CONCURRENT_REFRESHES_DEST, DEFAULT_CONCURRENT_REFRESHES)
    wait = extra.get(MIN_REFRESH_WAIT_DEST, DEFAULT_MIN_REFRESH_WAIT)
    if not isinstance(concurrent, int) or concurrent < 1:
        raise ConfigurationError(f"{CONCURRENT_REFRESHES_FLAG}={concurrent!r}: expected a positive integer")
    if not isinstance(wait, timedelta):
        raise ConfigurationError(f"{MIN_REFRESH_WAIT_FLAG}={wait!r}: expected {DURATION_FORM}")
    config = load_cloud_config(options.cloud_config)
    if getattr(options, "regional", False) and not config.regional:
        # `--regional` (as upstream) and `regional = true` in gce.conf mean the same.
        config = dataclasses.replace(config, regional=True)
    return GceSettings(
        explicit=explicit,
        discovery=discovery,
        cloud_config=config,
        concurrent_refreshes=concurrent,
        instances_min_wait=wait,
    )


def check_options(options: AutoscalingOptions) -> None:
    """The `check_options` of the `gce` provider: its options parse (no network)."""
    settings_from_options(options)


def build_provider(context: ProviderContext) -> GceCloudProvider:
    """The factory registered as `gce`: parses the flags, builds the Compute clients and reads
    the MIGs once."""
    from clusterscaler_gce.compute import ComputeService
    from clusterscaler_gce.mig_cache import MigCache
    from clusterscaler_gce.provider import GceCloudProvider

    settings = settings_from_options(context.options)
    config = settings.cloud_config
    location: list[Location] = []

    def resolve() -> Location:
        # Only discovery needs the location; `--nodes` MIGs name theirs.
        if not location:
            location.append(resolve_location(config))
        return location[0]

    if settings.discovery:
        resolve()
    service = ComputeService(config)
    cache = MigCache(
        service,
        settings.explicit,
        settings.discovery,
        resolve,
        concurrency=settings.concurrent_refreshes,
        instances_min_wait=settings.instances_min_wait.total_seconds(),
        multizone=config.multizone,
    )
    provider = GceCloudProvider(service, cache)
    cache.refresh(force=True)
    log.info(
        "gce_provider_ready",
        location=location[0].location if location else "",
        node_groups=[g.id for g in provider.node_groups()],
        problems=len(provider.problems()),
        api_endpoint=config.api_endpoint or "default",
    )
    return provider


clusterscaler_register_cloud_providers = cloud_provider_hook(
    PROVIDER_NAME,
    build_provider,
    description="GCE Managed Instance Groups (--nodes, --node-group-auto-discovery=mig:namePrefix=...)",
    check_options=check_options,
)
