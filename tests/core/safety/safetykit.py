"""A small world for the safety scenarios: an in-memory cluster, a cloud whose node groups
turn requested capacity into Nodes on demand, a virtual clock, and an `Autoscaler` built
with `Autoscaler.from_registry` from the installed plugins."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.autoscaler import Autoscaler
from clusterscaler.cloudprovider import (
    CloudProviderError,
    Instance,
    InstanceState,
    NodeGroupOptions,
    PricingModel,
    ResourceLimiter,
)
from clusterscaler.cluster import InMemoryCluster
from clusterscaler.decisions import (
    LoopResult,
    NoScaleUpReason,
    UnremovableNode,
    UnremovableReason,
)
from clusterscaler.model import (
    MIRROR_POD_ANNOTATION,
    ClusterObjects,
    Controller,
    DaemonSet,
    LabelSelector,
    Node,
    NodeCondition,
    NodeInfo,
    OwnerRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
)
from clusterscaler.options import AutoscalingOptions
from clusterscaler.pluginmanager import Registry, build_plugin_manager, collect_registry
from clusterscaler.simulation.clock import VirtualClock
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.utilization import GPU_RESOURCE

GROUP_LABEL = "safety.clusterscaler.io/group"
GPU_LABEL = "safety.clusterscaler.io/accelerator"
T0 = datetime(2025, 3, 1, tzinfo=UTC)
# Longer than the default --scale-down-unneeded-time (10m).
PAST_UNNEEDED = timedelta(minutes=11)

DS = OwnerRef("DaemonSet", "agent", "uid-ds-agent", True, "apps/v1")


def rs(name: str = "web") -> OwnerRef:
    return OwnerRef("ReplicaSet", name, f"uid-rs-{name}", True, "apps/v1")


@functools.cache
def installed_registry() -> Registry:
    """The registry of the installed plugins (entry points), loaded once per process."""
    return collect_registry(build_plugin_manager())


class StorageCluster(InMemoryCluster):
    """An `InMemoryCluster` whose snapshots also carry volumes and claims."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pvs: list[PersistentVolume] = []
        self.pvcs: list[PersistentVolumeClaim] = []
        self.evicted_objects: dict[str, Pod] = {}

    def snapshot(self) -> ClusterObjects:
        return dataclasses.replace(super().snapshot(), pvs=list(self.pvs), pvcs=list(self.pvcs))

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        # Keep what was evicted, as the controller that re-creates it would know it.
        current = self.pods.get(pod.key)
        super().evict(pod, grace_period_seconds)
        if current is not None and pod.key not in self.pods:
            self.evicted_objects[pod.key] = current


