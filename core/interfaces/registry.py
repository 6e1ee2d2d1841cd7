"""The registry the registration hooks receive: named plugins by kind.

A plugin's `clusterscaler_register_expanders(registry)` (and the hooks for cloud providers,
estimators, pod filters and pod-list processors) calls `registry.add_expander(name,
factory)`; the autoscaler builds what `--expander`, `--estimator` and `--cloud-provider` name from these factories.
Names are unique per kind across every installed distribution.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.interfaces.cloudprovider import CloudProvider
    from clusterscaler.interfaces.estimator import Estimator
    from clusterscaler.interfaces.expander import Expander
    from clusterscaler.interfaces.podfilter import PodFilter
    from clusterscaler.interfaces.podlistprocessor import PodListProcessor
    from clusterscaler.interfaces.providercontext import ProviderContext

__all__ = [
    "UNKNOWN_SOURCE",
    "CloudProviderFactory",
    "DuplicateNameError",
    "EstimatorFactory",
    "ExpanderFactory",
    "OptionsCheck",
    "PluginError",
    "PluginSource",
    "PodFilterFactory",
    "PodListProcessorFactory",
    "Registered",
    "Registry",
    "build_in_order",
]

# What each kind of plugin registers: a factory that builds it.
CloudProviderFactory: TypeAlias = "Callable[[ProviderContext], CloudProvider]"
ExpanderFactory: TypeAlias = "Callable[[AutoscalingOptions], Expander]"
EstimatorFactory: TypeAlias = "Callable[[AutoscalingOptions], Estimator]"
PodFilterFactory: TypeAlias = "Callable[[AutoscalingOptions], PodFilter]"
PodListProcessorFactory: TypeAlias = "Callable[[AutoscalingOptions], PodListProcessor]"

# What a plugin may register to check the options it reads, before anything starts.
OptionsCheck: TypeAlias = "Callable[[AutoscalingOptions], None]"

F = TypeVar("F")


class _Ordered(Protocol):
    """A kind whose plugins all run, in ascending `order`, equal orders by `name`."""

    name: str
    order: int


P = TypeVar("P", bound=_Ordered)


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
class Registered(Generic[F]):
    """One registered name: its factory (of the kind's factory type) and who registered it.

    `check_options` (cloud providers and expanders) checks the options the plugin reads
    without reaching the network; see `Registry.add_cloud_provider` and `add_expander`.
    """

    name: str
    factory: F
    source: PluginSource
    final_only: bool = False
    description: str = ""
    check_options: OptionsCheck | None = None


UNKNOWN_SOURCE = PluginSource(entry_point="<direct>", distribution="<unknown>", version="")


@dataclass
class Registry:
    """Named plugins by kind. Names are unique per kind across all distributions."""

    cloud_providers: dict[str, Registered[CloudProviderFactory]] = field(default_factory=dict)
    expanders: dict[str, Registered[ExpanderFactory]] = field(default_factory=dict)
    estimators: dict[str, Registered[EstimatorFactory]] = field(default_factory=dict)
    pod_filters: dict[str, Registered[PodFilterFactory]] = field(default_factory=dict)
    pod_list_processors: dict[str, Registered[PodListProcessorFactory]] = field(
        default_factory=dict
    )
    # Set by the manager while a plugin's registration hook runs, so that every entry
    # records which distribution it came from.
    current_source: PluginSource = UNKNOWN_SOURCE
    # Alternative names (e.g. `clusterapi` for `machineapi`), per kind.
    aliases: dict[str, dict[str, str]] = field(default_factory=dict)

    def _add(
        self,
        kind: str,
        table: dict[str, Registered[F]],
        name: str,
        factory: F,
        *,
        final_only: bool = False,
        description: str = "",
        check_options: OptionsCheck | None = None,
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
        check_options: OptionsCheck | None = None,
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
        check_options: OptionsCheck | None = None,
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

    def add_pod_list_processor(
        self, name: str, factory: PodListProcessorFactory, *, description: str = ""
    ) -> None:
        """Register `factory(options: AutoscalingOptions) -> PodListProcessor` as `name`.

        Every registered processor runs in each loop, in the order of its `order`
        attribute, then of its name (see `PodListProcessor`)."""
        self._add(
            "pod-list processor",
            self.pod_list_processors,
            name,
            factory,
            description=description,
        )

    def names(self) -> dict[str, list[str]]:
        return {
            "cloudProviders": sorted(self.cloud_providers),
            "expanders": sorted(self.expanders),
            "estimators": sorted(self.estimators),
            "podFilters": sorted(self.pod_filters),
            "podListProcessors": sorted(self.pod_list_processors),
        }


def build_in_order(
    kind: str,
    table: Mapping[str, Registered[Callable[[AutoscalingOptions], P]]],
    options: AutoscalingOptions,
    protocol: type,
    expected: str,
) -> list[P]:
    """Every plugin of a kind that all run (pod filters, pod-list processors) made from
    its factory, in ascending `order` and then by name, never in registration order. A
    factory whose object is not of the kind's `protocol` is an error naming the plugin and
    what was `expected` of it."""
    made: list[P] = []
    for name in sorted(table):
        plugin = table[name].factory(options)
        if not isinstance(plugin, protocol):
            raise TypeError(
                f"{kind} {name!r}: factory returned {type(plugin).__name__}, expected {expected}"
            )
        made.append(plugin)
    made.sort(key=lambda plugin: (plugin.order, plugin.name))
    return made
