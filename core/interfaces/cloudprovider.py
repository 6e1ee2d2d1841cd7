"""The cloud provider interface: what the autoscaler needs from a cloud.

A provider distribution registers a factory with
`registry.add_cloud_provider(name, factory)`; the factory receives a `ProviderContext`
(`clusterscaler.interfaces.providercontext`) and returns an object satisfying
`CloudProvider`. Node groups satisfy `NodeGroup`.

These mirror the upstream Cluster Autoscaler interfaces (Name, NodeGroups,
NodeGroupForNode, HasInstance, Pricing, GetResourceLimiter, GPULabel, Refresh, Cleanup;
MinSize, MaxSize, TargetSize, IncreaseSize, DeleteNodes, DecreaseTargetSize, Nodes,
TemplateNodeInfo, Exist, GetOptions) with Python names.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from clusterscaler.model import Node, NodeInfo, Pod


class CloudProviderError(Exception):
    """A provider call failed. The message names the node group and the call."""


class ConfigurationError(CloudProviderError):
    """The provider's configuration (cloud-config, tags, annotations, flags) is invalid.

    The message names the object, the field and the expected form.
    """


class NodeGroupNotFoundError(CloudProviderError):
    """A node group that was expected to exist is gone."""


class InstanceState(enum.Enum):
    """Where an instance is in its life, as CA's `cloudprovider.InstanceState`: creating
    instances count as upcoming nodes, deleting ones as being deleted."""

    RUNNING = "Running"
    CREATING = "Creating"
    DELETING = "Deleting"


class InstanceErrorClass(enum.Enum):
    """The kind of a creation error: `OUT_OF_RESOURCES` (stockout, quota) backs the node
    group off so that scale-up tries another group; `OTHER` is any other failure."""

    OUT_OF_RESOURCES = "OutOfResources"
    OTHER = "Other"


@dataclass(frozen=True, slots=True)
class InstanceErrorInfo:
    """Why an instance could not be created (stockout, quota, ...)."""

    error_class: InstanceErrorClass
    error_code: str
    error_message: str = ""


def checked_increase(group: str, current: int, delta: int, max_size: int) -> int:
    """The target `increase_size(delta)` asks for, from `current`; raises
    `CloudProviderError` naming `group` for a delta that is not positive or a target above
    `max_size`. Clouds do not all enforce the max themselves (moto, for one), so every
    provider checks it here, the same way."""
    if delta <= 0:
        raise CloudProviderError(f"{group}: increase_size: expected a positive delta, got {delta}")
    target = current + delta
    if target > max_size:
        raise CloudProviderError(
            f"{group}: increase_size: size increase too large, {current} + {delta} = {target} "
            f"> max {max_size}"
        )
    return target


def checked_delete(group: str, current: int, count: int, min_size: int) -> int:
    """The size left once `delete_nodes` removes `count` nodes from `current`; raises
    `CloudProviderError` naming `group`, with CA's "min size reached, nodes will not be
    deleted", when that is below `min_size`. Every provider checks it before deleting
    anything, so a refused batch deletes nothing (`force_delete_nodes` skips it)."""
    left = current - count
    if left < min_size:
        raise CloudProviderError(
            f"{group}: delete_nodes: min size reached, nodes will not be deleted: "
            f"{current} - {count} = {left} < min {min_size}"
        )
    return left


class InstanceCreationError(CloudProviderError):
    """`increase_size` was refused at once for a reason the cloud names (a stockout, a
    quota, a size not offered): `info` classifies it, so an `OUT_OF_RESOURCES` refusal backs
    the node group off as one and scale-up turns to another group, as a creation error of
    an instance does."""

    def __init__(self, message: str, info: InstanceErrorInfo) -> None:
        super().__init__(message)
        self.info = info


@dataclass(frozen=True, slots=True)
class Instance:
    """One machine of a node group, whether or not it has become a Node yet.

    `id` is the provider ID the Node will carry (`spec.providerID`), e.g.
    `aws:///us-east-1a/i-0123`; instances that are only requested carry a placeholder ID.
    """

    id: str
    state: InstanceState | None = None
    error: InstanceErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class ProviderProblem:
    """Something wrong with one node group (or a resource that should have been one).

    `node_group` is the group id, or the resource's name when the problem keeps it from
    being a node group; `reason` is a short CamelCase code; `message` names the object, the
    field and the expected form. One problem never stops the other groups.
    """

    node_group: str
    reason: str
    message: str


@runtime_checkable
class ReportsProblems(Protocol):
    """Optional for a `CloudProvider`: configuration problems found at the last refresh.

    The autoscaler shows them in the status ConfigMap, logs and `explain`.
    """

    def problems(self) -> Sequence[ProviderProblem]: ...


def provider_problems(provider: object) -> list[ProviderProblem]:
    """The provider's problems, or none when it does not report any."""
    if isinstance(provider, ReportsProblems):
        return list(provider.problems())
    return []


