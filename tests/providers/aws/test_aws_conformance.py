"""The aws provider keeps the CloudProvider contract, against moto behind the recording
proxy: ASGs named by `--nodes`, a stockout told by a failed scaling activity."""

from __future__ import annotations

import pytest
from aws_fakes import AwsFixtures, ProviderFactory
from clusterscaler.api import CloudProvider
from clusterscaler.testing.conformance import CloudProviderConformance, ConformanceCloud
from clusterscaler_aws.provider import AwsCloudProvider

STOCKOUT = (
    "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not "
    "have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a). "
    "Launching EC2 instance failed."
)


class AwsCloud(ConformanceCloud):
    def __init__(self, aws: AwsFixtures, make_provider: ProviderFactory) -> None:
        self._aws = aws
        self._make = make_provider
        self._specs: list[str] = []

    def add_group(self, name: str, *, min_size: int, max_size: int, size: int) -> None:
        self._aws.asg(name, min_size=min_size, max_size=max_size, desired=size)
        self._specs.append(f"{min_size}:{max_size}:{name}")

    def build(self) -> CloudProvider:
        return self._make(nodes=self._specs)

    def group_id(self, name: str) -> str:
        return name

    def refresh(self, provider: CloudProvider) -> None:
        assert isinstance(provider, AwsCloudProvider)
        provider.cache.refresh(force=True)

    def hold_creation(self, name: str) -> bool:
        # moto creates instances at once; a stockout leaves what is asked for requested.
        self._aws.stockout(name, STOCKOUT)
        return True

    def stockout(self, name: str) -> bool:
        self._aws.stockout(name, STOCKOUT)
        return True


class TestAwsConformance(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, aws: AwsFixtures, make_provider: ProviderFactory) -> AwsCloud:
        return AwsCloud(aws, make_provider)
