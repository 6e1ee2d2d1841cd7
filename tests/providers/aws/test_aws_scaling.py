"""Scaling calls: limits enforced before AWS is asked, placeholders, stockouts."""

from __future__ import annotations

import pytest
from aws_fakes import AwsFixtures, ProviderFactory, ProxyState
from clusterscaler.interfaces.cloudprovider import (
    CloudProviderError,
    InstanceErrorClass,
    InstanceState,
    NodeGroup,
)
from clusterscaler.model import Node

STOCKOUT = (
    "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not "
    "have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a). "
    "Launching EC2 instance failed."
)
VCPU_QUOTA = (
    "Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU "
    "capacity than your current vCPU limit of 32 allows for the instance bucket that the "
    "specified instance type belongs to. Launching EC2 instance failed."
)
BAD_AMI = (
    "The image id '[ami-0000]' does not exist. Launching EC2 instance failed."
)


def _nodes_of(group: NodeGroup) -> list[Node]:
    return [
        Node(name=f"node-{i}", provider_id=inst.id)
        for i, inst in enumerate(group.nodes())
        if "placeholder" not in inst.id
    ]


def test_increase_size_sets_desired_capacity(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", max_size=5, desired=1)
    provider = make_provider(nodes=["0:5:workers"])
    (group,) = provider.node_groups()

    group.increase_size(3)

    assert aws.desired("workers") == 4
    assert group.target_size() == 4
    assert proxy.count("SetDesiredCapacity") == 1


@pytest.mark.parametrize(
    ("desired", "delta"),
    [(3, 3), (5, 1), (0, 6)],
    ids=["one-too-many", "already-at-max", "from-zero-past-max"],
)
def test_increase_beyond_max_is_refused_without_calling_aws(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState, desired: int, delta: int) -> None:
    # moto does not enforce the ASG max: the provider must.
    aws.asg("workers", max_size=5, desired=desired)
    provider = make_provider(nodes=["0:5:workers"])
    (group,) = provider.node_groups()

    with pytest.raises(CloudProviderError, match=r"workers.*size increase too large, .* > max 5"):
        group.increase_size(delta)

    assert proxy.count("SetDesiredCapacity") == 0
    assert aws.desired("workers") == desired


def test_explicit_max_below_the_asg_max_is_the_limit(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", max_size=100, desired=2)
    provider = make_provider(nodes=["0:3:workers"])
    (group,) = provider.node_groups()

    with pytest.raises(CloudProviderError, match="> max 3"):
        group.increase_size(2)
    assert proxy.count("SetDesiredCapacity") == 0


def test_non_positive_increase_is_an_error(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", max_size=5)
    (group,) = make_provider(nodes=["0:5:workers"]).node_groups()
    # A CloudProviderError, as the loop expects of a refused increase.
    with pytest.raises(CloudProviderError, match="positive delta, got 0"):
        group.increase_size(0)


def test_delete_nodes_terminates_and_decrements(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", min_size=1, max_size=5, desired=3)
    provider = make_provider(nodes=["1:5:workers"])
    (group,) = provider.node_groups()
    victims = _nodes_of(group)[:2]

    group.delete_nodes(victims)

    assert proxy.count("TerminateInstanceInAutoScalingGroup") == 2
    assert group.target_size() == 1
    assert aws.desired("workers") == 1
    states = {i.id: i.state for i in group.nodes()}
    assert all(states[n.provider_id] is InstanceState.DELETING for n in victims)
    # The next refresh re-reads AWS instead of waiting for the interval.
    provider.refresh()
    remaining = {i.id for i in group.nodes()}
    assert not remaining & {n.provider_id for n in victims}


def test_delete_below_min_is_refused_without_calling_aws(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", min_size=2, max_size=5, desired=3)
    provider = make_provider(discovery=["asg:tag=team"], nodes=["2:5:workers"])
    (group,) = provider.node_groups()

    with pytest.raises(CloudProviderError, match=r"^ASG 'workers': delete_nodes: min size reached, nodes will not be deleted: 3 - 2 = 1 < min 2$"):
        group.delete_nodes(_nodes_of(group)[:2])

    assert proxy.count("TerminateInstanceInAutoScalingGroup") == 0
    assert aws.desired("workers") == 3


def test_delete_of_a_foreign_node_is_refused(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("a", max_size=5, desired=1)
    aws.asg("b", max_size=5, desired=1)
    provider = make_provider(nodes=["0:5:a", "0:5:b"])
    group_a, group_b = provider.node_groups()

    with pytest.raises(CloudProviderError, match=r"node-0.*does not belong"):
        group_a.delete_nodes(_nodes_of(group_b))
    assert proxy.count("TerminateInstanceInAutoScalingGroup") == 0


def test_stockout_gives_placeholders_with_out_of_resources_errors(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", max_size=5, desired=1)
    provider = make_provider(nodes=["0:5:workers"])
    (group,) = provider.node_groups()
    aws.stockout("workers", STOCKOUT)

    group.increase_size(2)
    provider.cache.refresh(force=True)

    instances = group.nodes()
    placeholders = [i for i in instances if "i-placeholder-workers-" in i.id]
    assert len(instances) == 3 and len(placeholders) == 2
    for placeholder in placeholders:
        assert placeholder.id.startswith("aws:///us-east-1a/i-placeholder-workers-")
        assert placeholder.state is InstanceState.CREATING
        assert placeholder.error is not None
        assert placeholder.error.error_class is InstanceErrorClass.OUT_OF_RESOURCES
        assert placeholder.error.error_code == "InsufficientInstanceCapacity"
        # Fake nodes made for placeholders map back to their group, as real nodes do.
        fake = Node(name="fake", provider_id=placeholder.id)
        owner = provider.node_group_for_node(fake)
        assert owner is not None and owner.id == "workers"
        assert provider.has_instance(fake)


@pytest.mark.parametrize(
    ("message", "error_class", "code"),
    [
        (VCPU_QUOTA, InstanceErrorClass.OUT_OF_RESOURCES, "VcpuLimitExceeded"),
        (BAD_AMI, InstanceErrorClass.OTHER, "ScalingActivityFailed"),
    ],
    ids=["vcpu-quota", "other-failure"],
)
def test_failed_activity_kinds(aws: AwsFixtures, make_provider: ProviderFactory, message: str, error_class: InstanceErrorClass, code: str) -> None:
    aws.asg("workers", max_size=5, desired=0)
    provider = make_provider(nodes=["0:5:workers"])
    (group,) = provider.node_groups()
    aws.stockout("workers", message)

    group.increase_size(1)
    provider.cache.refresh(force=True)

    (placeholder,) = group.nodes()
    assert placeholder.error is not None
    assert (placeholder.error.error_class, placeholder.error.error_code) == (error_class, code)


def test_placeholders_right_after_a_request_carry_no_error(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", max_size=5, desired=0)
    provider = make_provider(nodes=["0:5:workers"])
    (group,) = provider.node_groups()
    aws.stockout("workers", STOCKOUT)

    group.increase_size(2)

    # Not re-read from AWS yet: the request is upcoming capacity, not a failure.
    assert [i.error for i in group.nodes()] == [None, None]
    assert all(i.state is InstanceState.CREATING for i in group.nodes())


def test_decrease_target_size_cancels_only_placeholders(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", max_size=5, desired=1)
    provider = make_provider(nodes=["0:5:workers"])
    (group,) = provider.node_groups()
    aws.stockout("workers", STOCKOUT)
    group.increase_size(3)
    provider.cache.refresh(force=True)
    assert group.target_size() == 4

    with pytest.raises(CloudProviderError, match="1 instance"):
        group.decrease_target_size(-4)
    group.decrease_target_size(-3)

    assert group.target_size() == 1
    assert aws.desired("workers") == 1
    provider.cache.refresh(force=True)
    assert len(group.nodes()) == 1 and "placeholder" not in group.nodes()[0].id


def test_deleting_placeholders_shrinks_to_existing_instances(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", max_size=5, desired=1)
    provider = make_provider(nodes=["0:5:workers"])
    (group,) = provider.node_groups()
    aws.stockout("workers", STOCKOUT)
    group.increase_size(2)
    provider.cache.refresh(force=True)
    placeholder_nodes = [
        Node(name=f"fake-{i}", provider_id=inst.id)
        for i, inst in enumerate(group.nodes())
        if "placeholder" in inst.id
    ]

    group.delete_nodes(placeholder_nodes)

    assert aws.desired("workers") == 1
    assert group.target_size() == 1
    assert provider.node_group_for_node(placeholder_nodes[0]) is None
    assert not provider.has_instance(placeholder_nodes[0])


def test_terminating_instances_do_not_hide_requested_capacity(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", max_size=5, desired=2)
    provider = make_provider(nodes=["0:5:workers"])
    (group,) = provider.node_groups()
    aws.stockout("workers", STOCKOUT)
    group.increase_size(1)
    provider.cache.refresh(force=True)
    victim = _nodes_of(group)[0]

    group.delete_nodes([victim])

    states = sorted((("placeholder" in i.id), i.state.value) for i in group.nodes() if i.state)
    # The terminated instance, the other one, and the capacity still asked for.
    assert states == [(False, "Deleting"), (False, "Running"), (True, "Creating")]
    assert group.target_size() == 2
