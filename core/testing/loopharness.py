"""The real autoscaling loop, for plugin authors' tests.

`LoopHarness(registry, options)` runs the autoscaler's `run_once` with the plugins a
registry holds (the `installed_plugins` or `register_plugin` fixture gives one) over an
in-memory cluster, a `FakeCloud` whose node groups put their nodes into it, and a virtual
clock: a test adds node groups and pending pods, runs a loop, and reads what the cloud was
asked (`FakeNodeGroup.increases`, `.deleted`) and what the loop decided (`LoopResult`)::

    harness = LoopHarness(registry, AutoscalingOptions(expander=["myexpander"]))
    large = harness.cloud.add_group("large", max_size=5, cpu="16", memory="64Gi")
    harness.add_pod("p", cpu="1", memory="1Gi")
    harness.run_once()
    assert large.increases == [1]
"""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.registry import Registry
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.loop.decisions import LoopResult
from clusterscaler.model import Pod
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.simulator.builders import make_pod
from clusterscaler.testing.fakecloud import FakeCloud

__all__ = ["PENDING_AGE", "LoopHarness"]

# How long `add_pod`'s pending pods have been pending: past --new-pod-scale-up-delay's
# default, so the next loop considers them.
PENDING_AGE = timedelta(minutes=1)


class LoopHarness:
    """The loop with `registry`'s plugins over `cluster`, `cloud` and `clock` (all
    in memory, yours to arrange before and to read after `run_once`)."""

    def __init__(self, registry: Registry, options: AutoscalingOptions | None = None) -> None:
        self.registry = registry
        self.options = options if options is not None else AutoscalingOptions()
        self.clock = VirtualClock()
        self.cluster = InMemoryCluster()
        self.cloud = FakeCloud(self.cluster, self.clock)
        self._autoscaler: Autoscaler | None = None

    def add_pod(
        self,
        name: str,
        *,
        cpu: str = "0",
        memory: str = "0",
        node: str = "",
        namespace: str = "default",
    ) -> Pod:
        """A pod requesting `cpu` and `memory` (Kubernetes quantities), running on `node`,
        or without one pending (the scheduler could not place it) for `PENDING_AGE`."""
        if node:
            pod = make_pod(name, cpu, memory, namespace=namespace, node_name=node, phase="Running")
        else:
            pod = make_pod(
                name, cpu, memory, namespace=namespace, unschedulable=True,
                creation_time=self.clock.now() - PENDING_AGE,
            )
        self.cluster.add_pod(pod)
        return pod

    def run_once(self) -> LoopResult:
        """One loop at the clock's time. The autoscaler is built from the registry at the
        first loop and kept, with what it remembers, for the next ones."""
        if self._autoscaler is None:
            self._autoscaler = Autoscaler.from_registry(
                self.registry, options=self.options, provider=self.cloud,
                source=self.cluster, actions=self.cluster, clock=self.clock,
            )
        return self._autoscaler.run_once(self.clock.now())

    def advance(self, delta: timedelta) -> None:
        """Move the virtual clock forward (unneeded timers, provisioning timeouts)."""
        self.clock.advance(delta)
