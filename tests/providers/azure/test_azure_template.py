"""Scale from zero: the template node of a scale set, from its SKU, profile and tags."""

from __future__ import annotations

import pytest
from azurekit import ENABLED, ProviderFactory
from clusterscaler.api import ConfigurationError, Taint
from clusterscaler_azure.testing.fakearm import FakeArm

DISCOVERY = [f"label:{ENABLED}=true"]
TAGS = {ENABLED: "true", "min": "0", "max": "5"}
T = "k8s.io_cluster-autoscaler_node-template_"
GIB = 1024**3


def template(make_provider: ProviderFactory, **config: object):  # type: ignore[no-untyped-def]
    provider = make_provider(discovery=DISCOVERY, **config)
    (group,) = provider.node_groups()
    return group.template_node_info().node


def test_aks_pool_template(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("aks-gpu-12345678-vmss", sku="Standard_NC6s_v3", zones=["2", "1"],
                 tags={**TAGS, "aks-managed-poolName": "gpu", "poolName": "old"},
                 os_disk_gb=64, ephemeral=True, storage_type="StandardSSD_LRS")
    node = template(make_provider)
    assert node.capacity == node.allocatable
    assert (node.capacity.cpu, node.capacity.memory, node.capacity.pods) == (6000, 112 * GIB, 110)
    assert node.capacity.ephemeral_storage == 64 * GIB
    assert node.capacity.extended == {"nvidia.com/gpu": 1}
    labels = node.labels
    assert labels["node.kubernetes.io/instance-type"] == "Standard_NC6s_v3"
    assert labels["topology.kubernetes.io/region"] == "westeurope"
    assert labels["topology.kubernetes.io/zone"] == "westeurope-1"
    assert labels["topology.disk.csi.azure.com/zone"] == "westeurope-1"
    assert (labels["kubernetes.io/os"], labels["kubernetes.io/arch"]) == ("linux", "amd64")
    assert labels["kubernetes.azure.com/agentpool"] == labels["agentpool"] == "gpu"
    assert labels["kubernetes.azure.com/storageprofile"] == "ephemeral"
    assert labels["kubernetes.azure.com/storagetier"] == "StandardSSD_LRS"
    assert labels["kubernetes.azure.com/accelerator"] == "nvidia"
    assert node.taints == ()
    assert node.ready


def test_spot_windows_arm_and_regional(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("spot", sku="Standard_D2ps_v5", spot=True, windows=True, tags=TAGS, os_disk_gb=None)
    node = template(make_provider)
    assert node.labels["kubernetes.azure.com/scalesetpriority"] == "spot"
    assert Taint("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule") in node.taints
    assert node.labels["kubernetes.io/os"] == "windows"
    assert node.labels["kubernetes.io/arch"] == "arm64"
    assert node.labels["topology.kubernetes.io/zone"] == "0"
    assert "agentpool" not in node.labels
    assert node.capacity.ephemeral_storage == 0


def test_template_tags_win(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("pool", sku="Standard_D4s_v3", tags={
        **TAGS,
        T + "label_example.com_role": "db",
        T + "label_topology.kubernetes.io_zone": "custom",
        T + "taint_dedicated": "db:NoSchedule",
        T + "resources_hugepages-2Mi": "1Gi",
        T + "resources_ephemeral-storage": "50Gi",
    })
    node = template(make_provider)
    assert node.labels["example.com/role"] == "db"
    assert node.labels["topology.kubernetes.io/zone"] == "custom"
    assert node.taints == (Taint("dedicated", "db", "NoSchedule"),)
    assert node.capacity.extended == {"hugepages-2Mi": GIB}
    assert node.capacity.ephemeral_storage == 50 * GIB


def test_bad_resource_quantity_names_the_tag(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("pool", tags={**TAGS, T + "resources_nvidia.com_gpu": "lots"})
    provider = make_provider(discovery=DISCOVERY)
    with pytest.raises(ConfigurationError) as info:
        provider.node_groups()[0].template_node_info()
    message = str(info.value)
    assert "VMSS 'pool'" in message and T + "resources_nvidia.com_gpu" in message and "'lots'" in message


def test_dynamic_instance_list_asks_the_resource_skus_api(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_sku("Standard_New_v9", vcpus=16, memory_gb=64, gpus=2)
    arm.add_sku("Standard_D4s_v3", vcpus=4, memory_gb=16)
    arm.add_vmss("new", sku="Standard_New_v9", tags=TAGS)
    node = template(make_provider, enableDynamicInstanceList=True)
    assert (node.capacity.cpu, node.capacity.memory) == (16000, 64 * GIB)
    assert node.capacity.extended == {"nvidia.com/gpu": 2}
    assert arm.count("GET", r"/providers/microsoft\.compute/skus$") == 1


def test_dynamic_instance_list_falls_back_to_the_table(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.fail("GET", r"/skus$", 500, "InternalServerError", times=10)
    arm.add_vmss("pool", sku="Standard_D8s_v3", tags=TAGS)
    node = template(make_provider, enableDynamicInstanceList=True)
    assert node.capacity.cpu == 8000


def test_without_dynamic_list_an_unknown_size_is_a_problem(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_sku("Standard_New_v9", vcpus=16, memory_gb=64)
    arm.add_vmss("new", sku="Standard_New_v9", tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    (problem,) = provider.problems()
    assert problem.node_group == "new" and "enableDynamicInstanceList=true" in problem.message
    assert arm.count("GET", r"/skus$") == 0
