"""Scale from zero: template nodes from instance types, tags and EKS managed node groups."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from aws_fakes import AwsFixtures, ProviderFactory, ProxyState
from clusterscaler.interfaces.cloudprovider import (
    CloudProviderError,
    ConfigurationError,
    NodeGroupOptions,
)
from clusterscaler.model import Node, Resources, Taint

PREFIX = "k8s.io/cluster-autoscaler/node-template/"
MIB = 1024 * 1024


def _template(make_provider: ProviderFactory, **kwargs: Any) -> Node:
    (group,) = make_provider(**kwargs).node_groups()
    return group.template_node_info().node


def test_launch_template_instance_type_gives_capacity_and_well_known_labels(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", instance_type="m5.xlarge", zones=("us-east-1b", "us-east-1a"))

    node = _template(make_provider, nodes=["0:5:workers"])

    expected = Resources(cpu=4000, memory=16384 * MIB, pods=110)
    assert node.capacity == expected
    assert node.allocatable == expected
    assert node.labels == {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "m5.xlarge",
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": "us-east-1b",
        "topology.ebs.csi.aws.com/zone": "us-east-1b",
        "kubernetes.io/hostname": node.name,
    }
    assert node.taints == ()
    assert node.ready


@pytest.mark.parametrize(
    ("setup", "cpu", "memory_mib", "arch", "gpu"),
    [
        ({"launch_configuration": "c5"}, 2000, 4096, "amd64", 0),
        ({"mixed_instance_types": ["m6g.large", "m5.large"]}, 2000, 8192, "arm64", 0),
        ({"instance_type": "g4dn.xlarge"}, 4000, 16384, "amd64", 1),
    ],
    ids=["launch-configuration", "mixed-instances-first-override", "gpu-instance"],
)
def test_instance_type_sources(aws: AwsFixtures, make_provider: ProviderFactory, setup: dict[str, Any], cpu: int, memory_mib: int, arch: str, gpu: int) -> None:
    if "launch_configuration" in setup:
        aws.launch_configuration("c5", "c5.large")
    aws.asg("workers", **setup)

    node = _template(make_provider, nodes=["0:5:workers"])

    assert (node.capacity.cpu, node.capacity.memory) == (cpu, memory_mib * MIB)
    assert node.labels["kubernetes.io/arch"] == arch
    assert node.capacity.extended.get("nvidia.com/gpu", 0) == gpu


def test_instance_requirements_give_their_minimums(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    requirements = {
        "VCpuCount": {"Min": 8, "Max": 16},
        "MemoryMiB": {"Min": 32768},
        "AcceleratorCount": {"Min": 1},
        "AcceleratorManufacturers": ["nvidia"],
        "AcceleratorTypes": ["gpu"],
    }
    aws.asg("flex", mixed_overrides=[{"InstanceRequirements": requirements}])

    node = _template(make_provider, nodes=["0:5:flex"])

    assert (node.capacity.cpu, node.capacity.memory) == (8000, 32768 * MIB)
    assert node.capacity.extended["nvidia.com/gpu"] == 1
    # AWS picks the type at launch: no instance-type label is promised.
    assert "node.kubernetes.io/instance-type" not in node.labels


def test_label_taint_and_resource_tags_shape_the_template(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg(
        "workers",
        instance_type="m5.large",
        tags={
            PREFIX + "label/workload": "batch",
            PREFIX + "label/node.kubernetes.io/instance-type": "m5.large-custom",
            PREFIX + "taint/dedicated": "batch:NoSchedule",
            PREFIX + "taint/spot": ":PreferNoSchedule",
            PREFIX + "resources/ephemeral-storage": "100Gi",
            PREFIX + "resources/example.com/dongle": "2",
        },
    )

    node = _template(make_provider, nodes=["0:5:workers"])

    assert node.labels["workload"] == "batch"
    assert node.labels["node.kubernetes.io/instance-type"] == "m5.large-custom"
    assert set(node.taints) == {
        Taint(key="dedicated", value="batch", effect="NoSchedule"),
        Taint(key="spot", value="", effect="PreferNoSchedule"),
    }
    assert node.capacity.ephemeral_storage == 100 * 1024 * MIB
    assert node.capacity.extended["example.com/dongle"] == 2
    assert node.allocatable == node.capacity


@pytest.mark.parametrize(
    ("tag", "value", "expected"),
    [
        ("resources/ephemeral-storage", "lots", "resources/ephemeral-storage"),
        ("taint/dedicated", "batch", "NoSchedule"),
        ("label/bad key", "x", "label key"),
    ],
    ids=["bad-quantity", "taint-without-effect", "bad-label-key"],
)
def test_bad_tags_make_template_fail_naming_the_tag(aws: AwsFixtures, make_provider: ProviderFactory, tag: str, value: str, expected: Any) -> None:
    aws.asg("workers", tags={PREFIX + tag: value})
    (group,) = make_provider(nodes=["0:5:workers"]).node_groups()

    with pytest.raises(ConfigurationError, match="workers") as info:
        group.template_node_info()
    assert expected in str(info.value)


def test_autoscaling_options_tags_override_defaults(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg(
        "workers",
        tags={
            PREFIX + "autoscaling-options/scaledownutilizationthreshold": "0.7",
            PREFIX + "autoscaling-options/scaledownunneededtime": "1h30m",
            PREFIX + "autoscaling-options/ignoredaemonsetsutilization": "true",
        },
    )
    aws.asg("plain")
    provider = make_provider(nodes=["0:5:workers", "0:5:plain"])
    plain, workers = provider.node_groups()
    defaults = NodeGroupOptions(
        scale_down_utilization_threshold=0.5,
        scale_down_unneeded_time=timedelta(minutes=10),
        max_node_provision_time=timedelta(minutes=15),
        ignore_daemonsets_utilization=False,
    )

    overrides = workers.get_options(defaults)

    # The provider gives the tags' overrides only; the core lays them over the flags.
    assert overrides is not None and overrides.max_node_provision_time is None
    assert overrides.over(defaults) == NodeGroupOptions(
        scale_down_utilization_threshold=0.7,
        scale_down_unneeded_time=timedelta(hours=1, minutes=30),
        max_node_provision_time=timedelta(minutes=15),
        ignore_daemonsets_utilization=True,
    )
    assert plain.get_options(defaults) is None


def test_instance_types_are_looked_up_once(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", instance_type="m5.large")
    (group,) = make_provider(nodes=["0:5:workers"]).node_groups()

    group.template_node_info()
    group.template_node_info()

    assert proxy.count("DescribeInstanceTypes") == 1


def test_static_instance_list_never_asks_ec2(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", instance_type="r5.2xlarge")
    (group,) = make_provider(nodes=["0:5:workers"], static=True).node_groups()

    node = group.template_node_info().node

    assert proxy.count("DescribeInstanceTypes") == 0
    assert (node.capacity.cpu, node.capacity.memory) == (8000, 65536 * MIB)


def test_static_table_answers_when_describe_instance_types_fails(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", instance_type="c6g.4xlarge")
    (group,) = make_provider(nodes=["0:5:workers"]).node_groups()
    proxy.fail_actions.add("DescribeInstanceTypes")

    node = group.template_node_info().node

    assert proxy.count("DescribeInstanceTypes") >= 1
    assert (node.capacity.cpu, node.labels["kubernetes.io/arch"]) == (16000, "arm64")


def test_unknown_instance_type_is_an_error_naming_the_asg(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", instance_type="zz9.plural")
    (group,) = make_provider(nodes=["0:5:workers"], static=True).node_groups()

    with pytest.raises(CloudProviderError, match=r"workers.*zz9\.plural"):
        group.template_node_info()


def test_eks_managed_node_group_labels_and_taints(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    vpc = aws.ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = aws.ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
    role = "arn:aws:iam::123456789012:role/eks"
    aws.eks.create_cluster(
        name="prod", roleArn=role, resourcesVpcConfig={"subnetIds": [subnet]}
    )
    aws.eks.create_nodegroup(
        clusterName="prod",
        nodegroupName="spot-pool",
        nodeRole=role,
        subnets=[subnet],
        capacityType="SPOT",
        labels={"team": "data", "workload": "from-eks"},
        taints=[{"key": "spot", "value": "true", "effect": "NO_SCHEDULE"}],
    )
    aws.asg(
        "eks-spot-pool-1234",
        tags={
            "eks:cluster-name": "prod",
            "eks:nodegroup-name": "spot-pool",
            PREFIX + "label/workload": "from-tag",
        },
    )

    node = _template(make_provider, nodes=["0:5:eks-spot-pool-1234"])

    assert node.labels["team"] == "data"
    assert node.labels["workload"] == "from-eks"
    assert node.labels["eks.amazonaws.com/nodegroup"] == "spot-pool"
    assert node.labels["eks.amazonaws.com/capacityType"] == "SPOT"
    assert node.taints == (Taint(key="spot", value="true", effect="NoSchedule"),)
