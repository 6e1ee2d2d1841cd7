"""The pod-list-processor interface: what injects pending pods into scale-up or drops them.

A pod-list processor is registered with `registry.add_pod_list_processor(name, factory)`;
`factory(options)` returns an object satisfying `PodListProcessor`, as Cluster
Autoscaler's `PodListProcessor.Process` is: the pods waiting for a node go in, the pods
scale-up is to consider come out, with placeholder pods added (CapacityBuffers) or pods
left out (pods that consume a ProvisioningRequest). How the processors are built and run
is the loop's (`clusterscaler.loop.podlists`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from clusterscaler.model import Controller, Pod
    from clusterscaler.model.capacitybuffer import CapacityBuffer, ResourceQuota
    from clusterscaler.model.provisioning import PodTemplate, ProvisioningRequest

__all__ = ["PodListContext", "PodListProcessor"]


@dataclass(frozen=True, slots=True)
class PodListContext:
    """What a processor may read besides the pods it is given: the loop's time and the
    cluster's objects as the loop read them (never to be changed)."""

    now: datetime
    # Every pod of the cluster, bound or not (the pods a buffer's workload runs, the pods
    # already running for a ProvisioningRequest).
    pods: Sequence[Pod] = ()
    controllers: Sequence[Controller] = ()
    pod_templates: Sequence[PodTemplate] = ()
    provisioning_requests: Sequence[ProvisioningRequest] = ()
    capacity_buffers: Sequence[CapacityBuffer] = ()
    resource_quotas: Sequence[ResourceQuota] = ()


@runtime_checkable
class PodListProcessor(Protocol):
    """Injects pods into, or drops pods from, the pods a loop's scale-up considers.

    The loop calls `process` once per loop, before scale-up plans anything, with the pods
    of the cluster waiting for a node (not bound, not finished), in the cluster's order.
    What the processors return then goes through the loop's pending-pod filters (scheduler
    name, expendable priority, nominated node, --new-pod-scale-up-delay) as the cluster's
    own pods do, so an injected pod must be marked unschedulable to be scaled up for; the
    unschedulable pods that fit no existing node are those scale-up buys nodes for.

    Every registered processor runs, in ascending `order`, processors of equal `order` by
    `name`: never by the order in which plugins were installed or registered. Each gets
    what the one before returned. The standard processors use `order` 100
    (`provisioning-request-consumers`) and 200 (`capacity-buffers`); a processor switched
    off by its flags returns the pods it was given.
    """

    name: str
    order: int

    def process(self, pods: Sequence[Pod], context: PodListContext) -> list[Pod]:
        """The pods scale-up is to consider: `pods`, some left out, some added. A new list;
        neither `pods` nor the objects of `context` are changed."""
        ...
