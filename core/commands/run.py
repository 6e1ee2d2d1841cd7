"""`clusterscaler run`: the autoscaler against a live Kubernetes cluster.

`KubeRuntime` (clusterscaler.commands.runtime) is the Kubernetes edge: client, caches, actions,
events, status ConfigMap, metrics server, leader election. This module adds the cloud
provider and runs the loop: wait to lead and for the caches to sync, then one
`Autoscaler.run_once` every `--scan-interval` until SIGTERM/SIGINT, publishing each result.
With --frequent-loops-enabled a loop starts sooner after a productive loop, or when a pod
newly becomes unschedulable (`loop/trigger.py` decides, `kube/podobserver.py` signals).

Node deletions run in the background (a `ThreadedExecutor`), so a slow drain never holds up
the next loop. When the signal arrives, the loop in progress finishes, no new loop starts,
and the process waits for the deletions in flight to finish or roll back (bounded by the
deletion timeouts: --node-delete-delay-after-taint, --max-pod-eviction-time,
--max-graceful-termination-sec and --node-deletion-delay-timeout) and reports their outcome
before it exits and releases the Lease. Losing the Lease stops every
write at once (the actions refuse to act), and the process exits 1 so the Deployment
restarts it as a follower; the next leader removes the deletion taints a dead leader left.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import structlog
from clusterscaler.framework.clusteractions import ClusterActions, TaintsAndCordons
from clusterscaler.framework.dryrun import GuardedCloudProvider, WriteGuard, dry_run_guard
from clusterscaler.framework.errors import ErrorType, LoopAbortedError, describe
from clusterscaler.interfaces.cloudprovider import CloudProvider, CloudProviderError
from clusterscaler.interfaces.providercontext import KubeApiClient, ProviderContext
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.loop.decisions import LoopResult
from clusterscaler.loop.scaledown.actuator import deletion_timeout
from clusterscaler.loop.scaledown.executor import ThreadedExecutor
from clusterscaler.loop.trigger import POD_APPEARED, PRODUCTIVE, LoopTrigger
from clusterscaler.model import Node, Pod, Taint
from clusterscaler.report.events import events_for_result

if TYPE_CHECKING:
    from clusterscaler.commands.cli import CommandContext
    from clusterscaler.commands.runtime import KubeRuntime
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.kube.podobserver import UnschedulablePodObserver

log = structlog.get_logger()

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2
CACHE_SYNC_TIMEOUT = 300.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`run` takes only the autoscaler flags."""


class LeadershipLostError(LoopAbortedError):
    """A write was refused because this process no longer holds the Lease."""


class GuardedActions:
    """Cluster actions that refuse every write once this process may no longer act.

    Checked before each write rather than once per loop, so a leader that cannot renew stops
    changing the cluster mid-drain, not at the end of it.
    """

    def __init__(self, actions: ClusterActions, may_act: Callable[[], bool]) -> None:
        self.actions = actions
        self.may_act = may_act

    def _check(self, action: str) -> None:
        if not self.may_act():
            raise LeadershipLostError(f"{action} refused: this process may no longer act")

    def add_taint(self, node_name: str, taint: Taint) -> None:
        self._check(f"taint node {node_name}")
        self.actions.add_taint(node_name, taint)

    def add_taint_and_cordon(self, node_name: str, taint: Taint) -> None:
        self._check(f"taint and cordon node {node_name}")
        if isinstance(self.actions, TaintsAndCordons):
            self.actions.add_taint_and_cordon(node_name, taint)
        else:
            self.actions.add_taint(node_name, taint)
            self.actions.set_unschedulable(node_name, True)

    def remove_taint(self, node_name: str, key: str) -> bool:
        self._check(f"untaint node {node_name}")
        return self.actions.remove_taint(node_name, key)

    def set_unschedulable(self, node_name: str, unschedulable: bool) -> None:
        self._check(f"cordon node {node_name}")
        self.actions.set_unschedulable(node_name, unschedulable)

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        self._check(f"evict pod {pod.key}")
        self.actions.evict(pod, grace_period_seconds)

    def pod_exists(self, pod: Pod) -> bool:
        return self.actions.pod_exists(pod)

    def registered_instances(self, provider_ids: Collection[str]) -> set[str]:
        return self.actions.registered_instances(provider_ids)

    def read_pods_on_node(self, node_name: str) -> list[Pod]:
        return self.actions.read_pods_on_node(node_name)

    def read_node(self, node_name: str) -> Node | None:
        return self.actions.read_node(node_name)


def leader_guard(may_act: Callable[[], bool]) -> WriteGuard:
    """A cloud write guard that refuses every write once this process may no longer act:
    a deletion in flight when the Lease is lost must not delete a node the next leader may
    already have given back to the scheduler."""

    def guard(action: str, node_group: str, change: object) -> bool:
        if not may_act():
            raise LeadershipLostError(
                f"{action} on node group {node_group} refused: this process may no longer act"
            )
        return True

    return guard


