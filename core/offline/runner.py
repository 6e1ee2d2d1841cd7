"""Running the real autoscaling loop against the simulated cluster on a virtual clock.

Each tick: apply the scenario events that are due, let the cluster register nodes and
schedule pods, run one loop (`Autoscaler.run_once(now)`), record what happened, then move
the clock to the next scan (stopping at node registrations on the way, so that pods are
bound as soon as their node is ready, as kube-scheduler would).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog
from clusterscaler.framework.durations import format_duration
from clusterscaler.interfaces.cloudprovider import CloudProvider, CloudProviderError, PricingModel
from clusterscaler.loop.decisions import DeletionKind, LoopResult, NodeDeletion
from clusterscaler.model import Node
from clusterscaler.model.common import describe_value
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.offline.output import Sample, Summary, TimelineRow, pending_stats, plural
from clusterscaler.offline.scenario import (
    AddPods,
    Cordon,
    DeletePods,
    FailGroup,
    RecoverGroup,
    ScaleWorkload,
    ScenarioEvent,
)
from clusterscaler.offline.simulatedcluster import SimulatedCluster, SimulationError
from clusterscaler.report.logs import stamped_by

log = structlog.get_logger()


class Loop(Protocol):
    """What the simulation needs from the autoscaler: one loop at a given time."""

    def run_once(self, now: datetime) -> LoopResult: ...


@dataclass
class Simulation:
    """Everything one run needs; built by the command from flags and the scenario."""

    cluster: SimulatedCluster
    clock: VirtualClock
    provider: CloudProvider
    loop: Loop
    scan_interval: timedelta
    duration: timedelta
    events: Sequence[ScenarioEvent] = ()


@dataclass
class SimulationResult:
    """What a run produced so far (callbacks see it grow loop by loop)."""

    rows: list[TimelineRow] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    results: list[LoopResult] = field(default_factory=list)


def provision_initial_nodes(
    cluster: SimulatedCluster,
    provider: CloudProvider,
    counts: dict[str, int],
    *,
    retry_unschedulable: bool = True,
) -> None:
    """Create the scenario's initial nodes through the provider, ready at the start.

    Without `retry_unschedulable`, pods already marked unschedulable keep that verdict
    unless initial nodes were added (room the verdict did not know about).
    """
    groups = {g.id: g for g in provider.node_groups()}
    for name, count in counts.items():
        group = groups.get(name)
        if group is None:
            raise SimulationError(
                f"initialNodes.{name}: expected a node group of the cloud-config "
                f"({', '.join(sorted(groups)) or 'none'})"
            )
        if count:
            group.increase_size(count)
    # The clusters a scenario starts from already exist: no provisioning delay for them.
    for pending in list(cluster.pending_nodes.values()):
        pending.ready_at = cluster.clock.now()
    added = bool(cluster.pending_nodes)
    cluster.events.clear()
    cluster.step(retry_unschedulable=retry_unschedulable or added)
    cluster.events.clear()


def request_upcoming(provider: CloudProvider, counts: dict[str, int]) -> None:
    """Ask the simulated groups for the instances a real provider is still creating: they
    are upcoming at the start, and become nodes after the groups' provisioning delay.
    Groups a what-if change removed are skipped."""
    groups = {g.id: g for g in provider.node_groups()}
    for name, count in counts.items():
        group = groups.get(name)
        if group is not None and count > 0:
            group.increase_size(count)


class _Accounting:
    """Node-hours and cost, integrated between samples over requested and ready nodes."""

    def __init__(self, provider: CloudProvider) -> None:
        self.provider = provider
        self.pricing: PricingModel | None = provider.pricing()
        self.node_hours: dict[str, float] = {}
        self.cost = 0.0

    def group_of(self, node: Node) -> str:
        group = self.provider.node_group_for_node(node)
        return group.id if group is not None else "(not autoscaled)"

    def add(self, nodes: Sequence[Node], start: datetime, end: datetime) -> None:
        if end <= start:
            return
        hours = (end - start).total_seconds() / 3600
        for node in nodes:
            group = self.group_of(node)
            self.node_hours[group] = self.node_hours.get(group, 0.0) + hours
            if self.pricing is not None:
                self.cost += self.pricing.node_price(node, start, end)


def _sizes(cluster: SimulatedCluster, accounting: _Accounting) -> dict[str, int]:
    return _node_counts(cluster, accounting)[0]


def _node_counts(
    cluster: SimulatedCluster, accounting: _Accounting
) -> tuple[dict[str, int], dict[str, int]]:
    """Per group, in one pass over the nodes: the ready nodes, and the nodes requested and not
    ready yet (instances starting, nodes not ready)."""
    ready: Counter[str] = Counter({g.id: 0 for g in accounting.provider.node_groups()})
    upcoming: Counter[str] = Counter()
    for node in cluster.nodes.values():
        (ready if node.ready else upcoming)[accounting.group_of(node)] += 1
    for node in cluster.list_pending_nodes():
        upcoming[accounting.group_of(node)] += 1
    return dict(ready), dict(upcoming)


def validate_events(
    cluster: SimulatedCluster, provider: CloudProvider, events: Sequence[ScenarioEvent]
) -> None:
    """Refuse events that can never apply: unknown workloads or node groups.

    Pods and nodes may appear during the run, so events naming them are checked when due.
    """
    groups = sorted(g.id for g in provider.node_groups())
    for event in events:
        action = event.action
        if isinstance(action, ScaleWorkload):
            try:
                cluster.find_controller(action.workload)
            except SimulationError as exc:
                raise SimulationError(
                    f"event at {event.at} ({event.text}): {event.field or 'scale'}.{exc}"
                ) from None
        elif isinstance(action, FailGroup | RecoverGroup) and action.node_group not in groups:
            raise SimulationError(
                f"event at {event.at} ({event.text}): {event.field or 'nodeGroup'}: expected "
                f"one of {', '.join(groups) or '(none)'}, got {describe_value(action.node_group)}"
            )


def apply_event(cluster: SimulatedCluster, event: ScenarioEvent) -> str:
    """Apply one scenario event; returns the timeline detail."""
    action = event.action
    if isinstance(action, ScaleWorkload):
        delta = cluster.scale(action.workload, action.replicas)
        return f"{event.text} ({delta:+d} {'pod' if abs(delta) == 1 else 'pods'})"
    if isinstance(action, AddPods):
        cluster.add_pods(action.pods)
    elif isinstance(action, DeletePods):
        cluster.delete_pods(action.keys)
    elif isinstance(action, Cordon):
        cluster.cordon(action.node, action.unschedulable)
    elif isinstance(action, FailGroup):
        cluster.fail_group(
            action.node_group, action.error_code, action.message, action.out_of_resources
        )
    elif isinstance(action, RecoverGroup):
        cluster.recover_group(action.node_group)
    return event.text


def _loop_rows(
    result: LoopResult, offset: timedelta, sizes: dict[str, int], pending: int,
    backoffs: dict[str, datetime],
) -> list[TimelineRow]:
    """One loop's rows in the order the loop acts, cause before effect: instances that never
    became nodes are cleaned up and their groups backed off, then the scale-up picks among
    the groups left, then scale-down, then the errors."""
    rows: list[TimelineRow] = []
    for cleanup in result.cleanups:
        rows.append(_deletion_row(cleanup, "cleanup", offset, sizes, pending))
    rows.extend(_backoff_rows(result, offset, sizes, pending, backoffs))
    for d in result.scale_up.decisions:
        rows.append(
            TimelineRow(
                offset,
                "scale-up",
                d.node_group,
                f"{d.target_before} -> {d.target_before + d.delta} for {plural(len(d.pods), 'pod')}",
                sizes,
                pending,
            )
        )
    if result.scale_up.error:
        rows.append(
            TimelineRow(offset, "scale-up-failed", "", result.scale_up.error, sizes, pending)
        )
    for deletion in result.scale_down.deletions:
        rows.append(_deletion_row(deletion, "scale-down", offset, sizes, pending))
    for error in result.errors:
        rows.append(TimelineRow(offset, "error", "", error, sizes, pending))
    return rows


def _deletion_row(deletion: NodeDeletion, action: str, offset: timedelta, sizes: dict[str, int],
                  pending: int) -> TimelineRow:
    """A node removed by scale-down, or an instance that never became one by cleanup."""
    if not deletion.ok:
        action += "-failed"
    detail = f"{deletion.node} ({deletion.kind.value}"
    if deletion.evicted_pods:
        detail += f", {plural(len(deletion.evicted_pods), 'pod')} evicted"
    detail += ")" if deletion.ok else f"): {deletion.error}"
    return TimelineRow(offset, action, deletion.node_group, detail, sizes, pending)


def _backoff_rows(
    result: LoopResult,
    offset: timedelta,
    sizes: dict[str, int],
    pending: int,
    backoffs: dict[str, datetime],
) -> list[TimelineRow]:
    """A row when a node group enters backoff (or backs off again); `backoffs` holds each
    group's current backoff end between loops."""
    rows: list[TimelineRow] = []
    for group in result.node_groups:
        backoff = group.backoff
        if backoff is None:
            backoffs.pop(group.name, None)
            continue
        if backoffs.get(group.name) == backoff.until:
            continue
        backoffs[group.name] = backoff.until
        cause = backoff.error_code or backoff.error_class
        detail = f"for {format_duration(backoff.until - result.time)}"
        rows.append(
            TimelineRow(
                offset,
                "backoff",
                group.name,
                f"{detail} ({cause})" if cause else detail,
                sizes,
                pending,
            )
        )
    return rows


