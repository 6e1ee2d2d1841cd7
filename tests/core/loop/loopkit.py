"""Test doubles for the loop: an in-memory cloud provider over an `InMemoryCluster`, and
builders for clusters, pods and autoscalers."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.autoscaler import Autoscaler, build_estimator, build_expander
from clusterscaler.cloudprovider import (
    CloudProviderError,
    Instance,
    InstanceErrorInfo,
    InstanceState,
    NodeGroupOptions,
    PricingModel,
    ResourceLimiter,
)
from clusterscaler.cluster import InMemoryCluster
from clusterscaler.drain import build_pod_filters
from clusterscaler.model import (
    Controller,
    DaemonSet,
    Node,
    NodeCondition,
    NodeInfo,
    OwnerRef,
    Pod,
)
from clusterscaler.options import AutoscalingOptions
from clusterscaler.pluginmanager import Registry, build_plugin_manager, collect_registry
from clusterscaler.plugins import estimators, expanders, pod_filters
from clusterscaler.scaledown.executor import DeletionExecutor
from clusterscaler.simulation.clock import VirtualClock
from clusterscaler.simulator.builders import make_node, make_pod

GROUP_LABEL = "test.clusterscaler.io/group"
GPU_LABEL = "test.clusterscaler.io/gpu"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def registry() -> Registry:
    host = build_plugin_manager(
        autoload=False,
        extra_plugins={
            "pod-filters": pod_filters,
            "estimators": estimators,
            "expanders": expanders,
        },
    )
    return collect_registry(host)


def rs_owner(name: str = "web") -> OwnerRef:
    return OwnerRef("ReplicaSet", name, f"uid-rs-{name}", True, "apps/v1")


def pending_pod(name: str, cpu: str = "1", memory: str = "1Gi", **kw: Any) -> Pod:
    kw.setdefault("owner", rs_owner())
    kw.setdefault("creation_time", T0 - timedelta(minutes=5))
    return make_pod(name, cpu, memory, unschedulable=True, **kw)


def running_pod(name: str, node: str, cpu: str = "100m", memory: str = "100Mi", **kw: Any) -> Pod:
    kw.setdefault("owner", rs_owner())
    kw.setdefault("creation_time", T0 - timedelta(hours=5))
    return make_pod(name, cpu, memory, node_name=node, phase="Running", **kw)


def group_node(group: str, index: int, cpu: str = "4", memory: str = "16Gi", **kw: Any) -> Node:
    labels = {GROUP_LABEL: group, **kw.pop("labels", {})}
    name = f"{group}-{index}"
    node = make_node(name, cpu, memory, labels=labels, provider_id=f"fake://{name}", **kw)
    return node.with_(creation_time=T0 - timedelta(days=1))


class FakeNodeGroup:
    """A node group whose instances become Nodes of `cluster` when `register()` is called
    (or at once with `instant=True`)."""

    def __init__(
        self,
        provider: FakeProvider,
        id: str,
        min_size: int,
        max_size: int,
        template: Node,
        *,
        instant: bool = False,
        options: NodeGroupOptions | None = None,
    ) -> None:
        self.provider = provider
        self._id = id
        self._min = min_size
        self._max = max_size
        self.template = template
        self.instant = instant
        self.options = options
        self.target = 0
        self.instances: dict[str, Instance] = {}
        self.counter = 0
        self.fail_increase: str = ""
        self.fail_delete: str = ""
        self.create_error: InstanceErrorInfo | None = None
        self.calls: list[tuple[str, Any]] = []
        self.template_error = ""
        # Like clouds that list no instance for capacity they have not started creating.
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

    def adopt(self, node: Node) -> None:
        self.instances[node.provider_id] = Instance(node.provider_id, InstanceState.RUNNING)
        self.target = len(self.instances)
        self.counter = max(self.counter, len(self.instances))

    def increase_size(self, delta: int) -> None:
        self.calls.append(("increase_size", delta))
        if self.fail_increase:
            raise CloudProviderError(f"node group {self.id}: {self.fail_increase}")
        if delta <= 0 or self.target + delta > self.max_size:
            raise CloudProviderError(f"node group {self.id}: cannot grow by {delta}")
        self.target += delta
        for _ in range(delta if self.lists_requested else 0):
            self.counter += 1
            pid = f"fake://{self.id}-{self.counter}"
            if self.create_error is not None:
                self.instances[pid] = Instance(pid, InstanceState.CREATING, self.create_error)
            else:
                self.instances[pid] = Instance(pid, InstanceState.CREATING)
        if self.instant:
            self.register()

    def register(self, count: int | None = None) -> list[Node]:
        """Turn creating instances into ready Nodes."""
        made: list[Node] = []
        for pid, inst in list(self.instances.items()):
            if count is not None and len(made) >= count:
                break
            if inst.state is not InstanceState.CREATING or inst.error is not None:
                continue
            name = pid.removeprefix("fake://")
            node = self.template.with_(
                name=name,
                uid=f"uid-{name}",
                provider_id=pid,
                labels={**self.template.labels, "kubernetes.io/hostname": name},
                creation_time=self.provider.clock.now(),
                conditions=(NodeCondition("Ready", "True"),),
            )
            self.provider.cluster.add_node(node)
            self.instances[pid] = Instance(pid, InstanceState.RUNNING)
            made.append(node)
        return made

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        self.calls.append(("delete_nodes", [n.name for n in nodes]))
        if self.fail_delete:
            raise CloudProviderError(f"node group {self.id}: {self.fail_delete}")
        if self.target - len(nodes) < self.min_size:
            raise CloudProviderError(
                f"node group {self.id}: deleting {len(nodes)} nodes would go below min size"
            )
        for node in nodes:
            pid = node.provider_id
            if pid not in self.instances:
                raise CloudProviderError(f"node group {self.id}: {node.name} is not a member")
            del self.instances[pid]
            self.provider.cluster.remove_node(node.name)
            self.target -= 1

    def decrease_target_size(self, delta: int) -> None:
        self.calls.append(("decrease_target_size", delta))
        if delta >= 0 or self.target + delta < len(self.instances):
            raise CloudProviderError(f"node group {self.id}: cannot decrease by {delta}")
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


class FakeProvider:
    name = "fake"

    def __init__(self, cluster: InMemoryCluster, clock: VirtualClock | GatedClock) -> None:
        self.cluster = cluster
        self.clock = clock
        self.groups: dict[str, FakeNodeGroup] = {}
        self.limiter: ResourceLimiter | None = None
        self.refresh_error = ""

    def add_group(
        self,
        id: str,
        min_size: int = 0,
        max_size: int = 10,
        *,
        nodes: int = 0,
        cpu: str = "4",
        memory: str = "16Gi",
        labels: dict[str, str] | None = None,
        instant: bool = False,
        options: NodeGroupOptions | None = None,
        **node_kw: Any,
    ) -> FakeNodeGroup:
        template = group_node(id, 0, cpu, memory, labels=dict(labels or {}), **node_kw)
        group = FakeNodeGroup(
            self, id, min_size, max_size, template, instant=instant, options=options
        )
        self.groups[id] = group
        for i in range(1, nodes + 1):
            node = group_node(id, i, cpu, memory, labels=dict(labels or {}), **node_kw)
            self.cluster.add_node(node)
            group.adopt(node)
        return group

    def node_groups(self) -> Sequence[FakeNodeGroup]:
        return [self.groups[k] for k in sorted(self.groups)]

    def node_group_for_node(self, node: Node) -> FakeNodeGroup | None:
        gid = node.labels.get(GROUP_LABEL)
        return self.groups.get(gid) if gid else None

    def has_instance(self, node: Node) -> bool:
        g = self.node_group_for_node(node)
        return g is not None and node.provider_id in g.instances

    def pricing(self) -> PricingModel | None:
        return None

    def resource_limiter(self) -> ResourceLimiter | None:
        return self.limiter

    def gpu_label(self) -> str:
        return GPU_LABEL

    def refresh(self) -> None:
        if self.refresh_error:
            raise CloudProviderError(self.refresh_error)

    def cleanup(self) -> None:
        return None


class GatedClock:
    """Virtual time for loops whose deletions run on threads: `sleep` blocks the sleeping
    thread until the test moves the clock past its wake-up time, so a drain waits exactly
    as long as the test says, and never runs at the same time as a loop (see `settle`)."""

    def __init__(self, start: datetime = T0, *, limit: float = 10.0) -> None:
        self._now = start
        self._cond = threading.Condition()
        # Wake-up times of the threads asleep now.
        self._sleepers: list[datetime] = []
        self.limit = limit

    def now(self) -> datetime:
        with self._cond:
            return self._now

    def sleep(self, seconds: float) -> None:
        with self._cond:
            wake = self._now + timedelta(seconds=seconds)
            self._sleepers.append(wake)
            self._cond.notify_all()
            try:
                if not self._cond.wait_for(lambda: self._now >= wake, self.limit):
                    raise TimeoutError(f"nobody moved the clock to {wake} within {self.limit}s")
            finally:
                self._sleepers.remove(wake)
                self._cond.notify_all()

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock and wait until every thread due by then has woken up."""
        with self._cond:
            self._now += delta
            self._cond.notify_all()
            now = self._now
            assert self._cond.wait_for(
                lambda: all(w > now for w in self._sleepers), self.limit
            ), "sleeping threads did not wake up"
            return now

    def settle(self, running: Callable[[], int]) -> None:
        """Wait until each of `running()` background works is asleep or done."""
        deadline = time.monotonic() + self.limit
        with self._cond:
            # Polled: a work that ends does not notify this condition.
            while len(self._sleepers) != running():
                assert time.monotonic() < deadline, (
                    f"{running()} works running, {len(self._sleepers)} asleep"
                )
                self._cond.wait(0.005)


