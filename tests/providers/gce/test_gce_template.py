"""Scale from zero: template nodes built from the MIG's instance template, read through the
fake Compute API (instanceTemplates.get, machineTypes.get)."""

from __future__ import annotations

import math

import pytest
from clusterscaler.api import CloudProviderError, ConfigurationError, Taint
from clusterscaler_gce.reserved import GIB, MIB, kernel_reserved, os_reserved_ephemeral_storage
from clusterscaler_gce.testing.fakecompute import FakeComputeServer
from gcekit import PROJECT, ZONE, ProviderFactory

GKE_KUBE_ENV = (
    "AUTOSCALER_ENV_VARS: node_labels=cloud.google.com/gke-nodepool=pool-1,team=ml;"
    "node_taints=dedicated=ml:NoSchedule;kube_reserved=cpu=80m,memory=1Gi,ephemeral-storage=10Gi;"
    "os=linux;os_distribution=cos;arch=amd64\n"
)


def group_of(make_provider: ProviderFactory, mig: str = "pool"):  # type: ignore[no-untyped-def]
    provider = make_provider(nodes=[f"0:5:{PROJECT}/{ZONE}/{mig}"])
    (group,) = provider.node_groups()
    return provider, group


def test_template_from_a_gke_instance_template(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl", machine_type="n1-standard-4", kube_env=GKE_KUBE_ENV, boot_disk_gb=100)
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl")
    _, group = group_of(make_provider)

    node = group.template_node_info().node

    memory = 15360 * MIB
    expected_memory = memory - kernel_reserved(memory, "linux", "cos", "amd64")
    disk = 100 * GIB
    expected_disk = disk - os_reserved_ephemeral_storage(disk, "cos", "amd64")
    assert node.capacity.cpu == 4000
    assert node.capacity.memory == expected_memory
    assert node.capacity.pods == 110
    assert node.capacity.ephemeral_storage == expected_disk
    assert node.allocatable.cpu == 4000 - 80
    assert node.allocatable.memory == expected_memory - GIB - 100 * MIB
    assert node.allocatable.ephemeral_storage == expected_disk - 10 * GIB - int(0.1 * expected_disk)
    assert node.taints == (Taint("dedicated", "ml", "NoSchedule"),)
    assert node.labels == {
        "cloud.google.com/gke-nodepool": "pool-1",
        "team": "ml",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "n1-standard-4",
        "topology.kubernetes.io/region": "us-central1",
        "topology.kubernetes.io/zone": ZONE,
        "topology.gke.io/zone": ZONE,
        "kubernetes.io/hostname": "tpl-template",
    }
    assert node.ready


def test_gpus_custom_machine_and_local_ssd(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    kube_env = (
        "AUTOSCALER_ENV_VARS: os_distribution=ubuntu;ephemeral_storage_local_ssd_count=2;"
        "extended_resources=example.com/dongle=2\n"
    )
    gce.add_template(
        PROJECT, "gpu", machine_type="n2-custom-8-32768", kube_env=kube_env,
        accelerators={"nvidia-tesla-t4": 2}, local_ssds=2,
    )
    gce.add_mig(PROJECT, ZONE, "pool", template="gpu")
    _, group = group_of(make_provider)

    node = group.template_node_info().node

    assert node.capacity.cpu == 8000
    assert node.capacity.memory == 32768 * MIB - kernel_reserved(32768 * MIB, "linux", "ubuntu", "amd64")
    assert node.capacity.extended == {"nvidia.com/gpu": 2, "example.com/dongle": 2}
    assert node.capacity.ephemeral_storage == 2 * 375 * GIB - 13651496 * 1024
    assert node.labels["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
    # No kube-reserved in kube-env: allocatable is capacity, as upstream.
    assert node.allocatable == node.capacity
    # Custom types are parsed from the name: no machineTypes call.
    assert gce.count("GET", "/machineTypes/") == 0


def test_machine_type_is_read_once(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl", machine_type="e2-standard-8")
    gce.add_mig(PROJECT, ZONE, "pool-a", template="tpl")
    gce.add_mig(PROJECT, ZONE, "pool-b", template="tpl")
    provider = make_provider(discovery=["mig:namePrefix=pool-,min=0,max=3"])
    for _ in range(3):
        for group in provider.node_groups():
            assert group.template_node_info().node.capacity.cpu == 8000
    assert gce.count("GET", "/machineTypes/e2-standard-8$") == 1
    assert gce.count("GET", "/instanceTemplates/tpl$") == 1


def test_windows_and_max_pods(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    kube_env = "AUTOSCALER_ENV_VARS: os=windows;os_distribution=windows_ltsc;max_pods_per_node=32\n"
    gce.add_template(PROJECT, "win", machine_type="n1-standard-4", kube_env=kube_env, boot_disk_gb=200)
    gce.add_mig(PROJECT, ZONE, "pool", template="win")
    _, group = group_of(make_provider)
    node = group.template_node_info().node
    assert node.labels["kubernetes.io/os"] == "windows"
    assert node.capacity.memory == 15360 * MIB
    assert node.capacity.pods == 32
    assert node.capacity.ephemeral_storage == 200 * GIB - math.ceil(0.1133 * GIB) - math.ceil(0.010 * GIB)


@pytest.mark.parametrize(
    ("template_args", "message"),
    [
        ({"kube_env": "AUTOSCALER_ENV_VARS: node_taints=a=b:Never\n"}, "node_taints='a=b:Never'"),
        ({"kube_env": "AUTOSCALER_ENV_VARS: kube_reserved=cpu=8,memory=1Gi\n"}, "leave nothing of machine type 'n1-standard-4'"),
        ({"kube_env": "AUTOSCALER_ENV_VARS: ephemeral_storage_local_ssd_count=3\n", "local_ssds": 1},
         "ephemeral_storage_local_ssd_count=3 but the template attaches 1 local SSD(s)"),
        ({"machine_type": "custom-4"}, "machine type 'custom-4'"),
    ],
    ids=["bad-taint", "reserved-too-big", "missing-ssds", "bad-custom"],
)
def test_bad_templates_are_errors_naming_the_mig(gce: FakeComputeServer, make_provider: ProviderFactory, template_args: dict[str, object], message: str) -> None:
    gce.add_template(PROJECT, "tpl", **template_args)  # type: ignore[arg-type]
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl")
    _, group = group_of(make_provider)
    with pytest.raises(ConfigurationError) as info:
        group.template_node_info()
    assert f"MIG {PROJECT}/{ZONE}/pool instance template 'tpl'" in str(info.value)
    assert message in str(info.value)


def test_unknown_machine_type_and_missing_template_are_errors(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl", machine_type="n9-imaginary-4")
    gce.add_mig(PROJECT, ZONE, "pool", template="tpl")
    gce.add_mig(PROJECT, ZONE, "orphan", template="deleted-template")
    provider = make_provider(nodes=[f"0:5:{PROJECT}/{ZONE}/pool", f"0:5:{PROJECT}/{ZONE}/orphan"])
    orphan, pool = provider.node_groups()
    with pytest.raises(CloudProviderError, match=r"machineTypes\.get machine type test-project/us-central1-b/n9-imaginary-4"):
        pool.template_node_info()
    with pytest.raises(CloudProviderError, match=r"instanceTemplates\.get instance template test-project/deleted-template"):
        orphan.template_node_info()
    assert [(p.node_group.rsplit("/", 1)[-1], p.reason) for p in provider.problems()] == [("orphan", "InstanceTemplateUnreadable")]
