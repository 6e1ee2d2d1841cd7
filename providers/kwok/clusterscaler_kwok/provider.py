"""The `kwok` cloud provider: node groups whose instances are kwok's fake Node objects.

A node belongs to a group when its provider ID starts with `kwok` and its
`cluster-autoscaler.kwok.nodegroup/name` annotation (else the grouping label or annotation
of the config) names the group, as upstream's `NodeGroupForNode` decides. A group's size is
the number of such nodes in the node cache, plus nodes this provider created that the cache
has not shown yet, minus nodes it deleted that the cache still shows: a scale-up is never
forgotten, nor a deletion counted twice, while the watch catches up.

Differences from upstream, each one on the side of safety or of the scheduler's view:
- a created node's `kubernetes.io/hostname` label is its own name (upstream keeps the
  template's, so every node of a group would be one hostname topology domain);
- `delete_nodes` checks every node before deleting any, and only deletes nodes annotated
  `kwok.x-k8s.io/node=fake`; `cleanup` likewise;
- a group whose template is malformed is reported (status ConfigMap, `explain`) and left
  out; the other groups scale (upstream exits).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from clusterscaler.api import (
    HOSTNAME_LABEL,
    CloudProviderError,
    Instance,
    InstanceState,
    ModelError,
    Node,
    NodeGroupOptions,
    NodeInfo,
    ProviderDefaults,
    ProviderProblem,
    ResourceLimiter,
    ResourceSlice,
    checked_delete,
    checked_increase,
    parse_node,
)

from clusterscaler_kwok import PROVIDER_NAME
from clusterscaler_kwok.config import KwokConfig
from clusterscaler_kwok.templates import (
    KWOK_NODE_ANNOTATION,
    KWOK_NODE_VALUE,
    METRICS_PATH_ANNOTATION,
    PROVIDER_ID_PREFIX,
    GroupTemplate,
    group_name,
    group_name_of,
    node_name,
)

log = structlog.get_logger()

Raw = Mapping[str, Any]
# apimachinery's rand.String alphabet: no vowels, no confusable digits.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class NodeStore(Protocol):
    """Where the Node objects live: a cache of the cluster's nodes, and the writes."""

    def nodes(self) -> Sequence[Raw]:
        """Every node as last seen (raw JSON). Raises `CloudProviderError` when stale."""
        ...

    def create(self, node: Raw) -> None: ...

    def delete(self, name: str) -> None:
        """Delete a Node; a missing node counts as deleted."""
        ...

    def close(self) -> None: ...


def is_kwok_node(node: Raw) -> bool:
    return str((node.get("spec") or {}).get("providerID") or "").startswith("kwok")


def _is_fake(node: Raw) -> bool:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return isinstance(annotations, Mapping) and annotations.get(KWOK_NODE_ANNOTATION) == KWOK_NODE_VALUE


@dataclass
class _Membership:
    """A group's nodes as of the last refresh, and what this provider changed since."""

    seen: dict[str, Raw] = field(default_factory=dict)
    created: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)

    def names(self) -> set[str]:
        return (set(self.seen) | self.created) - self.deleted

    def forget(self, name: str) -> None:
        """A node this provider deleted: not a member from now on, even while the cache
        still shows it, or shows it late (created and deleted before it was ever seen)."""
        self.created.discard(name)
        self.deleted.add(name)

    def update(self, seen: dict[str, Raw]) -> None:
        """The cache's view: created nodes it shows are plain members now. A deleted node
        stays deleted until the cache has shown it and then no longer: one it has not
        shown yet may still arrive in a late watch event."""
        self.deleted -= set(self.seen) - set(seen)
        self.seen = seen
        self.created -= set(seen)