def _cluster_rows(
    cluster: SimulatedCluster,
    start: datetime,
    sizes: dict[str, int],
    pending: int,
    tally: Counter[str],
) -> list[TimelineRow]:
    """Node registrations and deletions since the last call, one row per group and kind;
    `tally` counts the events by action (a node each)."""
    grouped: dict[tuple[datetime, str, str], list[str]] = {}
    for event in cluster.events:
        if event.action == "workload-scaled":
            continue
        tally[event.action] += 1
        grouped.setdefault((event.time, event.action, event.node_group), []).append(event.detail)
    cluster.events.clear()
    rows = []
    for (when, action, group), details in grouped.items():
        if action == "node-deleted":
            # The loop's own scale-down row already says which node went away.
            continue
        text = details[0] if len(details) == 1 else f"{len(details)} nodes"
        rows.append(TimelineRow(when - start, action, group, text, sizes, pending))
    return rows


def run(
    sim: Simulation,
    *,
    on_loop: Callable[[LoopResult, SimulationResult], None] | None = None,
    progress: Callable[[timedelta], Any] | None = None,
) -> tuple[SimulationResult, Summary]:
    """Run the loop every `scan_interval` for `duration` of simulated time; log lines carry
    the simulated time meanwhile."""
    with stamped_by(sim.clock.now):
        return _run(sim, on_loop=on_loop, progress=progress)


