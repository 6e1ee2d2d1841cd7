"""Prometheus metrics with Cluster Autoscaler's names, the health check, and their HTTP server.

(Long on purpose: CA's whole metric table is declared here, in one place to compare
with upstream's pkg/metrics.)

Every metric lives in the ``Metrics`` object's own ``CollectorRegistry`` (never the global
one), so several autoscalers, or tests, can run in one process. Names, types, labels and
meanings follow CA's pkg/metrics: the two CA counters whose names do not end in ``_total``
(``old_unregistered_nodes_removed_count``, ``skipped_scale_events_count``) are counters
under exactly those names, and no ``_created`` series is exposed (CA's Go client has none).
The per node group series exist only with ``--emit-per-nodegroup-metrics``, as in CA.
Metrics of features this autoscaler does not have (node autoprovisioning, DRA, the GCE
instance-consistency check) are registered and stay at zero, so dashboards find them. One
family is ours alone: ``unreadable_objects_count{kind}``, the objects left out of the loop
because they could not be read.

``HealthCheck`` implements ``/health-check`` as CA does: healthy until monitoring starts
(the first loop), then unhealthy when no activity was recorded for ``--max-inactivity`` or
no loop succeeded for ``--max-failing-time``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.report.scaledown_tracking import (
    MaxNodeSkipEvalTracker,
    NodeRemovalLatencyTracker,
)
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Summary,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from clusterscaler.loop.decisions import LoopResult

__all__ = [
    "FUNCTION_DURATION_BUCKETS",
    "NAMESPACE",
    "HealthCheck",
    "Metrics",
    "OperationsServer",
    "parse_address",
]

log = structlog.get_logger()

NAMESPACE = "cluster_autoscaler"
# client-go's buckets of rest_client_request_duration_seconds and
# rest_client_rate_limiter_duration_seconds.
REST_CLIENT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Go's prometheus.ExponentialBuckets."""
    return tuple(start * factor**i for i in range(count))


# CA: ExponentialBuckets(0.01, 1.5, 30), 0.01 s to about 21 minutes.
FUNCTION_DURATION_BUCKETS = exponential_buckets(0.01, 1.5, 30)
BINPACKING_HETEROGENEITY_BUCKETS = exponential_buckets(1, 2, 6)
NODE_REMOVAL_LATENCY_BUCKETS = exponential_buckets(1, 1.5, 19)


class PlainCounter(Collector):
    """A counter exposed under exactly its name: prometheus_client appends ``_total`` to
    every counter, and two of CA's counters have names without it."""

    def __init__(
        self, name: str, doc: str, labels: tuple[str, ...], registry: CollectorRegistry
    ) -> None:
        self.name = f"{NAMESPACE}_{name}"
        self.doc = doc
        self.labelnames = labels
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError(f"counter {self.name}: amount {amount}: expected >= 0")
        key = tuple(labels[n] for n in self.labelnames)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.doc, "counter")
        with self._lock:
            values = dict(self._values)
        if not self.labelnames and not values:
            values[()] = 0.0
        for key, value in sorted(values.items()):
            metric.add_sample(self.name, dict(zip(self.labelnames, key, strict=True)), value)
        yield metric

    def describe(self) -> Iterator[Metric]:
        yield Metric(self.name, self.doc, "counter")


# CA's FailedScaleUpReason values, created at zero on start.
FAILED_SCALE_UP_REASONS = ("cloudProviderError", "apiCallError", "timeout")

# Activities for last_activity{activity}, as CA names them.
ACTIVITIES = ("autoscaling", "main", "scaleUp", "scaleDown", "reconfigure")


