"""`clusterscaler simulate`: the real loop against an in-memory cluster on a virtual clock.

With no arguments the built-in demo runs. A scenario file bundles a snapshot, a
cloud-config, flags and timed events; `--snapshot` and `--cloud-config` describe a cluster
directly (for example your own, from `kubectl get ... -o json`). `--once` runs one loop and
prints its decisions (`--json` for the JSON contract); otherwise the loop runs for
`--duration` at `--scan-interval` and a timeline and summary are printed (`--json`: one
JSON object per line; `--plot out.png`: a chart). A snapshot without a cloud-config is
autoscaled by the node groups its nodes' labels name (`clusterscaler.offline.inference`),
sized by `--nodes` and `--node-group-bounds`.

Exit status: 0 ok, 1 runtime error, 2 bad input (snapshot, scenario, cloud-config, flags).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import logging
import sys
import textwrap
from collections.abc import Sequence
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import structlog
import yaml
from clusterscaler.framework.durations import DURATION_FORM, format_duration, parse_duration
from clusterscaler.framework.options import AutoscalingOptions, flag_given, flag_specs
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    ConfigurationError,
)
from clusterscaler.loop.decisions import LoopResult
from clusterscaler.model import ClusterObjects, gc_paused
from clusterscaler.offline import output
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.offline.cloudgroups import (
    GroupsReport,
    ProviderGroups,
    read_provider_groups,
    render_groups,
)
from clusterscaler.offline.inference import Inference, bounds_from
from clusterscaler.offline.loader import InputError, input_notes, load_snapshot
from clusterscaler.offline.runner import (
    Simulation,
    SimulationResult,
    provision_initial_nodes,
    request_upcoming,
    validate_events,
)
from clusterscaler.offline.runner import run as run_simulation
from clusterscaler.offline.scenario import (
    Scenario,
    load_scenario,
    parse_scenario,
)
from clusterscaler.offline.setup import (
    SIM_PROVIDER,
    build_cluster,
    build_loop,
    build_provider,
    has_cloud_config,
    merge_options,
    with_cloud_config,
    with_inferred_node_groups,
    without_node_groups,
)
from clusterscaler.offline.simulatedcluster import SimulatedCluster, SimulationError
from clusterscaler.offline.whatif import (
    Change,
    ChangeReport,
    add_change_arguments,
    apply_changes,
    outcome,
    removed_groups,
    render_changes,
    settle,
    what_if_json,
)
from clusterscaler.offline.whatif import render as render_what_if
from clusterscaler.report.logs import configure as configure_logs
from clusterscaler.report.logs import settings_from_options, stamped_by

if TYPE_CHECKING:
    from clusterscaler.commands.cli import CommandContext
    from clusterscaler.interfaces.registry import Registry

log = structlog.get_logger()

OK, RUNTIME_ERROR, USAGE_ERROR = 0, 1, 2
FROM_CLUSTER = "--from-cluster"
DEFAULT_DURATION = timedelta(hours=1)


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid value {text!r}: expected {DURATION_FORM}"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("simulate flags")
    group.add_argument(
        "scenario",
        nargs="?",
        default=None,
        help="A scenario file (YAML: snapshot, cloudConfig, flags, workloads, events). "
        "Without one and without --snapshot, the built-in demo runs.",
    )
    group.add_argument(
        "--snapshot",
        default="",
        metavar="FILE",
        help="A Kubernetes List in JSON or YAML, as `kubectl get nodes,pods,pdb,ds,rs,sts,"
        "jobs,cm -A -o json` prints it: a file (gzipped or not), a directory of such files, "
        "or - for standard input.",
    )
    add_from_cluster_argument(group)
    add_bounds_argument(group)
    add_change_arguments(group)
    group.add_argument("--once", action="store_true", help="Run one loop and print its decisions.")
    group.add_argument(
        "--json",
        action="store_true",
        help="With --once, one JSON object with scaleUp, scaleDown, unschedulable and "
        "unremovable; otherwise JSON lines (events, samples, summary).",
    )
    group.add_argument(
        "--duration",
        type=_duration,
        default=None,
        metavar="duration",
        help="Simulated time to run (default: the scenario's, else 1h).",
    )
    group.add_argument(
        "--plot",
        default="",
        metavar="FILE",
        help="Write a chart of nodes per group, pending pods and cost over time, events marked: "
        "a PNG, or an SVG when FILE ends in .svg.",
    )


def add_from_cluster_argument(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        FROM_CLUSTER,
        action="store_true",
        help="Take the snapshot from the cluster of --kubeconfig (read only: list and watch) "
        "and run on it as on a --snapshot file. With a --cloud-provider other than sim, the "
        "node groups, their bounds and scale-from-zero templates are read from that provider "
        "(its flags: --node-group-auto-discovery, --nodes, --cloud-config), which is never "
        "written to.",
    )


def read_cluster(options: AutoscalingOptions) -> ClusterObjects:
    """The objects of the cluster of `--kubeconfig` (or `--kubernetes`), as the autoscaler's
    caches list them: only GET requests (list and watch) are sent."""
    return _read_cluster(options)[0]


def _read_cluster(options: AutoscalingOptions) -> tuple[ClusterObjects, Any]:
    """The cluster's objects, and the API client that read them."""
    from clusterscaler.kube.client import ClientSettings, KubeConfigError, build_api_client
    from clusterscaler.kube.source import KubeClusterSource

    try:
        api = build_api_client(ClientSettings.from_options(options))
    except KubeConfigError as exc:
        raise InputError(f"{FROM_CLUSTER}: {exc}") from None
    with KubeClusterSource(
        api,
        namespace=options.namespace,
        provisioning_requests=options.enable_provisioning_requests,
        capacity_quotas=options.capacity_quotas_enabled,
    ) as source:
        if not source.wait_for_sync(60):
            raise CloudProviderError(
                f"{FROM_CLUSTER}: the Kubernetes caches did not sync within 60s"
            )
        return source.snapshot(), api


