"""The clusterscaler plugin of `clusterscaler-kwok`: the `kwok` cloud provider.

At start the provider reads the `kwok-provider-config` ConfigMap (name from
`KWOK_PROVIDER_CONFIGMAP`, namespace from `POD_NAMESPACE`) and its templates, then keeps a
list+watch cache of the cluster's nodes, so a loop costs no request beyond the watch.

Its client: with `KWOK_PROVIDER_MODE=local`, the kubeconfig files of `KUBECONFIG` (or
`~/.kube/config`), as upstream, read and checked as the autoscaler's own client reads them
without `--kubeconfig`; otherwise the autoscaler's own client (in-cluster in a pod,
or `--kubeconfig`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.api import (
    CloudProviderError,
    ConfigurationError,
    ProviderContext,
    ProviderProblem,
    ResourceSlice,
    cloud_provider_hook,
    describe_value,
    ignored_node_group_flags,
)

from clusterscaler_kwok import PROVIDER_NAME
from clusterscaler_kwok.config import (
    CONFIG_KEY,
    TEMPLATES_KEY,
    KwokConfig,
    configmap_name,
    local_mode,
    parse_config,
    provider_namespace,
)
from clusterscaler_kwok.devices import template_slices
from clusterscaler_kwok.provider import KwokCloudProvider, Raw
from clusterscaler_kwok.templates import GroupTemplate, build_groups, parse_templates

if TYPE_CHECKING:
    from clusterscaler.api import Informer

log = structlog.get_logger()

CACHE_SYNC_TIMEOUT = 120.0


class KubeNodeStore:
    """The cluster's nodes through a list+watch cache; writes through the API. A `NodeStore`."""

    def __init__(self, api_client: Any) -> None:
        from clusterscaler.api import Informer, ListerSpec
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        spec: ListerSpec[Raw] = ListerSpec(
            resource="nodes", kind="Node", list_function=self._core.list_node, parse=dict
        )
        self._informer: Informer[Raw] = Informer(spec)
        self._informer.start()

    def wait_for_sync(self, timeout: float) -> None:
        if not self._informer.wait_for_sync(timeout):
            self._informer.stop()
            raise CloudProviderError(
                f"kwok provider: the node cache did not sync in {timeout:.0f}s"
                + (f": {self._informer.last_error}" if self._informer.last_error else "")
            )

    def nodes(self) -> Sequence[Raw]:
        if not self._informer.has_synced:
            raise CloudProviderError("kwok provider: the node cache has not synced yet")
        return self._informer.items()

    def create(self, node: Raw) -> None:
        name = node["metadata"]["name"]
        self._write("creating", name, lambda: self._core.create_node(
            body=node, _preload_content=False))

    def delete(self, name: str) -> None:
        # A node already gone counts as deleted.
        self._write("deleting", name, lambda: self._core.delete_node(
            name=name, _preload_content=False), missing_ok=True)

    @staticmethod
    def _write(action: str, name: str, call: Callable[[], Any], *, missing_ok: bool = False) -> None:
        """One write of a Node; every failure is a `CloudProviderError` naming the node."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        try:
            call()
        except ApiException as exc:
            if not (missing_ok and exc.status == 404):
                raise CloudProviderError(
                    f"kwok provider: {action} node {name} failed: {exc.status} {exc.reason}: "
                    f"{_message(exc)}"
                ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise CloudProviderError(f"kwok provider: {action} node {name} failed: {exc}") from None

    def close(self) -> None:
        self._informer.stop()


def _message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message", ""))
    except (TypeError, ValueError, AttributeError):
        return ""


def _api_client(context: ProviderContext) -> Any:
    if local_mode():
        # The files of KUBECONFIG (or ~/.kube/config), merged and checked as the
        # autoscaler's own client reads them without --kubeconfig: a malformed one is
        # refused naming the file and the field. Never the in-cluster account, as upstream.
        from clusterscaler.api import KubeClientSettings, KubeConfigError, build_kube_api_client

        try:
            return build_kube_api_client(
                KubeClientSettings(user_agent=context.options.user_agent, in_cluster=False)
            )
        except KubeConfigError as exc:
            raise ConfigurationError(f"kwok provider: KWOK_PROVIDER_MODE=local: {exc}") from None
    if context.kube_api is None:
        raise ConfigurationError(
            "kwok provider: no Kubernetes API client: run in a pod, give --kubeconfig, or set "
            "KWOK_PROVIDER_MODE=local with KUBECONFIG"
        )
    return context.kube_api


def _read_configmap(core: Any, namespace: str, name: str, key: str) -> str:
    """One key of a ConfigMap, read by listing with a field selector: the autoscaler's Role
    lists its namespace's ConfigMaps already, whatever their names."""
    from kubernetes.client.exceptions import ApiException

    if len(name) > 253:  # no ConfigMap is named so; said in a line
        raise ConfigurationError(
            f"kwok provider: ConfigMap {namespace}/{describe_value(name)}: expected a name of "
            "at most 253 characters"
        )

    try:
        response = core.list_namespaced_config_map(
            namespace, field_selector=f"metadata.name={name}", _preload_content=False
        )
    except ApiException as exc:
        raise ConfigurationError(
            f"kwok provider: ConfigMap {namespace}/{name}: cannot read it: {exc.status} "
            f"{exc.reason}"
        ) from None
    items = json.loads(response.data).get("items") or []
    if not items:
        raise ConfigurationError(
            f"kwok provider: ConfigMap {namespace}/{name}: not found; create it "
            "(docs/providers/kwok.md)"
        )
    text = (items[0].get("data") or {}).get(key)
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(
            f"kwok provider: ConfigMap {namespace}/{name}: data.{key}: required, "
            + ("YAML of the provider's configuration" if key == CONFIG_KEY
               else "a `kind: List` of template Nodes")
        )
    return text