class Group:
    """A node group of `Cloud`: requested instances stay `CREATING` until `register()`."""

    def __init__(self, cloud: Cloud, id: str, min_size: int, max_size: int, template: Node) -> None:
        self.cloud = cloud
        self._id = id
        self._min = min_size
        self._max = max_size
        self.template = template
        self.target = 0
        self.serial = 0
        self.instances: dict[str, Instance] = {}
        self.increases: list[int] = []
        self.deleted: list[str] = []
        self.fail_increase = ""
        self.fail_delete = ""
        self.options: NodeGroupOptions | None = None

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

    def _new_node(self) -> Node:
        self.serial += 1
        name = f"{self.id}-{self.serial}"
        return self.template.with_(
            name=name,
            uid=f"uid-{name}",
            provider_id=f"safety://{name}",
            labels={**self.template.labels, "kubernetes.io/hostname": name},
        )

    def add_running(self, count: int, created: datetime) -> list[Node]:
        made = []
        for _ in range(count):
            node = self._new_node().with_(creation_time=created)
            self.cloud.cluster.add_node(node)
            self.instances[node.provider_id] = Instance(node.provider_id, InstanceState.RUNNING)
            self.target += 1
            made.append(node)
        return made

    def increase_size(self, delta: int) -> None:
        self.increases.append(delta)
        if self.fail_increase:
            raise CloudProviderError(f"node group {self.id}: {self.fail_increase}")
        if delta <= 0 or self.target + delta > self.max_size:
            raise CloudProviderError(
                f"node group {self.id}: increase by {delta} from {self.target} exceeds max "
                f"{self.max_size}"
            )
        self.target += delta
        for _ in range(delta):
            self.serial += 1
            pid = f"safety://{self.id}-{self.serial}"
            self.instances[pid] = Instance(pid, InstanceState.CREATING)

    def register(self, count: int | None = None) -> list[Node]:
        """Creating instances (all, or the first `count`) become ready Nodes now."""
        made: list[Node] = []
        for pid, inst in list(self.instances.items()):
            if inst.state is not InstanceState.CREATING:
                continue
            if count is not None and len(made) >= count:
                break
            name = pid.removeprefix("safety://")
            node = self.template.with_(
                name=name,
                uid=f"uid-{name}",
                provider_id=pid,
                labels={**self.template.labels, "kubernetes.io/hostname": name},
                creation_time=self.cloud.clock.now(),
                conditions=(NodeCondition("Ready", "True"),),
            )
            self.cloud.cluster.add_node(node)
            self.instances[pid] = Instance(pid, InstanceState.RUNNING)
            made.append(node)
        return made

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        if self.fail_delete:
            raise CloudProviderError(f"node group {self.id}: {self.fail_delete}")
        if self.target - len(nodes) < self.min_size:
            raise CloudProviderError(
                f"node group {self.id}: deleting {len(nodes)} would go below min {self.min_size}"
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
        if delta >= 0 or self.target + delta < len(self.instances):
            raise CloudProviderError(f"node group {self.id}: cannot decrease by {delta}")
        self.target += delta

    def nodes(self) -> Sequence[Instance]:
        return list(self.instances.values())

    def template_node_info(self) -> NodeInfo:
        return NodeInfo(self.template.with_(name=f"{self.id}-template"))

    def exist(self) -> bool:
        return True

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        return self.options

    def debug(self) -> str:
        return f"{self.id} target={self.target} min={self.min_size} max={self.max_size}"


class Cloud:
    """The cloud provider of the scenarios; a node's group is read from `GROUP_LABEL`."""

    name = "safety"

    def __init__(self, cluster: InMemoryCluster, clock: VirtualClock) -> None:
        self.cluster = cluster
        self.clock = clock
        self.groups: dict[str, Group] = {}

    def node_groups(self) -> Sequence[Group]:
        return [self.groups[k] for k in sorted(self.groups)]

    def node_group_for_node(self, node: Node) -> Group | None:
        gid = node.labels.get(GROUP_LABEL)
        return self.groups.get(gid) if gid else None

    def has_instance(self, node: Node) -> bool:
        g = self.node_group_for_node(node)
        return g is not None and node.provider_id in g.instances

    def pricing(self) -> PricingModel | None:
        return None

    def resource_limiter(self) -> ResourceLimiter | None:
        return None

    def gpu_label(self) -> str:
        return GPU_LABEL

    def refresh(self) -> None:
        return None

    def cleanup(self) -> None:
        return None


class World:
    """Cluster, cloud, clock and the autoscaler under test."""

    def __init__(
        self,
        *,
        recreate_evicted: bool = False,
        cluster_class: type[StorageCluster] = StorageCluster,
        **options: Any,
    ) -> None:
        self.clock = VirtualClock(T0)
        self.cluster = cluster_class(
            controllers=[
                Controller("ReplicaSet", "default", "web", "uid-rs-web", replicas=5),
                Controller("ReplicaSet", "kube-system", "dns", "uid-rs-dns", replicas=2),
            ],
            daemonsets=[DaemonSet("default", "agent", "uid-ds-agent")],
            recreate_evicted=recreate_evicted,
        )
        self.cloud = Cloud(self.cluster, self.clock)
        self.options = dataclasses.replace(AutoscalingOptions(), **options)
        self._autoscaler: Autoscaler | None = None

    @property
    def autoscaler(self) -> Autoscaler:
        if self._autoscaler is None:
            self._autoscaler = Autoscaler.from_registry(
                installed_registry(),
                options=self.options,
                provider=self.cloud,
                source=self.cluster,
                actions=self.cluster,
                clock=self.clock,
            )
        return self._autoscaler

    # ------------------------------------------------------------------ building

    def group(
        self,
        id: str,
        min_size: int = 0,
        max_size: int = 10,
        *,
        nodes: int = 0,
        cpu: str = "4",
        memory: str = "16Gi",
        gpus: int = 0,
        labels: dict[str, str] | None = None,
        **node_kw: Any,
    ) -> Group:
        all_labels = {GROUP_LABEL: id, **(labels or {})}
        extended = {GPU_RESOURCE: gpus} if gpus else None
        template = make_node(
            f"{id}-0",
            cpu,
            memory,
            labels=all_labels,
            extended=extended,
            provider_id=f"safety://{id}-0",
            **node_kw,
        )
        g = Group(self.cloud, id, min_size, max_size, template)
        self.cloud.groups[id] = g
        g.add_running(nodes, T0 - timedelta(days=1))
        return g

    def pods(self, *pods: Pod) -> None:
        for p in pods:
            self.cluster.add_pod(p)

    def set_node(self, name: str, **changes: Any) -> None:
        self.cluster.add_node(self.cluster.nodes[name].with_(**changes))

    def pdb(self, name: str, labels: dict[str, str], allowed: int, **kw: Any) -> None:
        budget = PodDisruptionBudget(
            kw.pop("namespace", "default"),
            name,
            selector=LabelSelector(tuple(sorted(labels.items()))),
            disruptions_allowed=allowed,
            **kw,
        )
        self.cluster.pdbs[budget.key] = budget

    # ------------------------------------------------------------------ running

    def run(self, advance: timedelta = timedelta(0)) -> LoopResult:
        if advance:
            self.clock.advance(advance)
        return self.autoscaler.run_once(self.clock.now())

    def settle(self, loops: int = 2, step: timedelta = PAST_UNNEEDED) -> list[LoopResult]:
        """A first loop, then `loops - 1` more each `step` later."""
        out = [self.run()]
        for _ in range(loops - 1):
            out.append(self.run(step))
        return out

    def bind_pending(self) -> list[str]:
        """Play the scheduler: bind each pending pod to the first ready node (by name) that
        passes the predicates. Returns the pods left pending."""
        snap = ClusterSnapshot.from_objects(self.cluster.snapshot())
        left = []
        for p in sorted(self.cluster.pods.values(), key=lambda p: p.key):
            if p.node_name or p.is_terminal:
                continue
            for ni in sorted(snap.node_infos(), key=lambda ni: ni.name):
                if ni.node.ready and check_predicates(p, ni, snap) is None:
                    snap.add_pod(p.with_(node_name=ni.name), ni.name)
                    self.cluster.bind(p.key, ni.name)
                    break
            else:
                left.append(p.key)
        return left

    def alive(self) -> set[str]:
        return set(self.cluster.nodes)

    def deleted(self) -> list[str]:
        return [n for g in self.cloud.node_groups() for n in g.deleted]


def pod(name: str, node: str, cpu: str = "100m", memory: str = "100Mi", **kw: Any) -> Pod:
    """A running pod of the `web` ReplicaSet (override with `owner=`)."""
    kw.setdefault("owner", rs())
    kw.setdefault("creation_time", T0 - timedelta(hours=5))
    kw.setdefault("phase", "Running")
    return make_pod(name, cpu, memory, node_name=node, **kw)


def ds_pod(name: str, node: str, cpu: str = "100m") -> Pod:
    return pod(name, node, cpu, owner=DS)


def mirror_pod(name: str, node: str, cpu: str = "100m") -> Pod:
    return pod(
        name,
        node,
        cpu,
        owner=None,
        namespace="kube-system",
        annotations={MIRROR_POD_ANNOTATION: "hash"},
    )


def pending(name: str, cpu: str = "1", memory: str = "1Gi", **kw: Any) -> Pod:
    """An unschedulable pod of the `web` ReplicaSet created a while ago."""
    kw.setdefault("owner", rs())
    kw.setdefault("creation_time", T0 - timedelta(minutes=5))
    return make_pod(name, cpu, memory, unschedulable=True, **kw)


def unremovable(result: LoopResult, node: str) -> UnremovableNode | None:
    return next((u for u in result.scale_down.unremovable if u.node == node), None)


def reason_of(result: LoopResult, node: str) -> UnremovableReason | None:
    u = unremovable(result, node)
    return u.reason if u is not None else None


def unneeded_names(result: LoopResult) -> set[str]:
    return {u.node for u in result.scale_down.unneeded}


def rejections(result: LoopResult, pod_key: str) -> set[NoScaleUpReason]:
    return {r.reason for r in result.scale_up.pods_remaining.get(pod_key, ())}


def scaled(result: LoopResult) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in result.scale_up.decisions:
        out[d.node_group] = out.get(d.node_group, 0) + d.delta
    return out


def pods_on(world: World, node: str) -> list[str]:
    return sorted(p.name for p in world.cluster.pods.values() if p.node_name == node)


def names(items: Iterable[Node]) -> list[str]:
    return sorted(n.name for n in items)
