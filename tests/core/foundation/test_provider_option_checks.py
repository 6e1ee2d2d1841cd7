"""A cloud provider registers a `check_options` with its factory; the core calls the check
of the selected provider (by name or alias) before anything starts."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.api import hookimpl
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import ConfigurationError
from clusterscaler.interfaces.registry import PluginError, Registry


class Provider:
    """Registers `mycloud` (alias `mine`) whose check refuses every `--nodes` value."""

    def __init__(self) -> None:
        self.checked: list[AutoscalingOptions] = []

    def check(self, options: AutoscalingOptions) -> None:
        self.checked.append(options)
        for value in options.nodes:
            raise ConfigurationError(f"--nodes={value!r}: expected nothing")

    @hookimpl
    def clusterscaler_register_cloud_providers(self, registry: Registry) -> None:
        registry.add_cloud_provider(
            "mycloud", lambda context: None, aliases=["mine"], check_options=self.check
        )
        registry.add_cloud_provider("unchecked", lambda context: None)


@pytest.mark.parametrize("name", ["mycloud", "mine"], ids=["name", "alias"])
def test_the_selected_provider_checks_its_options(register_plugin: Any, name: str) -> None:
    provider = Provider()
    registry = register_plugin(provider, name="mycloud", distribution="clusterscaler-mycloud")
    options = AutoscalingOptions(cloud_provider=name, nodes=["1:2:x"])
    with pytest.raises(ConfigurationError, match=r"^--nodes='1:2:x': expected nothing$"):
        registry.check_cloud_provider_options(options)
    assert provider.checked == [options]
    registry.check_cloud_provider_options(AutoscalingOptions(cloud_provider=name))
    assert len(provider.checked) == 2


@pytest.mark.parametrize("name", ["unchecked", "not-registered"])
def test_other_providers_are_not_checked(register_plugin: Any, name: str) -> None:
    provider = Provider()
    registry = register_plugin(provider, name="mycloud", distribution="clusterscaler-mycloud")
    registry.check_cloud_provider_options(AutoscalingOptions(cloud_provider=name, nodes=["x"]))
    assert provider.checked == []


def test_check_options_must_be_callable(register_plugin: Any) -> None:
    class Bad:
        @hookimpl
        def clusterscaler_register_cloud_providers(self, registry: Registry) -> None:
            registry.add_cloud_provider("bad", lambda context: None, check_options="yes")

    with pytest.raises(PluginError, match=r"clusterscaler-bad: the cloud provider 'bad' must be registered with a callable check_options, got 'yes'"):
        register_plugin(Bad(), name="bad", distribution="clusterscaler-bad")


@pytest.mark.parametrize("name", ["sim", "aws", "machineapi", "clusterapi"])
def test_installed_providers_register_a_check(installed_plugins: tuple[Any, Registry], name: str) -> None:
    _, registry = installed_plugins
    if name not in registry.cloud_providers:
        pytest.skip(f"the {name} provider is not installed")
    assert callable(registry.cloud_providers[name].check_options)
