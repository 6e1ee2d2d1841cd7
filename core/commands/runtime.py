"""Everything the autoscaling loop needs from Kubernetes, wired from the flags.

``KubeRuntime.from_options(options)`` builds the client (``--kubeconfig``, ``--kubernetes``,
in-cluster; QPS and burst), the cluster source, the actions (inert with ``--dry-run``), the
event recorder (deduplicated unless ``--record-duplicated-events``, marked in dry-run), the
status ConfigMap writer (``--write-status-configmap``), leader election (``--leader-elect``),
the metrics and the ``/metrics`` + ``/health-check`` server on ``--address``.

The loop calls ``may_act()`` before acting (false as soon as leadership is lost),
``source.snapshot()`` to observe, and ``report(result)`` after each loop; ``stop()``
releases the Lease. A SIGTERM sets ``shutdown`` (see ``install_signal_handlers``) so the
loop can finish or roll back an in-flight drain before stopping.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.kube.actions import KubeClusterActions
from clusterscaler.kube.capacitybuffer import CapacityBufferWriter
from clusterscaler.kube.capacityquota import CapacityQuotaStatusWriter
from clusterscaler.kube.client import (
    ClientSettings,
    api_client_from,
    load_configuration,
    observe_all_clients,
    spare_capacity_client,
)
from clusterscaler.kube.eventcorrelator import AUTOSCALER_OPTIONS
from clusterscaler.kube.eventwriter import BackgroundEventSink, KubeEventSink
from clusterscaler.kube.leaderelection import LeaderElectionConfig, LeaderElector
from clusterscaler.kube.provreq import ProvisioningRequestStatusWriter
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.kube.statusconfigmap import KubeStatusWriter
from clusterscaler.report.events import EventRecorder, ObjectRef, events_for_result
from clusterscaler.report.metrics import HealthCheck, Metrics, OperationsServer
from clusterscaler.report.status import initializing_status, status_from_result

if TYPE_CHECKING:
    from clusterscaler.loop.decisions import LoopResult

__all__ = ["KubeRuntime"]

log = structlog.get_logger()


@dataclass
class KubeRuntime:
    """The Kubernetes edge of one autoscaler process."""

    api_client: Any
    source: KubeClusterSource
    actions: KubeClusterActions
    recorder: EventRecorder
    metrics: Metrics
    health: HealthCheck
    server: OperationsServer | None
    status_writer: KubeStatusWriter | None
    elector: LeaderElector | None
    status_ref: ObjectRef
    # The conditions of ProvisioningRequests (--enable-provisioning-requests).
    provreq_writer: ProvisioningRequestStatusWriter | None = None
    # The usage and conditions of CapacityQuotas (--capacity-quotas-enabled).
    quota_writer: CapacityQuotaStatusWriter | None = None
    # The managed PodTemplates and the status of CapacityBuffers
    # (--capacity-buffer-controller-enabled, --capacity-buffer-pod-injection-enabled).
    buffer_writer: CapacityBufferWriter | None = None
    # --capacity-buffer-controller-enabled: its reconciliation metric is exported.
    buffer_controller: bool = False
    # The client the cloud provider is given (`ProviderContext.kube_api`): its own, with
    # its own --kube-client-qps budget, as upstream's providers build theirs (CA's kwok
    # provider: `kubeclient.NewForConfigOrDie`), so that a provider's calls (kwok's node
    # deletions) do not queue behind the loop's taints, the caches and the events, nor
    # they behind it. None: `api_client`.
    provider_api_client: Any = None
    shutdown: threading.Event = field(default_factory=threading.Event)
    _initializing_written: bool = field(default=False, repr=False)

    @classmethod
    def from_options(
        cls,
        options: Any,
        *,
        api_client: Any = None,
        identity: str | None = None,
        serve: bool = True,
    ) -> KubeRuntime:
        """Build from an ``AutoscalingOptions``; ``serve=False`` skips the HTTP server."""
        settings = ClientSettings.from_options(options)
        metrics = Metrics(
            emit_per_nodegroup_metrics=options.emit_per_nodegroup_metrics,
            node_removal_latency_tracking=options.node_removal_latency_tracking_enabled,
            max_node_skip_eval_time_tracking=options.max_node_skip_eval_time_tracker_enabled,
        )
        # Every client of the process counts in the same `rest_client_*` series, as in CA:
        # those built here and any a plugin builds (the kwok provider's, outside a cluster).
        observe = metrics.observe_request
        observe_all_clients(observe)
        # One reading of the kubeconfig for the three clients below.
        configuration = None if api_client is not None else load_configuration(settings)
        api = api_client or api_client_from(settings, configuration, observe)
        health = HealthCheck(
            options.max_inactivity, options.max_failing_time, options.max_startup_time
        )
        elector = None
        if options.leader_elect:
            # As CA: the Lease is renewed through a client of its own, so that the caches'
            # lists and the loop's writes, throttled by --kube-client-qps, never hold a
            # renewal past --leader-elect-renew-deadline.
            lease_api = (
                api if api_client is not None
                else api_client_from(settings, configuration, observe)
            )
            elector = LeaderElector(
                lease_api, LeaderElectionConfig.from_options(options), identity=identity
            )
        writer = None
        if options.write_status_configmap:
            writer = KubeStatusWriter(
                api,
                namespace=options.namespace,
                name=options.status_config_map_name,
                on_error=metrics.register_error,
            )
        buffers = (
            options.capacity_buffer_controller_enabled
            or options.capacity_buffer_pod_injection_enabled
        )
        source = KubeClusterSource(
            api,
            namespace=options.namespace,
            provisioning_requests=options.enable_provisioning_requests,
            capacity_buffers=buffers,
            capacity_quotas=options.capacity_quotas_enabled,
        )
        return cls(
            api_client=api,
            source=source,
            # The node cache tells how to write a taint in one request (see `add_taint`).
            actions=KubeClusterActions(
                api, dry_run=options.dry_run, cached_node=source.cached_node
            ),
            # In the background: a scale-up that triggers thousands of events must not
            # stall the loop. Event writes share the loop's --kube-client-qps, taking only
            # the tokens its requests leave: a scale-down of hundreds of nodes is not
            # slowed by its own events (those that find the queue full are dropped,
            # counted and logged, as client-go's recorder drops them).
            recorder=EventRecorder(
                BackgroundEventSink(
                    KubeEventSink(
                        spare_capacity_client(api, settings, observe),
                        on_error=metrics.register_error,
                        # As CA: client-go's defaults when every duplicate is recorded,
                        # else one event per reason and object every five minutes.
                        correlation=None
                        if options.record_duplicated_events
                        else AUTOSCALER_OPTIONS,
                    )
                ),
                record_duplicates=options.record_duplicated_events,
                dry_run=options.dry_run,
            ),
            metrics=metrics,
            health=health,
            server=OperationsServer(options.address, metrics, health) if serve else None,
            status_writer=writer,
            elector=elector,
            status_ref=ObjectRef.config_map(options.namespace, options.status_config_map_name),
            provreq_writer=ProvisioningRequestStatusWriter(
                api, dry_run=options.dry_run, on_error=metrics.register_error
            )
            if options.enable_provisioning_requests
            else None,
            quota_writer=CapacityQuotaStatusWriter(
                api, dry_run=options.dry_run, on_error=metrics.register_error
            )
            if options.capacity_quotas_enabled
            else None,
            buffer_writer=CapacityBufferWriter(
                api,
                dry_run=options.dry_run,
                dry_run_pods=options.capacity_buffer_pod_dry_run_enabled,
                on_error=metrics.register_error,
            )
            if buffers
            else None,
            buffer_controller=options.capacity_buffer_controller_enabled,
            provider_api_client=(
                None if api_client is not None
                else api_client_from(settings, configuration, observe)
            ),
        )

    @property
    def provider_api(self) -> Any:
        """The Kubernetes client for the cloud provider (see `provider_api_client`)."""
        return self.provider_api_client if self.provider_api_client is not None else self.api_client

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Serve metrics, campaign for leadership and start the caches (all non-blocking)."""
        if self.server is not None:
            self.server.start()
        if self.elector is not None:
            self.elector.on_stopped_leading = self._lost_leadership
            self.elector.start()
        self.source.start()

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        """Block until leader (when electing) and the caches have synced; write Initializing."""
        if self.elector is not None and not self.elector.wait_for_leadership(timeout):
            return False
        if self.status_writer is not None and not self._initializing_written:
            # Once: callers poll this with short timeouts while the caches sync.
            self._initializing_written = True
            self.status_writer.write(initializing_status(datetime.now(UTC)))
        ready = self.source.wait_for_sync(timeout if timeout is not None else 3600.0)
        if ready:
            self.health.start_monitoring()
        return ready

    def may_act(self) -> bool:
        """Whether this process may change the cluster now (leader, not shutting down)."""
        if self.shutdown.is_set():
            return False
        return self.elector is None or self.elector.is_leader

    def report(self, result: LoopResult) -> None:
        """Publish one loop: status ConfigMap, metrics, events, health.

        A process that is not the leader (any more) only updates its own metrics and health:
        the status and events belong to the leader.
        """
        self.health.update_last_activity()
        self.health.update_stale_caches(result.stale_caches)
        started = time.monotonic()
        try:
            if self.may_act():
                self._publish(result)
        finally:
            # CA's main duration covers RunOnce, whose deferred write of the status
            # ConfigMap (and of the requests' conditions) is part of it: so is ours.
            self.metrics.record_loop(result, publish_seconds=time.monotonic() - started)

    def _publish(self, result: LoopResult) -> None:
        """The leader's part of `report`: what the loop writes to the cluster."""
        if self.provreq_writer is not None:
            self.provreq_writer.write(result.provisioning_requests)
        if self.quota_writer is not None:
            self.quota_writer.write(result.capacity_quotas)
        if self.buffer_writer is not None:
            self.buffer_writer.write(result.capacity_buffers, result.time)
            if self.buffer_controller:
                new, reconciled = self.buffer_writer.oldest_reconciliation(
                    result.capacity_buffers, result.time
                )
                self.metrics.update_capacity_buffer_reconciliation(
                    new.timestamp(), reconciled.timestamp()
                )
        if self.status_writer is not None:
            self.status_writer.write(status_from_result(result))
        if self.status_writer is not None and self.status_writer.uid:
            self.status_ref = ObjectRef(
                self.status_ref.kind,
                self.status_ref.name,
                self.status_ref.namespace,
                self.status_writer.uid,
            )
        for event in events_for_result(result, self.status_ref):
            self.recorder.record(event)
        if not result.errors and not result.halted and not result.stale_caches:
            self.health.update_last_successful_run()

    def stop(self) -> None:
        """Stop caches and server; release the Lease so a standby takes over at once."""
        self.shutdown.set()
        if isinstance(self.recorder.sink, BackgroundEventSink):
            self.recorder.sink.close()
        if self.elector is not None:
            self.elector.stop(release=True)
        self.source.stop()
        if self.server is not None:
            self.server.stop()
        # Clients built after this one stopped are not its to count.
        observe_all_clients(None)

    def _lost_leadership(self) -> None:
        log.error("leadership_lost_stopping")
        self.shutdown.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT set ``shutdown`` (main thread only)."""

        def handle(signum: int, _frame: Any) -> None:
            log.info("shutdown_requested", signal=signal.Signals(signum).name)
            self.shutdown.set()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)