def _template_nodes(core: Any, config: KwokConfig, namespace: str) -> tuple[list[Raw], str]:
    """The template Nodes, and the templates text they come from ("" for the cluster's
    nodes): its ResourceSlices declare the groups' devices."""
    if config.read_nodes_from == "configmap":
        text = _read_configmap(core, namespace, config.templates_configmap, TEMPLATES_KEY)
        return list(parse_templates(
            text, f"ConfigMap {namespace}/{config.templates_configmap}, key {TEMPLATES_KEY}"
        )), text
    response = core.list_node(_preload_content=False)
    return list(json.loads(response.data).get("items") or []), ""


def read_node_groups(core: Any, namespace: str, name: str) -> tuple[
    KwokConfig, list[GroupTemplate], list[ProviderProblem], dict[str, tuple[ResourceSlice, ...]]
]:
    """The provider's ConfigMaps as `core` (a `CoreV1Api`) lists them: the config, the
    node groups of its templates, the problems of the groups that cannot be used, and the
    groups' ResourceSlices. A ConfigMap that cannot be used at all is a
    `ConfigurationError` naming it and the field."""
    config = parse_config(
        _read_configmap(core, namespace, name, CONFIG_KEY),
        f"ConfigMap {namespace}/{name}, key {CONFIG_KEY}",
    )
    nodes, text = _template_nodes(core, config, namespace)
    groups, problems = build_groups(nodes, config)
    slices, slice_problems = template_slices(text, nodes, config)
    return config, groups, [*problems, *slice_problems], slices


def build_provider(context: ProviderContext) -> KwokCloudProvider:
    """The factory registered as `kwok`."""
    from kubernetes import client

    for flag, values in ignored_node_group_flags(context.options).items():
        log.warning("kwok_flag_ignored", flag=flag, values=values,
                    reason="the kwok provider's node groups are the template nodes of its "
                    "ConfigMap")
    api_client = _api_client(context)
    core = client.CoreV1Api(api_client)
    namespace = provider_namespace(str(getattr(context.options, "namespace", "kube-system")))
    name = configmap_name()
    config, groups, problems, slices = read_node_groups(core, namespace, name)
    for problem in problems:
        log.warning("kwok_node_group_invalid", node_group=problem.node_group,
                    error=problem.message)
    if not groups and not problems:
        log.warning(
            "kwok_no_node_groups",
            hint=f"no template node has the {config.group_by} {config.group_key}",
        )
    store = KubeNodeStore(api_client)
    store.wait_for_sync(CACHE_SYNC_TIMEOUT)
    log.info("kwok_provider_ready", namespace=namespace, configmap=name,
             node_groups=[g.name for g in groups])
    return KwokCloudProvider(config, groups, store, problems, slices=slices)


clusterscaler_register_cloud_providers = cloud_provider_hook(
    PROVIDER_NAME,
    build_provider,
    description="KWOK's fake nodes on a real API server, from upstream Cluster "
    "Autoscaler's kwok-provider-config ConfigMap",
)
