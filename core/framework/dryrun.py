"""Guarded writes to the cloud: `--dry-run`, and a leader that may no longer act.

`GuardedCloudProvider` passes every read to the real provider, so decisions are made on the
real state, and asks its guard before every write (`increase_size`, `delete_nodes`,
`decrease_target_size`): the guard lets it through, skips it (`--dry-run`: logged, nothing
changes), or raises (the process lost its Lease mid-drain: the write is refused, so a node
another leader may already have given back to the scheduler is never deleted).
Kubernetes writes are guarded by the actions' own wrappers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import structlog
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    Instance,
    NodeGroup,
    NodeGroupOptions,
    PricingModel,
    ProviderProblem,
    ResourceLimiter,
    delete_nodes,
    provider_problems,
    scale_down_blocked,
)

if TYPE_CHECKING:
    from clusterscaler.model import Node, NodeInfo

log = structlog.get_logger()

# Asked before each write with the action, the node group and what would change: True
# lets the write through, False skips it; raising refuses it.
WriteGuard = Callable[[str, str, object], bool]


def dry_run_guard(action: str, node_group: str, change: object) -> bool:
    """`--dry-run`: every write is logged and skipped."""
    log.info("dry_run_skip", action=action, node_group=node_group, change=change)
    return False


class GuardedNodeGroup:
    """A node group that reports the real group's state and changes it only through its
    guard."""

    def __init__(self, group: NodeGroup, guard: WriteGuard) -> None:
        self.group = group
        self.guard = guard

    @property
    def id(self) -> str:
        return self.group.id

    @property
    def min_size(self) -> int:
        return self.group.min_size

    @property
    def max_size(self) -> int:
        return self.group.max_size

    def target_size(self) -> int:
        return self.group.target_size()

    def increase_size(self, delta: int) -> None:
        if self.guard("increase_size", self.id, delta):
            self.group.increase_size(delta)

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        if self.guard("delete_nodes", self.id, [node.name for node in nodes]):
            self.group.delete_nodes(nodes)

    def force_delete_nodes(self, nodes: Sequence[Node]) -> None:
        """The real group's `force_delete_nodes`, or its `delete_nodes` when it has none."""
        if self.guard("force_delete_nodes", self.id, [node.name for node in nodes]):
            delete_nodes(self.group, nodes, force=True)

    def decrease_target_size(self, delta: int) -> None:
        if self.guard("decrease_target_size", self.id, delta):
            self.group.decrease_target_size(delta)

    def nodes(self) -> Sequence[Instance]:
        return self.group.nodes()

    def template_node_info(self) -> NodeInfo:
        return self.group.template_node_info()

    def exist(self) -> bool:
        return self.group.exist()

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        return self.group.get_options(defaults)

    def scale_down_blocked(self) -> str | None:
        """The real group's reason (`ScaleDownBlockingNodeGroup`), or None without one."""
        return scale_down_blocked(self.group)

    def debug(self) -> str:
        suffix = " (dry-run)" if self.guard is dry_run_guard else ""
        return f"{self.group.debug()}{suffix}"


class GuardedCloudProvider:
    """Wraps a provider so that its node groups change size only through `guard`."""

    def __init__(self, provider: CloudProvider, guard: WriteGuard) -> None:
        self.provider = provider
        self.guard = guard
        self._wrapped: dict[str, GuardedNodeGroup] = {}

    def _wrap(self, group: NodeGroup) -> GuardedNodeGroup:
        wrapped = self._wrapped.get(group.id)
        if wrapped is None or wrapped.group is not group:
            wrapped = self._wrapped[group.id] = GuardedNodeGroup(group, self.guard)
        return wrapped

    @property
    def name(self) -> str:
        return self.provider.name

    def node_groups(self) -> Sequence[NodeGroup]:
        return [self._wrap(group) for group in self.provider.node_groups()]

    def node_group_for_node(self, node: Node) -> NodeGroup | None:
        group = self.provider.node_group_for_node(node)
        return None if group is None else self._wrap(group)

    def has_instance(self, node: Node) -> bool:
        return self.provider.has_instance(node)

    def pricing(self) -> PricingModel | None:
        return self.provider.pricing()

    def resource_limiter(self) -> ResourceLimiter | None:
        return self.provider.resource_limiter()

    def gpu_label(self) -> str:
        return self.provider.gpu_label()

    def problems(self) -> Sequence[ProviderProblem]:
        """The wrapped provider's configuration problems (`ReportsProblems`)."""
        return provider_problems(self.provider)

    def refresh(self) -> None:
        self.provider.refresh()

    def cleanup(self) -> None:
        self.provider.cleanup()
