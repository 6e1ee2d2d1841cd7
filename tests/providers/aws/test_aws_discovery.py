"""ASG discovery by tags and by `--nodes`, caching, and one bad ASG among good ones."""

from __future__ import annotations

import pytest
from aws_fakes import AwsFixtures, ProviderFactory, ProxyState
from clusterscaler.interfaces.cloudprovider import (
    ConfigurationError,
    InstanceState,
    provider_problems,
)
from clusterscaler.model import Node

ENABLED = "k8s.io/cluster-autoscaler/enabled"
OWNED = "k8s.io/cluster-autoscaler/prod"
DISCOVERY = f"asg:tag={ENABLED},{OWNED}"


def test_discovery_by_tag_keys_takes_limits_from_the_asg(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", min_size=1, max_size=7, desired=2, tags={ENABLED: "true", OWNED: "owned"})
    aws.asg("other-cluster", max_size=3, tags={ENABLED: "true", "k8s.io/cluster-autoscaler/dev": "x"})
    aws.asg("untagged", max_size=3)

    provider = make_provider(discovery=[DISCOVERY])

    groups = provider.node_groups()
    assert [g.id for g in groups] == ["workers"]
    assert (groups[0].min_size, groups[0].max_size, groups[0].target_size()) == (1, 7, 2)


def test_key_value_entries_match_the_value(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("gpu", max_size=3, tags={ENABLED: "true", "pool": "gpu"})
    aws.asg("cpu", max_size=3, tags={ENABLED: "true", "pool": "cpu"})

    provider = make_provider(discovery=[f"asg:tag={ENABLED},pool=gpu"])

    assert [g.id for g in provider.node_groups()] == ["gpu"]


def test_several_discovery_specs_are_alternatives(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("a", max_size=3, tags={"team": "a"})
    aws.asg("b", max_size=3, tags={"team": "b"})
    aws.asg("c", max_size=3, tags={"team": "c"})

    provider = make_provider(discovery=["asg:tag=team=a", "asg:tag=team=b"])

    assert [g.id for g in provider.node_groups()] == ["a", "b"]


def test_explicit_nodes_keep_the_flag_limits(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("explicit", min_size=0, max_size=100, desired=1)

    provider = make_provider(nodes=["1:5:explicit"])

    (group,) = provider.node_groups()
    assert (group.id, group.min_size, group.max_size, group.target_size()) == ("explicit", 1, 5, 1)


def test_explicit_wins_over_discovery_for_the_same_asg(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("both", min_size=0, max_size=100, tags={ENABLED: "true"})

    provider = make_provider(nodes=["2:4:both"], discovery=[f"asg:tag={ENABLED}"])

    (group,) = provider.node_groups()
    assert (group.min_size, group.max_size) == (2, 4)


def test_missing_explicit_asg_is_reported_and_the_rest_is_managed(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("present", max_size=3)

    provider = make_provider(nodes=["0:3:present", "0:3:absent"])

    assert [g.id for g in provider.node_groups()] == ["present"]
    assert "absent" in provider.errors()
    assert "does not exist" in provider.errors()["absent"][0]
    (problem,) = provider_problems(provider)
    assert (problem.node_group, problem.reason) == ("absent", "InvalidAutoScalingGroup")
    assert "does not exist" in problem.message


def test_bad_tags_on_one_asg_are_reported_without_stopping_the_others(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("good", max_size=3, tags={ENABLED: "1", "k8s.io/cluster-autoscaler/node-template/label/a": "b"})
    aws.asg(
        "bad",
        max_size=3,
        tags={ENABLED: "1", "k8s.io/cluster-autoscaler/node-template/taint/dedicated": "gpu:NoWay"},
    )

    provider = make_provider(discovery=[f"asg:tag={ENABLED}"])

    assert [g.id for g in provider.node_groups()] == ["bad", "good"]
    (problem,) = provider.errors()["bad"]
    assert "k8s.io/cluster-autoscaler/node-template/taint/dedicated" in problem
    assert "NoSchedule" in problem  # names the expected form
    assert "good" not in provider.errors()
    bad, good = provider.node_groups()
    assert good.debug() == "good (0:3, target 0)"
    assert bad.debug().startswith("bad (0:3, target 0); 1 problem(s): ASG 'bad': tag ")


def test_discovery_follows_pagination(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    for i in range(5):
        aws.asg(f"pool-{i}", max_size=2, tags={ENABLED: "1"})
    provider = make_provider(discovery=[f"asg:tag={ENABLED}"])
    provider.service.page_size = 2
    before = proxy.count("DescribeAutoScalingGroups")

    provider.cache.refresh(force=True)

    assert [g.id for g in provider.node_groups()] == [f"pool-{i}" for i in range(5)]
    assert proxy.count("DescribeAutoScalingGroups") - before == 3  # pages of 2, 2 and 1


def test_refresh_is_cached_for_the_interval(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", max_size=3, tags={ENABLED: "1"})
    provider = make_provider(discovery=[f"asg:tag={ENABLED}"])
    calls = proxy.count("DescribeAutoScalingGroups")

    provider.refresh()
    provider.refresh()

    assert proxy.count("DescribeAutoScalingGroups") == calls


def test_new_and_deleted_asgs_appear_and_disappear_at_regeneration(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("first", max_size=3, tags={ENABLED: "1"})
    provider = make_provider(discovery=[f"asg:tag={ENABLED}"])
    aws.asg("second", max_size=3, tags={ENABLED: "1"})
    aws.autoscaling.delete_auto_scaling_group(AutoScalingGroupName="first", ForceDelete=True)

    provider.cache.refresh(force=True)

    assert [g.id for g in provider.node_groups()] == ["second"]


def test_nodes_map_to_groups_by_provider_id(aws: AwsFixtures, make_provider: ProviderFactory) -> None:
    aws.asg("workers", max_size=3, desired=2, tags={ENABLED: "1"})
    provider = make_provider(discovery=[f"asg:tag={ENABLED}"])
    (group,) = provider.node_groups()

    instances = group.nodes()

    assert len(instances) == 2
    assert all(i.state is InstanceState.RUNNING for i in instances)
    for instance in instances:
        assert instance.id.startswith("aws:///us-east-1")
        node = Node(name=f"ip-{instance.id[-6:]}", provider_id=instance.id)
        owner = provider.node_group_for_node(node)
        assert owner is not None and owner.id == "workers"
        assert provider.has_instance(node)
    stranger = Node(name="stranger", provider_id="aws:///us-east-1a/i-0000000000000dead")
    assert provider.node_group_for_node(stranger) is None
    assert not provider.has_instance(stranger)
    assert provider.node_group_for_node(Node(name="kind-node", provider_id="kind://docker/x")) is None


def test_a_provider_without_groups_is_a_configuration_error(proxy: ProxyState, make_provider: ProviderFactory) -> None:
    with pytest.raises(ConfigurationError, match="--nodes"):
        make_provider()
