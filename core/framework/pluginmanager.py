"""Loading plugins and collecting what they register.

`build_plugin_manager()` creates a pluggy manager with the hook specifications, loads the
entry points of the `clusterscaler` group (the standard plugins come this way too), drops
disabled plugins and checks that every hook implementation matches a specification.
`collect_registry()` then calls the registration hooks once and returns a `Registry` of
named cloud providers, expanders, estimators and pod filters.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import Distribution, EntryPoint, entry_points
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

import pluggy
from clusterscaler import ENTRY_POINT_GROUP, PROJECT_NAME
from clusterscaler.framework import hookspecs

if TYPE_CHECKING:
    # Types only: the registry holds the factories of the kinds the rest of the core
    # defines, and never imports them at run time.
    from clusterscaler.framework.cloudprovider import CloudProvider, ProviderContext
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.loop.estimator import Estimator
    from clusterscaler.loop.expander import Expander
    from clusterscaler.simulator.drain import PodFilter

# What each kind of plugin registers: a factory that builds it.
CloudProviderFactory: TypeAlias = "Callable[[ProviderContext], CloudProvider]"
ExpanderFactory: TypeAlias = "Callable[[AutoscalingOptions], Expander]"
EstimatorFactory: TypeAlias = "Callable[[AutoscalingOptions], Estimator]"
PodFilterFactory: TypeAlias = "Callable[[AutoscalingOptions], PodFilter]"

DISABLE_ENV = "CLUSTERSCALER_DISABLE_PLUGINS"

T = TypeVar("T")


class PluginError(Exception):
    """A plugin could not be loaded or registered something invalid."""


class DuplicateNameError(PluginError):
    """Two plugins registered the same name for the same kind."""


@dataclass(frozen=True, slots=True)
class PluginSource:
    """Where a plugin comes from: its entry point name and distribution."""

    entry_point: str
    distribution: str
    version: str


@dataclass(frozen=True, slots=True)
class Registered(Generic[T]):
    """One registered name: its factory and who registered it.

    `check_options` (cloud providers and expanders) checks the options the plugin reads
    without reaching the network; see `Registry.add_cloud_provider` and `add_expander`.
    """

    name: str
    factory: Callable[..., T]
    source: PluginSource
    final_only: bool = False
    description: str = ""
    check_options: Callable[[AutoscalingOptions], None] | None = None


UNKNOWN_SOURCE = PluginSource(entry_point="<direct>", distribution="<unknown>", version="")


@dataclass
class Registry:
    """Named plugins by kind. Names are unique per kind across all distributions."""

    cloud_providers: dict[str, Registered[CloudProvider]] = field(default_factory=dict)
    expanders: dict[str, Registered[Expander]] = field(default_factory=dict)
    estimators: dict[str, Registered[Estimator]] = field(default_factory=dict)
    pod_filters: dict[str, Registered[PodFilter]] = field(default_factory=dict)
    # Set by the manager while a plugin's registration hook runs, so that every entry
    # records which distribution it came from.
    current_source: PluginSource = UNKNOWN_SOURCE
    # Alternative names (e.g. `clusterapi` for `machineapi`), per kind.
    aliases: dict[str, dict[str, str]] = field(default_factory=dict)

    def _add(
        self,
        kind: str,
        table: dict[str, Registered[Any]],
        name: str,
        factory: Callable[..., Any],
        *,
        final_only: bool = False,
        description: str = "",
        check_options: Callable[[AutoscalingOptions], None] | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise PluginError(
                f"{self.current_source.distribution}: a {kind} name must be a non-empty string, "
                f"got {name!r}"
            )
        if not callable(factory):
            raise PluginError(
                f"{self.current_source.distribution}: the {kind} {name!r} must be registered "
                f"with a callable factory, got {factory!r}"
            )
        existing = table.get(name)
        if existing is not None:
            raise DuplicateNameError(
                f"{kind} {name!r} is registered by both {existing.source.distribution} "
                f"(entry point {existing.source.entry_point!r}) and "
                f"{self.current_source.distribution} (entry point "
                f"{self.current_source.entry_point!r}); uninstall one or disable it with "
                f"--disable-plugins"
            )
        if check_options is not None and not callable(check_options):
            raise PluginError(
                f"{self.current_source.distribution}: the {kind} {name!r} must be registered "
                f"with a callable check_options, got {check_options!r}"
            )
        table[name] = Registered(
            name=name,
            factory=factory,
            source=self.current_source,
            final_only=final_only,
            description=description,
            check_options=check_options,
        )

    def add_cloud_provider(
        self,
        name: str,
        factory: CloudProviderFactory,
        *,
        aliases: Iterable[str] = (),
        description: str = "",
        check_options: Callable[[AutoscalingOptions], None] | None = None,
    ) -> None:
        """Register `factory(context: ProviderContext) -> CloudProvider` as `name`.

        `check_options(options)`, when given, checks what the provider reads from the
        options (`--nodes`, `--node-group-auto-discovery`, `--cloud-config`, its own flags)
        and raises `ConfigurationError` naming the flag, the value and the expected form.
        It is called before the autoscaler starts anything (no API client, no metrics
        server), so it must not reach the network; the factory still gets every option.
        """
        for registered in (name, *aliases):
            self._add(
                "cloud provider",
                self.cloud_providers,
                registered,
                factory,
                description=description,
                check_options=check_options,
            )
            if registered != name:
                self.aliases.setdefault("cloud provider", {})[registered] = name

    def check_cloud_provider_options(self, options: AutoscalingOptions) -> None:
        """Check the options of the provider selected by `--cloud-provider` (see
        `add_cloud_provider`); raises its `ConfigurationError`. Nothing to check for a
        provider registered without `check_options`, or for a name not registered (the
        flag's own check reports that)."""
        entry = self.cloud_providers.get(options.cloud_provider)
        if entry is not None and entry.check_options is not None:
            entry.check_options(options)

    def add_expander(
        self,
        name: str,
        factory: ExpanderFactory,
        *,
        final_only: bool = False,
        description: str = "",
        check_options: Callable[[AutoscalingOptions], None] | None = None,
    ) -> None:
        """Register `factory(options: AutoscalingOptions) -> Expander` as `name`.

        `check_options(options)`, when given, checks the flags the expander reads (such as
        `--grpc-expander-url` for `grpc`) and raises `ValueError` naming the flag, the value
        and the expected form. It is called while the flags are parsed, when `--expander`
        names this expander, so it must not reach the network.
        """
        self._add(
            "expander",
            self.expanders,
            name,
            factory,
            final_only=final_only,
            description=description,
            check_options=check_options,
        )

    def check_expander_options(self, options: AutoscalingOptions) -> None:
        """Check the options of each expander named by `--expander` (see `add_expander`);
        raises the expander's `ValueError`. Names not registered are left to the flag's own
        check."""
        for name in options.expander:
            entry = self.expanders.get(name.strip())
            if entry is not None and entry.check_options is not None:
                entry.check_options(options)

    def add_estimator(
        self, name: str, factory: EstimatorFactory, *, description: str = ""
    ) -> None:
        """Register `factory(options: AutoscalingOptions) -> Estimator` as `name`."""
        self._add("estimator", self.estimators, name, factory, description=description)

    def add_pod_filter(
        self, name: str, factory: PodFilterFactory, *, description: str = ""
    ) -> None:
        """Register `factory(options: AutoscalingOptions) -> PodFilter` as `name`."""
        self._add("pod filter", self.pod_filters, name, factory, description=description)

    def names(self) -> dict[str, list[str]]:
        return {
            "cloudProviders": sorted(self.cloud_providers),
            "expanders": sorted(self.expanders),
            "estimators": sorted(self.estimators),
            "podFilters": sorted(self.pod_filters),
        }


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
