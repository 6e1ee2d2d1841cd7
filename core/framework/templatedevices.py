"""The DRA devices a node group declares for its template from a driver name and a GPU
count, as upstream's Cluster API provider predicts them (its `dra-driver` and `gpu-count`
annotations): one node-local pool named after the node, with a device `gpu-<i>` carrying
the attribute `type: gpu` per GPU.

Providers whose clouds describe a group by a GPU count (an instance type, a machine type's
accelerators, a VM size) and a tag or label naming the driver build their template's
ResourceSlices here, so that every provider predicts the same devices for the same
declaration.
"""

from __future__ import annotations

import re

from clusterscaler.model.dra import ResourceSlice, parse_template_slice

# The attribute `type` upstream's Cluster API provider gives each GPU it predicts.
GPU_DEVICE_TYPE = "gpu"
# At most this many devices in one ResourceSlice, as the API server validates it.
MAX_SLICE_DEVICES = 128
DRA_DRIVER_FORM = (
    "a DRA driver name: a lowercase DNS subdomain of at most 63 characters, "
    "such as gpu.nvidia.com"
)

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DRIVER = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")


def is_dra_driver_name(value: str) -> bool:
    """Whether `value` is a valid DRA driver name (a ResourceSlice's `spec.driver`)."""
    return 0 < len(value) <= 63 and bool(_DRIVER.match(value))


def gpu_template_slices(node_name: str, driver: str, gpus: int) -> tuple[ResourceSlice, ...]:
    """The ResourceSlice a new node's DRA driver `driver` publishes for its `gpus` GPUs;
    none for no GPUs.

    Raises `ValueError` naming the expected form when `driver` is not a driver name or
    `gpus` is more than one slice holds; the caller names the object and field.
    """
    if not is_dra_driver_name(driver):
        raise ValueError(f"expected {DRA_DRIVER_FORM}, got {driver!r}")
    if gpus > MAX_SLICE_DEVICES:
        raise ValueError(f"expected at most {MAX_SLICE_DEVICES} GPUs, got {gpus}")
    if gpus <= 0:
        return ()
    return (
        parse_template_slice({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{driver}"},
            "spec": {
                "driver": driver,
                "nodeName": node_name,
                "pool": {"name": node_name, "generation": 0, "resourceSliceCount": 1},
                "devices": [
                    {"name": f"gpu-{i}", "attributes": {"type": {"string": GPU_DEVICE_TYPE}}}
                    for i in range(gpus)
                ],
            },
        }),
    )
