"""The standard pod-list processors: what Cluster Autoscaler's processors do for
ProvisioningRequests and CapacityBuffers before scale-up.

`provisioning-request-consumers` (--enable-provisioning-requests) leaves out the pending
pods that consume a ProvisioningRequest; `capacity-buffers`
(--capacity-buffer-controller-enabled, --capacity-buffer-pod-injection-enabled) keeps the
buffers' status and adds their placeholder pods. Each returns the pods it was given when
its flags are off.
"""

from __future__ import annotations

from clusterscaler.api import (
    Registry,
    capacity_buffer_pods,
    hookimpl,
    provisioning_request_consumers,
)


@hookimpl
def clusterscaler_register_pod_list_processors(registry: Registry) -> None:
    registry.add_pod_list_processor(
        "provisioning-request-consumers",
        provisioning_request_consumers,
        description="Pending pods that consume a ProvisioningRequest trigger no scale-up "
        "(--enable-provisioning-requests).",
    )
    registry.add_pod_list_processor(
        "capacity-buffers",
        capacity_buffer_pods,
        description="CapacityBuffers' placeholder pods are scaled up for "
        "(--capacity-buffer-pod-injection-enabled).",
    )
