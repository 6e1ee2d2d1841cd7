"""The cluster and the clock, as the loop and the plugins see them.

`ClusterSource.snapshot()` returns every modelled object at one moment: the Kubernetes
caches (`clusterscaler.kube.source`) and the in-memory cluster of tests and `clusterscaler
simulate` (`clusterscaler.framework.inmemorycluster.InMemoryCluster`) are both one. `Clock`
is the time the loop, the actuator and a provider's throttles read: the wall clock in a
cluster, a virtual one offline.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from clusterscaler.model import ClusterObjects

__all__ = ["Clock", "ClusterSource"]


@runtime_checkable
class ClusterSource(Protocol):
    """Where the loop reads the cluster from."""

    def snapshot(self) -> ClusterObjects:
        """Every node, pod, PDB, DaemonSet and controller as they are now.

        The returned object is the caller's: the source must not change it afterwards.
        """
        ...


class Clock(Protocol):
    """Time for the actuator's retries and waits; the simulator passes a virtual one."""

    def now(self) -> datetime: ...

    def sleep(self, seconds: float) -> None: ...
