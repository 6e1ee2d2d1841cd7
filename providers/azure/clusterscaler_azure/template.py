"""The template node of a scale set: how a new VM would look once registered.

Built for scale-from-zero from the VM size (vCPUs, memory, GPUs, architecture), the scale
set's location, zones, OS, OS disk and priority, its `node-template` tags and the labels AKS
puts on the nodes of its pools. Capacity is what kubelet reports with default settings: 110
pods, the size's vCPUs and memory, the OS disk as ephemeral storage; allocatable equals
capacity, as in Cluster Autoscaler's Azure provider. With a `node-template_dra-driver` tag
the GPUs are that DRA driver's devices, in the template's ResourceSlices, instead of
`nvidia.com/gpu`.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterscaler.api import (
    GPU_RESOURCE,
    NodeInfo,
    Resources,
    ResourceSlice,
    Taint,
    TemplateTags,
    gpus_as_devices,
    tag_capacity,
    template_node_info,
)

from clusterscaler_azure.service import VmssDescription
from clusterscaler_azure.skus import SkuInfo
from clusterscaler_azure.tags import DRA_DRIVER_TAG, RESOURCES_PREFIX, SCHEME

FPGA_RESOURCE = "xilinx.com/fpga-xilinx_u250_gen3x16_xdma_shell_2_1-0"
AKS_PREFIX = "kubernetes.azure.com/"
GPU_LABEL = AKS_PREFIX + "accelerator"
LEGACY_GPU_LABEL = "accelerator"
AGENTPOOL_LABEL = AKS_PREFIX + "agentpool"
LEGACY_AGENTPOOL_LABEL = "agentpool"
STORAGE_PROFILE_LABEL = AKS_PREFIX + "storageprofile"
STORAGE_TIER_LABEL = AKS_PREFIX + "storagetier"
SPOT_LABEL = AKS_PREFIX + "scalesetpriority"
DISK_ZONE_LABEL = "topology.disk.csi.azure.com/zone"
# Tags AKS sets on the scale sets of its node pools; the newer one wins.
POOL_NAME_TAGS = ("poolName", "aks-managed-poolName")


@dataclass(frozen=True, slots=True)
class TemplateInput:
    vmss: VmssDescription
    sku: SkuInfo
    tags: TemplateTags


def template_node_name(vmss: str) -> str:
    return f"{vmss}-template"


def zone_label(vmss: VmssDescription) -> str:
    """`<location>-<zone>` of the scale set's first zone, `0` for a regional scale set.
    (Upstream picks a random zone; the first one keeps templates stable between loops.)"""
    location = vmss.location.lower()
    if vmss.zones:
        return f"{location}-{sorted(vmss.zones)[0]}"
    return "0"


def generic_labels(data: TemplateInput, node_name: str) -> dict[str, str]:
    vmss, sku = data.vmss, data.sku
    zone = zone_label(vmss)
    return {
        "kubernetes.io/arch": sku.architecture,
        "beta.kubernetes.io/arch": sku.architecture,
        "kubernetes.io/os": vmss.os,
        "beta.kubernetes.io/os": vmss.os,
        "node.kubernetes.io/instance-type": vmss.sku_name,
        "beta.kubernetes.io/instance-type": vmss.sku_name,
        "topology.kubernetes.io/region": vmss.location.lower(),
        "failure-domain.beta.kubernetes.io/region": vmss.location.lower(),
        "topology.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/zone": zone,
        DISK_ZONE_LABEL: zone if vmss.zones else "",
        "kubernetes.io/hostname": node_name,
    }


def aks_labels(data: TemplateInput) -> dict[str, str]:
    """The labels AKS puts on the nodes of a pool, predicted from the scale set."""
    vmss = data.vmss
    labels: dict[str, str] = {}
    lowered = {k.lower(): v for k, v in vmss.tags.items()}
    for tag in POOL_NAME_TAGS:
        pool = lowered.get(tag.lower(), "")
        if pool:
            labels[LEGACY_AGENTPOOL_LABEL] = pool
            labels[AGENTPOOL_LABEL] = pool
    if labels:
        # Storage labels are AKS's; other scale sets do not get them.
        profile = "ephemeral" if vmss.os_disk_ephemeral else "managed"
        labels["storageprofile"] = profile
        labels[STORAGE_PROFILE_LABEL] = profile
        if vmss.os_disk_storage_type:
            labels["storagetier"] = vmss.os_disk_storage_type
            labels[STORAGE_TIER_LABEL] = vmss.os_disk_storage_type
    if data.sku.nvidia:
        labels[GPU_LABEL] = "nvidia"
        labels[LEGACY_GPU_LABEL] = "nvidia"
    if vmss.spot:
        labels[SPOT_LABEL] = "spot"
    return labels


def capacity(data: TemplateInput) -> Resources:
    """VM size capacity, the OS disk, then `resources_<name>` tags on top."""
    sku = data.sku
    raw = sku.capacity(gpu_resource=FPGA_RESOURCE if sku.fpga else GPU_RESOURCE)
    if data.vmss.os_disk_size_gb:
        raw["ephemeral-storage"] = f"{data.vmss.os_disk_size_gb}Gi"
    raw.update(data.tags.resources)
    return tag_capacity("VMSS", data.vmss.name, raw, SCHEME)


def build_template_node_info(data: TemplateInput) -> NodeInfo:
    name = template_node_name(data.vmss.name)
    labels = generic_labels(data, name)
    labels.update(aks_labels(data))
    # Tag labels win over the predicted ones, as upstream.
    labels.update(data.tags.labels)
    taints = list(data.tags.taints)
    if data.vmss.spot and not any(t.key == SPOT_LABEL for t in taints):
        # AKS taints spot pools so that only pods tolerating eviction land there.
        taints.append(Taint(key=SPOT_LABEL, value="spot", effect="NoSchedule"))
    resources, slices = dra_devices(data, name, capacity(data))
    return template_node_info(name, labels, taints, resources, resource_slices=slices)


def dra_devices(
    data: TemplateInput, node_name: str, resources: Resources
) -> tuple[Resources, tuple[ResourceSlice, ...]]:
    """With a `dra-driver` tag, the GPUs of `resources` as that driver's devices (and no
    longer an extended resource); else `resources` unchanged and no devices."""
    tag = f"VMSS {data.vmss.name!r}: tag {DRA_DRIVER_TAG}={data.tags.dra_driver!r}"
    without_gpus = (
        f"VM size {data.sku.name} has no NVIDIA GPUs for the driver to publish; "
        f"expected a GPU size or a tag {RESOURCES_PREFIX}nvidia.com_gpu=<count>"
    )
    return gpus_as_devices(resources, node_name, data.tags.dra_driver, where=tag, without_gpus=without_gpus)
