"""Turning parsed flags and a scenario into a ready simulation: options, the in-memory
cluster, the `sim` provider built through the plugin registry, and the loop."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from clusterscaler.framework.options import (
    BOOL,
    GPU_TOTAL,
    STRING_ARRAY,
    STRING_SLICE,
    AutoscalingOptions,
    FlagSpec,
    OptionError,
    flag_given,
    flag_specs,
    options_from_namespace,
    validate,
)
from clusterscaler.framework.schedulerconfig import (
    SchedulerConfig,
    SchedulerConfigError,
    load_scheduler_config,
)
from clusterscaler.interfaces.cloudprovider import CloudProvider
from clusterscaler.interfaces.providercontext import KubeApiClient, ProviderContext
from clusterscaler.interfaces.registry import Registry
from clusterscaler.loop.autoscaler import Autoscaler, AutoscalerError
from clusterscaler.loop.expanderchain import ExpanderConfigError
from clusterscaler.model import ClusterObjects
from clusterscaler.model.common import describe_value
from clusterscaler.model.yamltext import MAX_CONFIG_FILE_BYTES, YamlFileError, read_yaml_file
from clusterscaler.offline.clock import DEFAULT_START, VirtualClock
from clusterscaler.offline.inference import Bounds, Inference, infer_node_groups
from clusterscaler.offline.loader import InputError, snapshot_time
from clusterscaler.offline.scenario import Scenario
from clusterscaler.offline.simulatedcluster import SimulatedCluster

SIM_PROVIDER = "sim"
# The sim provider reads an inline cloud-config from this `options.extra` key.
EMBEDDED_CONFIG_KEY = "sim_cloud_config"


def _scenario_value(spec: FlagSpec, value: Any, source: str) -> Any:
    """A scenario's flag value in the form argparse would have produced."""
    where = f"{source}: flags.{spec.name}"
    if value is None:  # `expander:` with nothing after it is not the string "None"
        raise InputError(f"{where}: expected a value, got null")
    try:
        if spec.kind == STRING_SLICE:
            items = value if isinstance(value, list) else [value]
            return [spec.parse(",".join(str(v) for v in items))]
        if spec.kind in (STRING_ARRAY, GPU_TOTAL):
            items = value if isinstance(value, list) else [value]
            return [spec.parse(str(v)) for v in items]
        if spec.kind == BOOL and isinstance(value, bool):
            return spec.parse("true" if value else "false")
        return spec.parse(str(value))
    except OptionError as exc:
        raise InputError(f"{where}: expected {exc.expected}, got {describe_value(value)}") from None


def merge_options(
    args: argparse.Namespace, scenario_flags: Mapping[str, Any], source: str
) -> AutoscalingOptions:
    """Options from defaults, then the scenario's flags, then flags given on the command line."""
    specs = {spec.name: spec for spec in flag_specs()}
    ns = argparse.Namespace(**vars(args))
    for name, value in scenario_flags.items():
        spec = specs[name]
        if not flag_given(args, spec.dest):
            setattr(ns, spec.dest, _scenario_value(spec, value, source))
    options, _ = options_from_namespace(ns, set(vars(ns)))
    try:
        validate(options)
    except OptionError as exc:
        raise InputError(f"{source}: flags: {exc}") from None
    path = options.scheduler_config_file
    if path:
        if not flag_given(args, "scheduler_config_file") and not os.path.isabs(path):
            # A scenario names its files relative to itself, as its cloudConfig.
            path = os.path.join(os.path.dirname(source), path)
        try:
            options.scheduler_config = load_scheduler_config(path)
        except SchedulerConfigError as exc:
            raise InputError(str(exc)) from None
    return options


def with_cloud_config(
    options: AutoscalingOptions, scenario: Scenario, cli_cloud_config: str
) -> AutoscalingOptions:
    """The cloud-config of the command line wins over the scenario's."""
    if cli_cloud_config:
        return dataclasses.replace(options, cloud_config=cli_cloud_config)
    if scenario.cloud_config is not None:
        extra = {**options.extra, EMBEDDED_CONFIG_KEY: dict(scenario.cloud_config)}
        return dataclasses.replace(options, cloud_config="", extra=extra)
    if scenario.cloud_config_path:
        return dataclasses.replace(options, cloud_config=scenario.cloud_config_path)
    return options