def build_provider(
    ctx: CommandContext, api_client: KubeApiClient, may_act: Callable[[], bool]
) -> CloudProvider:
    """The provider of `--cloud-provider`: inert for writes with `--dry-run`, writing only
    while `may_act()` otherwise."""
    options = ctx.options
    entry = ctx.registry.cloud_providers[options.cloud_provider]
    provider: CloudProvider = entry.factory(ProviderContext(options=options, kube_api=api_client))
    guard = dry_run_guard if options.dry_run else leader_guard(may_act)
    return GuardedCloudProvider(provider, guard)


def _wait_until_ready(runtime: KubeRuntime) -> bool:
    """Lead (when electing) and sync the caches, watching for shutdown; False if stopped."""
    if runtime.elector is not None:
        log.info("leader_election_waiting", lease=runtime.elector.config.name)
        while not runtime.elector.wait_for_leadership(1.0):
            if runtime.shutdown.is_set():
                return False
    deadline = time.monotonic() + CACHE_SYNC_TIMEOUT
    while not runtime.wait_until_ready(1.0):
        if runtime.shutdown.is_set():
            return False
        if time.monotonic() > deadline:
            raise TimeoutError(f"the caches did not sync within {CACHE_SYNC_TIMEOUT:.0f}s")
    return True


def run_loop(autoscaler: Autoscaler, runtime: KubeRuntime, options: AutoscalingOptions) -> int:
    """Loops, each --scan-interval after the previous one ended (with
    --frequent-loops-enabled, at once after a productive loop or when a pod newly becomes
    unschedulable: `LoopTrigger`), until shutdown; 1 when leadership was lost.

    An action on one object that fails (a taint, an eviction, a deletion, an event) fails
    inside the loop, which goes on and reports. What reaches here ended the loop early:
    leadership lost, no view of the cluster (caches not synced), a call about the whole
    cluster that failed. Each is one log line (status and reason, never HTTP headers or
    bodies) and one count in errors_total by its type; a bug's line carries its traceback.
    """
    from clusterscaler.kube.source import CacheNotSyncedError, StaleCacheError

    trigger = LoopTrigger(
        options.scan_interval, frequent_loops_enabled=options.frequent_loops_enabled
    )
    pods = runtime.source.unschedulable_pods

    def interrupt_at_shutdown() -> None:
        # Shutdown (a signal, leadership lost) ends a wait for an unschedulable pod at once.
        runtime.shutdown.wait()
        pods.interrupt()

    threading.Thread(target=interrupt_at_shutdown, name="shutdown-waker", daemon=True).start()
    while not runtime.shutdown.is_set():
        result: LoopResult | None = None
        try:
            result = autoscaler.run_once(datetime.now(UTC))
            runtime.report(result)
            log.info(
                "loop_done",
                duration_seconds=round(result.duration.total_seconds(), 3),
                scale_up=result.scale_up.status.value,
                scale_down=result.scale_down.status.value,
                pending_pods=len(result.pending_pods),
                halted=result.halted or None,
            )
        except LeadershipLostError as exc:
            log.error("leadership_lost", error=str(exc))
        except Exception as exc:  # one bad loop must not end the autoscaler
            # The caches not (or no longer) following the cluster is no bug: the next loop
            # may see it again.
            blind = isinstance(exc, CacheNotSyncedError | StaleCacheError)
            info = describe(exc, default=ErrorType.TRANSIENT if blind else ErrorType.INTERNAL)
            log.error("loop_failed", **info.fields(exc))
            runtime.metrics.register_error(info.type)
        trigger.record(result)
        if not _leads(runtime):
            break
        _wait_for_next_loop(runtime, trigger, pods)
    if not _leads(runtime):
        log.error("leadership_lost_exiting")
        return EXIT_ERROR
    return EXIT_OK


def _wait_for_next_loop(
    runtime: KubeRuntime, trigger: LoopTrigger, pods: UnschedulablePodObserver
) -> None:
    """Wait as `trigger` says, from now (the end of a loop), for the next loop, or until
    shutdown, and log why the next loop starts, as CA does."""
    ended = time.monotonic()
    if trigger.immediate():
        # A pod that appeared meanwhile is named as the reason, and its signal spent.
        reason = POD_APPEARED if pods.take() else PRODUCTIVE
        if not runtime.shutdown.is_set():
            _triggered(reason)
        return
    timeout = trigger.interval
    if not trigger.pod_triggered:
        runtime.shutdown.wait(timeout)
        return
    if pods.wait(timeout):
        runtime.shutdown.wait(trigger.pod_trigger_delay(time.monotonic() - ended))
        reason = POD_APPEARED
    else:
        reason = trigger.timer_reason
    if not runtime.shutdown.is_set():
        _triggered(reason)