def _run(
    sim: Simulation,
    *,
    on_loop: Callable[[LoopResult, SimulationResult], None] | None,
    progress: Callable[[timedelta], Any] | None,
) -> tuple[SimulationResult, Summary]:
    cluster, clock = sim.cluster, sim.clock
    start = clock.now()
    end = start + sim.duration
    accounting = _Accounting(sim.provider)
    out = SimulationResult()
    tally: Counter[str] = Counter()
    backoffs: dict[str, datetime] = {}
    events = sorted(sim.events, key=lambda e: e.at)
    next_event = 0
    tick = start
    last_sample = start
    while True:
        now = clock.now()
        while next_event < len(events) and start + events[next_event].at <= now:
            event = events[next_event]
            next_event += 1
            action = "event"
            try:
                detail = apply_event(cluster, event)
            except SimulationError as exc:
                action, detail = "event-failed", f"{event.text}: {exc}"
                log.warning("simulation_event_failed", scenario_event=event.text, error=str(exc))
            cluster.step()
            out.rows.append(
                TimelineRow(
                    now - start,
                    action,
                    "",
                    detail,
                    _sizes(cluster, accounting),
                    cluster.pending_pod_count(),
                )
            )
        cluster.step()
        sizes = _sizes(cluster, accounting)
        out.rows.extend(_cluster_rows(cluster, start, sizes, cluster.pending_pod_count(), tally))
        # Up to the loop, the nodes as they were: the ones it requests count from now on.
        accounting.add([*cluster.nodes.values(), *cluster.list_pending_nodes()], last_sample, now)
        last_sample = now
        try:
            result = sim.loop.run_once(now)
        except CloudProviderError as exc:
            out.rows.append(
                TimelineRow(now - start, "error", "", str(exc), sizes, cluster.pending_pod_count())
            )
            result = None
        # The actuator may have slept on the virtual clock (evictions, taint delays).
        cluster.step()
        sizes, upcoming = _node_counts(cluster, accounting)
        pending = cluster.pending_pod_count()
        if result is not None:
            out.results.append(result)
            out.rows.extend(_loop_rows(result, now - start, sizes, pending, backoffs))
        out.rows.extend(_cluster_rows(cluster, start, sizes, pending, tally))
        billable = [*cluster.nodes.values(), *cluster.list_pending_nodes()]
        accounting.add(billable, last_sample, clock.now())
        last_sample = clock.now()
        out.samples.append(Sample(clock.now() - start, sizes, pending, accounting.cost, upcoming))
        if result is not None and on_loop is not None:
            on_loop(result, out)
        if progress is not None:
            progress(clock.now() - start)
        tick = tick + sim.scan_interval
        if tick > end:
            break
        # Nodes that become ready before the next scan get their pods right away.
        while True:
            due = cluster.next_registration()
            if due is None or due >= tick:
                break
            before = [*cluster.nodes.values(), *cluster.list_pending_nodes()]
            clock.advance_to(due)
            accounting.add(before, last_sample, clock.now())
            last_sample = clock.now()
            cluster.step()
            out.rows.extend(
                _cluster_rows(
                    cluster, start, _sizes(cluster, accounting), cluster.pending_pod_count(), tally
                )
            )
        clock.advance_to(tick)
    waits = list(cluster.times.waits)
    p50, p95, worst = pending_stats(waits)
    # Counted as the timeline shows them: a scale-up or scale-down per node group per loop,
    # nodes one by one (an instance the loop removed as failed counts once).
    removed = {(d.node_group, d.node) for r in out.results for d in r.scale_down.deletions if d.ok}
    failed = {
        (d.node_group, d.node)
        for r in out.results
        for d in r.cleanups
        if d.ok and d.kind in (DeletionKind.CREATE_ERROR, DeletionKind.UNREGISTERED)
    }
    summary = Summary(
        duration=clock.now() - start,
        loops=len(out.results),
        scale_ups=sum(len({d.node_group for d in r.scale_up.decisions}) for r in out.results),
        nodes_requested=sum(d.delta for r in out.results for d in r.scale_up.decisions),
        nodes_provisioned=tally["node-ready"],
        nodes_failed=len(failed),
        nodes_provisioning=len(cluster.list_pending_nodes()),
        scale_downs=sum(
            len({d.node_group for d in r.scale_down.deletions if d.ok}) for r in out.results
        ),
        nodes_removed=len(removed),
        node_hours=dict(accounting.node_hours),
        cost=accounting.cost,
        pending_p50=p50,
        pending_p95=p95,
        pending_max=worst,
        still_pending=cluster.pending_pod_count(),
        final_sizes=_sizes(cluster, accounting),
    )
    return out, summary
