"""The `sim` cloud provider: node groups whose instances are Node objects.

(Long on purpose: it has two backends, the in-memory cluster and a real API server, that
must answer alike.)

The provider keeps no machines. Growing a group creates Node objects from the group's
template (fresh names, the group label, `sim://<group>/<node>` provider IDs); shrinking it
deletes them. Where the Node objects live is the backend's business: the in-memory cluster
of `clusterscaler simulate` (`ProviderContext.cluster`), or a real API server
(`ProviderContext.kube_api`), like Cluster Autoscaler's kwok provider.

Sizes are derived from the backend on every call (registered nodes + nodes still
provisioning + instances that failed to provision), so the provider never drifts from the
cluster it manages.

A node belongs to the group named by its `clusterscaler.io/node-group` label, else to the
group of its `sim://<group>/<node>` provider ID, else to the one group whose `nodeSelector`
it matches: that is how nodes of a real cluster's snapshot are adopted. A node two groups'
selectors match belongs to neither, and `refresh()` fails naming both groups.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import structlog
from clusterscaler.api import (
    DELETION_CANDIDATE_TAINT,
    HOSTNAME_LABEL,
    NODE_CONDITION_TAINTS,
    TO_BE_DELETED_TAINT,
    CloudProviderError,
    ConfigurationError,
    Instance,
    InstanceErrorInfo,
    InstanceState,
    Node,
    NodeGroupOptions,
    NodeInfo,
    ProviderContext,
    ResourceLimiter,
    TaintConfig,
    checked_increase,
)
from clusterscaler.plugins.sim.config import (
    NODE_GROUP_LABEL,
    NodeGroupSpec,
    SimCloudConfig,
    load_cloud_config,
    parse_cloud_config,
)
from clusterscaler.plugins.sim.pricing import SimPricing

if TYPE_CHECKING:
    from clusterscaler.api import AutoscalingOptions

log = structlog.get_logger()

PROVIDER_NAME = "sim"
PROVIDER_ID_PREFIX = "sim://"
GPU_LABEL = "clusterscaler.io/accelerator"
EMBEDDED_CONFIG_KEY = "sim_cloud_config"


@runtime_checkable
class NodeBackend(Protocol):
    """Where the `sim` provider's Node objects live."""

    def list_nodes(self) -> Sequence[Node]:
        """Every registered node (the provider filters by the group label)."""
        ...

    def list_pending_nodes(self) -> Sequence[Node]:
        """Nodes requested with `create_node` that have not registered yet."""
        ...

    def create_node(self, node: Node, ready_after: timedelta) -> None:
        """Create `node`; it may take `ready_after` to register and become ready."""
        ...

    def delete_node(self, name: str) -> None:
        """Delete a registered node (a missing node counts as deleted)."""
        ...

    def cancel_pending_node(self, name: str) -> bool:
        """Forget a node that has not registered yet; whether there was one."""
        ...

    def provisioning_error(self, group: str) -> InstanceErrorInfo | None:
        """The error new instances of `group` fail with right now, or `None`."""
        ...


def provider_id(group: str, node_name: str) -> str:
    return f"{PROVIDER_ID_PREFIX}{group}/{node_name}"


def group_of_provider_id(pid: str) -> str | None:
    if not pid.startswith(PROVIDER_ID_PREFIX):
        return None
    rest = pid[len(PROVIDER_ID_PREFIX) :]
    group, sep, _ = rest.partition("/")
    return group if sep and group else None


def instance_name(node: Node) -> str:
    """The name of the node an instance is (or was to be), also for placeholder nodes."""
    if node.provider_id.startswith(PROVIDER_ID_PREFIX):
        _, sep, name = node.provider_id[len(PROVIDER_ID_PREFIX) :].partition("/")
        if sep and name:
            return name
    return node.name


