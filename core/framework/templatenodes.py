"""The template node of a node group, as its providers build it for scale from zero.

Every provider that predicts a new node from its cloud's description (an instance type, a
VM size, a machine type) ends the same way: a Node that is ready, with its capacity also
allocatable unless the provider reserves some, and, where a tag names a DRA driver, the
group's GPUs as that driver's devices instead of the `nvidia.com/gpu` extended resource.
Where the cloud describes a machine type by vCPUs, memory in MiB, GPUs and architecture
(EC2 instance types, Azure VM sizes), that description is a `MachineShape`, whose
`capacity()` is what kubelet reports on such a machine with default settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clusterscaler.framework.templatedevices import gpu_template_slices
from clusterscaler.interfaces.cloudprovider import ConfigurationError
from clusterscaler.model import (
    GPU_RESOURCE,
    Node,
    NodeCondition,
    NodeInfo,
    Resources,
    ResourceSlice,
    Taint,
)

# Kubelet's default `--max-pods`.
KUBELET_MAX_PODS = 110


@dataclass(frozen=True, slots=True)
class MachineShape:
    """One machine type of a cloud (an EC2 instance type, an Azure VM size) in the units a
    template node is built from. `name` may be empty where the cloud picks the type (EC2
    attribute-based selection)."""

    name: str
    vcpu: int
    memory_mib: int
    gpu: int  # NVIDIA GPUs, exposed as nvidia.com/gpu
    architecture: str  # as the kubernetes.io/arch label: amd64, arm64

    def capacity(self, *, gpu_resource: str = GPU_RESOURCE) -> dict[str, str]:
        """The capacity kubelet reports on such a machine with default settings, as
        quantities by resource name: its vCPUs, memory, `KUBELET_MAX_PODS` pods and its GPUs
        (when it has any) as `gpu_resource`. A provider lays its tags over it and turns it
        into `Resources` with `tag_capacity`."""
        capacity = {"cpu": str(self.vcpu), "memory": f"{self.memory_mib}Mi", "pods": str(KUBELET_MAX_PODS)}
        if self.gpu:
            capacity[gpu_resource] = str(self.gpu)
        return capacity


def template_node_info(
    name: str,
    labels: Mapping[str, str],
    taints: Sequence[Taint],
    capacity: Resources,
    *,
    allocatable: Resources | None = None,
    resource_slices: tuple[ResourceSlice, ...] = (),
    csi_volume_limits: Mapping[str, int | None] | None = None,
) -> NodeInfo:
    """A ready template Node `name` (allocatable = capacity unless given) with its DRA
    devices, as a new node of the group registers; `csi_volume_limits` are the CSI drivers
    its CSINode will list (None for a driver installed without a limit)."""
    node = Node(
        name=name,
        labels=dict(labels),
        taints=tuple(taints),
        capacity=capacity,
        allocatable=capacity if allocatable is None else allocatable,
        ready=True,
        conditions=(NodeCondition(type="Ready", status="True", reason="KubeletReady"),),
        csi_volume_limits=dict(csi_volume_limits or {}),
    )
    return NodeInfo(node=node, resource_slices=resource_slices)


def gpus_as_devices(
    resources: Resources, node_name: str, driver: str, *, where: str, without_gpus: str
) -> tuple[Resources, tuple[ResourceSlice, ...]]:
    """With a DRA `driver`, the GPUs of `resources` as that driver's devices on the node
    `node_name` (and no longer an extended resource); without one, `resources` unchanged
    and no devices. Raises `ConfigurationError` starting with `where` (the tag or label
    that names the driver): `without_gpus` when there is no GPU to publish, or the form a
    driver name should have."""
    if not driver:
        return resources, ()
    gpus = resources.extended.get(GPU_RESOURCE, 0)
    if gpus <= 0:
        raise ConfigurationError(f"{where}: {without_gpus}")
    try:
        slices = gpu_template_slices(node_name, driver, gpus)
    except ValueError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
    extended = {k: v for k, v in resources.extended.items() if k != GPU_RESOURCE}
    return resources.with_(extended=extended), slices
