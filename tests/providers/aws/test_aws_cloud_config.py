"""The cloud-config file against a running endpoint: region and service overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_fakes import AwsFixtures, ProviderFactory, ProxyState
from clusterscaler.interfaces.cloudprovider import CloudProviderError, ConfigurationError
from clusterscaler.model import Node


def test_region_and_endpoint_come_from_the_cloud_config(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    aws.asg("workers", max_size=3)
    url = aws.autoscaling.meta.endpoint_url
    config = tmp_path / "aws.conf"
    config.write_text(
        "[Global]\nZone = us-east-1a\n\n"
        f'[ServiceOverride "1"]\nService = autoscaling\nRegion = us-east-1\nURL = {url}\n'
    )
    monkeypatch.delenv("AWS_REGION")
    # Nothing listens on port 9: only the override can reach the ASGs.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")

    provider = make_provider(nodes=["0:3:workers"], cloud_config=str(config))

    assert provider.service.region == "us-east-1"
    assert [g.id for g in provider.node_groups()] == ["workers"]


def test_unreadable_cloud_config_names_the_flag(proxy: ProxyState, make_provider: ProviderFactory, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="--cloud-config="):
        make_provider(nodes=["0:3:workers"], cloud_config=str(tmp_path / "missing.conf"))


def test_failed_termination_is_reported_and_the_next_refresh_rereads(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", max_size=3, desired=2)
    provider = make_provider(nodes=["0:3:workers"])
    (group,) = provider.node_groups()
    victim = Node(name="n", provider_id=group.nodes()[0].id)
    proxy.fail_actions.add("TerminateInstanceInAutoScalingGroup")
    before = proxy.count("DescribeAutoScalingGroups")

    with pytest.raises(CloudProviderError, match=r"workers.*TerminateInstanceInAutoScalingGroup"):
        group.delete_nodes([victim])
    provider.refresh()

    assert proxy.count("DescribeAutoScalingGroups") == before + 1
    assert aws.desired("workers") == 2 and group.target_size() == 2