class KwokNodeGroup:
    """One group of kwok nodes. Satisfies `NodeGroup`."""

    def __init__(
        self,
        template: GroupTemplate,
        provider: KwokCloudProvider,
        slices: Sequence[ResourceSlice] = (),
    ) -> None:
        self.template = template
        self._provider = provider
        self._members = _Membership()
        self._template_info: NodeInfo | None = None
        # The DRA devices each new node will have (the templates ConfigMap's slices).
        self._slices = tuple(slices)

    @property
    def id(self) -> str:
        return self.template.name

    @property
    def min_size(self) -> int:
        return self.template.min_size

    @property
    def max_size(self) -> int:
        return self.template.max_size

    def target_size(self) -> int:
        return len(self._members.names())

    def _new_node(self) -> dict[str, Any]:
        while True:
            name = f"{self.id}-{''.join(random.choices(_NAME_ALPHABET, k=5))}"
            if name not in self._members.names():
                break
        raw: dict[str, Any] = copy.deepcopy(self.template.node)
        meta = raw["metadata"]
        meta["name"] = name
        meta["labels"] = {**(meta.get("labels") or {}), HOSTNAME_LABEL: name}
        meta["annotations"] = {
            **meta["annotations"],
            METRICS_PATH_ANNOTATION: f"/metrics/nodes/{name}/metrics/resource",
        }
        raw["spec"]["providerID"] = PROVIDER_ID_PREFIX + name
        return raw

    def increase_size(self, delta: int) -> None:
        checked_increase(self.id, self.target_size(), delta, self.max_size)
        for _ in range(delta):
            node = self._new_node()
            self._provider.store.create(node)
            self._members.created.add(node_name(node))
            log.info("kwok_node_created", node_group=self.id, node=node_name(node))

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        self._delete(nodes, force=False)

    def force_delete_nodes(self, nodes: Sequence[Node]) -> None:
        self._delete(nodes, force=True)

    def _delete(self, nodes: Sequence[Node], *, force: bool) -> None:
        if not force:
            checked_delete(self.id, self.target_size(), len(nodes), self.min_size)
        # Every node is checked before any is deleted.
        names = self._members.names()
        for node in nodes:
            raw = self._members.seen.get(node.name)
            if node.name not in names:
                raise CloudProviderError(
                    f"{self.id}: delete_nodes: node {node.name} is not in this node group; "
                    "no node deleted"
                )
            if raw is not None and not _is_fake(raw):
                raise CloudProviderError(
                    f"{self.id}: delete_nodes: node {node.name} is not managed by kwok (no "
                    f"annotation {KWOK_NODE_ANNOTATION}={KWOK_NODE_VALUE}); no node deleted"
                )
        for node in nodes:
            self._provider.store.delete(node.name)
            self._members.forget(node.name)
            log.info("kwok_node_deleted", node_group=self.id, node=node.name)

    def decrease_target_size(self, delta: int) -> None:
        if delta >= 0:
            raise CloudProviderError(
                f"{self.id}: decrease_target_size: expected a negative delta, got {delta}"
            )
        # Every requested node is created at once as a Node object: there is never
        # requested capacity that is not a node yet, so nothing can be cancelled.
        raise CloudProviderError(
            f"{self.id}: decrease_target_size: attempt to delete existing nodes, target size "
            f"{self.target_size()} is all registered or created nodes (delta {delta})"
        )

    def nodes(self) -> Sequence[Instance]:
        return [
            Instance(PROVIDER_ID_PREFIX + name, InstanceState.RUNNING)
            for name in sorted(self._members.names())
        ]

    def template_node_info(self) -> NodeInfo:
        if self._template_info is None:
            try:
                self._template_info = NodeInfo(
                    node=parse_node(self.template.node), resource_slices=self._slices
                )
            except ModelError as exc:
                raise CloudProviderError(f"{self.id}: template node: {exc}") from None
        return self._template_info

    def exist(self) -> bool:
        return True

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        return None

    def debug(self) -> str:
        return f"{self.id} ({self.min_size}:{self.max_size})"

    def refresh(self, seen: dict[str, Raw]) -> None:
        self._members.update(seen)

    def created_not_seen(self) -> set[str]:
        """Nodes created by this provider that the cache has not shown yet."""
        return set(self._members.created)


class KwokCloudProvider(ProviderDefaults):
    """Node groups of kwok nodes. Satisfies `CloudProvider` and `ReportsProblems`."""

    PROVIDER_NAME = PROVIDER_NAME

    def __init__(self, config: KwokConfig, groups: Sequence[GroupTemplate], store: NodeStore,
                 problems: Sequence[ProviderProblem] = (),
                 limiter: ResourceLimiter | None = None,
                 slices: Mapping[str, Sequence[ResourceSlice]] | None = None) -> None:
        self.config = config
        self.store = store
        slices = slices or {}
        self._groups = {g.name: KwokNodeGroup(g, self, slices.get(g.name, ())) for g in groups}
        self._problems = list(problems)
        self._limiter = limiter

    def node_groups(self) -> Sequence[KwokNodeGroup]:
        return list(self._groups.values())

    def node_group_for_node(self, node: Node) -> KwokNodeGroup | None:
        if not node.provider_id.startswith("kwok"):
            return None
        return self._groups.get(group_name_of(node.labels, node.annotations, self.config))

    def has_instance(self, node: Node) -> bool:
        # The Node object is the instance.
        return True

    def resource_limiter(self) -> ResourceLimiter | None:
        return self._limiter

    def gpu_label(self) -> str:
        # The config's, not a constant of the provider.
        return self.config.gpu.label_key if self.config.gpu else ""

    def problems(self) -> Sequence[ProviderProblem]:
        return list(self._problems)

    def refresh(self) -> None:
        by_group: dict[str, dict[str, Raw]] = {name: {} for name in self._groups}
        for raw in self.store.nodes():
            if not is_kwok_node(raw):
                continue
            name = group_name(raw, self.config)
            if name in by_group:
                by_group[name][node_name(raw)] = raw
        for name, group in self._groups.items():
            group.refresh(by_group[name])

    def cleanup(self) -> None:
        """Delete the kwok nodes of this provider's groups, as upstream does on exit."""
        try:
            nodes = self.store.nodes()
        except CloudProviderError as exc:
            log.warning("kwok_cleanup_failed", error=str(exc))
            nodes = ()
        names = {
            node_name(raw) for raw in nodes
            if is_kwok_node(raw) and _is_fake(raw) and group_name(raw, self.config) in self._groups
        }
        # And the nodes created since the cache last caught up.
        for group in self._groups.values():
            names |= group.created_not_seen()
        for name in sorted(names):
            try:
                self.store.delete(name)
            except CloudProviderError as exc:
                log.warning("kwok_cleanup_failed", node=name, error=str(exc))
        self.store.close()
