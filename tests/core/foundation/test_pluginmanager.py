from __future__ import annotations

from importlib.metadata import EntryPoint
from types import ModuleType
from typing import Any

import pytest
from clusterscaler.api import hookimpl
from clusterscaler.framework.pluginmanager import (
    PluginHost,
    build_plugin_manager,
    collect_registry,
    describe,
    parse_disabled,
)
from clusterscaler.interfaces.registry import DuplicateNameError, PluginError, Registry


class _Dist:
    def __init__(self, name: str, version: str = "1.0") -> None:
        self.metadata = {"Name": name}
        self.version = version


def _ep(name: str, value: str, dist: str) -> EntryPoint:
    ep = EntryPoint(name=name, value=value, group="clusterscaler")
    return ep._for(_Dist(dist))  # type: ignore[attr-defined, no-any-return]


def _module(name: str, **attrs: Any) -> ModuleType:
    import sys

    module = ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    sys.modules[name] = module
    return module


def test_registered_names_record_their_distribution(register_plugin: Any) -> None:
    class Expanders:
        @hookimpl
        def clusterscaler_register_expanders(self, registry: Registry) -> None:
            registry.add_expander("cheapest", lambda options: None)

    registry = register_plugin(Expanders(), name="cheap", distribution="clusterscaler-cheap")
    entry = registry.expanders["cheapest"]
    assert entry.source.distribution == "clusterscaler-cheap"


def test_duplicate_name_is_an_error_naming_both_distributions(register_plugin: Any) -> None:
    class One:
        @hookimpl
        def clusterscaler_register_expanders(self, registry: Registry) -> None:
            registry.add_expander("smart", lambda options: None)

    class Two:
        @hookimpl
        def clusterscaler_register_expanders(self, registry: Registry) -> None:
            registry.add_expander("smart", lambda options: None)

    register_plugin(One(), name="one", distribution="clusterscaler-one")
    with pytest.raises(DuplicateNameError) as info:
        register_plugin(Two(), name="two", distribution="clusterscaler-two")
    assert "clusterscaler-one" in str(info.value)
    assert "clusterscaler-two" in str(info.value)
    assert "'smart'" in str(info.value)


def test_misspelled_hook_fails_loudly(plugin_host: PluginHost) -> None:
    class Typo:
        @hookimpl
        def clusterscaler_register_expander(self, registry: Registry) -> None:  # missing "s"
            pass

    with pytest.raises(PluginError, match="clusterscaler_register_expander"):
        build_plugin_manager(autoload=False, extra_plugins={"typo": Typo()})


def test_entry_points_are_loaded_and_import_failures_name_the_distribution() -> None:
    _module("cs_test_good", clusterscaler_register_estimators=hookimpl(
        lambda registry: registry.add_estimator("tiny", lambda options: None)
    ))
    host = build_plugin_manager(
        entry_point_source=lambda: [_ep("good", "cs_test_good", "clusterscaler-good")]
    )
    registry = collect_registry(host)
    assert registry.estimators["tiny"].source.distribution == "clusterscaler-good"

    with pytest.raises(PluginError) as info:
        build_plugin_manager(
            entry_point_source=lambda: [_ep("broken", "cs_test_missing_module", "clusterscaler-broken")]
        )
    assert "clusterscaler-broken" in str(info.value)
    assert "'broken'" in str(info.value)


def test_disabled_plugins_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [_ep("broken", "cs_test_missing_module", "clusterscaler-broken")]
    host = build_plugin_manager(entry_point_source=lambda: eps, disabled="broken")
    assert host.loaded == []
    monkeypatch.setenv("CLUSTERSCALER_DISABLE_PLUGINS", "other, broken")
    host = build_plugin_manager(entry_point_source=lambda: eps)
    assert host.loaded == []
    assert parse_disabled("a,b") == {"a", "b", "other", "broken"}


def test_describe_document_shape(register_plugin: Any, plugin_host: PluginHost) -> None:
    class Everything:
        @hookimpl
        def clusterscaler_register_cloud_providers(self, registry: Registry) -> None:
            registry.add_cloud_provider("zeta", lambda context: None)
            registry.add_cloud_provider("alpha", lambda context: None)

        @hookimpl
        def clusterscaler_register_pod_filters(self, registry: Registry) -> None:
            registry.add_pod_filter("mirror", lambda options: None)

        @hookimpl
        def clusterscaler_register_pod_list_processors(self, registry: Registry) -> None:
            registry.add_pod_list_processor("skip-batch", lambda options: None)
            registry.add_pod_list_processor("buffers", lambda options: None)

    registry = register_plugin(Everything(), name="everything", distribution="clusterscaler-all")
    doc = describe(plugin_host, registry)
    assert doc == {
        "distributions": [{"name": "clusterscaler-all", "version": "0", "entryPoints": ["everything"]}],
        "cloudProviders": ["alpha", "zeta"],
        "expanders": [],
        "estimators": [],
        "podFilters": ["mirror"],
        "podListProcessors": ["buffers", "skip-batch"],
    }


def test_cloud_provider_alias_is_registered(register_plugin: Any) -> None:
    class Machines:
        @hookimpl
        def clusterscaler_register_cloud_providers(self, registry: Registry) -> None:
            registry.add_cloud_provider("machineapi", lambda context: None, aliases=["clusterapi"])

    registry = register_plugin(Machines(), name="machines")
    assert registry.cloud_providers["clusterapi"].factory is registry.cloud_providers["machineapi"].factory
