"""pytest plugin for clusterscaler and for authors of clusterscaler plugins.

Installed with the `clusterscaler` distribution (entry point `pytest11`), so its fixtures
are available in any test suite of a venv where clusterscaler is installed:

- `plugin_host`: a plugin manager with the hook specifications and *no* entry points
  loaded, so a test controls exactly which plugins take part.
- `register_plugin`: `register_plugin(obj, name=...)` registers a plugin object (a module or
  an instance with `@hookimpl` methods) into `plugin_host` for one test and returns the
  freshly collected `Registry`.
- `installed_plugins`: the manager with every installed entry point loaded, as the CLI sees it.
- `fake_kube`, `fake_kube_client`: a fake Kubernetes API server on 127.0.0.1 and an official
  client talking to it (see `clusterscaler.testing.fakekube`).
- `real_cluster`, `kwok_cluster`: a real control plane (kube-apiserver, etcd, kube-scheduler,
  kube-controller-manager, kwok) built from Go modules, for tests marked `realcluster`
  (see `clusterscaler.testing.realcluster`).

Beside the fixtures, a plugin's tests run the real loop with its plugins through
`clusterscaler.testing.loopharness.LoopHarness` (over `clusterscaler.testing.fakecloud`),
and a cloud provider proves its contract with `clusterscaler.testing.conformance`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from clusterscaler.framework.pluginmanager import (
    PluginHost,
    build_plugin_manager,
    collect_registry,
)
from clusterscaler.interfaces.registry import PluginSource, Registry

# Re-exported so that pytest registers them as fixtures of this plugin.
from clusterscaler.testing.fakekube_fixtures import fake_kube, fake_kube_client
from clusterscaler.testing.realcluster import (
    kwok_cluster,
    pytest_collection_finish,
    pytest_configure,
    real_cluster,
)

__all__ = [
    "fake_kube",
    "fake_kube_client",
    "installed_plugins",
    "kwok_cluster",
    "plugin_host",
    "pytest_collection_finish",
    "pytest_configure",
    "real_cluster",
    "register_plugin",
]

RegisterPlugin = Callable[..., Registry]


@pytest.fixture
def plugin_host() -> PluginHost:
    """A plugin manager with hook specifications and no autoloaded plugins."""
    return build_plugin_manager(autoload=False)


@pytest.fixture
def register_plugin(plugin_host: PluginHost) -> Iterator[RegisterPlugin]:
    """Register plugin objects into `plugin_host` for one test; returns the new registry."""
    names: list[str] = []

    def register(plugin: object, name: str | None = None, distribution: str | None = None) -> Registry:
        plugin_name = name or f"test-plugin-{len(names)}"
        source = PluginSource(
            entry_point=plugin_name, distribution=distribution or plugin_name, version="0"
        )
        plugin_host.register(plugin, plugin_name, source)
        plugin_host.manager.check_pending()
        names.append(plugin_name)
        return collect_registry(plugin_host)

    yield register
    for name in names:
        if plugin_host.manager.has_plugin(name):
            plugin_host.unregister(name)


@pytest.fixture
def installed_plugins() -> tuple[PluginHost, Registry]:
    """Every installed plugin, loaded through entry points as the CLI loads them."""
    host = build_plugin_manager()
    return host, collect_registry(host)