class Harness:
    """A cluster, a provider, a virtual clock and an autoscaler over them."""

    def __init__(
        self,
        cluster_class: type[InMemoryCluster] = InMemoryCluster,
        *,
        clock: VirtualClock | GatedClock | None = None,
        executor: DeletionExecutor | None = None,
        **option_overrides: Any,
    ) -> None:
        self.clock = clock or VirtualClock(T0)
        self.executor = executor
        # The controllers the pods built here belong to, so drain rules can find them.
        self.cluster = cluster_class(
            controllers=[Controller("ReplicaSet", "default", "web", "uid-rs-web", replicas=3)],
            daemonsets=[DaemonSet("default", "agent", "uid-ds-agent")],
        )
        self.provider = FakeProvider(self.cluster, self.clock)
        self.options = dataclasses.replace(AutoscalingOptions(), **option_overrides)
        self._autoscaler: Autoscaler | None = None

    def set_options(self, **changes: Any) -> None:
        self.options = dataclasses.replace(self.options, **changes)
        self._autoscaler = None

    @property
    def autoscaler(self) -> Autoscaler:
        if self._autoscaler is None:
            reg = registry()
            self._autoscaler = Autoscaler(
                options=self.options,
                provider=self.provider,
                source=self.cluster,
                actions=self.cluster,
                estimator=build_estimator(reg, self.options),
                expander=build_expander(reg, self.options, self.provider),
                pod_filters=build_pod_filters(reg, self.options),
                clock=self.clock,
                executor=self.executor,
            )
        return self._autoscaler

    def add_pods(self, pods: Iterable[Pod]) -> None:
        for p in pods:
            self.cluster.add_pod(p)

    def run(self, advance: timedelta = timedelta(0)) -> Any:
        if advance:
            self.clock.advance(advance)
        return self.autoscaler.run_once(self.clock.now())

    def pods_on(self, node: str) -> list[Pod]:
        return [p for p in self.cluster.pods.values() if p.node_name == node]
