"""Scale from zero with DRA devices: a scale set tagged
`k8s.io_cluster-autoscaler_node-template_dra-driver` gets its VM size's GPUs as that
driver's devices in its template, and a pending pod claiming one grows that scale set."""

from __future__ import annotations

import pytest
from azurekit import ENABLED, ProviderFactory
from clusterscaler.api import ConfigurationError
from clusterscaler_azure.testing.fakearm import FakeArm

from tests.providers.drakit import NVIDIA, claims_scale_up

DISCOVERY = [f"label:{ENABLED}=true"]
TAGS = {ENABLED: "true", "min": "0", "max": "5"}
DRA_DRIVER = "k8s.io_cluster-autoscaler_node-template_dra-driver"
GPU_COUNT = "k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu"


def test_dra_driver_tag_turns_the_vm_sizes_gpus_into_devices(
    arm: FakeArm, make_provider: ProviderFactory
) -> None:
    arm.add_vmss("gpu", sku="Standard_NC24s_v3", tags={**TAGS, DRA_DRIVER: NVIDIA})
    (group,) = make_provider(discovery=DISCOVERY).node_groups()
    info = group.template_node_info()
    (devices,) = info.resource_slices
    assert devices.driver == NVIDIA and devices.node_name == info.node.name
    assert [d.name for d in devices.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    # Published by the driver, the GPUs are no longer an extended resource.
    assert "nvidia.com/gpu" not in info.node.allocatable.extended
    assert info.node.labels["kubernetes.azure.com/accelerator"] == "nvidia"


def test_a_claiming_pod_scales_the_device_scale_set_from_zero(
    arm: FakeArm, make_provider: ProviderFactory
) -> None:
    arm.add_vmss("cpu", sku="Standard_D16s_v3", tags=TAGS)
    arm.add_vmss("gpu", sku="Standard_NC24s_v3", tags={**TAGS, DRA_DRIVER: NVIDIA})
    provider = make_provider(discovery=DISCOVERY)
    # Five claiming pods, four GPUs a VM: two VMs of the GPU scale set, none of the CPU
    # one, whose nodes have no devices.
    assert claims_scale_up(provider, 5) == [("gpu", 2)]
    assert arm.capacity("gpu") == 2 and arm.capacity("cpu") == 0


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ({DRA_DRIVER: "nvidia_gpu"},
         f"VMSS 'bad': tag '{DRA_DRIVER}'='nvidia_gpu': expected a DRA driver name: a "
         "lowercase DNS subdomain of at most 63 characters, such as gpu.nvidia.com"),
        ({DRA_DRIVER: NVIDIA, GPU_COUNT: "0"},
         f"VMSS 'bad': tag {DRA_DRIVER}='gpu.nvidia.com': VM size Standard_NC24s_v3 has no "
         f"NVIDIA GPUs for the driver to publish; expected a GPU size or a tag {GPU_COUNT}"
         "=<count>"),
    ],
    ids=["bad-driver-name", "no-gpus"],
)
def test_a_bad_declaration_names_the_tag_and_the_other_scale_sets_still_scale(
    arm: FakeArm, make_provider: ProviderFactory, tags: dict[str, str], expected: str
) -> None:
    arm.add_vmss("bad", sku="Standard_NC24s_v3", tags={**TAGS, **tags})
    arm.add_vmss("good", sku="Standard_NC24s_v3", tags={**TAGS, DRA_DRIVER: NVIDIA})
    provider = make_provider(discovery=DISCOVERY)
    by_id = {g.id: g for g in provider.node_groups()}
    with pytest.raises(ConfigurationError) as failure:
        by_id["bad"].template_node_info()
    assert str(failure.value) == expected
    if "nvidia_gpu" in expected:
        # A malformed tag is also in the status ConfigMap and `explain`.
        assert [p.message for p in provider.problems()] == [expected]

    assert claims_scale_up(provider, 1) == [("good", 1)]