class NodeOwnership:
    """Which group of the cloud-config a node belongs to (see the module docstring)."""

    def __init__(self, specs: Sequence[NodeGroupSpec]) -> None:
        self._index_of = {s.name: i for i, s in enumerate(specs)}
        # Selecting groups indexed by one of their labels, so that a node is checked
        # against the few groups whose first label it carries, not against all of them.
        self._by_label: dict[str, dict[str, list[NodeGroupSpec]]] = {}
        for spec in specs:
            if spec.node_selector:
                key = min(spec.node_selector)
                values = self._by_label.setdefault(key, {})
                values.setdefault(spec.node_selector[key], []).append(spec)
        # Owners by node name, valid while the backend lists the same Node object: every
        # group filters every node several times a loop, and a node's labels only change
        # through a new object.
        self._cache: dict[str, tuple[Node, str | None]] = {}

    @property
    def selects(self) -> bool:
        """Whether any group adopts nodes by a nodeSelector."""
        return bool(self._by_label)

    def selected_by(self, node: Node) -> list[NodeGroupSpec]:
        """The groups whose nodeSelector `node` matches, in cloud-config order."""
        found: list[NodeGroupSpec] = []
        labels = node.labels
        for key, values in self._by_label.items():
            value = labels.get(key)
            if value is None:
                continue
            found.extend(s for s in values.get(value, ()) if s.selects(labels))
        found.sort(key=lambda s: self._index_of[s.name])
        return found

    def owner(self, node: Node) -> str | None:
        """The name of the group `node` belongs to, or None (the name may be of a group the
        cloud-config does not declare: such nodes are not autoscaled)."""
        cached = self._cache.get(node.name)
        if cached is not None and cached[0] is node:
            return cached[1]
        owner = node.labels.get(NODE_GROUP_LABEL) or group_of_provider_id(node.provider_id)
        if not owner and self._by_label:
            selected = self.selected_by(node)
            owner = selected[0].name if len(selected) == 1 else None
        self._cache[node.name] = (node, owner or None)
        return owner or None

    def conflicts(self, nodes: Sequence[Node]) -> list[str]:
        """One message per node that two or more groups' nodeSelectors match."""
        # Called with every node at each refresh: forget the nodes that are gone.
        listed = {n.name for n in nodes}
        self._cache = {k: v for k, v in self._cache.items() if k in listed}
        out: list[str] = []
        if not self._by_label:
            return out
        for node in nodes:
            if node.labels.get(NODE_GROUP_LABEL) or group_of_provider_id(node.provider_id):
                continue
            selected = self.selected_by(node)
            if len(selected) > 1:
                groups = " and ".join(
                    f"nodeGroups[{self._index_of[s.name]}] ({s.name})" for s in selected
                )
                out.append(
                    f"node {node.name}: matched by the nodeSelector of {groups}; expected "
                    f"one group per node: make the selectors exclusive, or label the node "
                    f"{NODE_GROUP_LABEL}=<group>"
                )
        return out


def member_rule(ownership: NodeOwnership | None) -> Callable[[Node], str | None]:
    """The group whose registered nodes include `node`: by the group label alone unless a
    group adopts nodes by nodeSelector (then by the ownership rules)."""
    if ownership is None or not ownership.selects:
        return lambda node: node.labels.get(NODE_GROUP_LABEL)
    return ownership.owner


