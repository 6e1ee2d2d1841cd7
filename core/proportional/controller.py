"""One poll of the cluster-proportional-autoscaler against the Kubernetes API.

Each poll lists the nodes, reads the parameters ConfigMap (creating it from
`--default-params` when it does not exist, never overwriting one), computes the replica
count and writes it through the Scale subresource of every target whose replicas differ.
Invalid parameters fail the poll and leave every target untouched.

Reads ask for raw JSON (`_preload_content=False`): the generated models are slow on big
node lists and we only need a few fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
from clusterscaler.kube.informer import Informer, ListerSpec
from clusterscaler.proportional.calculator import ClusterSize, Decision, compute_replicas
from clusterscaler.proportional.clustersize import (
    NodeFacts,
    count_cluster,
    label_selector,
    node_facts,
)
from clusterscaler.proportional.params import Params, ParamsError, parse_configmap_data
from clusterscaler.proportional.targets import Target
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

log = structlog.get_logger()

NODE_PAGE_SIZE = 500
# How long a poll waits for the node cache's first list, as upstream waits for its reflector.
NODE_SYNC_TIMEOUT_SECONDS = 5.0
REQUEST_TIMEOUT_SECONDS = 15.0


class PollError(Exception):
    """A poll that could not complete; targets it did not reach are unchanged."""


@dataclass(frozen=True)
class TargetUpdate:
    """What a poll did to one target: `previous` replicas, `desired`, whether it wrote."""

    target: Target
    previous: int | None
    desired: int
    changed: bool
    error: str | None = None


@dataclass(frozen=True)
class PollResult:
    """The outcome of one successful poll."""

    size: ClusterSize
    decision: Decision
    updates: tuple[TargetUpdate, ...]
    configmap_created: bool = False


def _json(response: Any) -> Any:
    return json.loads(response.data)


def _api_error(exc: ApiException) -> str:
    reason = exc.reason or ""
    try:
        message = json.loads(exc.body or "{}").get("message") or reason
    except (ValueError, AttributeError):
        message = reason
    return f"{exc.status} {message}".strip()


@dataclass
class _ParamsCache:
    resource_version: str | None = None
    params: Params | None = None
    error: ParamsError | None = None


@dataclass
class Controller:
    """Polls the cluster and scales the targets; holds only the parsed-parameters cache."""

    api_client: k8s.ApiClient
    namespace: str
    configmap: str
    targets: tuple[Target, ...]
    default_params: Mapping[str, str] | None = None
    node_labels: Mapping[str, str] = field(default_factory=dict)
    request_timeout: float = REQUEST_TIMEOUT_SECONDS
    watch_nodes: bool = False
    _cache: _ParamsCache = field(default_factory=_ParamsCache, init=False, repr=False)
    _resolved: dict[Target, tuple[str, str, str]] = field(
        default_factory=dict, init=False, repr=False
    )
    _informer: Informer[NodeFacts] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._core = k8s.CoreV1Api(self.api_client)
        self._apps = k8s.AppsV1Api(self.api_client)
        self._apis = k8s.ApisApi(self.api_client)
        self._custom = k8s.CustomObjectsApi(self.api_client)

    # -- observe ------------------------------------------------------------------

    def _list_nodes(self) -> Iterator[Mapping[str, Any]]:
        selector = label_selector(self.node_labels)
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "limit": NODE_PAGE_SIZE,
                "_preload_content": False,
                "_request_timeout": self.request_timeout,
            }
            if selector:
                kwargs["label_selector"] = selector
            if token:
                kwargs["_continue"] = token
            page = _json(self._core.list_node(**kwargs))
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def _cached_nodes(self) -> list[NodeFacts]:
        if self._informer is None:
            selector = label_selector(self.node_labels)
            spec = ListerSpec(
                resource="nodes",
                kind="Node",
                list_function=self._core.list_node,
                parse=node_facts,
                kwargs={"label_selector": selector} if selector else None,
            )
            self._informer = Informer(spec, page_size=NODE_PAGE_SIZE)
            self._informer.start()
        if not self._informer.wait_for_sync(NODE_SYNC_TIMEOUT_SECONDS):
            reason = self._informer.last_error or "no answer from the API server"
            raise PollError(
                f"listing nodes: cache not synced after {NODE_SYNC_TIMEOUT_SECONDS:g}s: {reason}"
            )
        return self._informer.items()

    def cluster_size(self) -> ClusterSize:
        """Count the (label-matching) nodes and their cores.

        With `watch_nodes` the nodes come from a list+watch cache, so a poll costs the API
        server nothing on big clusters; otherwise every poll lists them page by page.
        """
        if self.watch_nodes:
            return count_cluster(self._cached_nodes(), self.node_labels)
        try:
            return count_cluster(self._list_nodes(), self.node_labels)
        except ApiException as exc:
            raise PollError(f"listing nodes: {_api_error(exc)}") from exc

    def close(self) -> None:
        """Stop the node cache, if one runs."""
        if self._informer is not None:
            self._informer.stop()
            self._informer = None

    # -- parameters ---------------------------------------------------------------

    def _configmap_name(self) -> str:
        return f"{self.namespace}/{self.configmap}"

    def _read_configmap(self) -> Mapping[str, Any] | None:
        try:
            return dict(
                _json(
                    self._core.read_namespaced_config_map(
                        self.configmap,
                        self.namespace,
                        _preload_content=False,
                        _request_timeout=self.request_timeout,
                    )
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise PollError(
                f"reading ConfigMap {self._configmap_name()}: {_api_error(exc)}"
            ) from exc

    def _create_configmap(self, data: Mapping[str, str]) -> Mapping[str, Any] | None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.configmap, "namespace": self.namespace},
            "data": dict(data),
        }
        try:
            created = _json(
                self._core.create_namespaced_config_map(
                    self.namespace,
                    body,
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
            )
        except ApiException as exc:
            if exc.status == 409:  # created by someone else meanwhile: theirs wins
                return None
            raise PollError(
                f"creating ConfigMap {self._configmap_name()}: {_api_error(exc)}"
            ) from exc
        log.info(
            "proportional_configmap_created",
            configmap=self._configmap_name(),
            mode=",".join(sorted(data)),
        )
        return dict(created)

    def fetch_configmap(self) -> tuple[Mapping[str, Any], bool]:
        """The parameters ConfigMap and whether this poll created it from the defaults."""
        configmap = self._read_configmap()
        if configmap is not None:
            return configmap, False
        if self.default_params is None:
            raise PollError(
                f"ConfigMap {self._configmap_name()} not found and --default-params is not set"
            )
        created = self._create_configmap(self.default_params)
        if created is not None:
            return created, True
        configmap = self._read_configmap()
        if configmap is None:
            raise PollError(f"ConfigMap {self._configmap_name()} vanished while being created")
        return configmap, False

    def params_from(self, configmap: Mapping[str, Any]) -> Params:
        """Parse the ConfigMap's data, once per resourceVersion."""
        version = str((configmap.get("metadata") or {}).get("resourceVersion") or "")
        cache = self._cache
        if not version or version != cache.resource_version:
            previous_mode = cache.params.mode if cache.params else None
            try:
                params = parse_configmap_data(configmap.get("data"))
            except ParamsError as exc:
                self._cache = _ParamsCache(version or None, None, exc)
            else:
                self._cache = _ParamsCache(version or None, params, None)
                log.info(
                    "proportional_params_loaded",
                    configmap=self._configmap_name(),
                    resource_version=version,
                    mode=params.mode,
                    previous_mode=previous_mode,
                )
                if params.ignored_keys:
                    log.warning(
                        "proportional_params_unknown_keys",
                        configmap=self._configmap_name(),
                        mode=params.mode,
                        keys=",".join(params.ignored_keys),
                    )
        if self._cache.error is not None:
            raise PollError(
                f"ConfigMap {self._configmap_name()}: invalid parameters: {self._cache.error}"
            ) from self._cache.error
        assert self._cache.params is not None
        return self._cache.params

    # -- act ----------------------------------------------------------------------

    def _preferred_version(self, group: str) -> str:
        groups = (
            _json(
                self._apis.get_api_versions(
                    _preload_content=False, _request_timeout=self.request_timeout
                )
            ).get("groups")
            or []
        )
        for entry in groups:
            if entry.get("name") == group:
                version = (entry.get("preferredVersion") or {}).get("version")
                if version:
                    return str(version)
        raise LookupError(f"API group {group!r} is not served")

    def _resolve_custom(self, target: Target) -> tuple[str, str, str]:
        """(group, version, plural) of a custom target, found through discovery once."""
        cached = self._resolved.get(target)
        if cached is not None:
            return cached
        assert target.group is not None
        version = target.version or self._preferred_version(target.group)
        resources = (
            _json(
                self._custom.get_api_resources(
                    target.group,
                    version,
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
            ).get("resources")
            or []
        )
        names = {r.get("name", ""): r for r in resources}
        for name, resource in names.items():
            aliases = (
                name,
                resource.get("singularName"),
                str(resource.get("kind") or "").lower(),
                *(resource.get("shortNames") or []),
            )
            if "/" not in name and target.resource in aliases:
                break
        else:
            raise LookupError(f"{target.group}/{version} serves no resource {target.resource!r}")
        if f"{name}/scale" not in names:
            raise LookupError(f"{name}.{target.group} has no scale subresource")
        if not resource.get("namespaced", True):
            raise LookupError(f"{name}.{target.group} is not namespaced")
        self._resolved[target] = (target.group, version, name)
        return self._resolved[target]

    def _scale_calls(self, target: Target) -> tuple[Callable[..., Any], Callable[..., Any]]:
        if target.custom:
            group, version, plural = self._resolve_custom(target)
            get = self._custom.get_namespaced_custom_object_scale
            put = self._custom.replace_namespaced_custom_object_scale

            def read(name: str, namespace: str, **kw: Any) -> Any:
                return get(group, version, namespace, plural, name, **kw)

            def replace(name: str, namespace: str, body: Any, **kw: Any) -> Any:
                return put(group, version, namespace, plural, name, body, **kw)

            return read, replace
        if target.resource == "deployments":
            return (
                self._apps.read_namespaced_deployment_scale,
                self._apps.replace_namespaced_deployment_scale,
            )
        if target.resource == "replicasets":
            return (
                self._apps.read_namespaced_replica_set_scale,
                self._apps.replace_namespaced_replica_set_scale,
            )
        if target.resource == "statefulsets":
            return (
                self._apps.read_namespaced_stateful_set_scale,
                self._apps.replace_namespaced_stateful_set_scale,
            )
        return (
            self._core.read_namespaced_replication_controller_scale,
            self._core.replace_namespaced_replication_controller_scale,
        )

    def scale_target(self, target: Target, desired: int) -> TargetUpdate:
        """Set `desired` replicas on `target` through its Scale, only if they differ.

        The Scale is written back with the resourceVersion it was read at, so a
        concurrent change makes this poll fail (409) instead of being overwritten blindly.
        """
        opts = {"_preload_content": False, "_request_timeout": self.request_timeout}
        try:
            read, replace = self._scale_calls(target)
        except ApiException as exc:
            return TargetUpdate(target, None, desired, False, f"discovery: {_api_error(exc)}")
        except LookupError as exc:
            return TargetUpdate(target, None, desired, False, f"discovery: {exc}")
        try:
            scale = dict(_json(read(target.name, self.namespace, **opts)))
        except ApiException as exc:
            return TargetUpdate(target, None, desired, False, f"reading scale: {_api_error(exc)}")
        previous = int((scale.get("spec") or {}).get("replicas") or 0)
        if previous == desired:
            return TargetUpdate(target, previous, desired, False)
        scale["spec"] = {**(scale.get("spec") or {}), "replicas": desired}
        scale.pop("status", None)
        try:
            replace(target.name, self.namespace, scale, **opts)
        except ApiException as exc:
            return TargetUpdate(
                target, previous, desired, False, f"updating scale: {_api_error(exc)}"
            )
        return TargetUpdate(target, previous, desired, True)

    # -- the poll -----------------------------------------------------------------

    def poll(self) -> PollResult:
        """Run one poll; raises `PollError` when any step or any target failed."""
        size = self.cluster_size()
        configmap, created = self.fetch_configmap()
        params = self.params_from(configmap)
        decision = compute_replicas(params, size)
        log.debug(
            "proportional_poll",
            nodes=size.nodes,
            cores=size.cores,
            schedulable_nodes=size.schedulable_nodes,
            schedulable_cores=size.schedulable_cores,
            mode=decision.mode,
            replicas=decision.replicas,
        )
        updates = tuple(self.scale_target(t, decision.replicas) for t in self.targets)
        for update in updates:
            if update.changed:
                log.info(
                    "proportional_scale",
                    target=str(update.target),
                    namespace=self.namespace,
                    previous=update.previous,
                    replicas=update.desired,
                    mode=decision.mode,
                    nodes=decision.nodes,
                    cores=decision.cores,
                    replicas_from_nodes=decision.replicas_from_nodes,
                    replicas_from_cores=decision.replicas_from_cores,
                )
        failed = [u for u in updates if u.error]
        if failed:
            raise PollError("; ".join(f"{u.target} in {self.namespace}: {u.error}" for u in failed))
        return PollResult(size, decision, updates, created)

    def poll_safely(self) -> Exception | None:
        """Run one poll, log its failure and return it instead of raising."""
        try:
            self.poll()
        except Exception as exc:  # the loop must outlive API outages and bad ConfigMaps
            log.error("proportional_poll_failed", error=str(exc), error_type=type(exc).__name__)
            return exc
        return None