@dataclass(frozen=True, slots=True)
class NodeGroupOptions:
    """Per-node-group overrides of autoscaling options. `None` means "use the flag"."""

    scale_down_utilization_threshold: float | None = None
    scale_down_gpu_utilization_threshold: float | None = None
    scale_down_unneeded_time: timedelta | None = None
    scale_down_unready_time: timedelta | None = None
    max_node_provision_time: timedelta | None = None
    zero_or_max_node_scaling: bool | None = None
    ignore_daemonsets_utilization: bool | None = None

    def over(self, defaults: NodeGroupOptions) -> NodeGroupOptions:
        """These overrides on top of `defaults`: each unset (None) value taken from it.
        The one place where per-group options meet the flags."""
        return NodeGroupOptions(
            **{
                name: value if (value := getattr(self, name)) is not None else getattr(defaults, name)
                for name in NodeGroupOptions.__dataclass_fields__
            }
        )


@dataclass(frozen=True, slots=True)
class ResourceLimiter:
    """Cluster-wide minimum and maximum per resource.

    Keys are `cpu` (cores), `memory` (bytes), `nodes`, and GPU types. A resource missing
    from a map has no limit in that direction.
    """

    min_limits: Mapping[str, int] = field(default_factory=dict)
    max_limits: Mapping[str, int] = field(default_factory=dict)

    def min(self, resource: str) -> int:
        return self.min_limits.get(resource, 0)

    def max(self, resource: str) -> int | None:
        return self.max_limits.get(resource)


class PricingModel(Protocol):
    """Prices used by the `price` expander, in any currency, consistently."""

    def node_price(self, node: Node, start: datetime, end: datetime) -> float:
        """Price of running `node` from `start` to `end`."""
        ...

    def pod_price(self, pod: Pod, start: datetime, end: datetime) -> float:
        """Price of running `pod` (by its requests) from `start` to `end`."""
        ...


class GroupRecord(Protocol):
    """What a provider's cache knows of one node group: at least its limits (the records
    `CachedNodeGroup` reads)."""

    @property
    def min_size(self) -> int: ...

    @property
    def max_size(self) -> int: ...


@runtime_checkable
class NodeGroup(Protocol):
    """A set of nodes with the same shape that the cloud can grow and shrink."""

    @property
    def id(self) -> str:
        """Unique, stable name of the group (ASG name, MIG URL, MachineSet ns/name, ...)."""
        ...

    @property
    def min_size(self) -> int: ...

    @property
    def max_size(self) -> int: ...

    def target_size(self) -> int:
        """The size the cloud is asked to have, which may differ from registered nodes."""
        ...

    def increase_size(self, delta: int) -> None:
        """Ask for `delta` (> 0) more nodes. Must refuse to go beyond `max_size`."""
        ...

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        """Delete these nodes, shrinking the target. Must refuse to go below `min_size`."""
        ...

    def decrease_target_size(self, delta: int) -> None:
        """Shrink the target by `-delta` (delta < 0) without deleting any existing node.

        Only cancels requested capacity that has not become instances or nodes yet.
        """
        ...

    def nodes(self) -> Sequence[Instance]:
        """Every instance of the group, including ones not registered as nodes yet."""
        ...

    def template_node_info(self) -> NodeInfo:
        """A node as a new instance of this group would look, with its DaemonSet-free pods.

        Used to scale from zero. Raises `CloudProviderError` (or `ConfigurationError`) when
        the group cannot describe itself; the autoscaler then skips it for scale-up from zero.

        A group whose nodes have DRA devices declares them in the `resource_slices` of the
        returned `NodeInfo` (upstream's `LocalResourceSlices`): the ResourceSlices the
        drivers will publish for each new node (node-local; build them with
        `parse_template_slice`). The autoscaler renames them for each simulated node; a
        group without them is not grown for pods that claim devices until one of its nodes
        exists (whose slices are then copied).
        """
        ...

    def exist(self) -> bool: ...

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        """The group's overrides (unset values None), or `None` for none: the core lays
        them over `defaults` (`NodeGroupOptions.over`); `defaults` are given for values a
        provider derives from the flags."""
        ...

    def debug(self) -> str:
        """One line describing the group for logs and status."""
        ...


