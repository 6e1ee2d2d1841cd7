"""Every hook a clusterscaler plugin can implement, and the markers of hooks.

A plugin is a module (or object) with functions decorated by `hookimpl` (imported from
`clusterscaler.api`), declared as an entry point of the group `clusterscaler`::

    [project.entry-points.clusterscaler]
    myexpander = "clusterscaler_myexpander"

Named things (cloud providers, expanders, estimators, pod filters, pod-list processors)
are added to a typed registry passed to the registration hooks. The core calls each registration hook once,
right after the plugins are loaded and before the command line is parsed, so that flag
choices such as `--expander` list exactly what is installed.

Hooks are always called with keyword arguments. A hook implementation may accept a subset
of the declared arguments, but must not give any of them a default value: pluggy does not
pass arguments that have defaults.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import pluggy
from clusterscaler import PROJECT_NAME

if TYPE_CHECKING:
    from clusterscaler.interfaces.registry import Registry

# The one pair of markers: every hook below is declared with `hookspec`, and every plugin,
# ours and third parties', implements hooks with `hookimpl` from `clusterscaler.api`.
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def clusterscaler_add_options(parser: argparse.ArgumentParser) -> None:
    """Add a plugin's own command-line flags to the autoscaler's parser.

    Called once per run, after plugins are loaded and before arguments are parsed, with the
    parser of the autoscaler (`clusterscaler run`, `simulate` and `explain` share it).
    Use a flag prefix naming the plugin (e.g. `--aws-use-static-instance-list`). Parsed
    values reach the plugin through `AutoscalingOptions.extra` under the argparse `dest`.
    The return value is ignored.
    """


@hookspec
def clusterscaler_register_cloud_providers(registry: Registry) -> None:
    """Register cloud providers with `registry.add_cloud_provider(name, factory)`.

    Called once after plugins are loaded. `factory(context: ProviderContext) ->
    CloudProvider` builds the provider selected by `--cloud-provider=name`; it is called
    once when the autoscaler starts. Registering a name that another distribution already
    registered is an error naming both. The return value is ignored.
    """


@hookspec
def clusterscaler_register_expanders(registry: Registry) -> None:
    """Register expanders with `registry.add_expander(name, factory)`.

    Called once after plugins are loaded. `factory(options: AutoscalingOptions) ->
    Expander` is called when the expander chain given by `--expander=a,b` is built. Pass
    `final_only=True` for a strategy that always picks exactly one option (like `random`):
    such an expander may only stand last in a chain. The return value is ignored.
    """


@hookspec
def clusterscaler_register_estimators(registry: Registry) -> None:
    """Register estimators with `registry.add_estimator(name, factory)`.

    Called once after plugins are loaded. `factory(options: AutoscalingOptions) ->
    Estimator` is called for the estimator selected by `--estimator`. The return value is
    ignored.
    """


@hookspec
def clusterscaler_register_pod_filters(registry: Registry) -> None:
    """Register pod filters (drainability rules) with `registry.add_pod_filter(name, factory)`.

    Called once after plugins are loaded. `factory(options: AutoscalingOptions) ->
    PodFilter` is called when scale-down starts; every registered filter takes part in
    deciding whether a pod blocks the removal of its node, in the order given by each
    filter's `order` attribute (lower first). The return value is ignored.
    """


@hookspec
def clusterscaler_register_pod_list_processors(registry: Registry) -> None:
    """Register pod-list processors with `registry.add_pod_list_processor(name, factory)`.

    Called once after plugins are loaded. `factory(options: AutoscalingOptions) ->
    PodListProcessor` is called when the autoscaler is built; every registered processor
    then runs once per loop, before scale-up, on the pods waiting for a node, adding pods
    for scale-up to consider or leaving some out (as Cluster Autoscaler's processors do
    for ProvisioningRequests and CapacityBuffers). They run in ascending `order`, then by
    name, each on what the one before returned; see `PodListProcessor`. Registering a
    name that another distribution already registered is an error naming both. The
    return value is ignored.
    """
