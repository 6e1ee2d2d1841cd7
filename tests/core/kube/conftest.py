from __future__ import annotations

# The fixtures are registered by the clusterscaler pytest plugin once it lists this module;
# importing them here keeps these tests independent of that registration.
from clusterscaler.testing.fakekube_fixtures import fake_kube, fake_kube_client

__all__ = ["fake_kube", "fake_kube_client"]
