"""A node group's GPU as Cluster Autoscaler names it in metrics (its utils/gpu
GetGpuInfoForMetrics): the extended resource and the GPU type, read from the group's
template node and the provider's GPU label.

No GPU resource and no GPU label: no GPU (both empty). The resource without the label:
type ``generic``. The label without the resource (the device plugin has not advertised the
GPUs): type ``missing-gpu``. Both: the label's value (CA checks it against the provider's
list of GPU types; providers here publish none, so the value is taken as it is).
"""

from __future__ import annotations

from clusterscaler.model import GPU_RESOURCE, Node

__all__ = ["GENERIC_GPU", "MISSING_GPU", "gpu_for_metrics"]

GENERIC_GPU = "generic"
MISSING_GPU = "missing-gpu"


def gpu_for_metrics(node: Node | None, gpu_label: str) -> tuple[str, str]:
    """(gpu_resource_name, gpu_name) of `node` for the scale-up and scale-down metrics."""
    if node is None:
        return "", ""
    has_gpus = node.allocatable.extended.get(GPU_RESOURCE, 0) > 0
    gpu_type = node.labels.get(gpu_label, "") if gpu_label else ""
    if not has_gpus and not gpu_type:
        return "", ""
    if not gpu_type:
        return GPU_RESOURCE, GENERIC_GPU
    if not has_gpus:
        return GPU_RESOURCE, MISSING_GPU
    return GPU_RESOURCE, gpu_type
