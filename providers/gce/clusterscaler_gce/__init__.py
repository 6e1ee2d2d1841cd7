"""clusterscaler-gce: the `gce` cloud provider (Managed Instance Groups through
google-cloud-compute).

The entry module is `clusterscaler_gce.plugin`; the provider itself is
`clusterscaler_gce.provider.GceCloudProvider`. Importing this package does not import the
Google SDK, so that commands which never build a `gce` provider stay fast.
"""

from __future__ import annotations

PROVIDER_NAME = "gce"

__all__ = ["PROVIDER_NAME"]