def _triggered(reason: str) -> None:
    log.info("loop_triggered", reason=reason)


def finish_deletions(
    autoscaler: Autoscaler, runtime: KubeRuntime, options: AutoscalingOptions
) -> bool:
    """Wait for the deletions in flight (up to the longest a deletion may take by the
    flags) and report how they ended; False when some were still running."""
    in_flight = sorted(autoscaler.deletions_in_flight())
    done = True
    runtime.health.stop_monitoring()
    if in_flight:
        timeout = deletion_timeout(options).total_seconds()
        log.info("waiting_for_deletions", nodes=in_flight, timeout_seconds=timeout)
        done = autoscaler.wait_for_deletions(timeout)
        if not done:
            # The next leader removes the taints these deletions leave.
            log.error(
                "deletions_still_in_flight", nodes=sorted(autoscaler.deletions_in_flight())
            )
    final = autoscaler.report_finished(datetime.now(UTC))
    # Only the events: the status ConfigMap keeps the last loop's view, and after SIGTERM
    # `runtime.report` no longer writes (the process is shutting down, yet still leads).
    if final is not None and _leads(runtime):
        try:
            for event in events_for_result(final, runtime.status_ref):
                runtime.recorder.record(event)
        except Exception as exc:  # the outcome is logged by the actuator either way
            log.error("final_events_failed", error=f"{type(exc).__name__}: {exc}")
    return done


def _clean_up_provider(provider: CloudProvider, *, leads: bool) -> None:
    """The provider's cleanup at exit, by the leader only: after leadership is lost the
    node groups belong to the new leader (CA exits at once then, without its exit cleanup;
    the kwok provider's cleanup deletes the nodes it made). A failing cleanup is logged,
    never a traceback at exit."""
    if not leads:
        log.info("provider_cleanup_skipped", reason="leadership lost")
        return
    try:
        provider.cleanup()
    except Exception as exc:  # the process is ending: report, do not crash
        log.error("provider_cleanup_failed", error=f"{type(exc).__name__}: {exc}")


def _leads(runtime: KubeRuntime) -> bool:
    return runtime.elector is None or runtime.elector.is_leader


def run(ctx: CommandContext) -> int:
    # The Kubernetes edge (and the kubernetes package, about a second to import) is loaded
    # when the loop starts, so `run --help` and flag errors answer at once.
    from clusterscaler.commands.runtime import KubeRuntime
    from clusterscaler.interfaces.cloudprovider import ConfigurationError
    from clusterscaler.kube.client import KubeConfigError

    options = ctx.options
    # The provider's flags (--nodes, --node-group-auto-discovery, --cloud-config, its own)
    # are checked before anything starts: no API client, no metrics server, no Lease.
    try:
        ctx.registry.check_cloud_provider_options(options)
    except ConfigurationError as exc:
        print(
            f"clusterscaler: error: --cloud-provider={options.cloud_provider}: {exc}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        runtime = KubeRuntime.from_options(options)
    except KubeConfigError as exc:
        print(f"clusterscaler: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ValueError as exc:  # --address and other values only checked against the system
        print(f"clusterscaler: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    runtime.install_signal_handlers()
    provider: CloudProvider | None = None
    try:
        runtime.start()
        if not _wait_until_ready(runtime):
            return EXIT_OK
        try:
            provider = build_provider(ctx, runtime.provider_api, lambda: _leads(runtime))
        except CloudProviderError as exc:
            print(
                f"clusterscaler: error: --cloud-provider={options.cloud_provider}: {exc}",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        autoscaler = Autoscaler.from_registry(
            ctx.registry,
            options=options,
            provider=provider,
            source=runtime.source,
            # Leadership, not shutdown: after SIGTERM a drain in progress still finishes or
            # rolls back.
            actions=GuardedActions(runtime.actions, lambda: _leads(runtime)),
            executor=ThreadedExecutor(),
        )
        log.info(
            "autoscaler_started",
            cloud_provider=options.cloud_provider,
            expander=",".join(options.expander),
            dry_run=options.dry_run,
        )
        try:
            return run_loop(autoscaler, runtime, options)
        finally:
            # Before the Lease is released: no other leader may act on these nodes yet.
            finish_deletions(autoscaler, runtime, options)
    except (OSError, TimeoutError) as exc:
        log.error("autoscaler_failed", error=str(exc))
        return EXIT_ERROR
    finally:
        if provider is not None:
            _clean_up_provider(provider, leads=_leads(runtime))
        runtime.stop()
        log.info("stopped")
