"""The template node of a node group, as its providers build it for scale from zero.

Every provider that predicts a new node from its cloud's description (an instance type, a
VM size, a machine type) ends the same way: a Node that is ready, with its capacity also
allocatable unless the provider reserves some, and, where a tag names a DRA driver, the
group's GPUs as that driver's devices instead of the `nvidia.com/gpu` extended resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