@runtime_checkable
class ForceDeletingNodeGroup(Protocol):
    """A node group that can also delete nodes whatever its min size (CA's
    `NodeGroup.ForceDeleteNodes`). Optional: with --force-delete-failed-nodes or
    --force-delete-unregistered-nodes the autoscaler uses it where a group has it, and
    `delete_nodes` elsewhere (as CA does when a provider does not implement it)."""

    def force_delete_nodes(self, nodes: Sequence[Node]) -> None:
        """Delete these nodes, shrinking the target, even below `min_size`."""
        ...


def delete_nodes(group: NodeGroup, nodes: Sequence[Node], *, force: bool = False) -> None:
    """`group.delete_nodes(nodes)`, or with `force` its `force_delete_nodes` when it has
    one (`ForceDeletingNodeGroup`)."""
    if force and isinstance(group, ForceDeletingNodeGroup):
        group.force_delete_nodes(nodes)
    else:
        group.delete_nodes(nodes)


@runtime_checkable
class ScaleDownBlockingNodeGroup(Protocol):
    """A node group that can say its nodes may not be removed right now (CA's clusterapi
    provider does this for a MachineDeployment that is rolling out). Optional: the
    autoscaler asks once per loop; the nodes of a blocked group are no scale-down
    candidates in that loop, with the group's reason, and still receive other nodes' pods."""

    def scale_down_blocked(self) -> str | None:
        """Why no node of this group may be removed now, or None when they may."""
        ...


def scale_down_blocked(group: NodeGroup) -> str | None:
    """Why `group`'s nodes may not be removed now (`ScaleDownBlockingNodeGroup`), or None.

    A group without the method is never blocked. A `CloudProviderError` blocks the group,
    with that error as the reason: a node is kept when the provider cannot tell."""
    if not isinstance(group, ScaleDownBlockingNodeGroup):
        return None
    try:
        return group.scale_down_blocked()
    except CloudProviderError as exc:
        return f"could not tell whether its nodes may be removed: {exc}"


@runtime_checkable
class CloudProvider(Protocol):
    """A cloud (or simulation) that owns node groups."""

    @property
    def name(self) -> str: ...

    def node_groups(self) -> Sequence[NodeGroup]: ...

    def node_group_for_node(self, node: Node) -> NodeGroup | None:
        """The group that owns `node`, or `None` when the node is not autoscaled."""
        ...

    def has_instance(self, node: Node) -> bool:
        """Whether the cloud still has an instance backing `node`."""
        ...

    def pricing(self) -> PricingModel | None:
        """The pricing model, or `None` when the provider has none."""
        ...

    def resource_limiter(self) -> ResourceLimiter | None:
        """Cluster-wide limits the provider imposes, or `None` to use only the flags."""
        ...

    def gpu_label(self) -> str:
        """The node label whose presence marks a GPU node (e.g. `cloud.google.com/gke-accelerator`)."""
        ...

    def refresh(self) -> None:
        """Called at the start of every loop to refresh cached cloud state."""
        ...

    def cleanup(self) -> None:
        """Called once at shutdown, by the leader only: a replica that lost its Lease
        exits without it, since the node groups are the new leader's (as CA)."""
        ...
