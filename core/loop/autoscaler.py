"""The autoscaling loop.

(Long on purpose: it is the one place that orders a loop's
steps and carries the state kept between loops; each step it calls lives in its own
module: cluster state, upkeep, pending pods, scale-up, scale-down.)

`Autoscaler.run_once(now)` observes the cluster through a `ClusterSource`, the cloud
through a `CloudProvider`, decides scale-up and scale-down with Cluster Autoscaler's
semantics, acts through `ClusterActions` and the provider, and returns a `LoopResult` that
events, the status ConfigMap, metrics, logs, `explain` and `simulate --once --json` read.

Decisions depend only on the inputs and `now` (the simulator drives the loop on a virtual
clock); only the scale-down simulation timeout and the actuator's waits use a clock.

Node deletions are started by the loop (the nodes are tainted before `run_once` returns) and
finish on a `DeletionExecutor`: in the background for `clusterscaler run`, at once for
`simulate` and tests. Deletions in flight are seen by the following loops as nodes being
deleted, and their outcomes are reported by the first loop after they finish.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

import structlog
from clusterscaler.framework.clusteractions import ClusterActions, StaleSource, SystemClock
from clusterscaler.framework.errors import LoopError, describe
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    ProviderProblem,
    provider_problems,
)
from clusterscaler.interfaces.clusterview import Clock, ClusterSource
from clusterscaler.interfaces.estimator import Estimator
from clusterscaler.interfaces.expander import ExpanderContext, Option
from clusterscaler.interfaces.podfilter import PodFilter
from clusterscaler.interfaces.podlistprocessor import PodListContext, PodListProcessor
from clusterscaler.loop.capacitybuffers import BufferResult, CapacityBufferProcessor
from clusterscaler.loop.clusterstate import ClusterState, ClusterStateTracker
from clusterscaler.loop.decisions import (
    ClusterHealth,
    LoopResult,
    NodeCounts,
    NodeDeletion,
    NodeGroupStatus,
    ScaleDownResult,
    ScaleDownStatus,
    ScaleUpDecision,
    ScaleUpResult,
    ScaleUpStatus,
)
from clusterscaler.loop.dra_readiness import mark_unready_dra
from clusterscaler.loop.expanderchain import build_expander_chain
from clusterscaler.loop.gpu import gpu_for_metrics
from clusterscaler.loop.grouptemplates import LISTED_AT_MOST, Template, TemplateCache, upcoming_node
from clusterscaler.loop.limits import Limits, Totals, node_totals, sum_totals
from clusterscaler.loop.pending import PendingPods, classify_pending, drop_schedulable
from clusterscaler.loop.podlists import (
    build_pod_list_processors,
    process_pod_list,
    waiting_for_a_node,
)
from clusterscaler.loop.provreq import ProvisioningRequestPodsFilter, ProvisioningRequestProcessor
from clusterscaler.loop.quotas import CapacityQuotaStatus, QuotaTracker, quota_statuses
from clusterscaler.loop.scaledown.actuator import Actuator
from clusterscaler.loop.scaledown.budgets import InProgress
from clusterscaler.loop.scaledown.executor import DeletionExecutor, InlineExecutor
from clusterscaler.loop.scaledown.planner import ScaleDownInputs, ScaleDownPlanner
from clusterscaler.loop.scaledown.tracker import InFlightDeletion
from clusterscaler.loop.scaleup import (
    PodsToHelp,
    ScaleUpInputs,
    current_totals,
    execute_scale_up,
    plan_min_size_enforcement,
    plan_scale_up,
)
from clusterscaler.loop.upkeep import ClusterUpkeep
from clusterscaler.model import GPU_RESOURCE, ClusterObjects, NodeInfo, Pod, gc_paused
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
from clusterscaler.simulator.dra_compare import (
    compare_resource_pools,
    count_by_driver,
    merge_counts,
)
from clusterscaler.simulator.drain import build_pod_filters
from clusterscaler.simulator.profile import DefaultSpread, configured_filters

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.interfaces.registry import Registry

log = structlog.get_logger()


class AutoscalerError(Exception):
    """The autoscaler cannot be built from its options and plugins."""


def build_estimator(registry: Registry, options: AutoscalingOptions) -> Estimator:
    entry = registry.estimators.get(options.estimator)
    if entry is None:
        raise AutoscalerError(
            f"--estimator={options.estimator}: expected one of "
            f"{', '.join(sorted(registry.estimators)) or '(none installed)'}"
        )
    estimator: Estimator = entry.factory(options)
    return estimator


class BestOption(Protocol):
    """What the loop needs of the expander chain (`clusterscaler.loop.expanderchain.ExpanderChain`)."""

    def best_option(self, options: Sequence[Option], context: ExpanderContext) -> Option | None: ...


def build_expander(
    registry: Registry, options: AutoscalingOptions, provider: CloudProvider
) -> BestOption:
    """The expander chain of --expander."""
    return build_expander_chain(
        options.expander, registry, options, pricing_available=provider.pricing() is not None
    )


def _statuses_after(
    state: ClusterState, scale_up: ScaleUpResult, removed: Sequence[NodeDeletion]
) -> tuple[NodeGroupStatus, ...]:
    """Node group statuses with the targets this loop's actions changed; `removed` are the
    nodes deleted after the targets were read."""
    delta: dict[str, int] = {}
    for d in scale_up.decisions:
        delta[d.node_group] = delta.get(d.node_group, 0) + d.delta
    for x in removed:
        if x.ok:
            delta[x.node_group] = delta.get(x.node_group, 0) - 1
    return tuple(
        dataclasses.replace(
            s,
            target_size=s.target_size + delta.get(s.name, 0),
            upcoming=max(0, s.upcoming + max(0, delta.get(s.name, 0))),
            scale_up_in_progress=s.scale_up_in_progress or delta.get(s.name, 0) > 0,
        )
        for s in state.statuses()
    )


def _bound_pods(
    pods: Sequence[Pod], cutoff: int
) -> tuple[dict[str, list[Pod]], dict[str, list[Pod]]]:
    """The bound pods by node, without the expendable ones (priority below `cutoff`):
    all of them, and those the snapshot holds (not terminal), in one pass over the pods.
    As CA (FilterOutExpendablePods before the snapshot is built), scheduled expendable
    pods take no room in any simulation: the scheduler preempts them for pending pods,
    and they are not moved when their node goes; pending expendable pods stay
    (`classify_pending` sets them aside)."""
    by_node: dict[str, list[Pod]] = {}
    terminal: set[str] = set()
    for p in pods:
        node = p.node_name
        if not node:
            continue
        priority = p.priority
        if priority is not None and priority < cutoff:
            continue
        found = by_node.get(node)
        if found is None:
            by_node[node] = [p]
        else:
            found.append(p)
        # (Most bound pods run: the phase settles it without the property's call.)
        if p.phase != "Running" and p.is_terminal:
            terminal.add(node)
    if not terminal:
        return by_node, by_node
    live = dict(by_node)
    for node in terminal:
        live[node] = [p for p in by_node[node] if not p.is_terminal]
    return by_node, live


def _mark_unready_gpus(objects: ClusterObjects, gpu_label: str) -> ClusterObjects:
    """`objects` where a Ready node carrying the GPU label but advertising no GPU is not
    Ready: its device plugin has not started yet. As CA's
    FilterOutNodesWithUnreadyResources, such a node is then a starting (upcoming) node, not
    a template with no GPUs, a destination for pods or a scale-down candidate.

    A node whose DRA driver publishes devices for it (a ResourceSlice with its `nodeName`)
    has its GPUs there, not as `nvidia.com/gpu` (CA's GPU config exposed via DRA): it is
    left to the DRA readiness rule (`mark_unready_dra`)."""
    if not gpu_label:
        return objects
    unready = {
        n.name
        for n in objects.nodes
        if n.ready and gpu_label in n.labels and n.allocatable.extended.get(GPU_RESOURCE, 0) <= 0
    }
    if unready:
        unready -= {s.node_name for s in objects.resource_slices if s.node_name}
    if not unready:
        return objects
    log.info("gpu_not_advertised", nodes=len(unready), first=min(unready))
    return dataclasses.replace(
        objects,
        nodes=[n.with_(ready=False) if n.name in unready else n for n in objects.nodes],
    )


@dataclass(frozen=True)
class LoopInputs:
    """What one loop observed and derived before deciding, shared by scale-up and
    scale-down: the cluster, its state, the scheduling snapshot, the limits and totals."""

    now: datetime
    objects: ClusterObjects
    state: ClusterState
    # Pods by node, without the expendable ones (they take no room in simulations).
    pods_by_node: Mapping[str, Sequence[Pod]]
    snapshot: ClusterSnapshot
    limits: Limits
    gpu_label: str
    # Registered nodes that have started: scale-up counts the others as upcoming.
    started_totals: Totals
    # Nodes not being deleted: what the --cores-total/--memory-total minimums hold.
    remaining_totals: Totals


class Autoscaler:
    """The loop and the state it keeps between iterations."""

    def __init__(
        self,
        *,
        options: AutoscalingOptions,
        provider: CloudProvider,
        source: ClusterSource,
        actions: ClusterActions,
        estimator: Estimator,
        expander: BestOption,
        pod_filters: Sequence[PodFilter],
        pod_list_processors: Sequence[PodListProcessor] = (),
        clock: Clock | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        executor: DeletionExecutor | None = None,
    ) -> None:
        self.options = options
        self.provider = provider
        self.source = source
        self.actions = actions
        self.estimator = estimator
        self.expander = expander
        self.clock: Clock = clock or SystemClock()
        self.monotonic = monotonic
        self.state_tracker = ClusterStateTracker(options)
        self.templates = TemplateCache(options)
        self.planner = ScaleDownPlanner(options, pod_filters, clock=monotonic)
        self.actuator = Actuator(
            actions,
            options,
            self.clock,
            monotonic=monotonic,
            source=source,
            executor=executor or InlineExecutor(),
        )
        self.pending_hints = HintingSimulator()
        self.provisioning_requests = ProvisioningRequestProcessor(options, monotonic)
        # Run by `order`, then name, never in the order given. The standard ones are
        # looked up by their type for what the loop reports of them.
        self.pod_list_processors = tuple(
            sorted(pod_list_processors, key=lambda p: (p.order, p.name))
        )
        self.capacity_buffers = next(
            (p for p in self.pod_list_processors if isinstance(p, CapacityBufferProcessor)),
            None,
        )
        self.provisioning_request_consumers = next(
            (p for p in self.pod_list_processors if isinstance(p, ProvisioningRequestPodsFilter)),
            None,
        )
        # The filters of --scheduler-config-file (None: kube-scheduler's defaults).
        self.filters = configured_filters(options.scheduler_config)
        self.default_spread = DefaultSpread(options.scheduler_config)
        self.last_scale_up: datetime | None = None
        self.last_scale_down_delete: datetime | None = None
        self.last_scale_down_failure: datetime | None = None
        # Whether the unneeded times of an earlier run were looked for (first loop).
        self._candidates_loaded = False
        # With --scale-down-delay-type-local: the same times per node group.
        self.group_scale_up: dict[str, datetime] = {}
        self.group_scale_down_delete: dict[str, datetime] = {}
        self.group_scale_down_failure: dict[str, datetime] = {}
        self.upkeep = ClusterUpkeep(options, actions, self.actuator)
        self._last_result: LoopResult | None = None
        self._seen_problems: set[ProviderProblem] = set()
        self._announced: set[str] = set()

    @classmethod
    def from_registry(
        cls,
        registry: Registry,
        *,
        options: AutoscalingOptions,
        provider: CloudProvider,
        source: ClusterSource,
        actions: ClusterActions,
        clock: Clock | None = None,
        executor: DeletionExecutor | None = None,
    ) -> Autoscaler:
        """Build the estimator, expander chain, pod filters and pod-list processors from
        installed plugins.

        Without `executor`, node deletions finish inside the loop that starts them."""
        return cls(
            options=options,
            provider=provider,
            source=source,
            actions=actions,
            estimator=build_estimator(registry, options),
            expander=build_expander(registry, options, provider),
            pod_filters=build_pod_filters(registry, options),
            pod_list_processors=build_pod_list_processors(registry, options),
            clock=clock,
            executor=executor,
        )

    # ------------------------------------------------------------------ the loop

    def run_once(self, now: datetime) -> LoopResult:
        started = self.monotonic()
        # Deletions in flight call the provider only under this lock, so the loop has the
        # cloud to itself and sees each finished deletion together with its new target.
        # The collector is held off for the loop: it allocates heavily (snapshot forks,
        # placements, plans), and each full collection on the way would walk every object
        # of the cluster model, which lives across the loop. That walk was a fifth of a
        # 100,000-pod loop and grew with the cluster. Reference counting frees the
        # loop's temporaries as usual; cycles wait for the collector after the loop.
        with self.actuator.provider_lock, gc_paused():
            result = self._run(now)
            problems = self._provider_problems()
        result = dataclasses.replace(
            result,
            duration=timedelta(seconds=self.monotonic() - started),
            problems=problems,
            # The loop's own actions that failed without stopping it (soft taints).
            errors=(*result.errors, *self.actuator.take_errors()),
            node_groups=self._with_gpus(result.node_groups),
            scale_up_failures=tuple(self.state_tracker.take_failures()),
            max_nodes_total=self.options.max_nodes_total,
            taint_cleanups=tuple(self.actuator.take_taint_cleanups()),
            failed_reverts=tuple(self.upkeep.take_failed_reverts()),
        )
        self._last_result = result
        return result

    def _with_gpus(self, groups: tuple[NodeGroupStatus, ...]) -> tuple[NodeGroupStatus, ...]:
        """`groups` with each one's GPU and DRA drivers, read from its last template, for
        the metrics."""
        label = self.provider.gpu_label()
        out = []
        for g in groups:
            template = self.templates.last.get(g.name)
            info = template.node_info if template else None
            resource, name = gpu_for_metrics(info.node if info else None, label)
            drivers = ",".join(sorted({s.driver for s in info.resource_slices})) if info else ""
            out.append(
                dataclasses.replace(
                    g, gpu_resource_name=resource, gpu_name=name, dra_drivers=drivers
                )
            )
        return tuple(out)

    def _provider_problems(self) -> tuple[ProviderProblem, ...]:
        """The provider's configuration problems; each is logged when it appears, not at
        every loop."""
        try:
            problems = tuple(provider_problems(self.provider))
        except CloudProviderError as exc:
            log.error("provider_problems_failed", error=str(exc))
            return ()
        # A group whose live node and provider template disagree is planned from one and
        # grown from the other: said as a problem of the group, like a misconfiguration.
        problems = (*problems, *self.templates.mismatches())
        for p in problems:
            if p not in self._seen_problems:
                log.warning(
                    "node_group_problem",
                    node_group=p.node_group,
                    reason=p.reason,
                    message=p.message,
                )
        for p in self._seen_problems - set(problems):
            log.info("node_group_problem_resolved", node_group=p.node_group, reason=p.reason)
        self._seen_problems = set(problems)
        return problems

    # ------------------------------------------------------------------ deletions in flight

    def deletions_in_flight(self) -> Mapping[str, InFlightDeletion]:
        """Nodes whose deletion has started and not finished, by name."""
        return self.actuator.tracker.in_flight()

    def wait_for_deletions(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` seconds for the deletions in flight to finish or roll back;
        True when none is left."""
        return self.actuator.executor.wait(timeout)

    def report_finished(self, now: datetime) -> LoopResult | None:
        """The deletions that finished since the last loop, as a result without any new
        decision (for the last report before exiting); None when nothing finished."""
        finished = self._collect_finished(now)
        if not finished:
            return None
        last = self._last_result
        scale_down = ScaleDownResult(
            status=ScaleDownStatus.NOT_TRIED,
            deletions=tuple(finished),
            in_flight=tuple(sorted(self.deletions_in_flight())),
        )
        if last is None:
            return LoopResult(
                time=now, health=ClusterHealth(True, NodeCounts()), scale_down=scale_down
            )
        return dataclasses.replace(
            last,
            time=now,
            scale_up=ScaleUpResult(status=ScaleUpStatus.NOT_TRIED),
            scale_down=scale_down,
            pending_pods=(),
            cleanups=(),
            errors=(),
            duration=timedelta(0),
        )

    def _collect_finished(self, now: datetime) -> list[NodeDeletion]:
        """Take the deletions finished since the last call and update the timers: a failed
        node waits --unremovable-node-recheck-timeout before it is considered again, and
        scale-down waits --scale-down-delay-after-failure."""
        finished = [
            dataclasses.replace(d, start_reported=True) if d.node in self._announced else d
            for d in self.actuator.tracker.take_finished()
        ]
        self._announced.difference_update(d.node for d in finished)
        for d in finished:
            if d.ok:
                self.planner.timers.drop(d.node)
            else:
                self.last_scale_down_failure = now
                self.group_scale_down_failure[d.node_group] = now
                self.planner.recheck.add(d.node, now)
        return finished

    def _run(self, now: datetime) -> LoopResult:
        options = self.options
        finished = self._collect_finished(now)
        try:
            self.provider.refresh()
        except CloudProviderError as exc:
            log.error("cloud_provider_refresh_failed", error=str(exc))
            return LoopResult(
                time=now,
                health=ClusterHealth(False, NodeCounts(), "cloud provider refresh failed"),
                scale_down=self._not_tried(finished),
                halted=f"cloud provider refresh failed: {exc}",
                errors=(LoopError(str(exc), describe(exc).type),),
            )
        objects = self.source.snapshot()
        stale = self._stale_caches()
        if not self._candidates_loaded:
            self._candidates_loaded = True
            if options.node_deletion_candidate_ttl > timedelta(0):
                # Read before the stale taints of an earlier run are cleaned below.
                self.planner.timers.load_from_taints(
                    objects.nodes, now, options.node_deletion_candidate_ttl
                )
        if self.upkeep.clean_stale_taints(objects.nodes, self.deletions_in_flight()):
            objects = self.source.snapshot()
        objects = _mark_unready_gpus(objects, self.provider.gpu_label())
        if objects.resource_slices or self._templates_have_slices():
            objects = mark_unready_dra(objects, self.provider, self._last_template)
        objects = self.default_spread(objects)
        state = self.state_tracker.update(
            now, objects.nodes, self.provider, deleting=set(self.deletions_in_flight())
        )
        errors: list[str] = []
        cleanups = self.upkeep.clean_up_instances(state, errors, stale)
        if not state.health.healthy:
            log.warning("cluster_unhealthy", message=state.health.message)
            # As CA (CleanUpUnneededNodes on halting): time spent unhealthy does not count
            # towards --scale-down-unneeded-time.
            self.planner.timers.clear()
            return LoopResult(
                time=now,
                health=state.health,
                taint_counts=state.taint_counts,
                node_groups=state.statuses(),
                scale_down=self._not_tried(finished),
                halted=f"cluster is unhealthy: {state.health.message}",
                cleanups=tuple(cleanups),
                errors=tuple(errors),
                stale_caches=stale,
            )

        pods_by_node, live_by_node = _bound_pods(
            objects.pods, options.expendable_pods_priority_cutoff
        )
        snapshot = ClusterSnapshot.from_objects(objects, self.filters, bound=live_by_node)
        provreqs = self.provisioning_requests
        provreqs.start_loop(objects.provisioning_requests, objects.pod_templates, objects.pods, now)
        provreqs.book(snapshot, unusable=state.unready | state.not_started | state.being_deleted)
        gpu_label = self.provider.gpu_label()
        limits = Limits.from_options(options, self.provider.resource_limiter())
        # As CA's calculateScaleDownCoresMemoryTotal: nodes being deleted (ours in flight
        # included) no longer count towards the --cores-total/--memory-total/--gpu-total
        # minimums, so deletions started in earlier loops are not spent twice.
        remaining_totals = sum_totals(
            (n for n in objects.nodes if n.name not in state.being_deleted), gpu_label
        )
        # Nodes of a group that have not started are counted in its upcoming nodes (as
        # templates), so scale-up leaves them out of the registered totals.
        started_totals = sum_totals(
            (
                n
                for n in objects.nodes
                if n.name not in state.not_started or n.name not in state.group_of_node
            ),
            gpu_label,
        )

        inputs = LoopInputs(
            now=now,
            objects=objects,
            state=state,
            pods_by_node=pods_by_node,
            snapshot=snapshot,
            limits=limits,
            gpu_label=gpu_label,
            started_totals=started_totals,
            remaining_totals=remaining_totals,
        )
        # Before the templates are rebuilt: each ready node against the template its group
        # was planned from.
        dra_mismatch = self._dra_template_mismatch(state, snapshot)
        scale_up, pending = self._scale_up(inputs, errors)
        provreqs.after_scale_up(scale_up)
        scaled_up = any(d.delta > 0 for d in scale_up.decisions)
        if scaled_up:
            self.last_scale_up = now
            for d in scale_up.decisions:
                if d.delta > 0:
                    self.group_scale_up[d.node_group] = now
        if scale_up.status is ScaleUpStatus.ERROR:
            # As CA's postScaleUp: a loop whose scale-up failed ends there, so nothing is
            # deleted while the capacity the pods need could not be bought.
            log.warning("scale_down_skipped", reason="scale-up failed", error=scale_up.error)
            return LoopResult(
                time=now,
                health=state.health,
                taint_counts=state.taint_counts,
                node_groups=_statuses_after(state, scale_up, ()),
                scale_up=scale_up,
                scale_down=self._not_tried(finished),
                pending_pods=self._cluster_pending(pending),
                cleanups=tuple(cleanups),
                errors=tuple(errors),
                stale_caches=stale,
                dra_template_mismatch=dra_mismatch,
                provisioning_requests=provreqs.results(),
                provisioning_request_consumers=self._consumers(),
                capacity_buffers=self._buffer_results(),
                capacity_quotas=self._quota_statuses(objects, now),
            )

        if stale:
            # A node that looks empty in a cache that stopped following the cluster may
            # run pods bound since: no scale-down on a guess. Time spent blind does not
            # count towards --scale-down-unneeded-time either.
            log.warning("scale_down_skipped", reason="stale caches", caches=list(stale))
            self.planner.timers.clear()
            scale_down = dataclasses.replace(
                self._not_tried(finished), cooldown_reason="stale caches: " + "; ".join(stale)
            )
            removed: list[NodeDeletion] = []
        else:
            # Scale-down sees the pods as the snapshot has them, including pending pods the
            # scheduler is about to bind to existing nodes.
            scheduled = {ni.name: list(ni.pods.values()) for ni in snapshot.node_infos()}
            scale_down, removed = self._scale_down(inputs, scheduled, scaled_up, finished)
        return LoopResult(
            time=now,
            health=state.health,
            taint_counts=state.taint_counts,
            node_groups=_statuses_after(state, scale_up, removed),
            scale_up=scale_up,
            scale_down=scale_down,
            pending_pods=self._cluster_pending(pending),
            cleanups=tuple(cleanups),
            errors=tuple(errors),
            stale_caches=stale,
            unreadable=tuple(objects.unreadable),
            dra_template_mismatch=dra_mismatch,
            provisioning_requests=provreqs.results(),
            provisioning_request_consumers=self._consumers(),
            capacity_buffers=self._buffer_results(),
            capacity_quotas=self._quota_statuses(objects, now),
        )

    def _cluster_pending(self, pending: PendingPods) -> tuple[str, ...]:
        """The unschedulable pods of the cluster: CapacityBuffers' placeholder pods are
        left out (as CA counts them, before its pod-list processors inject them)."""
        keys = pending.unschedulable_keys()
        buffers = self.capacity_buffers
        if buffers is None or not buffers.results():
            return tuple(keys)
        return tuple(k for k in keys if not buffers.buffer_of_pod(k))

    def _consumers(self) -> tuple[tuple[str, str], ...]:
        """This loop's pending pods left out for consuming a ProvisioningRequest."""
        consumers = self.provisioning_request_consumers
        return tuple(consumers.ignored) if consumers is not None else ()

    def _buffer_results(self) -> tuple[BufferResult, ...]:
        buffers = self.capacity_buffers
        return buffers.results() if buffers is not None else ()

    def _pods_to_consider(self, objects: ClusterObjects, now: datetime) -> Sequence[Pod]:
        """The pods the pending-pod filters sort: the cluster's, as the pod-list processors
        leave them (with CapacityBuffers' placeholder pods, without the pods that consume a
        ProvisioningRequest)."""
        if not self.pod_list_processors:
            return objects.pods
        context = PodListContext(
            now=now,
            pods=objects.pods,
            controllers=objects.controllers,
            pod_templates=objects.pod_templates,
            provisioning_requests=objects.provisioning_requests,
            capacity_buffers=objects.capacity_buffers,
            resource_quotas=objects.resource_quotas,
        )
        return process_pod_list(
            self.pod_list_processors, waiting_for_a_node(objects.pods), context
        )

    def _last_template(self, group_id: str) -> NodeInfo | None:
        """The template the last loop planned `group_id` from (None: none yet)."""
        template = self.templates.last.get(group_id)
        return template.node_info if template is not None else None

    def _templates_have_slices(self) -> bool:
        return any(
            t.node_info is not None and t.node_info.resource_slices
            for t in self.templates.last.values()
        )

    def _dra_template_mismatch(
        self, state: ClusterState, snapshot: ClusterSnapshot
    ) -> dict[str, dict[str, int]]:
        """Per DRA driver, the differences between the devices each ready node of a group
        publishes and those of the template the last loop planned the group's new nodes
        from (for a group scaled from zero, the provider's prediction), as CA's DRA
        processor reports them; a sample of the nodes that differ is logged."""
        counts: dict[str, dict[str, int]] = {}
        templates = self.templates.last
        if not templates:
            return counts
        dra = snapshot.dra
        sample: list[str] = []
        differing = 0
        for gid, group in sorted(state.groups.items()):
            template = templates.get(gid)
            if template is None or template.node_info is None:
                continue
            predicted = template.node_info.resource_slices
            for node in group.nodes:
                if node.name not in state.ready:
                    continue
                published = dra.slices_of(node.name) if dra is not None else []
                if not predicted and not published:
                    continue
                deltas = compare_resource_pools(predicted, published)
                if not deltas:
                    continue
                merge_counts(counts, count_by_driver(deltas))
                differing += 1
                if len(sample) < LISTED_AT_MOST:
                    sample.append(f"{node.name}: " + ", ".join(d.summary() for d in deltas))
        if sample:
            log.warning(
                "dra_template_mismatch",
                nodes=differing,
                sample=sample,
                reason="the devices of ready nodes differ from their node group's template",
            )
        return counts

    # ------------------------------------------------------------------ cluster upkeep

    def _stale_caches(self) -> tuple[str, ...]:
        """The source's caches that stopped following the cluster (none for sources that
        cannot fall behind)."""
        source = self.source
        return source.stale_caches() if isinstance(source, StaleSource) else ()

    # ------------------------------------------------------------------ scale-up

    def _quota_statuses(
        self, objects: ClusterObjects, now: datetime
    ) -> tuple[CapacityQuotaStatus, ...]:
        """The status of each CapacityQuota, as upstream's CapacityQuota controller keeps
        it (--capacity-quotas-enabled)."""
        if not self.options.capacity_quotas_enabled:
            return ()
        return quota_statuses(objects.capacity_quotas, objects.nodes, now)

    def _quota_tracker(
        self, inputs: LoopInputs, templates: Mapping[str, Template]
    ) -> QuotaTracker | None:
        """The CapacityQuotas' room (--capacity-quotas-enabled), counted as CA counts it
        over the nodes: registered ones that have started, and upcoming ones as their
        group's template."""
        if not self.options.capacity_quotas_enabled or not inputs.objects.capacity_quotas:
            return None
        state = inputs.state
        upcoming = [
            (tpl.node_info.node, g.upcoming)
            for gid, g in state.groups.items()
            if g.upcoming
            and (tpl := templates.get(gid)) is not None
            and tpl.node_info is not None
        ]
        return QuotaTracker.build(
            inputs.objects.capacity_quotas,
            (
                n
                for n in inputs.objects.nodes
                if n.name not in state.not_started or n.name not in state.group_of_node
            ),
            inputs.gpu_label,
            upcoming,
        )

    def _scale_up(self, inputs: LoopInputs, errors: list[str]) -> tuple[ScaleUpResult, PendingPods]:
        now, objects, state, snapshot = inputs.now, inputs.objects, inputs.state, inputs.snapshot
        pods_by_node, limits, gpu_label = inputs.pods_by_node, inputs.limits, inputs.gpu_label
        base_totals = inputs.started_totals
        options = self.options
        templates = self.templates.build(
            state,
            pods_by_node,
            objects.daemonsets,
            snapshot.csinodes,
            node_slices=snapshot.dra.slices_of if snapshot.dra is not None else None,
        )
        provreqs = self.provisioning_requests
        pending = classify_pending(
            # As CA's pod-list processors: the buffers' placeholder pods go through the
            # same filters as the cluster's pending pods.
            self._pods_to_consider(objects, now),
            options,
            now,
            node_names=set(snapshot.node_names()),
        )
        errors.extend(pending.errors)
        # As CA's filterOutExpendable: a pod waiting for the scheduler to preempt its way onto
        # its nominated node takes room there, so that node is neither offered to other
        # pending pods nor drained as underutilized.
        for pod in pending.awaiting_preemption:
            snapshot.add_pod(pod, pod.nominated_node_name)
        decisions: list[ScaleUpDecision] = []
        totals = current_totals(state, templates, gpu_label, base_totals)
        quotas = self._quota_tracker(inputs, templates)
        if options.enforce_node_group_min_size:
            decisions.extend(
                plan_min_size_enforcement(
                    state,
                    now,
                    templates=templates,
                    limits=limits,
                    totals=totals,
                    gpu_label=gpu_label,
                    quotas=quotas,
                )
            )
            # The pending pods' scale-up gets what the enforcement left of the limits.
            for d in decisions:
                tpl = templates.get(d.node_group)
                if tpl is not None and tpl.node_info is not None:
                    totals = totals.plus(node_totals(tpl.node_info.node, gpu_label), d.delta)
                else:
                    totals = totals.plus(Totals(nodes=1), d.delta)
        context = ExpanderContext(
            pricing=self.provider.pricing(),
            cluster_node_count=len(objects.nodes),
            config_maps={c.key: c for c in objects.config_maps},
            namespace=options.namespace,
            now=now,
            gpu_label=gpu_label,
            # Seeded by the loop time so that a replayed loop makes the same random choice.
            rng=random.Random(int(now.timestamp())),
        )

        def choose(candidates: Sequence[Option]) -> Option | None:
            return self.expander.best_option(candidates, context)

        unusable = state.unready | state.not_started | state.being_deleted
        # Hints are only worth keeping for pods still pending (with none yet, as on a first
        # loop or while nothing fits, there is nothing to drop: no key set to build).
        if self.pending_hints.hints:
            self.pending_hints.drop_old_hints(pending.unschedulable_keys())
        # Pods that fit existing nodes stay in the snapshot: the scheduler will bind them
        # there, so scale-down must not count that capacity as free.
        drop_schedulable(pending, snapshot, self.pending_hints, unusable=unusable)
        # The requests answered from the room left; a best-effort-atomic one needing nodes
        # gets this loop's scale-up, and the pending pods wait for the next (as CA's
        # provisioning-request orchestrator alternates).
        provreqs.provision(snapshot, unusable)
        atomic = provreqs.atomic_pods
        snapshot.fork()
        try:
            upcoming = 0
            for gid, g in sorted(state.groups.items()):
                tpl = templates.get(gid)
                if not g.upcoming or tpl is None or tpl.node_info is None:
                    continue
                for i in range(g.upcoming):
                    info = upcoming_node(tpl.node_info, f"{tpl.node_info.node.name}-upcoming-{i}")
                    snapshot.add_node(info.node, info.pods, info.resource_slices)
                    upcoming += 1
            if upcoming:
                drop_schedulable(pending, snapshot, self.pending_hints, unusable=unusable)
            to_help = (
                PodsToHelp.of(atomic)
                if atomic
                else PodsToHelp(
                    tuple(pending.unschedulable),
                    tuple(pending.unschedulable_groups()),
                    tuple(pending.unschedulable_keys()),
                )
            )
            plan = plan_scale_up(
                ScaleUpInputs(
                    now=now,
                    pods=to_help,
                    state=state,
                    templates=templates,
                    snapshot=snapshot,
                    estimator=self.estimator,
                    choose=choose,
                    limits=limits,
                    totals=totals,
                    options=options,
                    gpu_label=gpu_label,
                    monotonic=self.monotonic,
                    quotas=quotas,
                )
            )
            if atomic:
                plan.result = provreqs.all_or_nothing(plan.result)
        finally:
            snapshot.revert()
        if context.warnings:
            plan.result = dataclasses.replace(
                plan.result, expander_warnings=tuple(context.warnings)
            )
        enforced = {d.node_group for d in decisions}
        for_pods = [d for d in plan.result.decisions if d.node_group not in enforced]
        if not decisions and not for_pods:
            return plan.result, pending
        # As CA: the min-size enforcement and the pending pods' scale-up are two separate
        # executions, so a failed enforcement does not stop the pods' scale-up.
        done: list[ScaleUpDecision] = []
        failures: list[str] = []
        for batch in (decisions, for_pods):
            if not batch:
                continue
            batch_done, batch_failures = execute_scale_up(
                batch,
                state,
                self.state_tracker,
                now,
                dry_run=options.dry_run,
                parallel=options.parallel_scale_up,
            )
            done.extend(batch_done)
            failures.extend(batch_failures)
        errors.extend(failures)
        status = plan.result.status
        if failures and not done:
            status = ScaleUpStatus.ERROR
        elif done and status is not ScaleUpStatus.SUCCESSFUL:
            status = ScaleUpStatus.SUCCESSFUL
        return (
            dataclasses.replace(
                plan.result,
                status=status,
                decisions=tuple(done),
                error="; ".join(failures),
            ),
            pending,
        )

    # ------------------------------------------------------------------ scale-down

    def _cooldown(self, now: datetime, scaled_up: bool) -> str:
        o = self.options
        if scaled_up:
            return "scale-up in this loop"
        if o.scale_down_delay_type_local:
            # The delays hold back only the node groups they concern (`_groups_in_cooldown`).
            return ""
        if (
            self.last_scale_up is not None
            and now < self.last_scale_up + o.scale_down_delay_after_add
        ):
            return "--scale-down-delay-after-add"
        delay_after_delete = o.scale_down_delay_after_delete or o.scan_interval
        if (
            self.last_scale_down_delete is not None
            and now < self.last_scale_down_delete + delay_after_delete
        ):
            return "--scale-down-delay-after-delete"
        if (
            self.last_scale_down_failure is not None
            and now < self.last_scale_down_failure + o.scale_down_delay_after_failure
        ):
            return "--scale-down-delay-after-failure"
        return ""

    def _groups_in_cooldown(self, now: datetime) -> dict[str, str]:
        """With --scale-down-delay-type-local, the node groups whose nodes are no scale-down
        candidates now (as CA's ScaleDownCandidatesDelayProcessor), with the delay that
        holds each back: it scaled up within --scale-down-delay-after-add, deleted a node
        within --scale-down-delay-after-delete, or failed to within
        --scale-down-delay-after-failure."""
        o = self.options
        if not o.scale_down_delay_type_local:
            return {}
        out: dict[str, str] = {}
        delay_after_delete = o.scale_down_delay_after_delete or o.scan_interval
        for times, delay, flag in (
            (self.group_scale_up, o.scale_down_delay_after_add, "--scale-down-delay-after-add"),
            (
                self.group_scale_down_delete,
                delay_after_delete,
                "--scale-down-delay-after-delete",
            ),
            (
                self.group_scale_down_failure,
                o.scale_down_delay_after_failure,
                "--scale-down-delay-after-failure",
            ),
        ):
            for gid, at in times.items():
                if now < at + delay:
                    out.setdefault(gid, flag)
        return out

    def _not_tried(self, finished: Sequence[NodeDeletion]) -> ScaleDownResult:
        return ScaleDownResult(
            status=ScaleDownStatus.NOT_TRIED,
            deletions=tuple(finished),
            in_flight=tuple(sorted(self.deletions_in_flight())),
        )

    def _scale_down(
        self,
        inputs: LoopInputs,
        pods_by_node: Mapping[str, Sequence[Pod]],
        scaled_up: bool,
        finished: Sequence[NodeDeletion],
    ) -> tuple[ScaleDownResult, list[NodeDeletion]]:
        """Plan scale-down and start the deletions chosen. Returns the result and the
        deletions that succeeded during this call (the group targets read at the start of
        the loop do not reflect them yet)."""
        now, objects, state, snapshot = inputs.now, inputs.objects, inputs.state, inputs.snapshot
        limits, gpu_label, base_totals = inputs.limits, inputs.gpu_label, inputs.remaining_totals
        options = self.options
        if not options.scale_down_enabled:
            return self._not_tried(finished), []
        if scaled_up:
            return (
                ScaleDownResult(
                    status=ScaleDownStatus.IN_COOLDOWN,
                    cooldown_reason="scale-up in this loop",
                    deletions=tuple(finished),
                    in_flight=tuple(sorted(self.deletions_in_flight())),
                ),
                [],
            )
        cooldown = self._cooldown(now, scaled_up)
        in_progress = self._in_progress(state, pods_by_node)
        plan = self.planner.plan(
            now,
            ScaleDownInputs(
                nodes=objects.nodes,
                pods_by_node=pods_by_node,
                pdbs=objects.pdbs,
                controllers=objects.controllers,
                daemonsets=objects.daemonsets,
                unreadable_pods=objects.unreadable_pods_by_node(),
            ),
            snapshot,
            state,
            limits=limits,
            totals=base_totals,
            in_progress=in_progress,
            allow_deletion=not cooldown,
            gpu_label=gpu_label,
            skip_groups=self._groups_in_cooldown(now),
            # Scale-down planning is the loop's last reader of the snapshot (built afresh
            # each loop): its removal simulation need not be undone.
            last_use=True,
        )
        groups = {gid: g.group for gid, g in state.groups.items()}
        selected = [*plan.selection.empty, *plan.selection.drain]
        with self._provider_released():
            # As in CA (`updateSoftDeletionTaints`, called in cooldown too), the soft taints
            # follow the unneeded nodes in every loop that plans scale-down. Nodes being
            # deleted are left to their deletion, which writes their taints concurrently.
            self.actuator.update_soft_taints(
                [n for n in objects.nodes if n.name not in state.being_deleted],
                (u.node for u in plan.unneeded),
                now,
            )
            started = self.actuator.start(
                plan.selection.empty, plan.selection.drain, groups, now
            )
        # Reported in this loop's `started`: when they finish, their start events are done.
        self._announced.update(d.node for d in started)
        for d in started:
            # A node being deleted is no longer unneeded; if its deletion fails it must be
            # unneeded for the full time again.
            self.planner.timers.drop(d.node)
        # Deletions that finished while this loop ran: taint failures, and every deletion
        # when the executor runs them inline.
        during = self._collect_finished(now)
        failed_now = {d.node for d in during if not d.ok}
        live = [d for d in started if d.node not in failed_now]
        if cooldown:
            status = ScaleDownStatus.IN_COOLDOWN
        elif live:
            status = ScaleDownStatus.NODE_DELETE_STARTED
            self.last_scale_down_delete = now
            for d in live:
                self.group_scale_down_delete[d.node_group] = now
        elif selected:
            status = ScaleDownStatus.ERROR
        elif plan.unneeded:
            status = ScaleDownStatus.NO_NODE_DELETED
        else:
            status = ScaleDownStatus.NO_UNNEEDED
        result = ScaleDownResult(
            status=status,
            unneeded=tuple(plan.unneeded),
            unremovable=tuple(plan.unremovable),
            deletions=(*finished, *during),
            cooldown_reason=cooldown,
            started=tuple(started),
            in_flight=tuple(sorted(self.deletions_in_flight())),
        )
        return result, [d for d in during if d.ok]

    @contextlib.contextmanager
    def _provider_released(self) -> Iterator[None]:
        """Run the loop's node writes (soft taints, the taints that start deletions)
        without the provider lock that `run_once` holds.

        They call no cloud, only the API server, where each waits its turn under
        --kube-client-qps: with the lock held through them, the deletions in flight (which
        call `delete_nodes` under it) waited for the whole loop, kept their places of
        --max-scale-down-parallelism and left fewer for the next loop. CA's deletions run
        beside its loop. What the loop read from the provider stays right: a deletion that
        finishes meanwhile is taken in this loop (`_collect_finished`, after `start`) and
        out of its group's size (`removed`)."""
        lock = self.actuator.provider_lock
        lock.release()
        try:
            yield
        finally:
            lock.acquire()

    def _in_progress(
        self, state: ClusterState, pods_by_node: Mapping[str, Sequence[Pod]]
    ) -> InProgress:
        """Deletions under way: ours in flight (known drains), and nodes others marked for
        deletion (a drain when they still run pods to move)."""
        in_flight = self.deletions_in_flight()
        per_group: dict[str, int] = {}
        drains = 0
        for name in sorted(state.being_deleted | set(in_flight)):
            ours = in_flight.get(name)
            gid = state.group_of_node.get(name) or (ours.node_group if ours else None)
            if gid is None:
                continue
            per_group[gid] = per_group.get(gid, 0) + 1
            if ours is not None:
                drains += 1 if ours.drain else 0
            elif any(
                not (p.is_daemonset or p.is_mirror or p.is_terminal)
                for p in pods_by_node.get(name, ())
            ):
                drains += 1
        return InProgress(total=sum(per_group.values()), drains=drains, per_group=per_group)
