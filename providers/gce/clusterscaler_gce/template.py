"""The template node of a MIG: how a new instance would look once registered (scale from zero).

Built from the MIG's instance template as Cluster Autoscaler's GCE provider does:
- capacity: the machine type's vCPUs and memory less what the kernel reserves, the NVIDIA
  accelerators as `nvidia.com/gpu`, ephemeral storage from the boot disk (less the OS
  partitions) or from the local SSDs kube-env names, extended resources from kube-env, and
  110 pods unless kube-env sets max pods;
- allocatable: capacity less kube-reserved and the hard eviction thresholds from kube-env
  (capacity itself when kube-env does not give kube-reserved);
- labels: kube-env's node labels, then the well-known ones (arch, os, instance type, region,
  zone, `topology.gke.io/zone`, hostname) and `cloud.google.com/gke-accelerator`;
- taints: kube-env's node taints;
- DRA devices: with the label `cloud.google.com/gke-gpu-dra-driver=true` (GKE's, read by
  upstream's GCE provider), the NVIDIA accelerators are devices of the DRA driver
  `gpu.nvidia.com` in the template's ResourceSlices, not `nvidia.com/gpu`.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from clusterscaler.api import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    KUBELET_MAX_PODS,
    ConfigurationError,
    NodeInfo,
    Resources,
    ResourceSlice,
    gpu_template_slices,
    template_node_info,
)

from clusterscaler_gce.compute import InstanceTemplate
from clusterscaler_gce.kube_env import KubeEnv, parse_kube_env
from clusterscaler_gce.machine_types import MachineType
from clusterscaler_gce.refs import MigRef, zone_region
from clusterscaler_gce.reserved import (
    GIB,
    LOCAL_SSD_SIZE,
    kernel_reserved,
    local_ssd_overhead,
    os_reserved_ephemeral_storage,
)

log = structlog.get_logger()

GPU_LABEL = "cloud.google.com/gke-accelerator"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
GKE_ZONE_LABEL = "topology.gke.io/zone"
KUBE_ENV_KEY = "kube-env"
# The label GKE puts on the nodes whose GPUs the NVIDIA DRA driver publishes, and that
# driver's name, as upstream's GCE provider knows them.
DRA_GPU_LABEL = "cloud.google.com/gke-gpu-dra-driver"
DRA_GPU_DRIVER = "gpu.nvidia.com"


@dataclass(frozen=True, slots=True)
class TemplateInput:
    """Everything a template node is built from, as plain data."""

    mig: MigRef
    zone: str
    template: InstanceTemplate
    machine_type: MachineType


def template_source(data: TemplateInput) -> str:
    return f"MIG {data.mig} instance template {data.template.name!r}"


def kube_env_of(data: TemplateInput) -> KubeEnv:
    source = template_source(data)
    return parse_kube_env(data.template.metadata.get(KUBE_ENV_KEY, ""), source)


def nvidia_gpus(template: InstanceTemplate) -> tuple[int, str]:
    """Count and type of the NVIDIA accelerators (`nvidia-tesla-t4`, `nvidia-l4`, ...)."""
    count = 0
    kind = ""
    for accelerator in template.accelerators:
        if accelerator.type.startswith("nvidia-"):
            count += accelerator.count
            kind = kind or accelerator.type
    return count, kind


def ephemeral_storage(data: TemplateInput, env: KubeEnv) -> int:
    """Bytes of ephemeral storage capacity, 0 when none can be told."""
    source = template_source(data)
    distribution = env.os_distribution()
    ssd_count = env.local_ssd_count()
    if ssd_count > 0:
        attached = sum(1 for d in data.template.disks if d.type == "SCRATCH" and d.disk_type == "local-ssd")
        if attached < ssd_count:
            raise ConfigurationError(
                f"{source}: kube-env ephemeral_storage_local_ssd_count={ssd_count} but the "
                f"template attaches {attached} local SSD(s); expected at most {attached}"
            )
        total = ssd_count * LOCAL_SSD_SIZE
        return max(0, total - local_ssd_overhead(ssd_count, distribution))
    if env.boot_disk_ephemeral_storage_blocked():
        return 0
    boot = [d for d in data.template.disks if d.boot]
    if not boot or boot[0].size_gb <= 0:
        raise ConfigurationError(
            f"{source}: no boot disk with a size; expected a disk with boot=true and "
            "initializeParams.diskSizeGb (or BLOCK_EPH_STORAGE_BOOT_DISK=true in kube-env)"
        )
    size = boot[0].size_gb * GIB
    return max(0, size - os_reserved_ephemeral_storage(size, distribution, env.arch()))


def build_template_node_info(data: TemplateInput) -> NodeInfo:
    env = kube_env_of(data)
    source = template_source(data)
    operating_system = env.operating_system()
    distribution = env.os_distribution()
    arch = env.arch()
    machine = data.machine_type
    memory = machine.memory - kernel_reserved(machine.memory, operating_system, distribution, arch)
    gpus, gpu_type = nvidia_gpus(data.template)
    dra_gpus = uses_dra_gpu_driver(data, env)
    extended: dict[str, int] = dict(env.extended_resources())
    if gpus and not dra_gpus:
        extended[GPU_RESOURCE] = gpus
    capacity = Resources(
        cpu=machine.cpu * 1000,
        memory=memory,
        pods=env.max_pods() or KUBELET_MAX_PODS,
        ephemeral_storage=ephemeral_storage(data, env),
        extended=extended,
    )
    reserved = env.kube_reserved()
    if reserved is None:
        log.info("gce_template_allocatable_is_capacity", node_group=data.mig.url,
                 reason="kube-env gives no kube-reserved")
        allocatable = capacity
    else:
        eviction = env.eviction_hard()
        allocatable = Resources(
            cpu=capacity.cpu - reserved.get("cpu", 0),
            memory=capacity.memory - reserved.get("memory", 0) - eviction.memory,
            pods=capacity.pods,
            ephemeral_storage=(
                capacity.ephemeral_storage
                - reserved.get("ephemeral-storage", 0)
                - int(eviction.ephemeral_storage_ratio * capacity.ephemeral_storage)
            ) if capacity.ephemeral_storage else 0,
            extended=capacity.extended,
        )
        if allocatable.cpu <= 0 or allocatable.memory <= 0 or allocatable.ephemeral_storage < 0:
            raise ConfigurationError(
                f"{source}: kube-env kube_reserved and eviction thresholds leave nothing of "
                f"machine type {machine.name!r} ({machine.cpu} vCPU, {machine.memory} bytes); "
                "expected reservations smaller than the machine"
            )
    name = f"{data.template.name}-template"
    labels: dict[str, str] = dict(env.labels())
    labels.update(
        {
            "kubernetes.io/arch": arch,
            "kubernetes.io/os": operating_system,
            "node.kubernetes.io/instance-type": machine.name,
            "topology.kubernetes.io/region": zone_region(data.zone),
            "topology.kubernetes.io/zone": data.zone,
            GKE_ZONE_LABEL: data.zone,
            HOSTNAME_LABEL: name,
        }
    )
    if gpu_type:
        labels.setdefault(GPU_LABEL, gpu_type)
    slices = dra_gpu_slices(data, name, gpus) if dra_gpus else ()
    return template_node_info(
        name, labels, env.taints(), capacity, allocatable=allocatable, resource_slices=slices
    )


def uses_dra_gpu_driver(data: TemplateInput, env: KubeEnv) -> bool:
    """Whether kube-env's labels say the NVIDIA DRA driver publishes the GPUs."""
    value = env.labels().get(DRA_GPU_LABEL)
    if value is None or value == "false":
        return False
    if value != "true":
        raise ConfigurationError(
            f"{template_source(data)}: kube-env node label {DRA_GPU_LABEL}={value!r}: "
            "expected true or false"
        )
    return True


def dra_gpu_slices(data: TemplateInput, node_name: str, gpus: int) -> tuple[ResourceSlice, ...]:
    """The devices the NVIDIA DRA driver publishes for a new node's accelerators."""
    if gpus <= 0:
        # As upstream: the label alone publishes nothing.
        log.warning("gce_dra_gpu_label_without_gpus", node_group=data.mig.url,
                    label=DRA_GPU_LABEL, template=data.template.name)
        return ()
    try:
        return gpu_template_slices(node_name, DRA_GPU_DRIVER, gpus)
    except ValueError as exc:
        raise ConfigurationError(f"{template_source(data)}: guestAccelerators: {exc}") from None
