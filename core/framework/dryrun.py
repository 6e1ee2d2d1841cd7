"""`--dry-run` for the cloud: a provider whose node groups never change size.

Every read is passed to the real provider, so decisions are made on the real state; every
write (`increase_size`, `delete_nodes`, `decrease_target_size`) is logged and skipped.
Kubernetes writes are skipped by the actions' own `dry_run` switch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog
from clusterscaler.framework.cloudprovider import (
    CloudProvider,
    Instance,
    NodeGroup,
    NodeGroupOptions,
    PricingModel,
    ResourceLimiter,
)

if TYPE_CHECKING:
    from clusterscaler.model import Node, NodeInfo

log = structlog.get_logger()


class DryRunNodeGroup:
    """A node group that reports the real group's state and refuses to change it."""

    def __init__(self, group: NodeGroup) -> None:
        self.group = group

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
        log.info("dry_run_skip", action="increase_size", node_group=self.id, delta=delta)

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        log.info(
            "dry_run_skip",
            action="delete_nodes",
            node_group=self.id,
            nodes=[node.name for node in nodes],
        )

    def decrease_target_size(self, delta: int) -> None:
        log.info("dry_run_skip", action="decrease_target_size", node_group=self.id, delta=delta)

    def nodes(self) -> Sequence[Instance]:
        return self.group.nodes()

    def template_node_info(self) -> NodeInfo:
        return self.group.template_node_info()

    def exist(self) -> bool:
        return self.group.exist()

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        return self.group.get_options(defaults)

    def debug(self) -> str:
        return f"{self.group.debug()} (dry-run)"


class DryRunCloudProvider:
    """Wraps a provider so that none of its node groups is ever resized."""

    def __init__(self, provider: CloudProvider) -> None:
        self.provider = provider
        self._wrapped: dict[str, DryRunNodeGroup] = {}

    def _wrap(self, group: NodeGroup) -> DryRunNodeGroup:
        wrapped = self._wrapped.get(group.id)
        if wrapped is None or wrapped.group is not group:
            wrapped = self._wrapped[group.id] = DryRunNodeGroup(group)
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

    def refresh(self) -> None:
        self.provider.refresh()

    def cleanup(self) -> None:
        self.provider.cleanup()
