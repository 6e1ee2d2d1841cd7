"""Scale from zero with DRA devices: an ASG tagged
`k8s.io/cluster-autoscaler/node-template/dra-driver` gets its instance type's GPUs as that
driver's devices in its template, and a pending pod claiming one grows that ASG."""

from __future__ import annotations

import pytest
from aws_fakes import AwsFixtures, ProviderFactory
from clusterscaler.api import ConfigurationError

from tests.providers.drakit import NVIDIA, claims_scale_up

DRA_DRIVER = "k8s.io/cluster-autoscaler/node-template/dra-driver"
ENABLED = "k8s.io/cluster-autoscaler/enabled"
GPU_COUNT = "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"


def test_dra_driver_tag_turns_the_instance_types_gpus_into_devices(
    aws: AwsFixtures, make_provider: ProviderFactory
) -> None:
    aws.asg("gpu", instance_type="p3.8xlarge", tags={DRA_DRIVER: NVIDIA})
    (group,) = make_provider(nodes=["0:5:gpu"]).node_groups()
    info = group.template_node_info()
    (devices,) = info.resource_slices
    assert devices.driver == NVIDIA
    assert devices.node_name == info.node.name
    assert [d.name for d in devices.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    # Published by the driver, the GPUs are no longer an extended resource.
    assert info.node.allocatable.get("nvidia.com/gpu") == 0


def test_a_resources_tag_gives_the_device_count(
    aws: AwsFixtures, make_provider: ProviderFactory
) -> None:
    aws.asg("gpu", instance_type="m5.large", tags={DRA_DRIVER: NVIDIA, GPU_COUNT: "2"})
    (group,) = make_provider(nodes=["0:5:gpu"]).node_groups()
    (devices,) = group.template_node_info().resource_slices
    assert len(devices.devices) == 2


def test_a_claiming_pod_scales_the_device_asg_from_zero(
    aws: AwsFixtures, make_provider: ProviderFactory
) -> None:
    aws.asg("cpu", max_size=5, instance_type="m5.4xlarge", tags={ENABLED: "1"})
    aws.asg("gpu", max_size=5, instance_type="p3.8xlarge",
            tags={ENABLED: "1", DRA_DRIVER: NVIDIA})
    provider = make_provider(discovery=[f"asg:tag={ENABLED}"])
    # Five claiming pods, four GPUs a node: two nodes of the GPU group, none of the
    # cheaper CPU group, whose nodes have no devices.
    assert claims_scale_up(provider, 5) == [("gpu", 2)]
    assert aws.desired("gpu") == 2 and aws.desired("cpu") == 0


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ({DRA_DRIVER: "GPU_nvidia"},
         f"ASG 'gpu': tag '{DRA_DRIVER}'='GPU_nvidia': expected a DRA driver name: a lowercase "
         "DNS subdomain of at most 63 characters, such as gpu.nvidia.com"),
        ({DRA_DRIVER: NVIDIA, GPU_COUNT: "0"},
         f"ASG 'gpu': tag {DRA_DRIVER}='gpu.nvidia.com': instance type m5.large has no GPUs "
         f"for the driver to publish; expected GPUs from the instance type or a tag {GPU_COUNT}"
         "=<count>"),
    ],
    ids=["bad-driver-name", "no-gpus"],
)
def test_a_bad_declaration_names_the_tag_and_the_other_asgs_still_scale(
    aws: AwsFixtures, make_provider: ProviderFactory, tags: dict[str, str], expected: str
) -> None:
    aws.asg("gpu", max_size=5, instance_type="m5.large", tags={ENABLED: "1", **tags})
    aws.asg("other", max_size=5, instance_type="p3.8xlarge",
            tags={ENABLED: "1", DRA_DRIVER: NVIDIA})
    provider = make_provider(discovery=[f"asg:tag={ENABLED}"])
    by_id = {g.id: g for g in provider.node_groups()}
    with pytest.raises(ConfigurationError) as failure:
        by_id["gpu"].template_node_info()
    assert str(failure.value) == expected
    if "GPU_nvidia" in expected:
        # A malformed tag is also in the status ConfigMap and `explain`.
        assert [p.message for p in provider.problems()] == [expected]

    assert claims_scale_up(provider, 1) == [("other", 1)]


@pytest.mark.parametrize(
    ("driver", "expected"),
    [(NVIDIA, None),
     ("Nvidia GPUs", f"EKS node group prod/gpu-pool: tag {DRA_DRIVER}='Nvidia GPUs': expected a "
                     "DRA driver name: a lowercase DNS subdomain of at most 63 characters, "
                     "such as gpu.nvidia.com, got 'Nvidia GPUs'")],
    ids=["driver", "bad-driver"],
)
def test_an_eks_managed_node_groups_dra_driver_tag_wins(
    aws: AwsFixtures, make_provider: ProviderFactory, driver: str, expected: str | None
) -> None:
    vpc = aws.ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = aws.ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
    role = "arn:aws:iam::123456789012:role/eks"
    aws.eks.create_cluster(name="prod", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet]})
    aws.eks.create_nodegroup(clusterName="prod", nodegroupName="gpu-pool", nodeRole=role,
                             subnets=[subnet], tags={DRA_DRIVER: driver})
    aws.asg("eks-gpu-pool-1234", instance_type="p3.8xlarge",
            tags={"eks:cluster-name": "prod", "eks:nodegroup-name": "gpu-pool",
                  DRA_DRIVER: "gpu.example.com"})
    (group,) = make_provider(nodes=["0:5:eks-gpu-pool-1234"]).node_groups()
    if expected is None:
        (devices,) = group.template_node_info().resource_slices
        assert devices.driver == NVIDIA and len(devices.devices) == 4
    else:
        with pytest.raises(ConfigurationError) as failure:
            group.template_node_info()
        assert str(failure.value) == expected