class Metrics:
    """All autoscaler metrics, registered in ``self.registry``.

    ``emit_per_nodegroup_metrics`` (``--emit-per-nodegroup-metrics``) enables the
    ``node_group_min_count`` / ``_max_count`` / ``_target_count`` series.
    """

    def __init__(
        self,
        *,
        emit_per_nodegroup_metrics: bool = False,
        node_removal_latency_tracking: bool = False,
        max_node_skip_eval_time_tracking: bool = False,
        registry: CollectorRegistry | None = None,
    ) -> None:
        # CA's Go client exposes no `_created` series; this switch is process-wide.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.emit_per_nodegroup_metrics = emit_per_nodegroup_metrics
        # --node-removal-latency-tracking-enabled, --max-node-skip-eval-time-tracker-enabled:
        # without them the two metrics are registered and never observed, as in CA.
        self._removal_latency = (
            NodeRemovalLatencyTracker() if node_removal_latency_tracking else None
        )
        self._skip_eval = MaxNodeSkipEvalTracker() if max_node_skip_eval_time_tracking else None
        r = self.registry
        # Unregistered (nowhere exposed) unless --emit-per-nodegroup-metrics.
        per_group = r if emit_per_nodegroup_metrics else None

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, labels, namespace=NAMESPACE, registry=r)

        def group_gauge(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
            return Gauge(name, doc, labels, namespace=NAMESPACE, registry=per_group)

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, labels, namespace=NAMESPACE, registry=r)

        def histogram(
            name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]
        ) -> Histogram:
            return Histogram(name, doc, labels, namespace=NAMESPACE, registry=r, buckets=buckets)

        gpu = ("gpu_resource_name", "gpu_name")

        self.cluster_safe_to_autoscale = gauge(
            "cluster_safe_to_autoscale",
            "Whether or not cluster is healthy enough for autoscaling. 1 if it is, 0 otherwise.",
        )
        self.nodes_count = gauge("nodes_count", "Number of nodes in cluster.", ("state",))
        self.node_groups_count = gauge(
            "node_groups_count", "Number of node groups managed by CA.", ("node_group_type",)
        )
        self.unschedulable_pods_count = gauge(
            "unschedulable_pods_count", "Number of unschedulable pods in the cluster.", ("type",)
        )
        self.max_nodes_count = gauge(
            "max_nodes_count", "Maximum number of nodes in all node groups"
        )
        self.cluster_cpu_current_cores = gauge(
            "cluster_cpu_current_cores",
            "Current number of cores in the cluster, minus deleting nodes.",
        )
        self.cpu_limits_cores = gauge(
            "cpu_limits_cores",
            "Minimum and maximum number of cores in the cluster.",
            ("direction",),
        )
        self.cluster_memory_current_bytes = gauge(
            "cluster_memory_current_bytes",
            "Current number of bytes of memory in the cluster, minus deleting nodes.",
        )
        self.memory_limits_bytes = gauge(
            "memory_limits_bytes",
            "Minimum and maximum number of bytes of memory in cluster.",
            ("direction",),
        )
        self.node_group_min_count = group_gauge(
            "node_group_min_count", "Minimum number of nodes in the node group", ("node_group",)
        )
        self.node_group_max_count = group_gauge(
            "node_group_max_count", "Maximum number of nodes in the node group", ("node_group",)
        )
        self.node_group_target_count = group_gauge(
            "node_group_target_count",
            "Target number of nodes in the node group by CA.",
            ("node_group",),
        )
        self.node_group_healthiness = group_gauge(
            "node_group_healthiness",
            "Whether or not node group is healthy enough for autoscaling. 1 if it is, 0 otherwise.",
            ("node_group",),
        )
        self.node_group_backoff_status = group_gauge(
            "node_group_backoff_status",
            "Whether or not node group is backoff for not autoscaling. 1 if it is, 0 otherwise.",
            ("node_group", "reason"),
        )
        self.last_activity = gauge(
            "last_activity", "Last time certain part of CA logic executed.", ("activity",)
        )
        self.function_duration_seconds = histogram(
            "function_duration_seconds",
            "Time taken by various parts of CA main loop.",
            ("function",),
            FUNCTION_DURATION_BUCKETS,
        )
        # A Go summary without objectives: CA exposes only its _sum and _count.
        self.function_duration_quantile_seconds = Summary(
            "function_duration_quantile_seconds",
            "Quantiles of time taken by various parts of CA main loop.",
            ("function",),
            namespace=NAMESPACE,
            registry=r,
        )
        self.pending_node_deletions = gauge(
            "pending_node_deletions",
            "Number of nodes that haven't been removed or aborted after finished scale-down phase.",
        )
        self.errors_total = counter(
            "errors_total", "The number of CA loops failed due to an error.", ("type",)
        )
        self.scaled_up_nodes_total = counter(
            "scaled_up_nodes_total", "Number of nodes added by CA.", (*gpu, "dra_drivers")
        )
        self.scaled_up_gpu_nodes_total = counter(
            "scaled_up_gpu_nodes_total", "Number of GPU nodes added by CA, by GPU name.", gpu
        )
        self.failed_scale_ups_total = counter(
            "failed_scale_ups_total",
            "Number of times scale-up operation has failed.",
            ("reason", *gpu, "dra_drivers"),
        )
        self.failed_node_creations_total = counter(
            "failed_node_creations_total", "Number of nodes that CA failed to add.", ("reason",)
        )
        self.failed_gpu_scale_ups_total = counter(
            "failed_gpu_scale_ups_total",
            "Number of times scale-up operation has failed.",
            ("reason", *gpu),
        )
        self.scaled_down_nodes_total = counter(
            "scaled_down_nodes_total",
            "Number of nodes removed by CA.",
            ("reason", *gpu, "dra_drivers"),
        )
        self.scaled_down_gpu_nodes_total = counter(
            "scaled_down_gpu_nodes_total",
            "Number of GPU nodes removed by CA, by reason and GPU name.",
            ("reason", *gpu),
        )
        self.evicted_pods_total = counter(
            "evicted_pods_total", "Number of pods evicted by CA", ("eviction_result",)
        )
        self.unneeded_nodes_count = gauge(
            "unneeded_nodes_count", "Number of nodes currently considered unneeded by CA."
        )
        self.unremovable_nodes_count = gauge(
            "unremovable_nodes_count",
            "Number of nodes currently considered unremovable by CA.",
            ("reason",),
        )
        self.scale_down_in_cooldown = gauge(
            "scale_down_in_cooldown",
            "Whether or not the scale down is in cooldown. 1 if its, 0 otherwise.",
        )
        self.old_unregistered_nodes_removed_count = PlainCounter(
            "old_unregistered_nodes_removed_count",
            "Number of unregistered nodes removed by CA.",
            (),
            r,
        )
        self.overflowing_controllers_count = gauge(
            "overflowing_controllers_count",
            "Number of controllers that own a large set of heterogenous pods, preventing CA "
            "from treating these pods as equivalent.",
        )
        self.node_taints_count = gauge(
            "node_taints_count", "Number of taints per type used in the cluster.", ("type",)
        )
        # Taint types reported so far: a type whose taints are all gone drops to 0 rather
        # than keeping its last count.
        self._taint_types: set[str] = set()
        self.skipped_scale_events_count = PlainCounter(
            "skipped_scale_events_count",
            "Count of scaling events that the CA has chosen to skip.",
            ("direction", "reason"),
            r,
        )
        self.created_node_groups_total = counter(
            "created_node_groups_total",
            "Number of node groups created by Node Autoprovisioning.",
            ("group_type",),
        )
        self.deleted_node_groups_total = counter(
            "deleted_node_groups_total",
            "Number of node groups deleted by Node Autoprovisioning.",
            ("group_type",),
        )
        self.inconsistent_instances_migs_count = gauge(
            "inconsistent_instances_migs_count",
            "Number of migs where instance count according to InstanceGroupManagers.List() "
            "differs from the results of Instances.List(). This can happen when some instances "
            "are abandoned or a user edits instance 'created-by' metadata.",
        )
        self.binpacking_heterogeneity = histogram(
            "binpacking_heterogeneity",
            "Number of groups of equivalent pods being processed as a part of the same "
            "binpacking simulation.",
            ("instance_type", "cpu_count", "namespace_count"),
            BINPACKING_HETEROGENEITY_BUCKETS,
        )
        self.max_node_skip_eval_duration_seconds = gauge(
            "max_node_skip_eval_duration_seconds",
            "Maximum evaluation time of a node being skipped during ScaleDown.",
        )
        self.node_removal_latency_seconds = histogram(
            "node_removal_latency_seconds",
            "Latency from when an unneeded node is eligible for scale down until it is "
            "removed (deleted=true) or it became needed again (deleted=false).",
            ("deleted",),
            NODE_REMOVAL_LATENCY_BUCKETS,
        )
        self.dra_node_template_resources_mismatch = gauge(
            "dra_node_template_resources_mismatch",
            "Count of resource pool mismatches between ready nodes and the node template "
            "that CA used to predict the node.",
            ("driver", "mismatch_type"),
        )
        self.skipped_pods_count = gauge(
            "skipped_pods_count",
            "Number of pods skipped when doing scheduling simulations.",
            ("type",),
        )
        # With --capacity-buffer-controller-enabled (CA's capacitybuffer/metrics).
        self.capacity_buffer_oldest_reconciliation_timestamp_seconds = gauge(
            "capacity_buffer_oldest_reconciliation_timestamp_seconds",
            "Unix timestamp of the oldest capacity buffer last reconciliation time.",
            ("new_buffer",),
        )
        # Ours, not CA's (the one family CA does not have): the objects of the cluster the
        # model could not read, by kind, left out of the loop (a node bound to such a pod is
        # never removed). CA has no counterpart because its Go types cannot hold such an
        # object at all; here an alert on it is how an operator learns of one.
        self.unreadable_objects_count = gauge(
            "unreadable_objects_count",
            "Number of cluster objects the autoscaler could not read and left out of its "
            "loop, by kind.",
            ("kind",),
        )
        # client-go's REST client metrics, which CA's /metrics exposes through
        # k8s.io/component-base (metrics/prometheus/restclient): without the
        # cluster_autoscaler_ prefix, the same names, labels and buckets.
        self.rest_client_requests_total = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host"),
            registry=r,
        )

        def client_histogram(name: str, doc: str) -> Histogram:
            return Histogram(name, doc, ("verb", "host"), registry=r, buckets=REST_CLIENT_BUCKETS)

        self.rest_client_request_duration_seconds = client_histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
        )
        self.rest_client_rate_limiter_duration_seconds = client_histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
        )
        # The drivers the last DRA template comparison found differences for.
        self._dra_mismatch_drivers: set[str] = set()
        self._init_series()

    def _init_series(self) -> None:
        """The series CA creates at zero on start (its InitMetrics), so that rates and
        alerts see them before the first increment."""
        from clusterscaler.framework.errors import ErrorType

        for error_type in ErrorType:
            self.errors_total.labels(type=error_type.value)
        for reason in FAILED_SCALE_UP_REASONS:
            self.failed_node_creations_total.labels(reason=reason)
        for result in ("succeeded", "failed"):
            self.evicted_pods_total.labels(eviction_result=result)
        for direction in ("down", "up"):
            for reason in ("CpuResourceLimit", "MemoryResourceLimit"):
                self.skipped_scale_events_count.inc(0, direction=direction, reason=reason)

    # ------------------------------------------------------------------ helpers

    def update_last_activity(self, activity: str, now: float | None = None) -> None:
        self.last_activity.labels(activity=activity).set(time.time() if now is None else now)

    @contextmanager
    def time_function(self, function: str) -> Iterator[None]:
        """Observe the duration of a block into ``function_duration_seconds{function}``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            self.function_duration_seconds.labels(function=function).observe(elapsed)
            self.function_duration_quantile_seconds.labels(function=function).observe(elapsed)

    def observe_request(
        self, method: str, host: str, code: str, seconds: float, throttled: float
    ) -> None:
        """One request of a Kubernetes client (`clusterscaler.kube.client.RequestObserver`),
        into the `rest_client_*` series. Safe from any thread."""
        self.rest_client_requests_total.labels(code=code, method=method, host=host).inc()
        self.rest_client_request_duration_seconds.labels(verb=method, host=host).observe(seconds)
        self.rest_client_rate_limiter_duration_seconds.labels(verb=method, host=host).observe(
            throttled
        )

    def register_error(self, error_type: str) -> None:
        """Count one failure in ``errors_total{type}``, ``type`` being one of CA's error
        types (``clusterscaler.framework.errors.ErrorType``). Safe from any thread."""
        self.errors_total.labels(type=str(error_type)).inc()

    def update_node_group(self, name: str, *, min_size: int, max_size: int, target: int) -> None:
        """Per node group sizes; a no-op without ``--emit-per-nodegroup-metrics``."""
        if not self.emit_per_nodegroup_metrics:
            return
        self.node_group_min_count.labels(node_group=name).set(min_size)
        self.node_group_max_count.labels(node_group=name).set(max_size)
        self.node_group_target_count.labels(node_group=name).set(target)

    def update_nodes_count(
        self,
        *,
        ready: int,
        unready: int,
        not_started: int,
        long_unregistered: int,
        unregistered: int,
        suspended: int = 0,
    ) -> None:
        for state, value in (
            ("ready", ready),
            ("unready", unready),
            ("notStarted", not_started),
            ("suspended", suspended),
            ("longUnregistered", long_unregistered),
            ("unregistered", unregistered),
        ):
            self.nodes_count.labels(state=state).set(value)

    def record_loop(self, result: LoopResult, publish_seconds: float = 0.0) -> None:
        """Update every metric a finished loop informs, as CA's static autoscaler does.
        `publish_seconds`: what writing the loop's status to the cluster took after it,
        counted in the main duration as CA counts its status ConfigMap's write."""
        from clusterscaler.framework.errors import ErrorType, error_type_of
        from clusterscaler.loop.decisions import DeletionKind, ScaleDownStatus, ScaleUpStatus

        counts = result.health.counts
        self.cluster_safe_to_autoscale.set(1 if result.health.healthy and not result.halted else 0)
        self.update_nodes_count(
            ready=counts.ready,
            unready=counts.unready,
            not_started=counts.not_started,
            long_unregistered=counts.long_unregistered,
            unregistered=counts.unregistered,
            suspended=counts.suspended,
        )
        self.node_groups_count.labels(node_group_type="autoscaled").set(len(result.node_groups))
        # No node autoprovisioning: CA reports the type at 0.
        self.node_groups_count.labels(node_group_type="autoprovisioned").set(0)
        self.unschedulable_pods_count.labels(type="unschedulable").set(len(result.pending_pods))
        # Pods no scheduler has looked at yet are not counted as pending here.
        self.unschedulable_pods_count.labels(type="scheduler_unprocessed").set(0)
        self.max_nodes_count.set(sum(g.max_size for g in result.node_groups))
        seconds = result.duration.total_seconds() + publish_seconds
        self.function_duration_seconds.labels(function="main").observe(seconds)
        self.function_duration_quantile_seconds.labels(function="main").observe(seconds)
        gpus = {g.name: (g.gpu_resource_name, g.gpu_name) for g in result.node_groups}
        dra = {g.name: g.dra_drivers for g in result.node_groups}
        stamp = result.time.timestamp()
        self.update_last_activity("main", stamp)
        if not result.halted:
            self.update_last_activity("autoscaling", stamp)
        for group in result.node_groups:
            self.update_node_group(
                group.name,
                min_size=group.min_size,
                max_size=group.max_size,
                target=group.target_size,
            )
            self.node_group_healthiness.labels(node_group=group.name).set(1 if group.healthy else 0)
            if group.backoff is not None and group.backoff.until > result.time:
                self.node_group_backoff_status.labels(
                    node_group=group.name, reason=group.backoff.error_class
                ).set(1)
        scale_up = result.scale_up
        if scale_up.status is ScaleUpStatus.SUCCESSFUL:
            self.update_last_activity("scaleUp", stamp)
        for decision in scale_up.decisions:
            if decision.delta <= 0:
                continue
            resource, name = gpus.get(decision.node_group, ("", ""))
            self.scaled_up_nodes_total.labels(
                gpu_resource_name=resource,
                gpu_name=name,
                dra_drivers=dra.get(decision.node_group, ""),
            ).inc(decision.delta)
            if name:
                self.scaled_up_gpu_nodes_total.labels(
                    gpu_resource_name=resource, gpu_name=name
                ).inc(decision.delta)
        for failure in result.scale_up_failures:
            resource, name = gpus.get(failure.node_group, ("", ""))
            self.failed_scale_ups_total.labels(
                reason=failure.reason,
                gpu_resource_name=resource,
                gpu_name=name,
                dra_drivers=dra.get(failure.node_group, ""),
            ).inc()
            self.failed_node_creations_total.labels(reason=failure.reason).inc(failure.nodes)
            if name:
                self.failed_gpu_scale_ups_total.labels(
                    reason=failure.reason, gpu_resource_name=resource, gpu_name=name
                ).inc()
        scale_down = result.scale_down
        self.unneeded_nodes_count.set(len(scale_down.unneeded))
        # Deletions run in the background: the nodes whose deletion started and has not
        # finished (or been rolled back) when the loop ended.
        self.pending_node_deletions.set(len(scale_down.in_flight))
        self.unremovable_nodes_count.clear()
        for unremovable in scale_down.unremovable:
            self.unremovable_nodes_count.labels(reason=unremovable.reason.value).inc()
        self.unreadable_objects_count.clear()
        for item in result.unreadable:
            self.unreadable_objects_count.labels(kind=item.kind).inc()
        self.scale_down_in_cooldown.set(
            1 if scale_down.status is ScaleDownStatus.IN_COOLDOWN else 0
        )
        reasons = {
            DeletionKind.EMPTY: "empty",
            DeletionKind.DRAIN: "underutilized",
            DeletionKind.UNREADY: "unready",
        }
        for deletion in scale_down.deletions:
            if deletion.error:
                if deletion.kind is DeletionKind.DRAIN:
                    self.evicted_pods_total.labels(eviction_result="failed").inc()
                # Each deletion is reported once, by the loop after it finished.
                self.register_error(deletion.error_type or ErrorType.INTERNAL)
                continue
            self.update_last_activity("scaleDown", stamp)
            reason = reasons.get(deletion.kind, "undefined")
            resource, name = gpus.get(deletion.node_group, ("", ""))
            self.scaled_down_nodes_total.labels(
                reason=reason,
                gpu_resource_name=resource,
                gpu_name=name,
                dra_drivers=dra.get(deletion.node_group, ""),
            ).inc()
            if name:
                self.scaled_down_gpu_nodes_total.labels(
                    reason=reason, gpu_resource_name=resource, gpu_name=name
                ).inc()
            if deletion.evicted_pods:
                self.evicted_pods_total.labels(eviction_result="succeeded").inc(
                    len(deletion.evicted_pods)
                )
        self._record_skipped_scale_events(result)
        if self._removal_latency is not None:
            for deleted, seconds in self._removal_latency.update(scale_down, result.time):
                self.node_removal_latency_seconds.labels(
                    deleted="true" if deleted else "false"
                ).observe(seconds)
        if self._skip_eval is not None:
            longest = self._skip_eval.update(scale_down, result.time)
            if longest is not None:
                self.max_node_skip_eval_duration_seconds.set(longest)
        removed = [
            c for c in result.cleanups if c.kind is DeletionKind.UNREGISTERED and not c.error
        ]
        if removed:
            self.old_unregistered_nodes_removed_count.inc(len(removed))
        if result.taint_counts is not None:
            self.update_node_taints(result.taint_counts)
        if result.dra_template_mismatch is not None:
            self._record_dra_template_mismatch(result.dra_template_mismatch)
        # Each error by its type (the failed clean-ups are among them); the types are CA's
        # few, so the series stay bounded.
        for error in result.errors:
            self.register_error(error_type_of(error))

    def _record_dra_template_mismatch(self, counts: Mapping[str, Mapping[str, int]]) -> None:
        """dra_node_template_resources_mismatch{driver,mismatch_type}, as CA's comparator
        sets it: every type of each driver with a difference now, and zeros for the
        drivers that had one in the last comparison and have none now."""
        from clusterscaler.simulator.dra_compare import MISMATCH_TYPES

        for driver in sorted(self._dra_mismatch_drivers | set(counts)):
            found = counts.get(driver, {})
            for kind in MISMATCH_TYPES:
                self.dra_node_template_resources_mismatch.labels(
                    driver=driver, mismatch_type=kind
                ).set(found.get(kind, 0))
        self._dra_mismatch_drivers = set(counts)

    def _record_skipped_scale_events(self, result: LoopResult) -> None:
        """skipped_scale_events_count{direction,reason}, as CA counts it: once per node
        group a scale-up skipped and per node a scale-down skipped because of the
        cluster's CPU or memory limits (--cores-total, --memory-total), once for each of
        the two it would cross."""
        from clusterscaler.loop.limits import CPU, MEMORY

        reasons = {CPU: "CpuResourceLimit", MEMORY: "MemoryResourceLimit"}
        exceeded_by_group: dict[str, set[str]] = {}
        for rejections in result.scale_up.group_rejections.values():
            for rejection in rejections:
                if rejection.exceeded:
                    exceeded_by_group.setdefault(rejection.node_group, set()).update(
                        rejection.exceeded
                    )
        for resources in exceeded_by_group.values():
            for resource in resources & reasons.keys():
                self.skipped_scale_events_count.inc(direction="up", reason=reasons[resource])
        for unremovable in result.scale_down.unremovable:
            for resource in set(unremovable.exceeded) & reasons.keys():
                self.skipped_scale_events_count.inc(direction="down", reason=reasons[resource])

    def update_capacity_buffer_reconciliation(self, new: float, reconciled: float) -> None:
        """The oldest creation time of the buffers not reconciled yet (`new_buffer="true"`)
        and the oldest last reconciliation of the others, as Unix timestamps."""
        gauge = self.capacity_buffer_oldest_reconciliation_timestamp_seconds
        gauge.labels(new_buffer="true").set(int(new))
        gauge.labels(new_buffer="false").set(int(reconciled))

    def update_node_taints(self, counts: Mapping[str, int]) -> None:
        """Set node_taints_count{type} to `counts` (taints on the nodes by report type);
        types reported before and absent now are set to 0."""
        for taint_type in self._taint_types - counts.keys():
            self.node_taints_count.labels(type=taint_type).set(0)
        for taint_type, count in counts.items():
            self.node_taints_count.labels(type=taint_type).set(count)
        self._taint_types.update(counts)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        text = generate_latest(self.registry)
        # The text format names a counter family `<name>_total`; CA's counters without the
        # suffix keep their own name in HELP and TYPE, as their samples do.
        for plain in (self.old_unregistered_nodes_removed_count, self.skipped_scale_events_count):
            name = plain.name.encode()
            for prefix in (b"# HELP ", b"# TYPE "):
                text = text.replace(prefix + name + b"_total ", prefix + name + b" ")
        return text