class GroupIndex:
    """The registered nodes of every group, kept current from a backend that journals its
    node changes (`node_version()`, `node_changes_since(version)`, `get_node(name)`: the
    in-memory cluster does). Sizes then cost the time of the changes since the last call,
    not of the whole cluster: the autoscaler deletes nodes one call at a time, and each
    call checks the group's size against its minimum."""

    def __init__(self, backend: NodeBackend, member_of: Callable[[Node], str | None]) -> None:
        self._backend: Any = backend
        self._member_of = member_of
        self._version: int | None = None
        self._members: dict[str, dict[str, Node]] = {}
        # Members whose Node object is being deleted (a deletionTimestamp): not counted.
        self._deleting: dict[str, set[str]] = {}
        self._group_of: dict[str, str] = {}

    @staticmethod
    def supports(backend: object) -> bool:
        return all(
            callable(getattr(backend, name, None))
            for name in ("node_version", "node_changes_since", "get_node")
        )

    def members(self, group: str) -> list[Node]:
        """The group's registered nodes, in the order they joined the group (a node that
        moved from another group comes last)."""
        self._sync()
        return list(self._members.get(group, {}).values())

    def active(self, group: str) -> int:
        """How many of the group's registered nodes are not being deleted."""
        self._sync()
        return len(self._members.get(group, ())) - len(self._deleting.get(group, ()))

    def _sync(self) -> None:
        # The version is read before the changes: a change landing in between is applied
        # now and again at the next call, which is harmless (updates are idempotent).
        version = self._backend.node_version()
        if version == self._version:
            return
        changes = None
        if self._version is not None:
            changes = self._backend.node_changes_since(self._version)
        if changes is None:
            self._members.clear()
            self._deleting.clear()
            self._group_of.clear()
            for node in self._backend.list_nodes():
                self._update(node.name, node)
        else:
            get_node = self._backend.get_node
            for name in dict.fromkeys(changes):
                self._update(name, get_node(name))
        self._version = version

    def _update(self, name: str, node: Node | None) -> None:
        old = self._group_of.get(name)
        new = self._member_of(node) if node is not None else None
        if old is not None and old != new:
            del self._members[old][name]
            self._deleting[old].discard(name)
            del self._group_of[name]
        if node is None or new is None:
            return
        # Assigned in place: a node replaced by a new object (a taint added, say) keeps
        # its position, as in the backend's listing.
        self._members.setdefault(new, {})[name] = node
        self._group_of[name] = new
        deleting = self._deleting.setdefault(new, set())
        if node.deletion_time is None:
            deleting.discard(name)
        else:
            deleting.add(name)


def copy_node(node: Node, group: str, taints: TaintConfig) -> Node:
    """`node` as the template of `group`: what a new node like it would be. Its name-bound
    fields (hostname, provider ID, uid, annotations) go, and so do the taints of its state
    rather than of its kind: the autoscaler's, node-condition, startup and status taints."""
    labels = {k: v for k, v in node.labels.items() if k != HOSTNAME_LABEL}
    labels[NODE_GROUP_LABEL] = group
    kept = tuple(
        t
        for t in node.taints
        if t.key not in (TO_BE_DELETED_TAINT, DELETION_CANDIDATE_TAINT)
        and t.key not in NODE_CONDITION_TAINTS
        and not taints.is_startup(t.key)
        and not taints.is_status(t.key)
    )
    return Node(
        name=f"template-{group}",
        labels=labels,
        taints=kept,
        capacity=node.capacity,
        allocatable=node.allocatable,
        ready=True,
    )


@dataclass
class _FailedInstance:
    name: str
    error: InstanceErrorInfo


