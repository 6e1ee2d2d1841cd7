"""`clusterscaler run`: the autoscaler against a live Kubernetes cluster.

Wires the edges around the loop: the Kubernetes client and caches, the cloud provider, the
actions, events, the status ConfigMap, metrics and `/health-check`, leader election, and
signals. The loop itself (`Autoscaler.run_once`) knows none of them.

Lifecycle: serve `/metrics` and `/health-check`; with `--leader-elect` wait to lead; start the
caches and wait until they have synced; build the provider; then run one loop every
`--scan-interval` until SIGTERM/SIGINT, reporting each result. A loop in progress when the
signal arrives finishes (so a drain completes or is rolled back by the actuator) before the
process exits and releases the Lease. Losing the Lease stops acting at once and exits 1 so
the Deployment restarts the process as a follower.
"""

from __future__ import annotations

import argparse
import queue
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.autoscaler import Autoscaler
from clusterscaler.cloudprovider import CloudProvider, CloudProviderError, ProviderContext
from clusterscaler.dryrun import DryRunCloudProvider
from clusterscaler.events import Event, EventRecorder, EventSink, ObjectRef, events_for_result
from clusterscaler.kube.actions import KubeClusterActions
from clusterscaler.kube.client import ClientSettings, KubeConfigError, build_api_client
from clusterscaler.kube.events import KubeEventSink
from clusterscaler.kube.leaderelection import LeaderElectionConfig, LeaderElector
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.kube.status import KubeStatusWriter
from clusterscaler.metrics import HealthCheck, Metrics, OperationsServer
from clusterscaler.status import status_from_result

if TYPE_CHECKING:
    from clusterscaler.cli import CommandContext
    from clusterscaler.decisions import LoopResult
    from clusterscaler.options import AutoscalingOptions

log = structlog.get_logger()

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2
CACHE_SYNC_TIMEOUT = 300.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`run` takes only the autoscaler flags."""


@dataclass
class Shutdown:
    """Set by SIGTERM/SIGINT; every wait in the run loop watches it."""

    event: threading.Event = field(default_factory=threading.Event)
    reason: str = ""

    def request(self, reason: str) -> None:
        if not self.event.is_set():
            self.reason = reason
            log.info("shutdown_requested", reason=reason)
        self.event.set()

    def install(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.request(signal.Signals(signum).name)

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    def wait(self, seconds: float) -> bool:
        return self.event.wait(max(0.0, seconds))


class BackgroundEventSink:
    """Writes events from a worker thread so the loop never waits on the API server.

    Event writes share the client's rate limit (`--kube-client-qps`); a scale-up that
    triggers thousands of `TriggeredScaleUp` events must not stall the next loop. When the
    queue is full, new events are dropped and counted, as client-go's broadcaster does.
    """

    def __init__(self, sink: EventSink, *, max_queued: int = 1000) -> None:
        self.sink = sink
        self.queue: queue.Queue[tuple[Event, datetime] | None] = queue.Queue(max_queued)
        self.dropped = 0
        self._thread = threading.Thread(target=self._work, name="events", daemon=True)
        self._thread.start()

    def write(self, event: Event, timestamp: datetime) -> None:
        try:
            self.queue.put_nowait((event, timestamp))
        except queue.Full:
            self.dropped += 1
            log.warning("event_dropped", reason=event.reason, object=str(event.involved))

    def _work(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            self.sink.write(*item)

    def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued (up to `timeout`) and stop the worker."""
        try:
            self.queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)


class Reporter:
    """Publishes each loop's result: events, status ConfigMap, metrics, health."""

    def __init__(
        self,
        options: AutoscalingOptions,
        api_client: Any,
        metrics: Metrics,
        health: HealthCheck,
    ) -> None:
        self.options = options
        self.metrics = metrics
        self.health = health
        self.event_sink = BackgroundEventSink(KubeEventSink(api_client))
        self.recorder = EventRecorder(
            self.event_sink,
            record_duplicates=options.record_duplicated_events,
            dry_run=options.dry_run,
        )
        self.status_writer = (
            KubeStatusWriter(
                api_client, namespace=options.namespace, name=options.status_config_map_name
            )
            if options.write_status_configmap
            else None
        )

    def publish(self, result: LoopResult) -> None:
        self.metrics.record_loop(result)
        if self.status_writer is not None:
            self.status_writer.write(status_from_result(result))
        status_ref = ObjectRef.config_map(
            self.options.namespace,
            self.options.status_config_map_name,
            self.status_writer.uid if self.status_writer is not None else "",
        )
        for event in events_for_result(result, status_ref):
            self.recorder.record(event)
        if result.halted or result.errors:
            self.health.update_last_activity()
        else:
            self.health.update_last_successful_run()


