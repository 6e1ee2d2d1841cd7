"""A small world for the safety scenarios: an in-memory cluster, a `FakeCloud` whose node
groups turn requested capacity into Nodes on demand, a virtual clock, and an `Autoscaler`
built with `Autoscaler.from_registry` from the installed plugins."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.interfaces.registry import Registry
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.loop.decisions import (
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
    OwnerRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
)
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from clusterscaler.simulator.builders import make_pod
from clusterscaler.testing.fakecloud import GPU_LABEL as GPU_LABEL
from clusterscaler.testing.fakecloud import FakeCloud, FakeNodeGroup

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
        self.cloud = FakeCloud(
            self.cluster, self.clock, name="safety", existing_since=T0 - timedelta(days=1)
        )
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

    def group(self, id: str, *args: Any, **kw: Any) -> FakeNodeGroup:
        """A node group of the cloud (`FakeCloud.add_group`), its nodes a day old."""
        return self.cloud.add_group(id, *args, **kw)

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