def read_cluster_and_provider(
    registry: Registry, options: AutoscalingOptions, args: argparse.Namespace
) -> tuple[ClusterObjects, ProviderGroups]:
    """`--from-cluster` with a real `--cloud-provider`: the cluster's objects (GET requests
    only), with each node of a provider group labelled with it, and the provider's node
    groups, read through a provider whose writes are refused."""
    bounds_file = getattr(args, "node_group_bounds", "")
    if bounds_file:
        raise InputError(
            f"--node-group-bounds {bounds_file!r}: expected only when the node groups are "
            f"inferred (--cloud-provider={SIM_PROVIDER}); the {options.cloud_provider} "
            "provider gives its groups' bounds (set them with its own flags: --nodes, "
            "--node-group-auto-discovery, --cloud-config)"
        )
    # Bad provider flags are reported before the API server or the cloud is asked anything.
    registry.check_cloud_provider_options(options)
    objects, api = _read_cluster(options)
    provider = build_provider(registry, options, kube_api=api)
    try:
        groups = read_provider_groups(provider, objects.nodes, options)
    finally:
        provider.cleanup()
    return groups.label_members(objects), groups


def from_provider(args: argparse.Namespace, options: AutoscalingOptions) -> bool:
    """Whether the node groups come from a real provider (`--from-cluster` with a
    `--cloud-provider` other than `sim`)."""
    return bool(getattr(args, "from_cluster", False)) and options.cloud_provider != SIM_PROVIDER


def check_from_cluster(args: argparse.Namespace) -> None:
    if getattr(args, "from_cluster", False) and (args.snapshot or getattr(args, "scenario", None)):
        raise InputError(
            f"{FROM_CLUSTER}: expected without --snapshot or a scenario file (the snapshot is "
            "taken from the cluster)"
        )


def add_bounds_argument(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--node-group-bounds",
        default="",
        metavar="FILE",
        help="Without --cloud-config: a YAML file of the sizes of the node groups inferred "
        "from the snapshot (nodeGroups: {<group>: {minSize: N, maxSize: M}}); --nodes="
        "<min>:<max>:<group> wins. Default: min 0, max 1000.",
    )


def infer_if_needed(
    args: argparse.Namespace, options: AutoscalingOptions, objects: ClusterObjects
) -> tuple[AutoscalingOptions, ClusterObjects, Inference | None]:
    """Without a cloud-config, the node groups of a snapshot's nodes (none are inferred for
    a cluster without nodes: then a cloud-config is required)."""
    bounds_file = getattr(args, "node_group_bounds", "")
    if has_cloud_config(options) or not objects.nodes:
        if bounds_file:
            raise InputError(
                f"--node-group-bounds {bounds_file!r}: expected only without --cloud-config "
                "(a cloud-config declares its groups' minSize and maxSize)"
            )
        return options, objects, None
    bounds = bounds_from(options.nodes, bounds_file)
    return with_inferred_node_groups(options, objects, bounds)


