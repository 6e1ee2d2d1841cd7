"""The machineapi provider's options, checked before it reads anything from the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import ConfigurationError
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler_machineapi import plugin
from clusterscaler_machineapi.discovery import DiscoverySpec


class Untouchable:
    """A Kubernetes client that fails the test if the provider uses it."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the API client was used ({name}) despite bad options")


def test_a_cloud_config_that_is_no_file_is_refused_by_the_check_and_the_factory() -> None:
    options = AutoscalingOptions(cloud_provider="clusterapi", cloud_config="/etc/no-such.kubeconfig")
    message = (
        r"^--cloud-config='/etc/no-such.kubeconfig': expected the path of the management "
        r"cluster's kubeconfig file; no such file$"
    )
    with pytest.raises(ConfigurationError, match=message):
        plugin.check_options(options)
    with pytest.raises(ConfigurationError, match=message):
        plugin.build_provider(ProviderContext(options=options, kube_api=Untouchable()))


def test_a_cloud_config_that_is_no_kubeconfig_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "mgmt.kubeconfig"
    bad.write_text("this: [is not a kubeconfig")
    options = AutoscalingOptions(cloud_provider="clusterapi", cloud_config=str(bad))
    with pytest.raises(ConfigurationError, match=r"^--cloud-config='.*mgmt.kubeconfig': the management cluster's configuration cannot be loaded"):
        plugin.build_provider(ProviderContext(options=options, kube_api=Untouchable()))


@pytest.mark.parametrize(
    ("cloud_config", "authoritative", "kubeconfig", "expected"),
    [
        ("", False, "/k", None),  # the autoscaler's own cluster
        ("", True, "", None),  # in-cluster either way: the autoscaler's own connection
        ("", True, "/k", ""),  # authoritative: in-cluster, not --kubeconfig
        ("MGMT", False, "/k", "MGMT"),
        ("MGMT", True, "", "MGMT"),
    ],
)
def test_which_cluster_holds_the_machines(
    tmp_path: Path, cloud_config: str, authoritative: bool, kubeconfig: str, expected: str | None
) -> None:
    mgmt = tmp_path / "mgmt.kubeconfig"
    mgmt.write_text("{}")
    options = AutoscalingOptions(
        cloud_config=str(mgmt) if cloud_config else "",
        kubeconfig=kubeconfig,
        extra={plugin.AUTHORITATIVE.dest: authoritative},
    )
    assert plugin.management_kubeconfig(options) == (str(mgmt) if expected == "MGMT" else expected)


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