@dataclass
class SimNodeGroup:
    """One node group of the cloud-config. Satisfies `NodeGroup`."""

    spec: NodeGroupSpec
    backend: NodeBackend
    ownership: NodeOwnership | None = None
    # Which taints a node copied into a template loses (see `copy_node`).
    taints: TaintConfig = field(default_factory=TaintConfig)
    # Registered nodes by group, when the backend journals its changes (see `GroupIndex`).
    index: GroupIndex | None = None
    _copied: Node | None = None
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _failed: list[_FailedInstance] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.spec.name

    @property
    def min_size(self) -> int:
        return self.spec.min_size

    @property
    def max_size(self) -> int:
        return self.spec.max_size

    def _owner(self, node: Node) -> str | None:
        if self.ownership is None:
            return node.labels.get(NODE_GROUP_LABEL) or group_of_provider_id(node.provider_id)
        return self.ownership.owner(node)

    def _own(self, nodes: Sequence[Node]) -> list[Node]:
        name = self.spec.name
        member_of = member_rule(self.ownership)
        return [n for n in nodes if member_of(n) == name]

    def registered_nodes(self) -> list[Node]:
        if self.index is not None:
            return self.index.members(self.spec.name)
        return self._own(self.backend.list_nodes())

    def pending_nodes(self) -> list[Node]:
        return self._own(self.backend.list_pending_nodes())

    def target_size(self) -> int:
        if self.index is not None:
            registered = self.index.active(self.spec.name)
        else:
            registered = sum(1 for n in self.registered_nodes() if n.deletion_time is None)
        return registered + len(self.pending_nodes()) + len(self._failed)

    def _new_name(self, taken: set[str]) -> str:
        while True:
            name = f"{self.spec.name}-{next(self._names):05d}"
            if name not in taken:
                return name

    def template(self) -> Node:
        """The node new nodes are made from: the cloud-config's template, else a copy of
        one of the group's nodes (a group declared by nodeSelector alone), remembered for
        when the group has no node left. Raises `CloudProviderError` when there is neither."""
        if self.spec.template is not None:
            return self.spec.template
        candidates = sorted(
            (n for n in self.registered_nodes() if n.deletion_time is None),
            # A Ready, schedulable node without taints of its own state is the best model.
            key=lambda n: (not n.ready or n.unschedulable, n.name),
        )
        if candidates:
            self._copied = copy_node(candidates[0], self.spec.name, self.taints)
        if self._copied is None:
            raise CloudProviderError(
                f"node group {self.id}: no template in the cloud-config and no node of the "
                f"group to copy one from"
            )
        return self._copied

    def new_node(self, name: str, template: Node | None = None) -> Node:
        """A node of this group as `increase_size` creates it (from `template`, by default
        the group's)."""
        template = template or self.template()
        labels = dict(template.labels)
        labels[HOSTNAME_LABEL] = name
        labels[NODE_GROUP_LABEL] = self.spec.name
        return template.with_(
            name=name, labels=labels, provider_id=provider_id(self.spec.name, name), ready=True
        )

    def increase_size(self, delta: int) -> None:
        wanted = checked_increase(f"node group {self.id}", self.target_size(), delta, self.max_size)
        # Fails before anything is created when the group has nothing to copy.
        template = self.template()
        error = self.backend.provisioning_error(self.id)
        taken = {n.name for n in self.backend.list_nodes()}
        taken.update(n.name for n in self.backend.list_pending_nodes())
        taken.update(f.name for f in self._failed)
        for _ in range(delta):
            name = self._new_name(taken)
            taken.add(name)
            if error is not None:
                self._failed.append(_FailedInstance(name, error))
            else:
                self.backend.create_node(self.new_node(name, template), self.spec.provision_delay)
        log.debug(
            "sim_increase_size",
            node_group=self.id,
            delta=delta,
            target=wanted,
            error=None if error is None else error.error_code,
        )

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            group = self._owner(node)
            if group != self.id:
                raise CloudProviderError(
                    f"node group {self.id}: delete_nodes: node {node.name} belongs to "
                    f"{group or 'no node group'}"
                )
        # The autoscaler names instances that never became nodes (still provisioning, or
        # failed) by placeholder nodes carrying their provider ID.
        names = [instance_name(node) for node in nodes]
        failed = {f.name for f in self._failed}
        pending = {n.name for n in self.pending_nodes()}
        registered = [n for n in names if n not in failed and n not in pending]
        target = self.target_size()
        # Only nodes that exist count against the minimum: dropping requests that never
        # turned into nodes takes nothing away.
        if registered and target - len(names) < self.min_size:
            raise CloudProviderError(
                f"node group {self.id}: delete_nodes: min size reached, deleting "
                f"{len(nodes)} of {target} nodes would go below min {self.min_size}"
            )
        dropped: set[str] = set()
        for name in names:
            if name in failed:
                dropped.add(name)
            elif name in pending:
                self.backend.cancel_pending_node(name)
            else:
                self.backend.delete_node(name)
        if dropped:
            self._failed = [f for f in self._failed if f.name not in dropped]
        log.debug("sim_delete_nodes", node_group=self.id, nodes=names)

    def decrease_target_size(self, delta: int) -> None:
        if delta >= 0:
            raise CloudProviderError(
                f"node group {self.id}: decrease_target_size: expected a negative delta, got {delta}"
            )
        pending = self.pending_nodes()
        if -delta > len(pending) + len(self._failed):
            raise CloudProviderError(
                f"node group {self.id}: decrease_target_size: attempt to delete existing "
                f"nodes, only {len(pending) + len(self._failed)} requested nodes have not "
                f"registered (delta {delta})"
            )
        remaining = -delta
        # Failed requests go first: they would never have become nodes anyway.
        while remaining and self._failed:
            self._failed.pop()
            remaining -= 1
        for node in reversed(pending):
            if not remaining:
                break
            if self.backend.cancel_pending_node(node.name):
                remaining -= 1

    def nodes(self) -> Sequence[Instance]:
        # A registered node is matched to its instance by provider ID. A node without one
        # (an adopted node of a cluster that sets none) is its own instance: listing it
        # under a made-up ID would read as an instance that never registered.
        out = [
            Instance(
                id=n.provider_id,
                state=InstanceState.DELETING if n.deletion_time is not None else InstanceState.RUNNING,
            )
            for n in self.registered_nodes()
            if n.provider_id
        ]
        out.extend(
            Instance(id=provider_id(self.id, n.name), state=InstanceState.CREATING)
            for n in self.pending_nodes()
        )
        out.extend(
            Instance(id=provider_id(self.id, f.name), state=InstanceState.CREATING, error=f.error)
            for f in self._failed
        )
        return out

    def template_node_info(self) -> NodeInfo:
        name = f"template-node-for-{self.id}"
        return NodeInfo(
            self.new_node(name).with_(provider_id=""),
            resource_slices=self.spec.resource_slices,
        )

    def check_template(self) -> None:
        """Raise `ConfigurationError` when the group has no template and no node to copy."""
        try:
            self.template()
        except CloudProviderError:
            selector = ", ".join(f"{k}: {v}" for k, v in sorted(self.spec.node_selector.items()))
            raise ConfigurationError(
                f"node group {self.id}: template: required when no node matches the "
                f"nodeSelector {{{selector}}}"
            ) from None

    def exist(self) -> bool:
        return True

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        return None

    def debug(self) -> str:
        return (
            f"{self.id} (min: {self.min_size}, max: {self.max_size}, "
            f"target: {self.target_size()})"
        )