def build_provider(ctx: CommandContext, api_client: Any) -> CloudProvider:
    options = ctx.options
    entry = ctx.registry.cloud_providers[options.cloud_provider]
    provider: CloudProvider = entry.factory(ProviderContext(options=options, kube_api=api_client))
    if options.dry_run:
        provider = DryRunCloudProvider(provider)
    return provider


def _wait_for_leadership(elector: LeaderElector, shutdown: Shutdown) -> bool:
    log.info("leader_election_waiting", lease=elector.config.name, identity=elector.identity)
    while not shutdown.requested:
        if elector.wait_for_leadership(1.0):
            return True
    return False


def _wait_for_caches(source: KubeClusterSource, shutdown: Shutdown) -> bool:
    deadline = time.monotonic() + CACHE_SYNC_TIMEOUT
    while not shutdown.requested and time.monotonic() < deadline:
        if source.wait_for_sync(1.0):
            return True
    return False


def run_loop(
    autoscaler: Autoscaler,
    reporter: Reporter,
    options: AutoscalingOptions,
    shutdown: Shutdown,
    elector: LeaderElector | None,
) -> int:
    """Run one loop per scan interval until shutdown; 1 if leadership was lost."""
    interval = options.scan_interval.total_seconds()
    reporter.health.start_monitoring()
    while not shutdown.requested:
        if elector is not None and not elector.is_leader:
            log.error("leadership_lost_stopping", lease=elector.config.name)
            return EXIT_ERROR
        started = time.monotonic()
        try:
            result = autoscaler.run_once(datetime.now(UTC))
            reporter.publish(result)
            log.info(
                "loop_done",
                duration_seconds=round(result.duration.total_seconds(), 3),
                scale_up=result.scale_up.status.value,
                scale_down=result.scale_down.status.value,
                pending_pods=len(result.pending_pods),
                halted=result.halted or None,
            )
        except Exception as exc:  # one bad loop must not end the autoscaler
            log.exception("loop_failed", error=str(exc))
            reporter.metrics.register_error("internalError")
        shutdown.wait(interval - (time.monotonic() - started))
    return EXIT_OK


def run(ctx: CommandContext) -> int:
    options = ctx.options
    shutdown = Shutdown()
    shutdown.install()
    try:
        api_client = build_api_client(ClientSettings.from_options(options))
    except KubeConfigError as exc:
        print(f"clusterscaler: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    metrics = Metrics(emit_per_nodegroup_metrics=options.emit_per_nodegroup_metrics)
    health = HealthCheck(options.max_inactivity, options.max_failing_time)
    try:
        server = OperationsServer(options.address, metrics, health)
        server.start()
    except (ValueError, OSError) as exc:
        print(f"clusterscaler: error: --address {options.address!r}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    log.info("serving", address=f"{server.host}:{server.port}", paths="/metrics,/health-check")
    elector: LeaderElector | None = None
    source: KubeClusterSource | None = None
    provider: CloudProvider | None = None
    try:
        if options.leader_elect:
            elector = LeaderElector(api_client, LeaderElectionConfig.from_options(options))
            elector.start()
            if not _wait_for_leadership(elector, shutdown):
                return EXIT_OK
        source = KubeClusterSource(api_client, namespace=options.namespace)
        source.start()
        if not _wait_for_caches(source, shutdown):
            if shutdown.requested:
                return EXIT_OK
            log.error("cache_sync_timeout", seconds=CACHE_SYNC_TIMEOUT)
            return EXIT_ERROR
        try:
            provider = build_provider(ctx, api_client)
        except CloudProviderError as exc:
            print(f"clusterscaler: error: --cloud-provider={options.cloud_provider}: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        actions = KubeClusterActions(api_client, dry_run=options.dry_run)
        autoscaler = Autoscaler.from_registry(
            ctx.registry, options=options, provider=provider, source=source, actions=actions
        )
        reporter = Reporter(options, api_client, metrics, health)
        log.info(
            "autoscaler_started",
            cloud_provider=options.cloud_provider,
            expander=",".join(options.expander),
            dry_run=options.dry_run,
        )
        try:
            return run_loop(autoscaler, reporter, options, shutdown, elector)
        finally:
            reporter.event_sink.close()
    finally:
        if provider is not None:
            provider.cleanup()
        if source is not None:
            source.stop()
        if elector is not None:
            elector.stop(release=True)
        server.stop()
        log.info("stopped", reason=shutdown.reason or "exit")
