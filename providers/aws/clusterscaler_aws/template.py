"""The template node of an ASG: how a new instance would look once registered.

Built for scale-from-zero from the instance type (vCPUs, memory, GPUs, architecture), the
ASG's first availability zone, its `node-template/*` tags and, for EKS managed node groups,
the node group's labels and taints. With a `node-template/dra-driver` tag the GPUs are that
DRA driver's devices, in the template's ResourceSlices, instead of `nvidia.com/gpu`. Capacity is what kubelet would report with default
settings: 110 pods, the instance's vCPUs and memory; allocatable equals capacity, as for
Cluster Autoscaler's AWS provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clusterscaler.api import (
    GPU_RESOURCE,
    ConfigurationError,
    NodeInfo,
    Resources,
    ResourceSlice,
    Taint,
    gpus_as_devices,
    tag_capacity,
    template_node_info,
)

from clusterscaler_aws.instance_types import InstanceTypeInfo
from clusterscaler_aws.service import ManagedNodegroup
from clusterscaler_aws.tags import DRA_DRIVER_TAG, RESOURCES_PREFIX, SCHEME, AsgTemplateTags

EBS_CSI_ZONE_LABEL = "topology.ebs.csi.aws.com/zone"
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
EKS_CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
# EKS spells taint effects in upper snake case.
EKS_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


@dataclass(frozen=True, slots=True)
class TemplateInput:
    """Everything a template node is built from, as plain data."""

    asg: str
    instance_type: InstanceTypeInfo
    zone: str
    region: str
    tags: AsgTemplateTags
    managed_nodegroup: ManagedNodegroup | None = None


def template_node_name(asg: str) -> str:
    return f"{asg}-asg-template"


def generic_labels(data: TemplateInput, node_name: str) -> dict[str, str]:
    """The well-known labels kubelet and the AWS cloud controller put on every node."""
    labels = {
        "kubernetes.io/arch": data.instance_type.architecture,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": data.instance_type.name,
        "topology.kubernetes.io/region": data.region,
        "topology.kubernetes.io/zone": data.zone,
        EBS_CSI_ZONE_LABEL: data.zone,
        "kubernetes.io/hostname": node_name,
    }
    if not data.instance_type.name:
        # Attribute-based selection: the type is AWS's choice, unknown in advance.
        del labels["node.kubernetes.io/instance-type"]
    return labels


def capacity(data: TemplateInput) -> Resources:
    """Instance capacity, then `resources/<name>` tags (and EKS node group tags) on top."""
    raw = data.instance_type.capacity()
    raw.update(data.tags.resources)
    if data.managed_nodegroup is not None:
        # Resource tags of the managed node group win over the ASG's, as upstream.
        for key, value in data.managed_nodegroup.tags.items():
            if key.startswith(RESOURCES_PREFIX) and key[len(RESOURCES_PREFIX) :]:
                raw[key[len(RESOURCES_PREFIX) :]] = value.strip()
    return tag_capacity("ASG", data.asg, raw, SCHEME)


def build_template_node_info(data: TemplateInput) -> NodeInfo:
    name = template_node_name(data.asg)
    labels = generic_labels(data, name)
    # Tag labels win over the generic ones, and EKS node group labels over both, as upstream.
    labels.update(data.tags.labels)
    taints = list(data.tags.taints)
    mng = data.managed_nodegroup
    if mng is not None:
        labels.update(managed_nodegroup_labels(mng))
        seen = {(t.key, t.effect) for t in taints}
        for taint in managed_nodegroup_taints(mng):
            if (taint.key, taint.effect) not in seen:
                taints.append(taint)
                seen.add((taint.key, taint.effect))
    resources, slices = dra_devices(data, name, capacity(data))
    return template_node_info(name, labels, taints, resources, resource_slices=slices)


def dra_devices(
    data: TemplateInput, node_name: str, resources: Resources
) -> tuple[Resources, tuple[ResourceSlice, ...]]:
    """With a `dra-driver` tag, the GPUs of `resources` as that driver's devices (and no
    longer an extended resource); else `resources` unchanged and no devices. The tag of an
    EKS managed node group wins over the ASG's, as its resource tags do."""
    driver = data.tags.dra_driver
    tag = f"ASG {data.asg!r}: tag {DRA_DRIVER_TAG}={driver!r}"
    mng = data.managed_nodegroup
    if mng is not None and DRA_DRIVER_TAG in mng.tags:
        driver = mng.tags[DRA_DRIVER_TAG].strip()
        tag = f"EKS node group {mng.cluster}/{mng.name}: tag {DRA_DRIVER_TAG}={driver!r}"
    without_gpus = (
        f"instance type {data.instance_type.name or '(attribute-based)'} has no GPUs "
        f"for the driver to publish; expected GPUs from the instance type or a tag "
        f"{RESOURCES_PREFIX}{GPU_RESOURCE}=<count>"
    )
    return gpus_as_devices(resources, node_name, driver, where=tag, without_gpus=without_gpus)


def managed_nodegroup_labels(mng: ManagedNodegroup) -> Mapping[str, str]:
    """Labels EKS puts on the nodes of a managed node group."""
    labels = {EKS_NODEGROUP_LABEL: mng.name}
    if mng.capacity_type:
        labels[EKS_CAPACITY_TYPE_LABEL] = mng.capacity_type
    labels.update(mng.labels)
    return labels


def managed_nodegroup_taints(mng: ManagedNodegroup) -> list[Taint]:
    taints = []
    for key, value, effect in mng.taints:
        converted = EKS_EFFECTS.get(effect, effect)
        if converted not in EKS_EFFECTS.values():
            raise ConfigurationError(
                f"EKS node group {mng.cluster}/{mng.name}: taint {key!r} has effect {effect!r}; "
                f"expected one of {', '.join(EKS_EFFECTS)}"
            )
        taints.append(Taint(key=key, value=value, effect=converted))
    return taints