DEMO_SOURCE = "built-in demo"
OTHER_INPUTS = (
    "This is the built-in demo. To simulate your own cluster: `clusterscaler simulate "
    "SCENARIO.yaml`, `--snapshot FILE` (the JSON of `kubectl get nodes,pods,pdb,ds,rs,sts,"
    "jobs,cm -A -o json`, node groups from `--cloud-config` or inferred) or `--from-cluster` "
    "(the cluster of --kubeconfig, read only); docs/simulate.md."
)


def demo_scenario() -> Scenario:
    text = resources.files("clusterscaler.offline").joinpath("demo.yaml").read_text("utf-8")
    return parse_scenario(yaml.safe_load(text), DEMO_SOURCE)


def load_inputs(args: argparse.Namespace) -> Scenario:
    """The scenario to run: a file, a snapshot given by flags, or the demo."""
    if args.scenario:
        scenario = load_scenario(args.scenario)
        if args.snapshot:
            scenario.objects = load_snapshot(args.snapshot)
        return scenario
    if args.snapshot:
        name = "stdin" if args.snapshot == "-" else Path(args.snapshot).name.split(".")[0]
        scenario = Scenario(name=name, source=args.snapshot)
        scenario.objects = load_snapshot(args.snapshot)
        return scenario
    return demo_scenario()


def what_if(
    registry: Registry,
    options: AutoscalingOptions,
    cluster: SimulatedCluster,
    clock: VirtualClock,
    provider: CloudProvider,
    changes: Sequence[Change],
) -> tuple[AutoscalingOptions, CloudProvider, list[ChangeReport]]:
    """Apply `changes` to `cluster`; the options and provider without the node groups they
    remove."""
    groups = [g.id for g in provider.node_groups()]
    reports = apply_changes(cluster, changes, cluster.group_of, groups)
    removed = removed_groups(changes)
    if removed:
        options = without_node_groups(options, removed)
        provider = build_provider(registry, options, cluster=cluster, clock=clock)
    return options, provider, reports


def prepare(
    ctx: CommandContext,
    scenario: Scenario,
    changes: Sequence[Change] = (),
    reports: list[ChangeReport] | None = None,
    provider_groups: ProviderGroups | None = None,
) -> tuple[Simulation, AutoscalingOptions, GroupsReport | None]:
    """The simulation of `scenario`, with `changes` applied (their reports are appended to
    `reports`); with `provider_groups`, on the node groups read from a real provider
    (`scenario`'s objects are those `read_cluster_and_provider` labelled)."""
    args = ctx.args
    options = merge_options(args, scenario.flags, scenario.source)
    options = with_cloud_config(
        options, scenario, args.cloud_config if flag_given(args, "cloud_config") else ""
    )
    inference: GroupsReport | None
    if provider_groups is not None:
        options, objects, inference = provider_groups.sim_options(options), scenario.objects, provider_groups
    else:
        options, objects, inference = infer_if_needed(args, options, scenario.objects)
    if options.cloud_provider != SIM_PROVIDER:
        raise InputError(
            f"--cloud-provider: simulate runs on an in-memory cluster and needs the "
            f"{SIM_PROVIDER} provider (another provider only with {FROM_CLUSTER}, which reads "
            f"its node groups), got {options.cloud_provider!r}"
        )
    if not options.cloud_config and "sim_cloud_config" not in options.extra:
        # The scenario or snapshot file is named: it is what lacks the node groups.
        given = f"{scenario.source}: " if scenario.source and scenario.source != DEMO_SOURCE else ""
        raise InputError(
            f"{given}--cloud-config: expected a cloud-config file declaring the node groups "
            "(see examples/cloud-configs/), a scenario with cloudConfig, or a snapshot with "
            "nodes to infer them from"
        )
    # One object per pod and node goes into the in-memory cluster's tables: as for parsing,
    # collection passes over the growing heap would find nothing to free.
    with gc_paused():
        cluster, clock = build_cluster(objects, scenario, options.scheduler_config)
    provider = build_provider(ctx.registry, options, cluster=cluster, clock=clock)
    if changes:
        options, provider, applied = what_if(ctx.registry, options, cluster, clock, provider, changes)
        if reports is not None:
            reports.extend(applied)
    # `--once` decides on the cluster as given: a snapshot's unschedulable pods stay so.
    try:
        provision_initial_nodes(
            cluster,
            provider,
            scenario.initial_nodes,
            retry_unschedulable=not getattr(args, "once", False),
        )
    except SimulationError as exc:
        # Named by the scenario asking for the nodes and the cloud-config lacking the group.
        given = f" (--cloud-config {options.cloud_config})" if options.cloud_config else ""
        raise SimulationError(f"{scenario.source}: {exc}{given}") from None
    if provider_groups is not None:
        request_upcoming(provider, provider_groups.upcoming())
    try:
        validate_events(cluster, provider, scenario.events)
    except SimulationError as exc:
        raise SimulationError(f"{scenario.source}: {exc}") from None
    loop = build_loop(ctx.registry, options, provider, cluster, clock, source=scenario.source)
    duration = args.duration or scenario.duration or DEFAULT_DURATION
    sim = Simulation(
        cluster=cluster,
        clock=clock,
        provider=provider,
        loop=loop,
        scan_interval=options.scan_interval,
        duration=duration,
        events=scenario.events,
    )
    return sim, options, inference


