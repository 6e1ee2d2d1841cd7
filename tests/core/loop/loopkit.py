"""Test doubles for the loop: a `FakeCloud` over an `InMemoryCluster`, a clock for loops
whose deletions run on threads, and builders for pods and autoscalers."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.framework.clusteractions import ClusterActions
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.interfaces.clusterview import ClusterSource
from clusterscaler.interfaces.registry import Registry
from clusterscaler.loop.autoscaler import Autoscaler, build_estimator, build_expander
from clusterscaler.loop.podlists import build_pod_list_processors
from clusterscaler.loop.scaledown.executor import DeletionExecutor
from clusterscaler.model import Controller, DaemonSet, OwnerRef, Pod
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.plugins import estimators, expanders, pod_filters, pod_list_processors
from clusterscaler.simulator.builders import make_pod
from clusterscaler.simulator.drain import build_pod_filters
from clusterscaler.testing.fakecloud import GPU_LABEL as GPU_LABEL
from clusterscaler.testing.fakecloud import GROUP_LABEL as GROUP_LABEL
from clusterscaler.testing.fakecloud import FakeCloud

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def registry() -> Registry:
    host = build_plugin_manager(
        autoload=False,
        extra_plugins={
            "pod-filters": pod_filters,
            "pod-list-processors": pod_list_processors,
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
        self.provider = FakeCloud(
            self.cluster, self.clock, name="fake", existing_since=T0 - timedelta(days=1)
        )
        self.options = dataclasses.replace(AutoscalingOptions(), **option_overrides)
        # Where the loop reads and writes, when not straight to `cluster` (set before the
        # first run): a lagging cache, actions that fail.
        self.source: ClusterSource | None = None
        self.actions: ClusterActions | None = None
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
                source=self.source or self.cluster,
                actions=self.actions or self.cluster,
                estimator=build_estimator(reg, self.options),
                expander=build_expander(reg, self.options, self.provider),
                pod_filters=build_pod_filters(reg, self.options),
                pod_list_processors=build_pod_list_processors(reg, self.options),
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
