"""clusterscaler-aws: the `aws` cloud provider (EC2 Auto Scaling groups through boto3).

The entry module is `clusterscaler_aws.plugin`; the provider itself is
`clusterscaler_aws.provider.AwsCloudProvider`. Importing this package does not import boto3,
so that commands which never build an `aws` provider stay fast.
"""

from __future__ import annotations

PROVIDER_NAME = "aws"

__all__ = ["PROVIDER_NAME"]