def quiet_logs(options: AutoscalingOptions) -> None:
    """The timeline (or the report) is the standard output: logs go to standard error (or
    `--log-file`), never split onto standard output, and the loop's own info logs only show
    with --v=2 or more."""
    settings = settings_from_options(options)
    if settings.split_stream and not settings.log_file:
        configure_logs(dataclasses.replace(settings, split_stream=False))
    if options.v < 2:
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def run(ctx: CommandContext) -> int:
    if ctx.exits and ctx.args.once:
        # One loop, then the process ends: the snapshot, the cluster and the loop live until
        # then, and the loop holds the collector off anyway (`Autoscaler.run_once`). Held off
        # from here (`main` freezes what is left when the command returns), it never traces
        # the model just parsed to find nothing to free.
        gc.disable()
    return _simulate(ctx)


def _simulate(ctx: CommandContext) -> int:
    out = sys.stdout
    quiet_logs(ctx.options)
    try:
        check_from_cluster(ctx.args)
        provider_groups: ProviderGroups | None = None
        if from_provider(ctx.args, ctx.options):
            scenario = Scenario(name="cluster", source=FROM_CLUSTER)
            scenario.objects, provider_groups = read_cluster_and_provider(
                ctx.registry, ctx.options, ctx.args
            )
        elif getattr(ctx.args, "from_cluster", False):
            scenario = Scenario(name="cluster", source=FROM_CLUSTER)
            scenario.objects = read_cluster(ctx.options)
        else:
            scenario = load_inputs(ctx.args)
        changes: list[Change] = list(getattr(ctx.args, "changes", None) or [])
        if changes and ctx.args.once:
            return _once_what_if(ctx, scenario, changes, out, provider_groups)
        reports: list[ChangeReport] = []
        sim, options, inference = prepare(ctx, scenario, changes, reports, provider_groups)
        if ctx.args.once:
            return _once(sim, options, ctx.args.json, out, inference)
        if reports:
            sim.cluster.step()
            settle(sim.cluster, reports)
        return _run(sim, scenario, ctx.args, out, inference, reports)
    except (InputError, ConfigurationError, SimulationError) as exc:
        print(f"clusterscaler simulate: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except (CloudProviderError, output.PlotError, OSError) as exc:
        print(f"clusterscaler simulate: error: {exc}", file=sys.stderr)
        return RUNTIME_ERROR


def _once(
    sim: Simulation,
    options: AutoscalingOptions,
    as_json: bool,
    out: TextIO,
    inference: GroupsReport | None = None,
) -> int:
    from clusterscaler.commands import explain_report as explain

    # Pods a real scheduler already found no room for stay pending, as in the snapshot.
    sim.cluster.step(retry_unschedulable=False)
    objects = sim.cluster.snapshot()
    now = sim.clock.now()
    with stamped_by(sim.clock.now):
        result = sim.loop.run_once(now)
    if as_json:
        doc = output.decision_json(result)
        if inference is not None:
            doc.update(inference.to_json())
        if notes := input_notes(objects):
            doc["notes"] = notes
        output.write_json_line(out, doc)
        return OK
    report = explain.explain(result, objects, options, now, sim.provider)
    if inference is not None:
        out.write(render_groups(inference) + "\n\n")
    out.write(explain.render(report) + "\n")
    return OK


def _once_what_if(
    ctx: CommandContext,
    scenario: Scenario,
    changes: Sequence[Change],
    out: TextIO,
    provider_groups: ProviderGroups | None = None,
) -> int:
    """One loop on the snapshot as it is, then one on a fresh copy with `changes` applied:
    the second's decisions, with what changed between the two."""
    sim, _, _ = prepare(ctx, scenario, provider_groups=provider_groups)
    sim.cluster.step(retry_unschedulable=False)
    seen = sim.cluster.snapshot()
    with stamped_by(sim.clock.now):
        result = sim.loop.run_once(sim.clock.now())
    removed = [d["node"] for d in output.decision_json(result)["scaleDown"]]
    before = outcome(seen, result, removed, sim.provider)
    reports: list[ChangeReport] = []
    sim, options, inference = prepare(ctx, scenario, changes, reports, provider_groups)
    sim.cluster.step(retry_unschedulable=False)
    settle(sim.cluster, reports)
    objects = sim.cluster.snapshot()
    now = sim.clock.now()
    with stamped_by(sim.clock.now):
        result = sim.loop.run_once(now)
    doc = output.decision_json(result)
    after = outcome(objects, result, [d["node"] for d in doc["scaleDown"]], sim.provider)
    if ctx.args.json:
        if inference is not None:
            doc.update(inference.to_json())
        doc["whatIf"] = what_if_json(reports, before, after)
        output.write_json_line(out, doc)
        return OK
    from clusterscaler.commands import explain_report as explain

    if inference is not None:
        out.write(render_groups(inference) + "\n\n")
    out.write(render_what_if(reports, before, after) + "\n\n")
    out.write(explain.render(explain.explain(result, objects, options, now, sim.provider)) + "\n")
    return OK


def _flag_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, list | tuple):
        return ",".join(_flag_text(v) for v in value)
    return str(value)


