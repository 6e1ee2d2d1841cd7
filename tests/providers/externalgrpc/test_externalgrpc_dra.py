"""Scale from zero with DRA devices: a provider service declares its template's GPUs as DRA
devices with the annotations `capacity.cluster-autoscaler.kubernetes.io/dra-driver` and
`.../gpu-count` on the template Node of `NodeGroupTemplateNodeInfo`; a pending pod claiming
one grows that group."""

from __future__ import annotations

import pytest
from clusterscaler.api import CloudProviderError, Node
from clusterscaler.simulator.builders import make_node
from externalgrpc_fakes import FakeService
from externalgrpckit import ProviderFactory

from tests.providers.drakit import NVIDIA, claims_scale_up

DRA_DRIVER = "capacity.cluster-autoscaler.kubernetes.io/dra-driver"
GPU_COUNT = "capacity.cluster-autoscaler.kubernetes.io/gpu-count"


def template(name: str, **annotations: str) -> Node:
    return make_node(name, "16", "64Gi", annotations=annotations)


def test_the_annotations_declare_the_templates_devices(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    service.add_group("gpu", 0, 5, template=template(
        "gpu-template", **{DRA_DRIVER: NVIDIA, GPU_COUNT: "4"}))
    service.add_group("cpu", 0, 5, template=template("cpu-template"))
    by_id = {g.id: g for g in make_provider().node_groups()}
    info = by_id["gpu"].template_node_info()
    (devices,) = info.resource_slices
    assert devices.driver == NVIDIA and devices.node_name == "gpu-template"
    assert [d.name for d in devices.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert by_id["cpu"].template_node_info().resource_slices == ()


def test_a_claiming_pod_scales_the_device_group_from_zero(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    service.add_group("cpu", 0, 5, template=template("cpu-template"))
    service.add_group("gpu", 0, 5, template=template(
        "gpu-template", **{DRA_DRIVER: NVIDIA, GPU_COUNT: "4"}))
    provider = make_provider()
    # Five claiming pods, four GPUs a node: two nodes of the GPU group, none of the CPU
    # group, whose nodes have no devices.
    assert claims_scale_up(provider, 5) == [("gpu", 2)]
    assert [r.delta for r in service.requests_of("NodeGroupIncreaseSize")] == [2]


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({DRA_DRIVER: "NVIDIA"},
         f"annotation {DRA_DRIVER}='NVIDIA': expected a DRA driver name: a lowercase DNS "
         "subdomain of at most 63 characters, such as gpu.nvidia.com"),
        ({DRA_DRIVER: NVIDIA},
         f"annotation {GPU_COUNT}=None: expected the number of GPUs the driver gpu.nvidia.com "
         "publishes for a new node, a non-negative integer"),
        ({DRA_DRIVER: NVIDIA, GPU_COUNT: "four"},
         f"annotation {GPU_COUNT}='four': expected the number of GPUs the driver "
         "gpu.nvidia.com publishes for a new node, a non-negative integer"),
        ({DRA_DRIVER: NVIDIA, GPU_COUNT: "200"},
         f"annotation {GPU_COUNT}='200': expected at most 128 GPUs, got 200"),
    ],
    ids=["bad-driver", "no-count", "bad-count", "too-many"],
)
def test_a_bad_declaration_names_the_annotation_and_the_other_groups_still_scale(
    service: FakeService, make_provider: ProviderFactory, annotations: dict[str, str],
    expected: str,
) -> None:
    service.add_group("bad", 0, 5, template=template("bad-template", **annotations))
    service.add_group("good", 0, 5, template=template(
        "good-template", **{DRA_DRIVER: NVIDIA, GPU_COUNT: "2"}))
    provider = make_provider()
    by_id = {g.id: g for g in provider.node_groups()}
    with pytest.raises(CloudProviderError) as failure:
        by_id["bad"].template_node_info()
    assert str(failure.value) == (
        "externalgrpc provider: node group bad: NodeGroupTemplateNodeInfo: nodeBytes: "
        f"template node bad-template: {expected}"
    )

    assert claims_scale_up(provider, 1) == [("good", 1)]