def has_cloud_config(options: AutoscalingOptions) -> bool:
    """Whether the node groups are declared (a cloud-config file or an inline one)."""
    return bool(options.cloud_config) or EMBEDDED_CONFIG_KEY in options.extra


def with_inferred_node_groups(
    options: AutoscalingOptions, objects: ClusterObjects, bounds: dict[str, Bounds]
) -> tuple[AutoscalingOptions, ClusterObjects, Inference]:
    """For a snapshot without a cloud-config: the node groups its nodes' labels name, as
    the `sim` provider's inline cloud-config, and the objects with each member node
    labelled with its group (see `clusterscaler.offline.inference`)."""
    inference = infer_node_groups(objects.nodes, bounds)
    extra = {**options.extra, EMBEDDED_CONFIG_KEY: inference.cloud_config()}
    return (
        dataclasses.replace(options, cloud_config="", extra=extra),
        inference.label_members(objects),
        inference,
    )


def without_node_groups(options: AutoscalingOptions, names: list[str]) -> AutoscalingOptions:
    """`options` with the node groups `names` left out of the `sim` cloud-config (a file's
    is read and passed on inline)."""
    doc: Any = options.extra.get(EMBEDDED_CONFIG_KEY)
    if doc is None and options.cloud_config:
        try:
            doc = read_yaml_file(
                options.cloud_config, f"--cloud-config {options.cloud_config!r}",
                "YAML declaring nodeGroups", max_bytes=MAX_CONFIG_FILE_BYTES,
            )
        except YamlFileError as exc:
            raise InputError(str(exc)) from None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("nodeGroups"), list):
        return options
    groups = [g for g in doc["nodeGroups"] if not (isinstance(g, Mapping) and g.get("name") in names)]
    extra = {**options.extra, EMBEDDED_CONFIG_KEY: {**doc, "nodeGroups": groups}}
    return dataclasses.replace(options, cloud_config="", extra=extra)


def build_cluster(
    objects: ClusterObjects,
    scenario: Scenario | None = None,
    scheduler_config: SchedulerConfig | None = None,
) -> tuple[SimulatedCluster, VirtualClock]:
    taken = snapshot_time(objects)
    # A snapshot of a real cluster continues from the moment it was taken.
    clock = VirtualClock(taken) if taken is not None and taken > DEFAULT_START else VirtualClock()
    cluster = SimulatedCluster(objects, clock, scheduler_config=scheduler_config)
    if scenario is not None:
        for key, template in scenario.templates.items():
            cluster.templates.setdefault(key, template)
    return cluster, clock


def build_provider(
    registry: Registry,
    options: AutoscalingOptions,
    *,
    cluster: SimulatedCluster | None = None,
    clock: VirtualClock | None = None,
    kube_api: KubeApiClient | None = None,
) -> CloudProvider:
    entry = registry.cloud_providers.get(options.cloud_provider)
    if entry is None:
        raise InputError(
            f"--cloud-provider: expected one of {', '.join(sorted(registry.cloud_providers))}, "
            f"got {options.cloud_provider!r}"
        )
    provider: CloudProvider = entry.factory(
        ProviderContext(options=options, kube_api=kube_api, cluster=cluster, clock=clock)
    )
    return provider


def build_loop(
    registry: Registry,
    options: AutoscalingOptions,
    provider: CloudProvider,
    cluster: SimulatedCluster,
    clock: VirtualClock,
    *,
    source: str = "",
) -> Autoscaler:
    """The real loop, reading and acting on the in-memory cluster, on the virtual clock.
    `source` names the scenario whose flags the options hold, in errors."""
    try:
        return Autoscaler.from_registry(
            registry, options=options, provider=provider, source=cluster, actions=cluster, clock=clock
        )
    except AutoscalerError as exc:
        raise InputError(str(exc)) from None
    except ExpanderConfigError as exc:
        # Only a scenario's `flags.expander` gets here: the command line's is checked as its
        # flags are parsed.
        raise InputError(f"{source or 'scenario'}: flags.expander: {exc}") from None
