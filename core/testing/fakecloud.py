"""An in-memory cloud provider for tests of the autoscaler and of plugins.

`FakeCloud` satisfies `CloudProvider` and its `FakeNodeGroup`s satisfy `NodeGroup`. Node
groups turn requested capacity into Nodes of an in-memory cluster when the test says so
(`register()`), or at once (`instant=True`), so a test controls exactly when new capacity
becomes ready. Every mutating call is recorded (`calls`) and can be made to fail
(`fail_increase`, `fail_delete`, `fail_decrease`, `create_error`, `template_error`,
`refresh_error`).

Naming: the nodes of group `g` are `g-1`, `g-2`, ... in creation order; a node's provider
ID is `<cloud name>://<node name>` (`fake://g-1` by default); a node belongs to the group
named by its `GROUP_LABEL` label, which every node the cloud builds carries.

Plugin authors can test an expander or a pod filter against a provider::

    from clusterscaler.testing.fakecloud import FakeCloud

    cloud = FakeCloud()
    small = cloud.add_group("small", max_size=5, nodes=1, cpu="2", memory="8Gi")
    large = cloud.add_group("large", max_size=5, cpu="16", memory="64Gi")
    large.increase_size(2)
    assert [n.name for n in large.register()] == ["large-1", "large-2"]
    assert sorted(cloud.cluster.nodes) == ["large-1", "large-2", "small-1"]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar, overload

from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.interfaces.cloudprovider import (
    CloudProviderError,
    Instance,
    InstanceErrorInfo,
    InstanceState,
    NodeGroupOptions,
    PricingModel,
    ResourceLimiter,
)
from clusterscaler.interfaces.clusterview import Clock
from clusterscaler.model import GPU_RESOURCE, Node, NodeCondition, NodeInfo
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.simulator.builders import make_node

__all__ = [
    "ESTABLISHED_AGE",
    "GPU_LABEL",
    "GROUP_LABEL",
    "FakeCloud",
    "FakeNodeGroup",
    "NodeStore",
]

# The label naming a node's group: how `FakeCloud.node_group_for_node` finds it.
GROUP_LABEL = "fakecloud.clusterscaler.io/group"
# The provider's GPU label (`CloudProvider.gpu_label`).
GPU_LABEL = "fakecloud.clusterscaler.io/accelerator"
_HOSTNAME_LABEL = "kubernetes.io/hostname"
# How long before the clock's time `add_group`'s running nodes were created by default: long
# past any provisioning or startup grace, as the nodes of a cluster that has been running.
ESTABLISHED_AGE = timedelta(days=1)


class NodeStore(Protocol):
    """Where registered nodes go and deleted ones leave (an `InMemoryCluster`)."""

    def add_node(self, node: Node) -> None:
        """Add or replace the node of the same name."""
        ...

    def remove_node(self, name: str) -> object:
        """Delete the node (and, in a cluster, the pods bound to it)."""
        ...


Store = TypeVar("Store", bound=NodeStore)


class FakeNodeGroup:
    """A node group of `FakeCloud`. Use `FakeCloud.add_group` to make one.

    Requested instances stay `CREATING` until `register()` turns them into ready Nodes (at
    once with `instant`). The attributes below are the test's controls and records.
    """

    def __init__(
        self,
        cloud: FakeCloud[Any],
        id: str,
        min_size: int,
        max_size: int,
        template: Node,
        *,
        instant: bool = False,
        options: NodeGroupOptions | None = None,
    ) -> None:
        if not 0 <= min_size <= max_size:
            raise ValueError(
                f"node group {id}: min_size/max_size: expected 0 <= min <= max, "
                f"got {min_size}/{max_size}"
            )
        self.cloud = cloud
        self._id = id
        self._min = min_size
        self._max = max_size
        # The node every new instance is a copy of (renamed).
        self.template = template
        # Register requested instances as ready Nodes within `increase_size`.
        self.instant = instant
        # What `get_options` returns: per-group overrides, or None for the flags.
        self.options = options
        self.target = 0
        # Provider ID -> instance, in creation order.
        self.instances: dict[str, Instance] = {}
        # How many instances were ever created: the number in the next node's name.
        self.serial = 0
        # Every call of increase_size, delete_nodes and decrease_target_size, failed ones
        # too: ("increase_size", delta), ("delete_nodes", [names]), ...
        self.calls: list[tuple[str, Any]] = []
        # The deltas of the increase_size calls alone (a test may clear it).
        self.increases: list[int] = []
        # Names of the nodes deleted successfully, in order.
        self.deleted: list[str] = []
        # A non-empty message makes the call raise CloudProviderError with it.
        self.fail_increase = ""
        self.fail_delete = ""
        self.fail_decrease = ""
        self.template_error = ""
        # Requested instances carry this error (a stockout, say) and never register.
        self.create_error: InstanceErrorInfo | None = None
        # False: like clouds that list no instance for capacity they have not started
        # creating, `increase_size` only raises the target.
        self.lists_requested = True

    @property
    def id(self) -> str:
        return self._id

    @property
    def min_size(self) -> int:
        return self._min

    @property
    def max_size(self) -> int:
        return self._max

    def target_size(self) -> int:
        return self.target

    def _next_name(self) -> str:
        self.serial += 1
        return f"{self.id}-{self.serial}"

    def _node(self, name: str, created: datetime) -> Node:
        return self.template.with_(
            name=name,
            uid=f"uid-{name}",
            provider_id=self.cloud.provider_id(name),
            labels={**self.template.labels, _HOSTNAME_LABEL: name},
            creation_time=created,
        )

    def add_running(self, count: int, created: datetime | None = None) -> list[Node]:
        """Add `count` running instances, already Nodes of the cluster, and grow the target.

        `created` is their creation time (default: the clock's now).
        """
        when = self.cloud.clock.now() if created is None else created
        made = []
        for _ in range(count):
            node = self._node(self._next_name(), when)
            self.cloud.cluster.add_node(node)
            self.instances[node.provider_id] = Instance(node.provider_id, InstanceState.RUNNING)
            self.target += 1
            made.append(node)
        return made

    def increase_size(self, delta: int) -> None:
        self.calls.append(("increase_size", delta))
        self.increases.append(delta)
        if self.fail_increase:
            raise CloudProviderError(f"node group {self.id}: {self.fail_increase}")
        if delta <= 0:
            raise CloudProviderError(
                f"node group {self.id}: increase_size: expected a positive delta, got {delta}"
            )
        if self.target + delta > self.max_size:
            raise CloudProviderError(
                f"node group {self.id}: increase by {delta} from {self.target} exceeds max "
                f"{self.max_size}"
            )
        self.target += delta
        for _ in range(delta if self.lists_requested else 0):
            pid = self.cloud.provider_id(self._next_name())
            self.instances[pid] = Instance(pid, InstanceState.CREATING, self.create_error)
        if self.instant:
            self.register()

    def register(self, count: int | None = None) -> list[Node]:
        """Turn creating instances (all, or the first `count`) into ready Nodes now.

        Instances with a `create_error` never register.
        """
        made: list[Node] = []
        for pid, inst in list(self.instances.items()):
            if count is not None and len(made) >= count:
                break
            if inst.state is not InstanceState.CREATING or inst.error is not None:
                continue
            name = self.cloud.node_name(pid)
            node = self._node(name, self.cloud.clock.now()).with_(
                conditions=(NodeCondition("Ready", "True"),)
            )
            self.cloud.cluster.add_node(node)
            self.instances[pid] = Instance(pid, InstanceState.RUNNING)
            made.append(node)
        return made

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        """Delete all the nodes or, when one cannot go, none of them."""
        self._delete("delete_nodes", nodes, force=False)

    def force_delete_nodes(self, nodes: Sequence[Node]) -> None:
        """`delete_nodes` whatever the min size (CA's `ForceDeleteNodes`)."""
        self._delete("force_delete_nodes", nodes, force=True)

    def _delete(self, call: str, nodes: Sequence[Node], *, force: bool) -> None:
        self.calls.append((call, [n.name for n in nodes]))
        if self.fail_delete:
            raise CloudProviderError(f"node group {self.id}: {self.fail_delete}")
        if not force and self.target - len(nodes) < self.min_size:
            raise CloudProviderError(
                f"node group {self.id}: deleting {len(nodes)} nodes would go below min size "
                f"{self.min_size}"
            )
        for node in nodes:
            if node.provider_id not in self.instances:
                raise CloudProviderError(f"node group {self.id}: {node.name} is not a member")
        for node in nodes:
            del self.instances[node.provider_id]
            self.cloud.cluster.remove_node(node.name)
            self.target -= 1
            self.deleted.append(node.name)

    def decrease_target_size(self, delta: int) -> None:
        self.calls.append(("decrease_target_size", delta))
        if self.fail_decrease:
            raise CloudProviderError(f"node group {self.id}: {self.fail_decrease}")
        if delta >= 0 or self.target + delta < len(self.instances):
            raise CloudProviderError(
                f"node group {self.id}: cannot decrease the target by {delta} "
                f"(target {self.target}, {len(self.instances)} instances)"
            )
        self.target += delta

    def nodes(self) -> Sequence[Instance]:
        return list(self.instances.values())

    def template_node_info(self) -> NodeInfo:
        if self.template_error:
            raise CloudProviderError(self.template_error)
        return NodeInfo(self.template.with_(name=f"{self.id}-template"))

    def exist(self) -> bool:
        return True

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        return self.options

    def debug(self) -> str:
        return f"{self.id} (min {self.min_size}, max {self.max_size}, target {self.target})"


class FakeCloud(Generic[Store]):
    """A `CloudProvider` whose node groups put their nodes into `cluster`.

    `cluster` defaults to an empty `InMemoryCluster`, `clock` to a `VirtualClock`; `name` is
    the provider's name and the scheme of its provider IDs; `existing_since` is when the
    running nodes `add_group` adds were created (default: `ESTABLISHED_AGE` before the
    clock's time then). Set `limiter`, `price` or
    `refresh_error` to change what `resource_limiter()`, `pricing()` and `refresh()` do.
    """

    @overload
    def __init__(
        self: FakeCloud[InMemoryCluster],
        cluster: None = None,
        clock: Clock | None = None,
        *,
        name: str = "fake",
        existing_since: datetime | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        cluster: Store,
        clock: Clock | None = None,
        *,
        name: str = "fake",
        existing_since: datetime | None = None,
    ) -> None: ...

    def __init__(
        self,
        cluster: Any = None,
        clock: Clock | None = None,
        *,
        name: str = "fake",
        existing_since: datetime | None = None,
    ) -> None:
        # The overloads tie `Store` to the argument, or to InMemoryCluster without one.
        self.cluster: Store = cluster if cluster is not None else InMemoryCluster()  # type: ignore[assignment]
        self.clock: Clock = VirtualClock() if clock is None else clock
        self._name = name
        self.existing_since = existing_since
        self.groups: dict[str, FakeNodeGroup] = {}
        self.limiter: ResourceLimiter | None = None
        self.price: PricingModel | None = None
        self.refresh_error = ""

    @property
    def name(self) -> str:
        return self._name

    def provider_id(self, node_name: str) -> str:
        return f"{self._name}://{node_name}"

    def node_name(self, provider_id: str) -> str:
        return provider_id.removeprefix(f"{self._name}://")

    def add_group(
        self,
        id: str,
        min_size: int = 0,
        max_size: int = 10,
        *,
        nodes: int = 0,
        cpu: str = "4",
        memory: str = "16Gi",
        gpus: int = 0,
        labels: Mapping[str, str] | None = None,
        instant: bool = False,
        options: NodeGroupOptions | None = None,
        created: datetime | None = None,
        **node_kw: Any,
    ) -> FakeNodeGroup:
        """A new group whose nodes have `cpu`, `memory` and `gpus`, and `nodes` running ones.

        `labels` are added to `GROUP_LABEL`; other keywords (`taints`, `extended`,
        `ready`, ...) go to `make_node` for the template. `created` is when the running
        nodes were created (default: `existing_since`, else `ESTABLISHED_AGE` ago).
        """
        if id in self.groups:
            raise ValueError(f"node group {id}: id: expected a new id, already used")
        extended = dict(node_kw.pop("extended", None) or {})
        if gpus:
            extended[GPU_RESOURCE] = gpus
        template = make_node(
            f"{id}-0",
            cpu,
            memory,
            labels={GROUP_LABEL: id, **(labels or {})},
            extended=extended or None,
            provider_id=self.provider_id(f"{id}-0"),
            **node_kw,
        )
        group = FakeNodeGroup(
            self, id, min_size, max_size, template, instant=instant, options=options
        )
        self.groups[id] = group
        since = created or self.existing_since or self.clock.now() - ESTABLISHED_AGE
        group.add_running(nodes, since)
        return group

    def node_groups(self) -> Sequence[FakeNodeGroup]:
        return [self.groups[k] for k in sorted(self.groups)]

    def node_group_for_node(self, node: Node) -> FakeNodeGroup | None:
        gid = node.labels.get(GROUP_LABEL)
        return self.groups.get(gid) if gid else None

    def has_instance(self, node: Node) -> bool:
        group = self.node_group_for_node(node)
        return group is not None and node.provider_id in group.instances

    def pricing(self) -> PricingModel | None:
        return self.price

    def resource_limiter(self) -> ResourceLimiter | None:
        return self.limiter

    def gpu_label(self) -> str:
        return GPU_LABEL

    def refresh(self) -> None:
        if self.refresh_error:
            raise CloudProviderError(self.refresh_error)

    def cleanup(self) -> None:
        return None