class SimCloudProvider:
    """The `sim` cloud provider. Satisfies `CloudProvider`."""

    def __init__(
        self, config: SimCloudConfig, backend: NodeBackend, taints: TaintConfig | None = None
    ) -> None:
        self.config = config
        self.backend = backend
        self.ownership = NodeOwnership(config.node_groups)
        index = (
            GroupIndex(backend, member_rule(self.ownership))
            if GroupIndex.supports(backend)
            else None
        )
        self._groups = [
            SimNodeGroup(spec, backend, self.ownership, taints or TaintConfig(), index)
            for spec in config.node_groups
        ]
        self._by_name = {g.id: g for g in self._groups}
        self._pricing = SimPricing(
            {s.name: s.price for s in config.node_groups if s.price is not None},
            group_of=self.ownership.owner,
        )

    @property
    def name(self) -> str:
        return PROVIDER_NAME

    def node_groups(self) -> Sequence[SimNodeGroup]:
        return list(self._groups)

    def node_group(self, name: str) -> SimNodeGroup | None:
        return self._by_name.get(name)

    def node_group_for_node(self, node: Node) -> SimNodeGroup | None:
        group = self.ownership.owner(node)
        return self._by_name.get(group) if group else None

    def check_nodes(self) -> None:
        """Fail when a node matches the nodeSelector of two groups: which group scales it
        would be a guess. Raises `ConfigurationError` naming the cloud-config, the node and
        both groups."""
        conflicts = self.ownership.conflicts(self.backend.list_nodes())
        if conflicts:
            more = f" (and {len(conflicts) - 1} more nodes)" if len(conflicts) > 1 else ""
            raise ConfigurationError(f"{self.config.source}: {conflicts[0]}{more}")

    def has_instance(self, node: Node) -> bool:
        # The Node object is the instance: while it is listed, the instance exists.
        return True

    def pricing(self) -> SimPricing:
        return self._pricing

    def resource_limiter(self) -> ResourceLimiter | None:
        return None

    def gpu_label(self) -> str:
        return GPU_LABEL

    def refresh(self) -> None:
        refresh = getattr(self.backend, "refresh", None)
        if callable(refresh):
            refresh()
        self.check_nodes()

    def cleanup(self) -> None:
        return None


