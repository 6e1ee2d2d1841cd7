"""The in-memory cluster `clusterscaler simulate` runs the loop against.

(Long on purpose: the kubelet, scheduler and controllers it stands in for act on the
same objects within one virtual tick.)

`SimulatedCluster` is the core's `InMemoryCluster` (a `ClusterSource` and `ClusterActions`)
plus what a real cluster does on its own while the autoscaler waits:

- nodes requested from the `sim` provider register and become ready after their group's
  provision delay (and DaemonSet pods land on them);
- a scheduler binds pending pods to ready nodes that fit, using the same predicates as
  the autoscaler's scheduling simulation, and marks the others unschedulable;
- controllers recreate the pods they own when those are evicted or their node is deleted;
- scenario events scale workloads, add or delete pods, cordon nodes and make groups fail
  to provision.

It also implements the `sim` provider's node backend (`list_nodes`, `create_node`, ...).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.schedulerconfig import SchedulerConfig
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    InstanceErrorClass,
    InstanceErrorInfo,
)
from clusterscaler.model import (
    ClusterObjects,
    ConfigMap,
    Controller,
    CSINode,
    DaemonSet,
    Namespace,
    Node,
    NodeCondition,
    OwnerRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Taint,
)
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.simulator import ClusterSnapshot, check_predicates, find_fitting_node
from clusterscaler.simulator.equivalence import scheduling_key
from clusterscaler.simulator.profile import DefaultSpread, configured_filters

log = structlog.get_logger()

# Owner kinds whose controller recreates a deleted pod.
RECREATING_KINDS = frozenset({"ReplicaSet", "ReplicationController", "StatefulSet", "Job"})


class SimulationError(ValueError):
    """A scenario event refers to something the cluster does not have."""


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """Something the simulated cluster did on its own (for the timeline)."""

    time: datetime
    action: str
    node_group: str = ""
    detail: str = ""


@dataclass(slots=True)
class _Pending:
    node: Node
    ready_at: datetime


@dataclass
class PodTimes:
    """When pods started waiting and how long bound pods waited, for the summary."""

    waiting_since: dict[str, datetime] = field(default_factory=dict)
    waits: list[timedelta] = field(default_factory=list)


def controller_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


class NodeTable(dict[str, Node]):
    """The cluster's nodes by name, journaling the names whose node changed (added,
    replaced or removed). A reader that indexes the nodes (the `sim` provider's group
    membership) then catches up in the time of the changes, not of the cluster: deleting
    1,000 nodes one call at a time must not rescan the cluster 1,000 times."""

    # Changes remembered; a reader further behind rebuilds from the whole table.
    JOURNAL = 8192

    def __init__(self, nodes: Iterable[tuple[str, Node]] = ()) -> None:
        super().__init__(nodes)
        self._journal: deque[str] = deque(maxlen=self.JOURNAL)
        self.version = 0

    def _touch(self, name: str) -> None:
        self._journal.append(name)
        self.version += 1

    def changes_since(self, version: int) -> list[str] | None:
        """Names changed after `version` (oldest first, repeats possible), or `None` when
        the journal no longer reaches back that far."""
        behind = self.version - version
        if behind < 0 or behind > len(self._journal):
            return None
        journal = self._journal
        return [journal[-i] for i in range(behind, 0, -1)]

    def __setitem__(self, name: str, node: Node) -> None:
        super().__setitem__(name, node)
        self._touch(name)

    def __delitem__(self, name: str) -> None:
        super().__delitem__(name)
        self._touch(name)

    def pop(self, name: str, *default: Any) -> Any:
        if name in self:
            self._touch(name)
        return super().pop(name, *default)

    def popitem(self) -> tuple[str, Node]:
        name, node = super().popitem()
        self._touch(name)
        return name, node

    def setdefault(self, name: str, default: Node, /) -> Node:
        if name not in self:
            self[name] = default
        return self[name]

    def update(self, *args: Any, **kwargs: Node) -> None:
        for name, node in dict(*args, **kwargs).items():
            self[name] = node

    def __ior__(self, other: Any) -> NodeTable:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        for name in list(self):
            self._touch(name)
        super().clear()


class SimulatedCluster(InMemoryCluster):
    """An in-memory cluster with provisioning delay, a scheduler and controllers."""

    def __init__(
        self,
        objects: ClusterObjects,
        clock: VirtualClock,
        *,
        group_label: str = "clusterscaler.io/node-group",
        scheduler_config: SchedulerConfig | None = None,
    ) -> None:
        super().__init__(
            objects.nodes,
            objects.pods,
            pdbs=objects.pdbs,
            daemonsets=objects.daemonsets,
            controllers=objects.controllers,
            recreate_evicted=False,
        )
        self.clock = clock
        self.group_label = group_label
        # The cluster's scheduler follows the profile the autoscaler is told about
        # (--scheduler-config-file), as kube-scheduler would with the same file.
        self.scheduler_config = scheduler_config or SchedulerConfig()
        self._filters = configured_filters(self.scheduler_config)
        self._default_spread = DefaultSpread(self.scheduler_config)
        self.nodes: NodeTable = NodeTable(self.nodes.items())
        # The provider whose groups these nodes are (see `use_provider`); until one is
        # attached, a node's group is its group label.
        self.provider: CloudProvider | None = None
        self.pvs: list[PersistentVolume] = list(objects.pvs)
        self.pvcs: list[PersistentVolumeClaim] = list(objects.pvcs)
        self.storage_classes: list[StorageClass] = list(objects.storage_classes)
        self.storage_listed = objects.storage_listed
        # The claims the StatefulSet and ephemeral volume controllers would make for the
        # pods created here: not modelled, so not checked (`ClusterObjects.unmodelled_claims`).
        self.unmodelled_claims: set[str] = set(objects.unmodelled_claims)
        self.csinodes: list[CSINode] = list(objects.csinodes)
        # DRA objects, as read (claims are not updated as the simulation binds pods: a pod
        # bound here holds the devices its claims get when the snapshot places it).
        self.dra_objects = (
            list(objects.resource_slices),
            list(objects.device_classes),
            list(objects.resource_claims),
            list(objects.resource_claim_templates),
        )
        self.config_maps: list[ConfigMap] = list(objects.config_maps)
        self.namespaces: list[Namespace] = list(objects.namespaces)
        # ProvisioningRequests as read: the conditions the loop gives them are the loop's
        # own to remember (it keeps what it wrote while a request's version is unchanged).
        self.provisioning_requests = list(objects.provisioning_requests)
        # CapacityBuffers as read, with the ResourceQuotas that bound them: the status the
        # loop gives a buffer is computed again each loop, from its spec (with
        # --capacity-buffer-controller-enabled) or as read.
        self.capacity_buffers = list(objects.capacity_buffers)
        self.resource_quotas = list(objects.resource_quotas)
        self.pod_templates = list(objects.pod_templates)
        self.capacity_quotas = list(objects.capacity_quotas)
        self.pending_nodes: dict[str, _Pending] = {}
        self.failures: dict[str, InstanceErrorInfo] = {}
        self.events: list[ClusterEvent] = []
        self.times = PodTimes()
        # Pod templates per controller: the controller objects of the model carry none, so
        # the first pod seen of each controller stands in for its template.
        self.templates: dict[str, Pod] = {}
        self._seq = itertools.count(1)
        self._names = itertools.count(1)
        self._generation = 0
        self._scheduled_generation = -1
        waiting_since = self.times.waiting_since
        for key, pod in self.pods.items():
            if pod.owner is not None:
                self._remember_template(pod)
            if not pod.node_name and not pod.is_terminal:
                waiting_since[key] = self._wait_start(pod)

    # ------------------------------------------------------------------ source

    def snapshot(self) -> ClusterObjects:
        objects = super().snapshot()
        objects.pvs = list(self.pvs)
        objects.pvcs = list(self.pvcs)
        objects.storage_classes = list(self.storage_classes)
        objects.storage_listed = self.storage_listed
        objects.unmodelled_claims = frozenset(self.unmodelled_claims)
        objects.csinodes = list(self.csinodes)
        slices, classes, claims, templates = self.dra_objects
        objects.resource_slices = list(slices)
        objects.device_classes = list(classes)
        objects.resource_claims = list(claims)
        objects.resource_claim_templates = list(templates)
        objects.config_maps = list(self.config_maps)
        objects.namespaces = list(self.namespaces)
        objects.provisioning_requests = list(self.provisioning_requests)
        objects.capacity_buffers = list(self.capacity_buffers)
        objects.resource_quotas = list(self.resource_quotas)
        objects.pod_templates = list(self.pod_templates)
        objects.capacity_quotas = list(self.capacity_quotas)
        return objects

    # ------------------------------------------------------------------ node backend

    def list_nodes(self) -> Sequence[Node]:
        with self._lock:
            return list(self.nodes.values())

    def list_pending_nodes(self) -> Sequence[Node]:
        return [p.node for p in self.pending_nodes.values()]

    def node_version(self) -> int:
        """A counter of node changes (see `NodeTable`)."""
        return self.nodes.version

    def node_changes_since(self, version: int) -> list[str] | None:
        """Names of the nodes changed after `node_version()` was `version`, or `None` when
        too many changed to tell (see `NodeTable.changes_since`)."""
        with self._lock:
            return self.nodes.changes_since(version)

    def get_node(self, name: str) -> Node | None:
        return self.nodes.get(name)

    def create_node(self, node: Node, ready_after: timedelta) -> None:
        now = self.clock.now()
        if node.name in self.nodes or node.name in self.pending_nodes:
            raise SimulationError(f"node {node.name}: name: expected a new name, already in use")
        self.pending_nodes[node.name] = _Pending(node, now + ready_after)

    def delete_node(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None:
            return
        # The pods are collected and deleted under the lock in one step, so an eviction
        # running on another thread cannot slip between the two.
        orphans = self.remove_node(name)
        for pod in orphans:
            self._recreate(pod)
        self._event("node-deleted", node, detail=f"{len(orphans)} pods on it")

    def cancel_pending_node(self, name: str) -> bool:
        return self.pending_nodes.pop(name, None) is not None

    def provisioning_error(self, group: str) -> InstanceErrorInfo | None:
        return self.failures.get(group)

    # ------------------------------------------------------------------ actions

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        key = pod.key
        current = self.pods.get(key)
        super().evict(pod, grace_period_seconds)
        self._changed()
        if current is not None and key not in self.pods:
            self._recreate(current)

    # ------------------------------------------------------------------ time passing

    def step(self, *, retry_unschedulable: bool = True) -> None:
        """What the cluster does by `clock.now()`: register due nodes, then schedule.

        Without `retry_unschedulable`, pods a scheduler already marked unschedulable are
        left as they are (a snapshot of a real cluster is taken at its word).
        """
        now = self.clock.now()
        due = sorted(
            (p for p in self.pending_nodes.values() if p.ready_at <= now),
            key=lambda p: (p.ready_at, p.node.name),
        )
        for pending in due:
            del self.pending_nodes[pending.node.name]
            self._register(pending.node, pending.ready_at)
        self.schedule(retry_unschedulable=retry_unschedulable)

    def next_registration(self) -> datetime | None:
        if not self.pending_nodes:
            return None
        return min(p.ready_at for p in self.pending_nodes.values())

    def _register(self, node: Node, at: datetime) -> None:
        node = node.with_(
            creation_time=at,
            ready=True,
            conditions=(NodeCondition("Ready", "True", "KubeletReady", "", at),),
        )
        self.add_node(node)
        self._event("node-ready", node)
        for ds in self.daemonsets:
            self.place_daemon_pod(ds, node)

    def place_daemon_pod(self, ds: DaemonSet, node: Node, name: str = "") -> Pod | None:
        """Run `ds`'s pod on `node` where the DaemonSet controller would (named `name`,
        by default after the node); the pod placed, or `None`."""
        if ds.template is None:
            return None
        owner = OwnerRef(kind="DaemonSet", name=ds.name, uid=ds.uid, controller=True)
        pod = ds.template.with_(
            namespace=ds.namespace,
            name=name or f"{ds.name}-{node.name}",
            uid=f"{ds.uid or ds.name}-{node.name}",
            owner=owner,
            owners=(owner,),
            creation_time=self.clock.now(),
        )
        snap = ClusterSnapshot.from_objects(ClusterObjects(nodes=[node]))
        ni = snap.get(node.name)
        # The DaemonSet controller places its pod only where node selector, affinity and
        # taints allow; resources are not its concern.
        reason = check_predicates(pod, ni, snap)
        if reason is not None and not reason.startswith("Insufficient"):
            return None
        pod = pod.with_(node_name=node.name, phase="Running")
        self.add_pod(pod)
        return pod

    def schedule(self, *, retry_unschedulable: bool = True) -> int:
        """Bind pending pods to ready nodes, highest priority and oldest first.

        Pods that fit nowhere are marked unschedulable (PodScheduled=False), as
        kube-scheduler does; that is what makes the autoscaler consider them.
        """
        now = self.clock.now()
        with self._lock:
            pending = [
                p
                for p in self.pods.values()
                if not p.node_name
                and not p.is_terminal
                and p.deletion_time is None
                and (retry_unschedulable or not p.unschedulable)
            ]
        if not pending:
            return 0
        if self._generation == self._scheduled_generation and all(p.unschedulable for p in pending):
            # Nothing changed since these pods last found no node: they still would not.
            return 0
        pending.sort(key=lambda p: (-(p.priority or 0), p.creation_time or self.clock.start, p.key))
        objects = self._default_spread(self.snapshot())
        snap = ClusterSnapshot.from_objects(objects, self._filters)
        # Pods as the scheduler sees them: with the profile's default spread constraints.
        as_seen = (
            {p.key: p for p in objects.pods}
            if self.scheduler_config.filters_default_spread
            else None
        )
        with self._lock:
            ready = {n.name for n in self.nodes.values() if n.ready}
        # Equivalent pods fail alike: capacity only shrinks while this pass binds pods.
        failed: set[tuple[str, Hashable]] = set()
        bound = 0
        for pod in pending:
            seen = as_seen.get(pod.key, pod) if as_seen is not None else pod
            key = _equivalence(seen)
            target = None
            if key is None or key not in failed:
                target = find_fitting_node(seen, snap, node_filter=lambda ni: ni.node.name in ready)
            if target is None:
                if key is not None:
                    failed.add(key)
                if not pod.unschedulable:
                    self._mark_unschedulable(pod)
                continue
            snap.add_pod(seen, target)
            self.bind(pod.key, target)
            bound += 1
            since = self.times.waiting_since.pop(pod.key, None)
            if since is not None:
                self.times.waits.append(max(now - since, timedelta(0)))
        self._scheduled_generation = self._generation
        return bound

    def _mark_unschedulable(self, pod: Pod) -> None:
        with self._lock:
            # Only the pod as the pass saw it: one bound or deleted meanwhile is left alone.
            if self.pods.get(pod.key) is pod:
                self.pods[pod.key] = pod.with_(unschedulable=True)

    # ------------------------------------------------------------------ change tracking
    # Every change that can make room for a pending pod (or take it away) bumps the
    # generation, so that `schedule` only retries pods when something changed.

    def _changed(self) -> None:
        with self._lock:
            self._generation += 1

    def add_node(self, node: Node) -> None:
        super().add_node(node)
        self._changed()

    def remove_node(self, name: str) -> list[Pod]:
        removed = super().remove_node(name)
        self._changed()
        return removed

    def add_pod(self, pod: Pod) -> None:
        super().add_pod(pod)
        if pod.volumes:
            self._claims_made_for(pod)
        self._changed()

    def _claims_made_for(self, pod: Pod) -> None:
        """Note the claims a controller makes with `pod` that the cluster does not hold: its
        generic ephemeral volumes' (the ephemeral volume controller's) and, for a StatefulSet
        pod, its claims (the StatefulSet controller's, from its volumeClaimTemplates)."""
        stateful = pod.owner is not None and pod.owner.kind == "StatefulSet"
        made = {
            f"{pod.namespace}/{pod.name}-{v.name}"
            if v.kind == "ephemeral"
            else f"{pod.namespace}/{v.claim_name}"
            for v in pod.volumes
            if v.kind == "ephemeral" or (stateful and v.kind == "persistentVolumeClaim")
        }
        if made:
            self.unmodelled_claims |= made - {c.key for c in self.pvcs}

    def bind(self, pod_key: str, node_name: str) -> None:
        super().bind(pod_key, node_name)
        self._changed()

    def add_taint(self, node_name: str, taint: Taint) -> None:
        super().add_taint(node_name, taint)
        self._changed()

    def remove_taint(self, node_name: str, key: str) -> bool:
        removed = super().remove_taint(node_name, key)
        self._changed()
        return removed

    def set_unschedulable(self, node_name: str, unschedulable: bool) -> None:
        super().set_unschedulable(node_name, unschedulable)
        self._changed()

    # ------------------------------------------------------------------ controllers

    def _remember_template(self, pod: Pod) -> None:
        if pod.owner is not None and pod.owner.kind in RECREATING_KINDS:
            key = controller_key(pod.owner.kind, pod.namespace, pod.owner.name)
            self.templates.setdefault(key, pod)

    def _wait_start(self, pod: Pod) -> datetime:
        created = pod.creation_time
        if created is None or created < self.clock.start:
            return self.clock.start
        return created

    def _fresh(self, template: Pod, name: str) -> Pod:
        now = self.clock.now()
        return template.with_(
            name=name,
            uid=f"sim-{name}-{next(self._seq)}",
            node_name="",
            phase="Pending",
            unschedulable=False,
            nominated_node_name="",
            creation_time=now,
            deletion_time=None,
        )

    def _add_pending(self, pod: Pod) -> None:
        self.add_pod(pod)
        self.times.waiting_since[pod.key] = self.clock.now()

    def _recreate(self, pod: Pod) -> None:
        """The pod's controller notices it is gone and creates a replacement."""
        owner = pod.owner
        if owner is None or owner.kind not in RECREATING_KINDS or pod.is_terminal:
            return
        # A StatefulSet recreates the pod under the same name; others generate a new one.
        name = (
            pod.name
            if owner.kind == "StatefulSet"
            else self._new_pod_name(pod.namespace, owner.name)
        )
        self._add_pending(self._fresh(pod, name))

    def _new_pod_name(self, namespace: str, prefix: str) -> str:
        """A generated name no pod of the namespace has, as controllers make them."""
        while True:
            name = f"{prefix}-{next(self._names):05d}"
            if f"{namespace}/{name}" not in self.pods:
                return name

    def find_controller(self, ref: str) -> Controller:
        """A controller by `kind/namespace/name`, `namespace/name` or `name` (default ns)."""
        parts = ref.split("/")
        kind = parts[0] if len(parts) == 3 else None
        namespace = parts[-2] if len(parts) >= 2 else "default"
        name = parts[-1]
        matches = [
            c
            for c in self.controllers
            if c.name == name and c.namespace == namespace and (kind is None or c.kind == kind)
        ]
        if len(matches) != 1:
            known = ", ".join(sorted(f"{c.kind}/{c.namespace}/{c.name}" for c in self.controllers))
            why = "no" if not matches else "more than one"
            raise SimulationError(
                f"workload {ref!r}: {why} such controller; expected one of the workloads: "
                f"{known or '(none)'}"
            )
        return matches[0]

    def owned_pods(self, controller: Controller) -> list[Pod]:
        with self._lock:
            return [
                p
                for p in self.pods.values()
                if p.owner is not None
                and p.owner.kind == controller.kind
                and p.owner.name == controller.name
                and p.namespace == controller.namespace
                and not p.is_terminal
            ]

    def scale(self, ref: str, replicas: int) -> int:
        """Set a workload's replicas; returns the change in pods."""
        if replicas < 0:
            raise SimulationError(f"workload {ref!r}: replicas: expected >= 0, got {replicas}")
        controller = self.find_controller(ref)
        key = controller_key(controller.kind, controller.namespace, controller.name)
        template = self.templates.get(key)
        current = self.owned_pods(controller)
        if replicas > len(current) and template is None:
            raise SimulationError(
                f"workload {ref!r}: has no pod to copy; give it at least one pod in the "
                "snapshot or declare it under workloads"
            )
        self.controllers = [
            dataclasses.replace(c, replicas=replicas) if c is controller else c
            for c in self.controllers
        ]
        delta = replicas - len(current)
        if delta > 0 and template is not None:
            for _ in range(delta):
                if controller.kind == "StatefulSet":
                    taken = {p.name for p in current}
                    name = next(
                        f"{controller.name}-{i}"
                        for i in itertools.count()
                        if f"{controller.name}-{i}" not in taken
                    )
                    current.append(self._fresh(template, name))
                    self._add_pending(current[-1])
                else:
                    name = self._new_pod_name(controller.namespace, controller.name)
                    self._add_pending(self._fresh(template, name))
        elif delta < 0:
            victims = _scale_down_order(current, -delta)
            for pod in victims:
                self._delete_pod(pod.key)
        self._event_text("workload-scaled", detail=f"{ref} -> {replicas} replicas ({delta:+d})")
        return delta

    def add_pods(self, pods: Iterable[Pod]) -> int:
        count = 0
        for pod in pods:
            if pod.key in self.pods:
                raise SimulationError(f"pod {pod.key}: name: expected a new name, already exists")
            pod = pod.with_(creation_time=self.clock.now())
            self._remember_template(pod)
            if pod.node_name:
                self.add_pod(pod)
            else:
                self._add_pending(pod.with_(phase="Pending"))
            count += 1
        return count

    def delete_pods(self, keys: Iterable[str]) -> int:
        count = 0
        for key in keys:
            if key not in self.pods:
                raise SimulationError(f"pod {key}: expected an existing pod (namespace/name)")
            self._delete_pod(key)
            count += 1
        return count

    def _delete_pod(self, key: str) -> None:
        with self._lock:
            self.pods.pop(key, None)
        self.times.waiting_since.pop(key, None)
        self._changed()

    def cordon(self, name: str, unschedulable: bool = True) -> None:
        if name not in self.nodes:
            raise SimulationError(
                f"node {name!r}: expected an existing node; have {', '.join(sorted(self.nodes)) or '(none)'}"
            )
        self.set_unschedulable(name, unschedulable)

    def fail_group(self, group: str, error_code: str, message: str, out_of_resources: bool) -> None:
        self.failures[group] = InstanceErrorInfo(
            InstanceErrorClass.OUT_OF_RESOURCES if out_of_resources else InstanceErrorClass.OTHER,
            error_code,
            message,
        )

    def recover_group(self, group: str) -> None:
        self.failures.pop(group, None)

    # ------------------------------------------------------------------ helpers

    def pending_pod_count(self) -> int:
        with self._lock:
            return sum(1 for p in self.pods.values() if not p.node_name and not p.is_terminal)

    def use_provider(self, provider: CloudProvider) -> None:
        """Name the groups of nodes (in events) as `provider` does: nodes a group adopts by
        its nodeSelector carry no group label."""
        self.provider = provider

    def group_of(self, node: Node) -> str:
        """The node group of `node`, "" when it has none."""
        if self.provider is not None:
            try:
                group = self.provider.node_group_for_node(node)
            except CloudProviderError as exc:
                log.warning("sim_node_group_unknown", node=node.name, error=str(exc))
            else:
                return group.id if group is not None else ""
        return node.labels.get(self.group_label, "")

    def _event(self, action: str, node: Node, detail: str = "") -> None:
        self.events.append(
            ClusterEvent(self.clock.now(), action, self.group_of(node), detail or node.name)
        )

    def _event_text(self, action: str, detail: str, node_group: str = "") -> None:
        self.events.append(ClusterEvent(self.clock.now(), action, node_group, detail))


def _equivalence(pod: Pod) -> tuple[str, Hashable] | None:
    """Pods of one controller with the same scheduling requirements, or `None` (unique)."""
    owner = pod.owner
    if owner is None or not owner.uid or owner.kind == "DaemonSet":
        return None
    return owner.uid, scheduling_key(pod)


def _scale_down_order(pods: list[Pod], count: int) -> list[Pod]:
    """Which pods a ReplicaSet deletes first: unscheduled ones, then the newest."""
    ordered = sorted(
        pods,
        key=lambda p: (
            bool(p.node_name),
            -(p.creation_time.timestamp() if p.creation_time else 0.0),
            p.key,
        ),
    )
    return ordered[:count]
