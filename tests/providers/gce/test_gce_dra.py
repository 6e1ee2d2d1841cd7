"""Scale from zero with DRA devices: a MIG whose kube-env labels its nodes
`cloud.google.com/gke-gpu-dra-driver=true` (GKE's label, read by upstream's GCE provider)
gets its NVIDIA accelerators as devices of the driver `gpu.nvidia.com` in its template, and
a pending pod claiming one grows that MIG."""

from __future__ import annotations

import pytest
from clusterscaler.api import ConfigurationError
from clusterscaler_gce.testing.fakecompute import FakeComputeServer
from gcekit import PROJECT, ZONE, ProviderFactory

from tests.providers.drakit import NVIDIA, claims_scale_up

DRA_LABEL = "cloud.google.com/gke-gpu-dra-driver"


def kube_env(labels: str) -> str:
    return f"AUTOSCALER_ENV_VARS: kube_reserved=cpu=80m,memory=1Gi;node_labels={labels}\n"


def add_gpu_mig(gce: FakeComputeServer, name: str, label: str = "true", gpus: int = 4) -> None:
    gce.add_template(PROJECT, name, machine_type="n1-standard-8",
                     kube_env=kube_env(f"{DRA_LABEL}={label}"),
                     accelerators={"nvidia-tesla-t4": gpus})
    gce.add_mig(PROJECT, ZONE, name, template=name)


def test_the_dra_label_turns_the_accelerators_into_devices(
    gce: FakeComputeServer, make_provider: ProviderFactory
) -> None:
    add_gpu_mig(gce, "gpu-pool")
    (group,) = make_provider(nodes=[f"0:5:{PROJECT}/{ZONE}/gpu-pool"]).node_groups()
    info = group.template_node_info()
    (devices,) = info.resource_slices
    assert devices.driver == NVIDIA and devices.node_name == info.node.name
    assert [d.name for d in devices.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    # Published by the driver, the GPUs are no longer an extended resource.
    assert "nvidia.com/gpu" not in info.node.allocatable.extended
    assert info.node.labels["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"


def test_without_the_label_the_gpus_stay_an_extended_resource(
    gce: FakeComputeServer, make_provider: ProviderFactory
) -> None:
    add_gpu_mig(gce, "gpu-pool", label="false")
    (group,) = make_provider(nodes=[f"0:5:{PROJECT}/{ZONE}/gpu-pool"]).node_groups()
    info = group.template_node_info()
    assert info.resource_slices == ()
    assert info.node.allocatable.extended["nvidia.com/gpu"] == 4


def test_a_claiming_pod_scales_the_device_mig_from_zero(
    gce: FakeComputeServer, make_provider: ProviderFactory
) -> None:
    gce.add_template(PROJECT, "cpu", machine_type="n1-standard-8", kube_env=kube_env("a=b"))
    gce.add_mig(PROJECT, ZONE, "pool-cpu", template="cpu")
    add_gpu_mig(gce, "pool-gpu")
    provider = make_provider(discovery=["mig:namePrefix=pool-,min=0,max=5"])
    # Five claiming pods, four GPUs a node: two nodes of the GPU MIG, none of the CPU
    # MIG, whose nodes have no devices.
    gpu_id = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/instanceGroups/pool-gpu"
    assert claims_scale_up(provider, 5) == [(gpu_id, 2)]
    assert gce.target_size(PROJECT, ZONE, "pool-gpu") == 2
    assert gce.target_size(PROJECT, ZONE, "pool-cpu") == 0


def test_a_bad_label_value_names_the_mig_and_the_other_migs_still_scale(
    gce: FakeComputeServer, make_provider: ProviderFactory
) -> None:
    add_gpu_mig(gce, "pool-bad", label="yes")
    add_gpu_mig(gce, "pool-good")
    provider = make_provider(discovery=["mig:namePrefix=pool-,min=0,max=5"])
    by_name = {g.id.rsplit("/", 1)[-1]: g for g in provider.node_groups()}
    with pytest.raises(ConfigurationError) as failure:
        by_name["pool-bad"].template_node_info()
    assert str(failure.value) == (
        f"MIG {PROJECT}/{ZONE}/pool-bad instance template 'pool-bad': kube-env node label "
        f"{DRA_LABEL}='yes': expected true or false"
    )

    assert [(group.rsplit("/", 1)[-1], delta)
            for group, delta in claims_scale_up(provider, 1)] == [("pool-good", 1)]
