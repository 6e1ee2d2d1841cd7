"""The clusterscaler plugin of `clusterscaler-machineapi`: the `machineapi` cloud provider."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.api import (
    BoolFlag,
    CloudProviderError,
    ConfigurationError,
    ProviderContext,
    cloud_provider_hook,
    hookimpl,
)

from clusterscaler_machineapi import PROVIDER_ALIASES, PROVIDER_NAME
from clusterscaler_machineapi.apigroups import (
    CAPI_GROUP,
    CAPI_GROUP_ENV,
    CAPI_VERSION_ENV,
    CLUSTER,
    DEFAULT_ARCH,
    DEFAULT_ARCH_ENV,
    KNOWN_ARCHES,
    MACHINE_DEPLOYMENT,
    MACHINE_POOL,
    OPENSHIFT_GROUP,
    PLURALS,
    ApiGroup,
)
from clusterscaler_machineapi.discovery import DiscoverySpec, parse_discovery_specs

if TYPE_CHECKING:
    # The provider's modules are imported when it is built: this module is loaded for
    # every command, whatever --cloud-provider says.
    from clusterscaler.api import AutoscalingOptions

    from clusterscaler_machineapi.kubeapi import KubeApi
    from clusterscaler_machineapi.listings import ListingSource
    from clusterscaler_machineapi.provider import MachineApiCloudProvider

log = structlog.get_logger()

# How long the factory waits for the first list of every watched resource.
CACHE_SYNC_TIMEOUT = 120.0

AUTHORITATIVE = BoolFlag(
    "--clusterapi-cloud-config-authoritative",
    "Treat the cloud-config flag authoritatively (do not fall back to the "
    "kubeconfig flag): without --cloud-config the Machine API objects are read from the "
    "in-cluster configuration. ClusterAPI only.",
)


@hookimpl
def clusterscaler_add_options(parser: argparse.ArgumentParser) -> None:
    AUTHORITATIVE.add_to(parser)


def discovery_from_options(options: AutoscalingOptions) -> list[DiscoverySpec]:
    """The `--node-group-auto-discovery` specs, parsed."""
    return parse_discovery_specs(options.node_group_auto_discovery)


def management_kubeconfig(options: AutoscalingOptions) -> str | None:
    """Where the Machine API objects are read from, as upstream's clusterapi provider does.

    `--cloud-config` is the kubeconfig of the management cluster. Without it the objects
    live in the cluster of `--kubeconfig` (None: the autoscaler's own connection), unless
    `--clusterapi-cloud-config-authoritative` says not to fall back to it: then the
    in-cluster configuration is the management cluster's ("": no kubeconfig file).
    Raises `ConfigurationError` when `--cloud-config` names no readable file.
    """
    path = options.cloud_config.strip()
    if path:
        if not os.path.isfile(path):
            raise ConfigurationError(
                f"--cloud-config={options.cloud_config!r}: expected the path of the "
                "management cluster's kubeconfig file; no such file"
            )
        return path
    if AUTHORITATIVE.value(options) and (
        options.kubeconfig or options.kubernetes
    ):
        return ""
    return None


def check_options(options: AutoscalingOptions) -> None:
    """The `check_options` of the `machineapi` provider: discovery specs and the
    management cluster's kubeconfig. The rest of its configuration (API groups,
    annotations) is read from the cluster."""
    discovery_from_options(options)
    management_kubeconfig(options)


def management_client(options: AutoscalingOptions) -> Any:
    """A client of the management cluster, or None to use the autoscaler's own."""
    kubeconfig = management_kubeconfig(options)
    if kubeconfig is None:
        return None
    from clusterscaler.api import KubeClientSettings, build_kube_api_client

    settings = KubeClientSettings(
        kubeconfig=kubeconfig,
        qps=float(options.kube_client_qps),
        burst=int(options.kube_client_burst),
        user_agent=options.user_agent,
    )
    try:
        return build_kube_api_client(settings)
    except Exception as exc:
        # The client's KubeConfigError, and whatever the kubeconfig loader lets through
        # (a YAML syntax error surfaces as the parser's own exception).
        where = f"--cloud-config={kubeconfig!r}" if kubeconfig else AUTHORITATIVE.flag
        raise ConfigurationError(
            f"{where}: the management cluster's configuration cannot be loaded: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def default_arch(environ: Mapping[str, str] | None = None) -> str:
    """The architecture of template nodes whose infrastructure template does not say.

    `CAPI_SCALE_ZERO_DEFAULT_ARCH`, as upstream; amd64 when unset. An unknown value is
    refused rather than replaced by amd64, which would build nodes no pod of a single-arch
    cluster fits.
    """
    env = os.environ if environ is None else environ
    value = env.get(DEFAULT_ARCH_ENV, "").strip()
    if not value:
        return DEFAULT_ARCH
    if value not in KNOWN_ARCHES:
        raise ConfigurationError(
            f"{DEFAULT_ARCH_ENV}={value!r}: expected one of {', '.join(KNOWN_ARCHES)}"
        )
    return value


def resolve_api_groups(api: KubeApi, environ: Mapping[str, str] | None = None) -> list[ApiGroup]:
    """The Machine API groups served by the cluster, each at its version.

    `CAPI_GROUP` names the one group to use; otherwise every served group among
    `cluster.x-k8s.io` and `machine.openshift.io` is used. `CAPI_VERSION` overrides the
    version discovery prefers.
    """
    from clusterscaler_machineapi.kubeapi import KubeApiError

    env = os.environ if environ is None else environ
    override = env.get(CAPI_GROUP_ENV, "").strip()
    wanted = [override] if override else [CAPI_GROUP, OPENSHIFT_GROUP]
    version_override = env.get(CAPI_VERSION_ENV, "").strip()
    served_groups = api.preferred_versions()
    out = []
    for group in wanted:
        version = served_groups.get(group)
        if version is None:
            continue
        if version_override:
            version = version_override
        try:
            served = api.served_resources(group, version)
        except KubeApiError as exc:
            if exc.status != 404:
                raise
            served = set()
        needed = [PLURALS["Machine"], PLURALS["MachineSet"], f"{PLURALS['MachineSet']}/scale"]
        missing = [name for name in needed if name not in served]
        if missing:
            raise ConfigurationError(
                f"machineapi provider: API group {group}/{version} does not serve "
                f"{', '.join(missing)}; set {CAPI_VERSION_ENV} to a version that does"
            )
        if group != OPENSHIFT_GROUP and f"{PLURALS[MACHINE_DEPLOYMENT]}/scale" not in served:
            log.warning("machineapi_no_machinedeployments", api_version=f"{group}/{version}")
        # MachinePools are optional in Cluster API (a feature gate); used when served.
        pools = group != OPENSHIFT_GROUP and f"{PLURALS[MACHINE_POOL]}/scale" in served
        clusters = group != OPENSHIFT_GROUP and PLURALS[CLUSTER] in served
        out.append(ApiGroup(group=group, version=version, machine_pools=pools, clusters=clusters))
    if not out:
        raise ConfigurationError(
            "machineapi provider: the API server serves none of the API groups "
            f"{', '.join(wanted)}; install Cluster API or the OpenShift Machine API, or set "
            f"{CAPI_GROUP_ENV} to the group that serves MachineSets"
        )
    return out


def build_provider(
    context: ProviderContext,
    environ: Mapping[str, str] | None = None,
    *,
    watch: bool = True,
    sync_timeout: float = CACHE_SYNC_TIMEOUT,
) -> MachineApiCloudProvider:
    """The factory registered as `machineapi`: finds the API groups and lists node groups once.

    With `watch` (the default) MachineSets, MachineDeployments and Machines are kept in
    list+watch caches; without it every refresh lists them. They are read from the
    management cluster when `--cloud-config` (or `--clusterapi-cloud-config-authoritative`)
    says so, the Nodes always from the autoscaler's own connection.
    """
    if context.kube_api is None:
        raise ConfigurationError(
            "machineapi provider: needs a Kubernetes API connection (--kubeconfig or "
            "in-cluster configuration); it cannot run offline"
        )
    options = context.options
    if options.nodes:
        log.warning(
            "machineapi_nodes_flag_ignored",
            nodes=list(options.nodes),
            reason="node groups come from the min/max size annotations",
        )
    specs = discovery_from_options(options)
    arch = default_arch(environ)
    management = management_client(options)
    kube_api = management if management is not None else context.kube_api
    try:
        return _build(
            context,
            kube_api,
            specs,
            arch,
            environ,
            watch=watch,
            sync_timeout=sync_timeout,
            owned=management,
        )
    except BaseException:
        if management is not None:
            management.close()
        raise


def _build(
    context: ProviderContext,
    kube_api: Any,
    specs: list[DiscoverySpec],
    arch: str,
    environ: Mapping[str, str] | None,
    *,
    watch: bool,
    sync_timeout: float,
    owned: Any,
) -> MachineApiCloudProvider:
    from clusterscaler_machineapi.infrastructure import InfrastructureTemplates
    from clusterscaler_machineapi.kubeapi import KubeApi
    from clusterscaler_machineapi.listings import WatchedListings
    from clusterscaler_machineapi.provider import MachineApiCloudProvider

    options = context.options
    api = KubeApi(kube_api)
    try:
        apis = resolve_api_groups(api, environ)
    except ConfigurationError:
        raise
    except CloudProviderError as exc:
        raise CloudProviderError(f"machineapi provider: API discovery failed: {exc}") from exc
    source: ListingSource | None = None
    if watch:
        watched = WatchedListings(kube_api, apis, specs)
        watched.start()
        if not watched.wait_for_sync(sync_timeout):
            try:
                watched.listings()  # raises, naming the caches and their last errors
            except CloudProviderError as exc:
                watched.close()
                raise CloudProviderError(f"machineapi provider: {exc}") from exc
        source = watched
    provider = MachineApiCloudProvider(
        api,
        apis,
        specs,
        source=source,
        templates=InfrastructureTemplates(api),
        default_arch=arch,
        owned_client=owned,
    )
    try:
        provider.refresh()
    except CloudProviderError:
        provider.cleanup()
        raise
    log.info(
        "machineapi_provider_ready",
        api_versions=[a.api_version for a in apis],
        node_groups=[g.id for g in provider.node_groups()],
        discovery=list(options.node_group_auto_discovery),
        watch=watch,
        management_cluster=owned is not None,
    )
    return provider


clusterscaler_register_cloud_providers = cloud_provider_hook(
    PROVIDER_NAME,
    build_provider,
    aliases=PROVIDER_ALIASES,
    description="OpenShift MachineSets and Cluster API MachineSets/MachineDeployments/"
    "MachinePools "
    "(--node-group-auto-discovery=clusterapi:namespace=...,clusterName=...)",
    check_options=check_options,
)