class HealthCheck:
    """``/health-check``: fails after ``max_inactivity`` without activity or
    ``max_failing_time`` without a successful loop, once monitoring has started. Until the
    first successful loop both limits are ``max_startup_time`` instead (--max-startup-time:
    the first loop fills cold caches), never shorter than either of them, as in CA."""

    def __init__(
        self,
        max_inactivity: timedelta,
        max_failing_time: timedelta,
        max_startup_time: timedelta | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_inactivity = max_inactivity.total_seconds()
        self.max_failing_time = max_failing_time.total_seconds()
        startup = 0.0 if max_startup_time is None else max_startup_time.total_seconds()
        self.max_startup_time = max(startup, self.max_inactivity, self.max_failing_time)
        self._initialized = False
        self.clock = clock
        self._lock = threading.Lock()
        self._monitoring = False
        self._last_activity = clock()
        self._last_success = clock()
        # Caches that stopped following the cluster as the last loop saw them: named in
        # every answer. Such loops are not successful, so past --max-failing-time the
        # check fails and a restart relists everything.
        self._stale_caches: tuple[str, ...] = ()

    def start_monitoring(self) -> None:
        with self._lock:
            now = self.clock()
            self._monitoring = True
            self._last_activity = now
            self._last_success = now

    def update_last_activity(self) -> None:
        with self._lock:
            self._last_activity = self.clock()

    def stop_monitoring(self) -> None:
        """Shutdown has begun: no loop runs any more, on purpose. The wait for deletions in
        flight can last longer than --max-inactivity (eviction retries and pod termination
        by the flags' defaults take ~15 minutes), and a liveness probe failing meanwhile
        would kill the process mid-drain, leaving tainted nodes behind."""
        with self._lock:
            self._monitoring = False

    def update_last_successful_run(self) -> None:
        """A loop completed: that is activity too."""
        with self._lock:
            now = self.clock()
            self._last_success = now
            self._last_activity = now
            self._initialized = True

    def update_stale_caches(self, stale: tuple[str, ...]) -> None:
        """The caches the last loop found stale (empty: all current)."""
        with self._lock:
            self._stale_caches = stale

    def check(self) -> tuple[bool, str]:
        """(healthy, message)."""
        with self._lock:
            monitoring = self._monitoring
            now = self.clock()
            inactive = now - self._last_activity
            failing = now - self._last_success
            stale = self._stale_caches
            initialized = self._initialized
        note = (
            "; stale caches, scale-down and instance clean-up paused: " + "; ".join(stale)
            if stale
            else ""
        )
        if not monitoring:
            return True, "OK" + note
        if not initialized:
            if max(inactive, failing) > self.max_startup_time:
                return False, (
                    f"Error: no successful run in the {failing:.0f}s since the start "
                    f"(--max-startup-time {self.max_startup_time:.0f}s)" + note
                )
            return True, "OK" + note
        if inactive > self.max_inactivity:
            return False, (
                f"Error: last activity more than {inactive:.0f}s ago "
                f"(--max-inactivity {self.max_inactivity:.0f}s)" + note
            )
        if failing > self.max_failing_time:
            return False, (
                f"Error: last successful run more than {failing:.0f}s ago "
                f"(--max-failing-time {self.max_failing_time:.0f}s)" + note
            )
        return True, "OK" + note


def parse_address(address: str) -> tuple[str, int]:
    """``--address`` (``:8085``, ``0.0.0.0:8085``, ``[::1]:8085``) as (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--address {address!r}: expected [host]:port such as :8085")
    return host.strip("[]"), int(port)


class OperationsServer:
    """Serves ``/metrics`` and ``/health-check`` (and ``/healthz``) in a background thread."""

    def __init__(self, address: str, metrics: Metrics, health: HealthCheck) -> None:
        self.host, self.port = parse_address(address)
        self.metrics = metrics
        self.health = health
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    body = owner.metrics.render()
                    self._send(200, body, CONTENT_TYPE_LATEST)
                elif path in ("/health-check", "/healthz"):
                    ok, message = owner.health.check()
                    self._send(200 if ok else 500, message.encode(), "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found\n", "text/plain; charset=utf-8")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # scrapes every few seconds would drown the autoscaler's own logs

        httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self.port = int(httpd.server_address[1])
        self._thread = threading.Thread(
            target=httpd.serve_forever, name="operations-server", daemon=True
        )
        self._thread.start()
        log.info("operations_server_started", host=self.host or "0.0.0.0", port=self.port)

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> OperationsServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
