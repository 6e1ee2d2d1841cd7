"""`clusterscaler explain`: per pending pod and per node, what the autoscaler would do and why.

It runs one loop in dry-run mode (nothing is changed: not the cluster, not the cloud) and
reads its `LoopResult`: for each pending pod, per node group, whether a new node would help
and if not why (predicate reason, max size reached, backoff, resource limit, ...), plus the
pods the loop leaves out (expendable, too young, waiting for preemption); for each node,
whether it is removable and if not why (reason and blocking pod). This is Cluster
Autoscaler's troubleshooting FAQ turned into a command.

Offline it reads `--snapshot` and `--cloud-config` (the `sim` provider stands in for the
cloud; without a cloud-config the node groups are inferred from the nodes' labels, see
`clusterscaler.offline.inference`); `--from-cluster` reads the cluster of `--kubeconfig` (GET
requests only) and explains it the same way, with the node groups of a real
`--cloud-provider` when one is given (read only, see `clusterscaler.offline.cloudgroups`);
live it reads the cluster of `--kubeconfig` with the provider of `--cloud-provider`.
`--json` prints the keys of `simulate --once --json`, then `pendingPods`. The report itself is
`clusterscaler.commands.explain_report`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.commands.explain_report import Report, explain, render, report_json
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    ConfigurationError,
)
from clusterscaler.loop.decisions import LoopResult
from clusterscaler.model import ClusterObjects
from clusterscaler.offline import output
from clusterscaler.offline.clock import DEFAULT_START
from clusterscaler.offline.cloudgroups import render_groups
from clusterscaler.offline.whatif import ChangeReport, Outcome, outcome, what_if_json
from clusterscaler.offline.whatif import render as render_what_if
from clusterscaler.report.logs import stamped_by

if TYPE_CHECKING:
    from clusterscaler.commands.cli import CommandContext
    from clusterscaler.interfaces.registry import Registry
    from clusterscaler.offline.cloudgroups import GroupsReport

__all__ = ["add_arguments", "evaluate", "explain", "render", "report_json", "run"]

log = structlog.get_logger()

OK, RUNTIME_ERROR, USAGE_ERROR = 0, 1, 2
NO_INPUT = (
    "nothing to explain: give --snapshot FILE (the JSON of `kubectl get nodes,pods,pdb,ds,rs,"
    "sts,jobs,cm -A -o json`; node groups from --cloud-config or inferred from the nodes), "
    "--from-cluster (the cluster of --kubeconfig, read only; with --cloud-provider for its "
    "node groups), or --cloud-provider with --kubeconfig to explain a live cluster with its "
    "provider (docs/explain.md)"
)
# --------------------------------------------------------------------------- command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("explain flags")
    group.add_argument(
        "--snapshot",
        default="",
        metavar="FILE",
        help="Explain this snapshot (a Kubernetes List in JSON or YAML: a file, gzipped or "
        "not, a directory of such files, or - for standard input) with --cloud-config "
        "(without one, the node groups are inferred from the nodes' labels), instead of the "
        "live cluster of --kubeconfig.",
    )
    from clusterscaler.commands.explain_filters import add_filter_arguments
    from clusterscaler.commands.simulate import add_bounds_argument, add_from_cluster_argument
    from clusterscaler.offline.whatif import add_change_arguments

    add_from_cluster_argument(group)
    add_bounds_argument(group)
    add_change_arguments(group)
    add_filter_arguments(group)
    group.add_argument(
        "--json", action="store_true", help="Print JSON (the keys of simulate --once --json)."
    )


def _one_loop(
    registry: Registry,
    options: AutoscalingOptions,
    objects: ClusterObjects,
    now: datetime,
    kube_api: Any | None,
    upcoming: Mapping[str, int],
) -> tuple[LoopResult, CloudProvider]:
    """One dry-run loop over an in-memory copy of `objects`, with `upcoming` instances
    requested per group first: nothing real changes."""
    from clusterscaler.offline.runner import request_upcoming
    from clusterscaler.offline.setup import build_cluster, build_loop, build_provider

    cluster, clock = build_cluster(objects, scheduler_config=options.scheduler_config)
    clock.advance_to(now)
    provider = build_provider(
        registry,
        options,
        cluster=cluster if kube_api is None else None,
        kube_api=kube_api,
        clock=clock,
    )
    if upcoming:
        request_upcoming(provider, dict(upcoming))
    loop = build_loop(registry, options, provider, cluster, clock)
    with stamped_by(clock.now):
        return loop.run_once(now), provider


def evaluate(
    registry: Registry,
    options: AutoscalingOptions,
    objects: ClusterObjects,
    now: datetime,
    kube_api: Any | None = None,
    upcoming: Mapping[str, int] | None = None,
) -> tuple[LoopResult, CloudProvider]:
    """The loop's decisions about `objects` at `now`, with an answer for every node, and
    the cloud provider the loop ran with (it names the nodes' groups). `upcoming`: the
    instances a real provider is still creating, per group of an in-memory run.

    A loop that scales up skips scale-down (cooldown), so its result says nothing about
    nodes. Cluster Autoscaler still computes unneeded nodes in that loop, and its removal
    simulation only moves pods that are already running: the node answers then come from a
    second loop over the same cluster without its pending pods.
    """
    options = dataclasses.replace(options, dry_run=True)
    upcoming = upcoming or {}
    result, provider = _one_loop(registry, options, objects, now, kube_api, upcoming)
    down = result.scale_down
    if result.scale_up.decisions and not down.unneeded and not down.unremovable:
        running = dataclasses.replace(objects, pods=[p for p in objects.pods if p.node_name])
        calm, _ = _one_loop(registry, options, running, now, kube_api, upcoming)
        result = dataclasses.replace(result, scale_down=calm.scale_down)
    return result, provider


_Evaluated = tuple[LoopResult, CloudProvider, ClusterObjects, AutoscalingOptions, datetime]
# The changes of the command line, applied, and the outcome before them.
WhatIf = tuple[list[ChangeReport], Outcome]


def _removable(report: Report) -> list[str]:
    return [entry["node"] for entry in report_json(report)["scaleDown"]]


def _what_if(
    ctx: CommandContext,
    options: AutoscalingOptions,
    objects: ClusterObjects,
    now: datetime,
    upcoming: Mapping[str, int],
) -> tuple[AutoscalingOptions, ClusterObjects, WhatIf]:
    """The snapshot's outcome as it is, then the options and objects with the changes of the
    command line applied (and the scheduler run over them)."""
    from clusterscaler.commands.simulate import what_if
    from clusterscaler.offline.setup import build_cluster, build_provider
    from clusterscaler.offline.whatif import settle

    result, provider = evaluate(ctx.registry, options, objects, now, upcoming=upcoming)
    removable = _removable(explain(result, objects, options, now, provider))
    before = outcome(objects, result, removable, provider)
    cluster, clock = build_cluster(objects, scheduler_config=options.scheduler_config)
    clock.advance_to(now)
    provider = build_provider(ctx.registry, options, cluster=cluster, clock=clock)
    options, provider, reports = what_if(
        ctx.registry, options, cluster, clock, provider, ctx.args.changes
    )
    cluster.step(retry_unschedulable=False)
    settle(cluster, reports)
    return options, cluster.snapshot(), (reports, before)


def _offline(ctx: CommandContext) -> tuple[_Evaluated, GroupsReport | None, WhatIf | None]:
    from clusterscaler.commands.simulate import (
        check_from_cluster,
        from_provider,
        infer_if_needed,
        read_cluster,
        read_cluster_and_provider,
    )
    from clusterscaler.offline.loader import load_snapshot, snapshot_time
    from clusterscaler.offline.setup import SIM_PROVIDER

    options = ctx.options
    check_from_cluster(ctx.args)
    live = bool(getattr(ctx.args, "from_cluster", False))
    inference: GroupsReport | None
    upcoming: dict[str, int] = {}
    if from_provider(ctx.args, options):
        # The node groups of the real provider (read only), run on the `sim` provider.
        objects, inference = read_cluster_and_provider(ctx.registry, options, ctx.args)
        options = inference.sim_options(options)
        upcoming = inference.upcoming()
    else:
        if options.cloud_provider != SIM_PROVIDER:
            raise ConfigurationError(
                f"--cloud-provider: explaining a snapshot needs the {SIM_PROVIDER} provider "
                "and a cloud-config describing the node groups (another provider only with "
                f"--from-cluster, which reads its node groups), got {options.cloud_provider!r}"
            )
        objects = read_cluster(options) if live else load_snapshot(ctx.args.snapshot)
        options, objects, inference = infer_if_needed(ctx.args, options, objects)
    if not options.cloud_config and inference is None:
        raise ConfigurationError(
            "--cloud-config: expected a sim cloud-config declaring the node groups of the "
            "snapshot (it has no nodes to infer them from)"
        )
    # A snapshot file is a moment of a real cluster: "now" is its newest object.
    now = datetime.now(UTC) if live else snapshot_time(objects) or DEFAULT_START
    changes: WhatIf | None = None
    if getattr(ctx.args, "changes", None):
        options, objects, changes = _what_if(ctx, options, objects, now, upcoming)
    result, provider = evaluate(ctx.registry, options, objects, now, upcoming=upcoming)
    return (result, provider, objects, options, now), inference, changes


def _live(ctx: CommandContext) -> _Evaluated:
    from clusterscaler.kube.client import ClientSettings, build_api_client
    from clusterscaler.kube.source import KubeClusterSource

    options = ctx.options
    # Bad provider flags are reported before the API server is asked anything.
    ctx.registry.check_cloud_provider_options(options)
    api = build_api_client(ClientSettings.from_options(options))
    with KubeClusterSource(
        api,
        namespace=options.namespace,
        provisioning_requests=options.enable_provisioning_requests,
        capacity_quotas=options.capacity_quotas_enabled,
    ) as source:
        if not source.wait_for_sync(60):
            raise CloudProviderError("explain: the Kubernetes caches did not sync within 60s")
        objects = source.snapshot()
    now = datetime.now(UTC)
    result, provider = evaluate(ctx.registry, options, objects, now, kube_api=api)
    return result, provider, objects, options, now


def run(ctx: CommandContext) -> int:
    from clusterscaler.commands.explain_filters import (
        Filters,
        narrow,
        narrow_json,
        render_summary,
        summary,
    )
    from clusterscaler.commands.simulate import quiet_logs
    from clusterscaler.kube.client import KubeConfigError
    from clusterscaler.offline.loader import InputError
    from clusterscaler.offline.setup import SIM_PROVIDER
    from clusterscaler.offline.simulatedcluster import SimulationError

    quiet_logs(ctx.options)
    inference: GroupsReport | None = None
    changes: WhatIf | None = None
    offline = bool(ctx.args.snapshot or getattr(ctx.args, "from_cluster", False))
    if (not offline and ctx.options.cloud_provider == SIM_PROVIDER
            and not ctx.options.cloud_config and not getattr(ctx.args, "changes", None)):
        print(f"clusterscaler explain: error: {NO_INPUT}", file=sys.stderr)
        return USAGE_ERROR
    if ctx.exits and ctx.args.snapshot:
        # One loop over a snapshot, then the process ends: held off from here (`main`
        # freezes what is left), the collector never traces the model just parsed.
        gc.disable()
    try:
        if getattr(ctx.args, "changes", None) and not offline:
            raise ConfigurationError(
                "--apply, --scale, --drain-node, --remove-node-group: expected with --snapshot or "
                "--from-cluster (a live "
                "cluster is explained as it is)"
            )
        if offline:
            (result, provider, objects, options, now), inference, changes = _offline(ctx)
        else:
            result, provider, objects, options, now = _live(ctx)
    except (InputError, ConfigurationError, SimulationError, KubeConfigError) as exc:
        print(f"clusterscaler explain: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except (CloudProviderError, OSError) as exc:
        print(f"clusterscaler explain: error: {exc}", file=sys.stderr)
        return RUNTIME_ERROR
    report = explain(result, objects, options, now, provider)
    after = outcome(objects, result, _removable(report), provider) if changes is not None else None
    filters = Filters.from_args(ctx.args)
    try:
        filters.check(objects, [g.name for g in result.node_groups])
    except InputError as exc:
        print(f"clusterscaler explain: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    shown = narrow(report, filters)
    if ctx.args.json:
        doc = narrow_json(report_json(report), shown, filters)
        doc["summary"] = summary(shown)
        if inference is not None:
            doc.update(inference.to_json())
        if changes is not None and after is not None:
            doc["whatIf"] = what_if_json(changes[0], changes[1], after)
        output.write_json_line(sys.stdout, doc)
    else:
        if inference is not None:
            print(render_groups(inference) + "\n")
        if changes is not None and after is not None:
            print(render_what_if(changes[0], changes[1], after) + "\n")
        print(render_summary(shown) + "\n")
        print(render(shown))
    return OK