def config_from_options(options: AutoscalingOptions) -> SimCloudConfig:
    """The node groups: from `--cloud-config`, or from an already loaded document in
    `options.extra["sim_cloud_config"]` (scenario files embed their cloud-config)."""
    embedded = options.extra.get(EMBEDDED_CONFIG_KEY)
    path = options.cloud_config
    if embedded is not None:
        return parse_cloud_config(embedded, source="scenario cloudConfig")
    if path:
        return load_cloud_config(path)
    raise ConfigurationError(
        "--cloud-config: the sim provider needs a cloud-config file declaring nodeGroups "
        "(see examples/cloud-configs/); got none"
    )


def check_options(options: AutoscalingOptions) -> None:
    """The `check_options` of the `sim` provider: its cloud-config reads and parses, and no
    flag names node groups it would not read."""
    for flag, values in (("--nodes", options.nodes),
                         ("--node-group-auto-discovery", options.node_group_auto_discovery)):
        if values:
            raise ConfigurationError(
                f"{flag}={values[0]!r}: the sim provider does not read {flag}; its node "
                "groups are the nodeGroups of its cloud-config (--cloud-config)"
            )
    config_from_options(options)


def build_provider(context: ProviderContext) -> SimCloudProvider:
    """The factory registered as `sim`: the in-memory cluster offline, else the API server.

    The node groups come from the cloud-config (`config_from_options`).
    """
    config = config_from_options(context.options)
    backend: NodeBackend
    if context.cluster is not None:
        if not isinstance(context.cluster, NodeBackend):
            raise ConfigurationError(
                f"sim provider: the in-memory cluster {type(context.cluster).__name__} does not "
                "offer list_nodes, list_pending_nodes, create_node, delete_node, "
                "cancel_pending_node and provisioning_error"
            )
        backend = context.cluster
    elif context.kube_api is not None:
        from clusterscaler.plugins.sim.kube import KubeNodeBackend

        # Nodes adopted by a nodeSelector carry no group label: list them all then.
        adopts = any(spec.node_selector for spec in config.node_groups)
        backend = KubeNodeBackend(context.kube_api, all_nodes=adopts)
    else:
        raise ConfigurationError(
            "sim provider: neither an in-memory cluster nor a Kubernetes API client was given; "
            "use `clusterscaler simulate` offline or --kubeconfig for a real API server"
        )
    provider = SimCloudProvider(config, backend, TaintConfig.from_options(context.options))
    if context.cluster is not None:
        # The in-memory cluster names the groups of nodes in its events (node-deleted, ...):
        # it needs the provider's rules, since adopted nodes carry no group label.
        use_provider = getattr(context.cluster, "use_provider", None)
        if callable(use_provider):
            use_provider(provider)
        # Offline the nodes are all there: an ambiguous cloud-config, or a group with
        # nothing to make nodes from, is bad input, refused before the simulation starts
        # rather than at its first loop.
        provider.check_nodes()
        try:
            for group in provider.node_groups():
                group.check_template()
        except ConfigurationError as exc:
            # Named with the file (or the scenario's inline cloud-config) it comes from.
            raise ConfigurationError(f"{config.source}: {exc}") from None
    return provider
