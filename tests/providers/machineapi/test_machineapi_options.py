"""The machineapi provider's options, checked before it reads anything from the cluster."""

from __future__ import annotations

import pytest
from clusterscaler.framework.cloudprovider import ConfigurationError, ProviderContext
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler_machineapi import plugin
from clusterscaler_machineapi.discovery import DiscoverySpec


class Untouchable:
    """A Kubernetes client that fails the test if the provider uses it."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the API client was used ({name}) despite bad options")


def test_cloud_config_is_refused_by_the_check_and_the_factory() -> None:
    options = AutoscalingOptions(cloud_provider="clusterapi", cloud_config="/etc/mgmt.kubeconfig")
    message = (
        r"^--cloud-config='/etc/mgmt.kubeconfig': the machineapi provider reads MachineSets "
        r"and MachineDeployments from the cluster of --kubeconfig .*; a separate management "
        r"cluster is not supported; expected no --cloud-config$"
    )
    with pytest.raises(ConfigurationError, match=message):
        plugin.check_options(options)
    with pytest.raises(ConfigurationError, match=message):
        plugin.build_provider(ProviderContext(options=options, kube_api=Untouchable()))


def test_discovery_specs_are_parsed_up_front() -> None:
    options = AutoscalingOptions(
        node_group_auto_discovery=["clusterapi:namespace=team-a,pool=gpu", "clusterapi:clusterName=prod"]
    )
    assert plugin.discovery_from_options(options) == [
        DiscoverySpec(namespace="team-a", labels={"pool": "gpu"}),
        DiscoverySpec(cluster_name="prod"),
    ]
    plugin.check_options(options)
    bad = AutoscalingOptions(node_group_auto_discovery=["clusterapi:namespace=a,=b"])
    with pytest.raises(ConfigurationError, match=r"^--node-group-auto-discovery='clusterapi:namespace=a,=b': '=b' must be key=value"):
        plugin.build_provider(ProviderContext(options=bad, kube_api=Untouchable()))
