"""Loading plugins and collecting what they register.

`build_plugin_manager()` creates a pluggy manager with the hook specifications, loads the
entry points of the `clusterscaler` group (the standard plugins come this way too), drops
disabled plugins and checks that every hook implementation matches a specification.
`collect_registry()` then calls the registration hooks once and returns a `Registry` of
named cloud providers, expanders, estimators, pod filters and pod-list processors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import Distribution, EntryPoint, entry_points
from types import ModuleType
from typing import Any

import pluggy
from clusterscaler import ENTRY_POINT_GROUP, PROJECT_NAME
from clusterscaler.interfaces import hookspecs
from clusterscaler.interfaces.registry import (
    UNKNOWN_SOURCE,
    DuplicateNameError,
    PluginError,
    PluginSource,
    Registry,
)

DISABLE_ENV = "CLUSTERSCALER_DISABLE_PLUGINS"

@dataclass
class LoadedPlugin:
    name: str
    plugin: object
    source: PluginSource


@dataclass
class PluginHost:
    """A pluggy manager plus what was loaded into it, in load order."""

    manager: pluggy.PluginManager
    loaded: list[LoadedPlugin] = field(default_factory=list)
    disabled: frozenset[str] = frozenset()

    @property
    def hook(self) -> Any:
        return self.manager.hook

    def register(self, plugin: object, name: str, source: PluginSource | None = None) -> None:
        """Register a plugin object (module or instance) directly, e.g. in tests."""
        self.manager.register(plugin, name=name)
        self.loaded.append(
            LoadedPlugin(name=name, plugin=plugin, source=source or _direct_source(name))
        )

    def unregister(self, name: str) -> None:
        self.manager.unregister(name=name)
        self.loaded = [p for p in self.loaded if p.name != name]

    def source_of(self, plugin: object) -> PluginSource:
        for loaded in self.loaded:
            if loaded.plugin is plugin:
                return loaded.source
        return UNKNOWN_SOURCE


def _direct_source(name: str) -> PluginSource:
    return PluginSource(entry_point=name, distribution=name, version="")


def parse_disabled(value: str | Iterable[str] | None) -> frozenset[str]:
    """Entry-point names to skip, from `--disable-plugins=a,b` and the environment."""
    names: set[str] = set()
    values: list[str] = []
    if isinstance(value, str):
        values.append(value)
    elif value is not None:
        values.extend(value)
    values.append(os.environ.get(DISABLE_ENV, ""))
    for item in values:
        names.update(part.strip() for part in item.split(",") if part.strip())
    return frozenset(names)


def _source_of(ep: EntryPoint) -> PluginSource:
    dist: Distribution | None = getattr(ep, "dist", None)
    if dist is None:
        return PluginSource(entry_point=ep.name, distribution="<unknown>", version="")
    return PluginSource(
        entry_point=ep.name, distribution=dist.metadata["Name"], version=dist.version
    )


def build_plugin_manager(
    *,
    autoload: bool = True,
    disabled: str | Iterable[str] | None = None,
    extra_plugins: Mapping[str, object] | None = None,
    entry_point_source: Callable[[], Iterable[EntryPoint]] | None = None,
) -> PluginHost:
    """Create the plugin host.

    With `autoload` the entry points of the `clusterscaler` group are imported, except
    those named in `disabled` or `CLUSTERSCALER_DISABLE_PLUGINS`. A plugin that fails to
    import raises `PluginError` naming its distribution. `extra_plugins` are registered
    directly (tests, embedding). Finally every implementation is checked against the
    specifications, so a misspelled hook fails loudly.
    """
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    host = PluginHost(manager=manager, disabled=parse_disabled(disabled))
    if autoload:
        eps = (
            entry_point_source()
            if entry_point_source is not None
            else entry_points(group=ENTRY_POINT_GROUP)
        )
        seen: dict[str, PluginSource] = {}
        for ep in sorted(eps, key=lambda e: (_source_of(e).distribution, e.name)):
            if ep.name in host.disabled:
                continue
            source = _source_of(ep)
            if ep.name in seen:
                raise DuplicateNameError(
                    f"entry point {ep.name!r} of group {ENTRY_POINT_GROUP!r} is declared by both "
                    f"{seen[ep.name].distribution} and {source.distribution}"
                )
            seen[ep.name] = source
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginError(
                    f"plugin {ep.name!r} from distribution {source.distribution} "
                    f"{source.version} failed to import ({ep.value}): "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            manager.register(plugin, name=ep.name)
            host.loaded.append(LoadedPlugin(name=ep.name, plugin=plugin, source=source))
    for name, plugin in (extra_plugins or {}).items():
        host.register(plugin, name)
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"a plugin implements an unknown hook: {exc}") from exc
    return host


_REGISTRATION_HOOKS = (
    "clusterscaler_register_cloud_providers",
    "clusterscaler_register_expanders",
    "clusterscaler_register_estimators",
    "clusterscaler_register_pod_filters",
    "clusterscaler_register_pod_list_processors",
)


def collect_registry(host: PluginHost) -> Registry:
    """Call every registration hook of every plugin, recording each entry's distribution."""
    registry = Registry()
    for hook_name in _REGISTRATION_HOOKS:
        hook = getattr(host.hook, hook_name)
        plugins = [impl.plugin for impl in hook.get_hookimpls()]
        for plugin in plugins:
            # Through pluggy, one plugin at a time, so that each entry records its source.
            others = [p for p in plugins if p is not plugin]
            registry.current_source = host.source_of(plugin)
            host.manager.subset_hook_caller(hook_name, remove_plugins=others)(registry=registry)
    registry.current_source = UNKNOWN_SOURCE
    return registry


def hook_names(plugin: object) -> list[str]:
    """The `clusterscaler_*` hooks a plugin object implements, sorted."""
    names = []
    for attr in dir(plugin):
        if attr.startswith("clusterscaler_") and callable(getattr(plugin, attr, None)):
            names.append(attr)
    return sorted(names)


def describe(host: PluginHost, registry: Registry) -> dict[str, Any]:
    """The `clusterscaler plugins --json` document."""
    by_dist: dict[str, dict[str, Any]] = {}
    for loaded in host.loaded:
        entry = by_dist.setdefault(
            loaded.source.distribution,
            {"name": loaded.source.distribution, "version": loaded.source.version, "entryPoints": []},
        )
        entry["entryPoints"].append(loaded.name)
    distributions = []
    for name in sorted(by_dist):
        entry = by_dist[name]
        entry["entryPoints"] = sorted(entry["entryPoints"])
        distributions.append(entry)
    return {"distributions": distributions, **registry.names()}


def plugin_module(host: PluginHost, name: str) -> ModuleType | object | None:
    for loaded in host.loaded:
        if loaded.name == name:
            return loaded.plugin
    return None