def plot_subtitle(scenario: Scenario, args: argparse.Namespace, sim: Simulation) -> str:
    """What the picture shows a run of: the inputs, the flags set (by the scenario, then the
    command line, which wins) and the simulated time."""
    inputs = [f"scenario {Path(args.scenario).name}" if args.scenario else "built-in scenario"]
    if args.snapshot:
        inputs.append(f"snapshot {Path(args.snapshot).name}")
    flags = {str(name): _flag_text(value) for name, value in scenario.flags.items()}
    for spec in flag_specs():
        if flag_given(args, spec.dest):
            flags[spec.name] = _flag_text(getattr(args, spec.dest))
    given = " ".join(f"--{name}={value}" for name, value in sorted(flags.items()))
    parts = [
        ", ".join(inputs),
        given or "default flags",
        f"{format_duration(sim.duration)} simulated, a loop every "
        f"{format_duration(sim.scan_interval)}",
    ]
    return "\n".join(textwrap.wrap(" | ".join(parts), width=120))


def _run(
    sim: Simulation,
    scenario: Scenario,
    args: argparse.Namespace,
    out: TextIO,
    inference: GroupsReport | None = None,
    reports: Sequence[ChangeReport] = (),
) -> int:
    if args.plot:
        output.check_plotting()
    progress = output.Progress(sim.duration, enabled=None if not args.json else False)
    emitted = 0

    def stream_rows(_: LoopResult, partial: SimulationResult) -> None:
        nonlocal emitted
        if args.json:
            for row in partial.rows[emitted:]:
                output.write_json_line(out, row.to_json())
            output.write_json_line(out, partial.samples[-1].to_json())
        emitted = len(partial.rows)

    if args.json and inference is not None:
        output.write_json_line(out, {"type": "nodeGroups", **inference.to_json()})
    if args.json and reports:
        output.write_json_line(out, {"type": "changes", "changes": [r.to_json() for r in reports]})
    notes = input_notes(sim.cluster.snapshot())
    if args.json and notes:
        output.write_json_line(out, {"type": "notes", "notes": notes})
    if not args.json:
        out.write(f"scenario: {scenario.name}\n")
        if scenario.description:
            out.write(f"{scenario.description}\n")
        if scenario.source == DEMO_SOURCE:
            out.write(f"{OTHER_INPUTS}\n")
        for note in notes:
            out.write(f"note: {note}\n")
        out.write("\n")
        if inference is not None:
            out.write(render_groups(inference) + "\n\n")
        if reports:
            out.write(render_changes(reports) + "\n\n")
    result, summary = run_simulation(sim, on_loop=stream_rows, progress=progress.update)
    progress.done()
    if args.json:
        for row in result.rows[emitted:]:
            output.write_json_line(out, row.to_json())
        output.write_json_line(out, summary.to_json())
    else:
        out.write(output.render_timeline(result.rows) + "\n\n")
        out.write(output.render_summary(summary) + "\n")
    if args.plot:
        output.plot(
            result.samples,
            args.plot,
            title=f"clusterscaler simulate: {scenario.name}",
            subtitle=plot_subtitle(scenario, args, sim),
            rows=result.rows,
        )
        if not args.json:
            out.write(f"\nplot written to {args.plot}\n")
    return OK
