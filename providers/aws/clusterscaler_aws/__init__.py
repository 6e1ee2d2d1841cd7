"""clusterscaler-aws: the `aws` cloud provider (EC2 Auto Scaling groups through boto3)."""

from __future__ import annotations

from clusterscaler_aws.provider import AwsCloudProvider, AwsNodeGroup

__all__ = ["AwsCloudProvider", "AwsNodeGroup"]
