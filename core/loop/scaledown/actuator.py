"""Carrying out scale-down: taint, cordon, evict, delete, and undo on failure.

(Long on purpose: each step's failure must roll back the steps before it, so the steps
and their rollbacks are kept in one place.)

A node chosen for deletion first gets the `ToBeDeletedByClusterAutoscaler` NoSchedule taint
(value: unix time) and, with --cordon-node-before-terminating, is cordoned; this happens in
the loop. The rest runs on a `DeletionExecutor` (in the background for `clusterscaler run`)
and is tracked by the `DeletionTracker` until it finishes. Empty nodes are deleted through
their node group --node-delete-delay-after-taint later (their DaemonSet pods evicted first
with --daemonset-eviction-for-empty-nodes). A node to drain has its pods evicted through the
Eviction API (those of the plan and any bound to it since, re-read after the taint), each
retried every 10s while its PDB refuses, until --max-pod-eviction-time; then the actuator
waits for them to terminate (their grace period, capped by --max-graceful-termination-sec,
plus 30s) before deleting the node. Drains run in parallel.
Any failure removes the taint, uncordons, and is reported in the `NodeDeletion` with CA's
error type; nothing is deleted on a guess.

The nodes of a zero-or-max (atomic) node group are deleted together, as CA's group deletion
scheduler does: all tainted or none, each prepared (drained) on its own, then deleted with
one `delete_nodes` call once all are ready (`atomic.AtomicDeletion`). When one fails, the
whole group is rolled back and each of its nodes reported failed.

A failed API or cloud call fails that one node's deletion (or soft taint) only: it is logged
on one line (the node, the step, status and reason, never HTTP headers or bodies) and the
other nodes go on. Only a `LoopAbortedError` (this process may no longer act) is let through.

Unneeded nodes get the soft `DeletionCandidateOfClusterAutoscaler` PreferNoSchedule taint
(at most --max-bulk-soft-taint-count changes per loop), removed once they are needed again.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import structlog
from clusterscaler.framework.clusteractions import (
    ClusterActions,
    EvictionError,
    NodeNotFoundError,
    TaintsAndCordons,
)
from clusterscaler.framework.errors import (
    ErrorInfo,
    ErrorType,
    LoopAbortedError,
    LoopError,
    describe,
    describe_error,
)
from clusterscaler.interfaces.cloudprovider import NodeGroup
from clusterscaler.interfaces.clusterview import Clock, ClusterSource
from clusterscaler.loop.decisions import DeletionKind, NodeDeletion, TaintCleanup
from clusterscaler.loop.scaledown.atomic import AtomicDeletion, Waiting
from clusterscaler.loop.scaledown.batcher import DeletionBatcher
from clusterscaler.loop.scaledown.budgets import RemovableNode
from clusterscaler.loop.scaledown.executor import DeletionExecutor, InlineExecutor
from clusterscaler.loop.scaledown.tracker import DeletionTracker
from clusterscaler.loop.taints import DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT
from clusterscaler.model import Node, Pod, Taint
from clusterscaler.simulator.drain import daemonset_pods_to_evict

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

log = structlog.get_logger()

EVICTION_RETRY_SECONDS = 10.0
TERMINATION_POLL_SECONDS = 5.0
TERMINATION_EXTRA_SECONDS = 30
DEFAULT_GRACE_SECONDS = 30
DELETION_MARGIN_SECONDS = 30


DELAY_DELETION_PREFIX = "delay-deletion.cluster-autoscaler.kubernetes.io/"
DELAY_DELETION_POLL_SECONDS = 5.0


def deletion_timeout(options: AutoscalingOptions) -> timedelta:
    """The longest one deletion can take by the flags: the wait after tainting, the
    eviction retries, the pods' termination, a delay-deletion annotation, and a margin for
    the API and cloud calls, and the wait of a --node-deletion-batcher-interval batch.
    Shutdown waits this long for deletions in flight."""
    return (
        options.node_delete_delay_after_taint
        + options.max_pod_eviction_time
        + timedelta(seconds=options.max_graceful_termination_sec + TERMINATION_EXTRA_SECONDS)
        + (options.node_deletion_delay_timeout or timedelta(0))
        + options.node_deletion_batcher_interval
        + timedelta(seconds=DELETION_MARGIN_SECONDS)
    )


def _delays_deletion(node: Node) -> bool:
    return any(k.startswith(DELAY_DELETION_PREFIX) for k in node.annotations)


def priority_groups(
    config: Sequence[tuple[int, int]], pods: Sequence[Pod]
) -> list[tuple[int, list[Pod]]]:
    """`pods` split by --drain-priority-config (priority, grace seconds) as CA's priority
    evictor splits them: one group per entry, by ascending priority, each with its grace
    period. A pod (no priority: 0) goes to the entry with the highest priority not above
    its own, or to the lowest entry when all are above it."""
    entries = sorted(config)
    groups: list[tuple[int, list[Pod]]] = [(grace, []) for _, grace in entries]
    for pod in pods:
        priority = pod.priority or 0
        index = 0
        for i, (entry_priority, _) in enumerate(entries):
            if entry_priority <= priority:
                index = i
        groups[index][1].append(pod)
    return groups


class DeletionFailed(Exception):
    """One step of deleting a node failed; the message names the node and the step.

    `action` is the step (taint, cordon, evict, wait, delete, ...), `objects` what it
    acted on besides the node (`pod=`), `info` the failure: CA's error type, the status
    and the reason, for the log line and errors_total; `exc` the exception it came from,
    if any (a bug's traceback); `pods` the pods that could not be evicted, if that is
    what failed."""

    def __init__(self, message: str, info: ErrorInfo, action: str, **objects: str) -> None:
        super().__init__(message)
        self.info = info
        self.action = action
        self.objects = objects
        self.exc: BaseException | None = None
        self.pods: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        node: str,
        action: str,
        doing: str,
        exc: BaseException,
        *,
        remote: ErrorType = ErrorType.API_CALL,
        default: ErrorType = ErrorType.INTERNAL,
        **objects: str,
    ) -> DeletionFailed:
        """`doing` (`action`) on `node` raised `exc`; see `describe` for `remote` and
        `default`."""
        info = describe(exc, remote=remote, default=default)
        failure = cls(f"node {node}: {doing} failed: {info}", info, action, **objects)
        failure.exc = exc
        return failure


def to_be_deleted_taint(now: datetime) -> Taint:
    return Taint(TO_BE_DELETED_TAINT, str(int(now.timestamp())), "NoSchedule")


def deletion_candidate_taint(now: datetime) -> Taint:
    return Taint(DELETION_CANDIDATE_TAINT, str(int(now.timestamp())), "PreferNoSchedule")


AUTOSCALER_TAINTS = (TO_BE_DELETED_TAINT, DELETION_CANDIDATE_TAINT)


def has_autoscaler_taint(node: Node) -> bool:
    """Whether the node carries a taint this autoscaler sets."""
    return any(has_taint(node, key) for key in AUTOSCALER_TAINTS)


def has_taint(node: Node, key: str) -> bool:
    return any(t.key == key for t in node.taints)


@dataclass(slots=True)
class _Tainted:
    """A node deleted with others (the rest of its zero-or-max group, or a batch of
    --node-deletion-batcher-interval); `evicted` collects the pods evicted while it is
    prepared."""

    r: RemovableNode
    drain: bool
    cordoned: bool
    evicted: list[str] = field(default_factory=list)


class Actuator:
    """Executes deletions chosen by the planner."""

    def __init__(
        self,
        actions: ClusterActions,
        options: AutoscalingOptions,
        clock: Clock,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        source: ClusterSource | None = None,
        executor: DeletionExecutor | None = None,
        tracker: DeletionTracker | None = None,
    ) -> None:
        self.source = source
        self.executor: DeletionExecutor = executor or InlineExecutor()
        self.tracker = tracker or DeletionTracker()
        self.actions = actions
        self.options = options
        self.clock = clock
        self.monotonic = monotonic
        # Failures of the actions the loop ran itself (soft taints), for its result; node
        # deletions report theirs through the tracker. Only the loop's thread uses it.
        self._loop_errors: list[LoopError] = []
        self._taint_cleanups: list[TaintCleanup] = []
        # Nodes whose rollback could not remove our taint (from any thread): the loop
        # retries them with the taints an earlier run left (`take_untaint_failures`).
        self._untaint_failed: set[str] = set()
        self._untaint_lock = threading.Lock()
        # Held by the loop while it runs and by deletions around `delete_nodes`: providers
        # are not required to be thread-safe, so the cloud is never called from two threads
        # at once. Reentrant because the inline executor deletes from the loop's thread.
        self.provider_lock = threading.RLock()
        # --node-deletion-batcher-interval: the nodes of a group ready within it are deleted
        # with one call; without it, each node as soon as it is ready. The inline executor
        # (the simulator's) runs every deletion at once: nothing could join a batch, and its
        # wait would only move the simulated clock inside the loop.
        interval = options.node_deletion_batcher_interval.total_seconds()
        self.batcher: DeletionBatcher[_Tainted] | None = (
            DeletionBatcher(interval, self.executor, clock.sleep, self._delete_batch)
            if interval > 0 and not isinstance(self.executor, InlineExecutor)
            else None
        )

    # ------------------------------------------------------------------ taints

    def clean_stale_taints(self, nodes: Iterable[Node]) -> tuple[list[str], list[str]]:
        """Remove autoscaler taints left by an earlier run (e.g. after a crash), node by
        node: a failure on one node is logged and leaves the others to be cleaned.

        Returns the nodes cleaned and the nodes whose cleaning failed (to retry)."""
        cleaned: set[str] = set()
        failed: list[str] = []
        for node in nodes:
            try:
                for key in AUTOSCALER_TAINTS:
                    # Asked of the node as it is now, not as a cache last saw it.
                    if not self.actions.remove_taint(node.name, key):
                        continue
                    cleaned.add(node.name)
                    self._taint_cleanups.append(TaintCleanup(node.name, key))
                    if key == TO_BE_DELETED_TAINT and node.unschedulable:
                        # We cordoned it before the crash; give it back to the scheduler.
                        self.actions.set_unschedulable(node.name, False)
                    log.info("stale_taint_removed", node=node.name, taint=key)
            except NodeNotFoundError:
                continue
            except Exception as exc:
                info = describe(exc)
                log.error("stale_taint_removal_failed", node=node.name, **info.fields(exc))
                self._taint_cleanups.append(TaintCleanup(node.name, key, str(exc)))
                self._loop_errors.append(
                    LoopError(f"node {node.name}: removing a stale taint failed: {info}", info.type)
                )
                failed.append(node.name)
        return sorted(cleaned), failed

    def take_taint_cleanups(self) -> list[TaintCleanup]:
        """The stale taints removed, or whose removal failed, since the last call."""
        cleanups, self._taint_cleanups = self._taint_cleanups, []
        return cleanups

    def take_untaint_failures(self) -> set[str]:
        """The nodes whose rollback left our taint on since the last call."""
        with self._untaint_lock:
            failed, self._untaint_failed = self._untaint_failed, set()
        return failed

    def take_errors(self) -> list[LoopError]:
        """The failures of the actions the loop ran since the last call (soft taints)."""
        errors, self._loop_errors = self._loop_errors, []
        return errors

    def update_soft_taints(
        self, nodes: Sequence[Node], unneeded: Iterable[str], now: datetime
    ) -> tuple[list[str], list[str]]:
        """Soft-taint unneeded nodes and untaint the others, within
        --max-bulk-soft-taint-count changes and --max-bulk-soft-taint-time. A node whose
        change fails is logged and left for the next loop (see `take_errors`); the
        others are changed.

        Returns the nodes tainted and untainted.
        """
        budget = self.options.max_bulk_soft_taint_count
        deadline = self.monotonic() + self.options.max_bulk_soft_taint_time.total_seconds()
        if budget <= 0 or self.options.dry_run:
            return [], []
        wanted = set(unneeded)
        tainted: list[str] = []
        untainted: list[str] = []
        for node in sorted(nodes, key=lambda n: n.name):
            if budget <= 0 or self.monotonic() > deadline:
                break
            present = has_taint(node, DELETION_CANDIDATE_TAINT)
            action = ""
            try:
                if node.name in wanted and not present:
                    action = "add_soft_taint"
                    self.actions.add_taint(node.name, deletion_candidate_taint(now))
                    tainted.append(node.name)
                    budget -= 1
                elif node.name not in wanted and present:
                    action = "remove_soft_taint"
                    self.actions.remove_taint(node.name, DELETION_CANDIDATE_TAINT)
                    untainted.append(node.name)
                    budget -= 1
            except LoopAbortedError:
                raise
            except NodeNotFoundError:
                continue
            except Exception as exc:
                # The write counts against the budget: a failing API server is not hit
                # harder because of the failures.
                budget -= 1
                info = describe(exc)
                log.error("soft_taint_failed", action=action, node=node.name, **info.fields(exc))
                self._loop_errors.append(
                    LoopError(f"node {node.name}: {action} failed: {info}", info.type)
                )
        return tainted, untainted

    # ------------------------------------------------------------------ deletion

    def start(
        self,
        empty: Sequence[RemovableNode],
        drain: Sequence[RemovableNode],
        groups: Mapping[str, NodeGroup],
        now: datetime,
    ) -> list[NodeDeletion]:
        """Start deleting `empty` and `drain` nodes; returns the deletions started.

        As in CA, the nodes are tainted (and cordoned) here, so the scheduler stops placing
        pods on them before this returns; the rest runs on the executor and reports its
        outcome to the tracker. A node whose taint fails is reported as finished (failed)
        at once and is not returned; the other nodes go on.

        A `LoopAbortedError` (this process may no longer act) stops everything: no
        deletion is handed to the executor, and the nodes tainted so far are reported as
        interrupted (the next leader removes their taints).
        """
        if self.options.dry_run:
            dry = [
                self._deletion(r, not r.empty) for r in (*empty, *drain)
            ]
            for d in dry:
                self.tracker.finish(d)
            return dry
        tainted_empty: list[tuple[RemovableNode, bool]] = []
        tainted_drain: list[tuple[RemovableNode, bool]] = []
        # Zero-or-max groups: (node, drain) per group, each group tainted whole or not at all.
        together: dict[str, list[tuple[RemovableNode, bool]]] = {}
        for r, is_drain in (*((r, False) for r in empty), *((r, True) for r in drain)):
            if r.atomic:
                together.setdefault(r.node_group, []).append((r, is_drain))
        tainted_groups: list[list[_Tainted]] = []
        try:
            for r in empty:
                if r.atomic:
                    continue
                cordoned = self._start_one(r, now, drain=False)
                if cordoned is not None:
                    tainted_empty.append((r, cordoned))
            for r in drain:
                if r.atomic:
                    continue
                cordoned = self._start_one(r, now, drain=True)
                if cordoned is not None:
                    tainted_drain.append((r, cordoned))
            for gid in sorted(together):
                self._start_group(together[gid], now, tainted_groups)
        except LoopAbortedError as exc:
            for r, _ in tainted_empty:
                self._interrupted(r, drain=False, why=describe_error(exc))
            for r, _ in tainted_drain:
                self._interrupted(r, drain=True, why=describe_error(exc))
            for tainted in tainted_groups:
                for t in tainted:
                    self._interrupted(t.r, drain=t.drain, why=describe_error(exc))
            raise
        if tainted_empty:
            self.executor.submit(
                f"empty-{tainted_empty[0][0].node.name}",
                functools.partial(self._delete_empty, list(tainted_empty), groups),
            )
        for r, cordoned in tainted_drain:
            self.executor.submit(
                r.node.name, functools.partial(self._report, r, groups, cordoned, drain=True)
            )
        for tainted in tainted_groups:
            self._submit_group(tainted, groups)
        return [
            *(self._deletion(r, False) for r, _ in tainted_empty),
            *(self._deletion(r, True) for r, _ in tainted_drain),
            *(self._deletion(t.r, t.drain) for tainted in tainted_groups for t in tainted),
        ]

    def _start_one(self, r: RemovableNode, now: datetime, *, drain: bool) -> bool | None:
        """Taint the node and record it in flight; None when tainting failed (reported)."""
        try:
            cordoned = self._taint(r.node.name, now)
        except DeletionFailed as exc:
            self.tracker.finish(self._failed(r, drain, [], exc))
            return None
        self.tracker.start(r.node.name, r.node_group, drain=drain, now=now)
        log.info(
            "scale_down_started",
            node=r.node.name,
            node_group=r.node_group,
            kind=self._kind(r, drain).value,
        )
        return cordoned

    def _interrupted(self, r: RemovableNode, *, drain: bool, why: str) -> None:
        """Report a deletion that stopped before its outcome was known; its taint stays
        for the next leader (or the next start) to remove."""
        self.tracker.finish(
            NodeDeletion(
                r.node.name,
                r.node_group,
                self._kind(r, drain),
                error=f"interrupted: {why}" if why else "interrupted",
                error_type=ErrorType.TRANSIENT,
                drain=drain,
            )
        )

    def _delete_empty(
        self, tainted: Sequence[tuple[RemovableNode, bool]], groups: Mapping[str, NodeGroup]
    ) -> None:
        """Empty nodes are deleted --node-delete-delay-after-taint after their taint, so
        that the scheduler sees the taint before the nodes disappear; then each on its own
        (as CA's `deleteNodesAsync` starts one deletion per node), so that one node's
        fresh read of its pods and its cloud call do not wait for the others'."""
        delay = self.options.node_delete_delay_after_taint.total_seconds()
        if delay > 0:
            try:
                self.clock.sleep(delay)
            except Exception as exc:
                log.error("scale_down_delay_failed", **describe(exc).fields(exc))
        for r, cordoned in tainted:
            self.executor.submit(
                r.node.name, functools.partial(self._report, r, groups, cordoned, drain=False)
            )

    def _report(
        self,
        r: RemovableNode,
        groups: Mapping[str, NodeGroup],
        cordoned: bool,
        *,
        drain: bool,
    ) -> None:
        """Finish one node's deletion and make sure its outcome reaches the tracker: a node
        left in flight would count against the budgets and stay out of scale-down forever."""
        name = r.node.name
        try:
            group = groups.get(r.node_group)
            if group is None:
                self._rollback(name, True, cordoned)
                info = ErrorInfo(ErrorType.NODE_GROUP_DOES_NOT_EXIST, "NodeGroupNotFound")
                message = f"node {name}: node group {r.node_group} is gone"
                failure = DeletionFailed(message, info, "delete")
                self.tracker.finish(self._failed(r, drain, [], failure))
            else:
                self._finish(r, group, cordoned, drain=drain)
        finally:
            batched = self.batcher is not None and self.batcher.holds(name)
            if name in self.tracker.in_flight() and not batched:
                # Interrupted (the process is exiting): the next leader removes the taint.
                self._interrupted(r, drain=drain, why="")

    def _taint(self, name: str, now: datetime) -> bool:
        """Taint (and cordon) a node for deletion; returns whether it was cordoned. On a
        failure nothing of ours is left on the node (as far as the API server lets us)."""
        taint = to_be_deleted_taint(now)
        cordon = self.options.cordon_node_before_terminating
        if cordon and isinstance(self.actions, TaintsAndCordons):
            # One write, as CA's `MarkToBeDeleted`. After a failure our taint goes; a
            # cordon that may have been written with it stays (it may have been there
            # before), as after a failed cordon.
            actions = self.actions
            self._write_or_undo(
                name,
                "taint",
                "tainting and cordoning",
                lambda: actions.add_taint_and_cordon(name, taint),
            )
            return True
        # The write may have been applied although its answer failed (a timeout, a
        # proxy's 500): the node must not keep the taint.
        self._write_or_undo(name, "taint", "tainting", lambda: self.actions.add_taint(name, taint))
        if cordon:
            self._write_or_undo(
                name,
                "cordon",
                "cordoning",
                lambda: self.actions.set_unschedulable(name, True),
            )
        return cordon

    def _write_or_undo(
        self, name: str, action: str, doing: str, write: Callable[[], object]
    ) -> None:
        """One write of a deletion's start; on a failure, our taint is taken off the node
        (unless the node is gone) and the failure raised as a `DeletionFailed`."""
        try:
            write()
        except LoopAbortedError:
            raise
        except Exception as exc:
            failure = DeletionFailed.of(name, action, doing, exc)
            if not isinstance(exc, NodeNotFoundError):
                self._rollback(name, True, False)
            raise failure from exc

    @staticmethod
    def _kind(r: RemovableNode, drain: bool) -> DeletionKind:
        if not r.ready:
            return DeletionKind.UNREADY
        return DeletionKind.DRAIN if drain else DeletionKind.EMPTY

    @classmethod
    def _deletion(
        cls, r: RemovableNode, drain: bool, evicted: Sequence[str] = ()
    ) -> NodeDeletion:
        """Node `r`'s deletion, started or done (evicting `evicted`)."""
        return NodeDeletion(
            r.node.name, r.node_group, cls._kind(r, drain), tuple(evicted), drain=drain
        )

    def _failed(
        self, r: RemovableNode, drain: bool, evicted: list[str], failure: DeletionFailed
    ) -> NodeDeletion:
        """The one log line of a failed deletion, and its outcome for the tracker."""
        kind = self._kind(r, drain)
        log.error(
            "scale_down_failed",
            node=r.node.name,
            node_group=r.node_group,
            kind=kind.value,
            action=failure.action,
            **failure.objects,
            **failure.info.fields(failure.exc),
        )
        return NodeDeletion(
            r.node.name,
            r.node_group,
            kind,
            tuple(evicted),
            str(failure),
            error_type=failure.info.type,
            drain=drain,
            failed_step=failure.action,
            failed_pods=failure.pods,
        )

    def _finish(self, r: RemovableNode, group: NodeGroup, cordoned: bool, *, drain: bool) -> None:
        """Evict what must go and delete the tainted node; roll back on failure. The outcome
        goes to the tracker; a success is recorded under the provider lock, so a loop never
        sees the group's smaller target without the finished deletion (or the reverse)."""
        name = r.node.name
        kind = self._kind(r, drain)
        evicted: list[str] = []
        try:
            self._prepare(r, drain=drain, evicted=evicted)
            if self.batcher is not None:
                # Deleted with the nodes of its group ready within the interval.
                self.batcher.add(group, name, _Tainted(r, drain, cordoned, evicted))
                return
            with self.provider_lock:
                try:
                    group.delete_nodes([r.node])
                except Exception as exc:
                    # As CA: whatever the provider raises is a cloud provider error.
                    raise DeletionFailed.of(
                        name,
                        "delete",
                        f"deleting it through node group {group.id}",
                        exc,
                        remote=ErrorType.CLOUD_PROVIDER,
                        default=ErrorType.CLOUD_PROVIDER,
                    ) from exc
                log.info(
                    "scale_down",
                    node=name,
                    node_group=r.node_group,
                    kind=kind.value,
                    evicted=len(evicted),
                )
                self.tracker.finish(self._deletion(r, drain, evicted))
        except DeletionFailed as exc:
            self._rollback(name, True, cordoned)
            self.tracker.finish(self._failed(r, drain, evicted, exc))
        except Exception as exc:
            # Whatever failed (an API error, leadership lost, a bug), the node must not stay
            # tainted.
            self._rollback(name, True, cordoned)
            failure = DeletionFailed.of(name, "drain" if drain else "delete", "deleting", exc)
            self.tracker.finish(self._failed(r, drain, evicted, failure))

    def _prepare(self, r: RemovableNode, *, drain: bool, evicted: list[str]) -> None:
        """What comes before the cloud call: evict the pods that must go (their keys are
        added to `evicted` as they go) and wait for delay-deletion annotations. Raises on
        failure."""
        name = r.node.name
        if not r.ready:
            self._confirm_unready(name)
        evict_ds = (
            self.options.daemonset_eviction_for_occupied_nodes
            if drain
            else self.options.daemonset_eviction_for_empty_nodes
        )
        # Only pods bound to this node are evicted: the plan may also hold pending pods the
        # simulation expected the scheduler to put here, which must not be touched.
        to_move = [p for p in r.plan.to_move if p.node_name == name]
        # DaemonSet pods whose budgets the plan gave to other removals are not evicted:
        # the API server would refuse them, or let them take a disruption a pod to move
        # needs (they go with their node).
        kept = {p.key for p in r.plan.daemonset_kept}
        daemons = [p for p in r.plan.daemonset if p.node_name == name and p.key not in kept]
        # Pods the plan chose to leave (skipped) stay left.
        late, late_daemons = self._bound_since_plan(
            name, [*to_move, *daemons, *r.plan.daemonset_kept, *r.plan.skipped]
        )
        daemons.extend(late_daemons)
        by_priority = bool(self.options.drain_priority_config)
        if drain:
            to_move.extend(late)
            if by_priority:
                # As CA's priority evictor: the DaemonSet pods to evict are drained with
                # the others, in their priority group, and must go too.
                to_move.extend(daemonset_pods_to_evict(daemons, by_default=evict_ds))
                daemons = []
                evicted.extend(self._evict_by_priority(name, to_move, required=True))
            else:
                evicted.extend(self._evict_all(name, to_move, required=True))
        elif late:
            # The node was chosen as empty: pods that run on it now had no place planned.
            raise DeletionFailed(
                f"node {name}: not empty any more: {len(late)} pod(s) bound since the plan "
                f"({', '.join(sorted(p.key for p in late)[:3])})",
                ErrorInfo(ErrorType.TRANSIENT, "NotEmpty"),
                "delete",
            )
        daemons = daemonset_pods_to_evict(daemons, by_default=evict_ds)
        if daemons and by_priority:
            evicted.extend(self._evict_by_priority(name, daemons, required=False))
        elif daemons:
            # DaemonSet pods are evicted best-effort: they do not hold the node back.
            evicted.extend(self._evict_all(name, daemons, required=False))
        self._wait_for_delay_deletion(r.node)

    # ------------------------------------------------------------------ zero-or-max groups

    def _start_group(
        self,
        members: Sequence[tuple[RemovableNode, bool]],
        now: datetime,
        started: list[list[_Tainted]],
    ) -> None:
        """Taint all the nodes of one zero-or-max group and record them in flight, adding
        them to `started`; when one cannot be tainted, roll back those tainted before it
        and report every node of the group failed (none is added)."""
        tainted: list[_Tainted] = []
        # Visible to the caller at once: a `LoopAbortedError` reports them interrupted.
        started.append(tainted)
        for i, (r, drain) in enumerate(members):
            try:
                cordoned = self._taint(r.node.name, now)
            except DeletionFailed as exc:
                started.remove(tainted)
                self.tracker.finish(self._failed(r, drain, [], exc))
                why = f"node {r.node.name}: {exc.action} failed"
                for t in tainted:
                    self._rollback(t.r.node.name, True, t.cordoned)
                    self._group_failed(t.r, t.drain, [], why)
                for other, other_drain in members[i + 1 :]:
                    self._group_failed(other, other_drain, [], why)
                return
            self.tracker.start(r.node.name, r.node_group, drain=drain, now=now)
            log.info(
                "scale_down_started",
                node=r.node.name,
                node_group=r.node_group,
                kind=self._kind(r, drain).value,
                atomic=True,
            )
            tainted.append(_Tainted(r, drain, cordoned))

    def _submit_group(self, tainted: Sequence[_Tainted], groups: Mapping[str, NodeGroup]) -> None:
        """Hand a tainted zero-or-max group to the executor: its empty nodes in one work
        (after --node-delete-delay-after-taint), each node to drain in its own."""
        gid = tainted[0].r.node_group
        deletion: AtomicDeletion[_Tainted] = AtomicDeletion(gid, [t.r.node.name for t in tainted])
        empties = [t for t in tainted if not t.drain]
        if empties:

            def delete_empty() -> None:
                delay = self.options.node_delete_delay_after_taint.total_seconds()
                if delay > 0:
                    try:
                        self.clock.sleep(delay)
                    except Exception as exc:
                        log.error("scale_down_delay_failed", **describe(exc).fields(exc))
                for t in empties:
                    self._report_together(t, deletion, groups)

            self.executor.submit(f"atomic-empty-{empties[0].r.node.name}", delete_empty)
        for t in tainted:
            if t.drain:
                self.executor.submit(
                    t.r.node.name,
                    functools.partial(self._report_together, t, deletion, groups),
                )

    def _report_together(
        self,
        t: _Tainted,
        deletion: AtomicDeletion[_Tainted],
        groups: Mapping[str, NodeGroup],
    ) -> None:
        """Prepare one node of a zero-or-max group; the last one ready deletes them all.
        Its outcome, and that of the nodes it fails or deletes, reach the tracker."""
        r = t.r
        name = r.node.name
        try:
            if deletion.failure:
                # Another node of the group failed: this one is not even drained.
                self._rollback(name, True, t.cordoned)
                self._group_failed(r, t.drain, [], deletion.failure)
                return
            group = groups.get(r.node_group)
            failure: DeletionFailed | None = None
            try:
                if group is None:
                    raise DeletionFailed(
                        f"node {name}: node group {r.node_group} is gone",
                        ErrorInfo(ErrorType.NODE_GROUP_DOES_NOT_EXIST, "NodeGroupNotFound"),
                        "delete",
                    )
                self._prepare(r, drain=t.drain, evicted=t.evicted)
            except DeletionFailed as exc:
                failure = exc
            except Exception as exc:
                failure = DeletionFailed.of(name, "drain" if t.drain else "delete", "deleting", exc)
            if failure is not None:
                self._rollback(name, True, t.cordoned)
                self.tracker.finish(self._failed(r, t.drain, t.evicted, failure))
                why = f"node {name}: {failure.action} failed"
                for w in deletion.fail(why):
                    self._rollback(w.name, True, w.item.cordoned)
                    self._group_failed(w.item.r, w.item.drain, w.item.evicted, why)
                return
            assert group is not None
            waiting = deletion.ready(name, t)
            if waiting is None:
                self._rollback(name, True, t.cordoned)
                self._group_failed(r, t.drain, t.evicted, deletion.failure)
            elif waiting:
                self._delete_together(group, waiting)
        except BaseException:
            # Interrupted (the process is exiting): the next leader removes the taints.
            for w in deletion.fail("interrupted"):
                self._interrupted(w.item.r, drain=w.item.drain, why="")
            if name in self.tracker.in_flight():
                self._interrupted(r, drain=t.drain, why="")
            raise

    def _delete_batch(self, group: NodeGroup, items: list[_Tainted]) -> None:
        """Delete one batch of --node-deletion-batcher-interval with one call."""
        self._delete_together(group, [Waiting(t.r.node.name, t) for t in items], atomic=False)

    def _delete_together(
        self, group: NodeGroup, waiting: Sequence[Waiting[_Tainted]], *, atomic: bool = True
    ) -> None:
        """Delete all the nodes of a zero-or-max group (or of a batch) with one call; on
        failure, roll every one back. Successes are recorded under the provider lock (see
        `_finish`)."""
        items = [w.item for w in waiting]
        try:
            error: Exception | None = None
            with self.provider_lock:
                try:
                    group.delete_nodes([t.r.node for t in items])
                except Exception as exc:
                    error = exc
                else:
                    for t in items:
                        kind = self._kind(t.r, t.drain)
                        log.info(
                            "scale_down",
                            node=t.r.node.name,
                            node_group=t.r.node_group,
                            kind=kind.value,
                            evicted=len(t.evicted),
                            atomic=atomic,
                        )
                        self.tracker.finish(self._deletion(t.r, t.drain, t.evicted))
            if error is not None:
                for t in items:
                    # As CA: whatever the provider raises is a cloud provider error.
                    failure = DeletionFailed.of(
                        t.r.node.name,
                        "delete",
                        f"deleting the {len(items)} nodes of node group {group.id} at once",
                        error,
                        remote=ErrorType.CLOUD_PROVIDER,
                        default=ErrorType.CLOUD_PROVIDER,
                    )
                    self._rollback(t.r.node.name, True, t.cordoned)
                    self.tracker.finish(
                        self._failed(t.r, t.drain, t.evicted, failure)
                    )
        finally:
            in_flight = self.tracker.in_flight()
            for t in items:
                if t.r.node.name in in_flight:
                    self._interrupted(t.r, drain=t.drain, why="")

    def _group_failed(self, r: RemovableNode, drain: bool, evicted: list[str], why: str) -> None:
        """Report node `r` failed because another node of its zero-or-max group did: the
        group goes whole or not at all (CA: "scale down failed for node group as a
        whole")."""
        failure = DeletionFailed(
            f"node {r.node.name}: scale down failed for node group {r.node_group} as a whole: "
            f"{why}",
            ErrorInfo(ErrorType.TRANSIENT, "AtomicScaleDownFailed"),
            "atomic",
        )
        self.tracker.finish(self._failed(r, drain, evicted, failure))

    def _confirm_unready(self, name: str) -> None:
        """A node removed as unready (for --scale-down-unready-time) must still be unready
        when a fresh read looks at it: a cache that fell behind may have missed it
        recovering. A node already gone needs no confirmation."""
        try:
            node = self.actions.read_node(name)
        except Exception as exc:
            raise DeletionFailed.of(
                name, "read_node", "reading it", exc, default=ErrorType.TRANSIENT
            ) from exc
        if node is not None and node.ready:
            raise DeletionFailed(
                f"node {name}: ready again: it is not removed as unready",
                ErrorInfo(ErrorType.TRANSIENT, "ReadyAgain"),
                "delete",
            )

    def _bound_since_plan(self, name: str, planned: Sequence[Pod]) -> tuple[list[Pod], list[Pod]]:
        """Pods bound to the tainted node that the plan does not know: the scheduler may
        have bound them between the loop's snapshot and the taint, or the snapshot came
        from a cache that fell behind. As CA's actuator, which re-lists the node's pods
        after tainting, they are read afresh from the API server (never the cache) and
        evicted too (rather than killed with the node), except mirror pods and expendable
        pods (below --expendable-pods-priority-cutoff). Returns the workload and the
        DaemonSet pods."""
        known = {p.key for p in planned}
        cutoff = self.options.expendable_pods_priority_cutoff
        workload: list[Pod] = []
        daemons: list[Pod] = []
        try:
            pods = self.actions.read_pods_on_node(name)
        except Exception as exc:
            # Nobody can say which pods the node runs now: it is not deleted on a guess.
            raise DeletionFailed.of(
                name, "list_pods", "listing its pods", exc, default=ErrorType.TRANSIENT
            ) from exc
        for pod in pods:
            if pod.node_name != name or pod.key in known:
                continue
            if pod.is_terminal or pod.is_mirror or pod.deletion_time is not None:
                continue
            if pod.priority is not None and pod.priority < cutoff:
                continue
            (daemons if pod.is_daemonset else workload).append(pod)
        if workload or daemons:
            log.info(
                "scale_down_late_pods",
                node=name,
                pods=len(workload),
                daemonset_pods=len(daemons),
            )
        return workload, daemons

    def _wait_for_delay_deletion(self, node: Node) -> None:
        """Hold the deletion while the node carries a `delay-deletion.cluster-autoscaler.
        kubernetes.io/*` annotation, up to --node-deletion-delay-timeout; then go ahead."""
        timeout = self.options.node_deletion_delay_timeout
        if self.source is None or not timeout or not _delays_deletion(node):
            return
        end = self.clock.now() + timeout
        log.info("waiting_for_delay_deletion", node=node.name, timeout_s=timeout.total_seconds())
        while self.clock.now() < end:
            self.clock.sleep(DELAY_DELETION_POLL_SECONDS)
            try:
                nodes = self.source.snapshot().nodes
            except Exception as exc:
                raise DeletionFailed.of(
                    node.name,
                    "wait",
                    "waiting for its delay-deletion annotations",
                    exc,
                    default=ErrorType.TRANSIENT,
                ) from exc
            fresh = next((n for n in nodes if n.name == node.name), None)
            if fresh is None or not _delays_deletion(fresh):
                return
        log.warning("delay_deletion_timed_out", node=node.name, timeout_s=timeout.total_seconds())

    def _rollback(self, name: str, tainted: bool, cordoned: bool) -> None:
        """Remove our taint and uncordon, best effort: a failure is logged on one line and
        never raised; the loop retries the node (`take_untaint_failures`)."""
        action = "untaint"
        try:
            if tainted:
                self.actions.remove_taint(name, TO_BE_DELETED_TAINT)
            action = "uncordon"
            if cordoned:
                self.actions.set_unschedulable(name, False)
        except NodeNotFoundError:
            pass
        except Exception as exc:
            log.error(
                "scale_down_rollback_failed", node=name, action=action, **describe(exc).fields(exc)
            )
            with self._untaint_lock:
                self._untaint_failed.add(name)

    def _grace(self, pod: Pod, limit: int | None = None) -> int:
        grace = pod.termination_grace_seconds
        grace = DEFAULT_GRACE_SECONDS if grace is None else grace
        return min(grace, self.options.max_graceful_termination_sec if limit is None else limit)

    def _evict_by_priority(self, node: str, pods: Sequence[Pod], *, required: bool) -> list[str]:
        """--drain-priority-config: evict `pods` group by group, lowest priority first, each
        pod with at most its group's grace period; with `required`, a group's pods must be
        gone before the next group is evicted."""
        evicted: list[str] = []
        for grace, group in priority_groups(self.options.drain_priority_config, pods):
            if group:
                log.debug(
                    "eviction_priority_group", node=node, pods=len(group), grace_seconds=grace
                )
                evicted.extend(self._evict_all(node, group, required=required, grace_limit=grace))
        return evicted

    def _evict_all(
        self, node: str, pods: Sequence[Pod], *, required: bool, grace_limit: int | None = None
    ) -> list[str]:
        """Evict `pods`, retrying refusals until --max-pod-eviction-time; with `required`,
        then wait for them to terminate. Raises `DeletionFailed` when a required pod stays.
        Grace periods are at most `grace_limit` (default --max-graceful-termination-sec)."""
        clock = self.clock
        deadline = clock.now() + self.options.max_pod_eviction_time
        pending = list(pods)
        evicted: list[str] = []
        while pending:
            retry: list[Pod] = []
            last: tuple[Pod, EvictionError] | None = None
            for pod in pending:
                try:
                    self.actions.evict(pod, self._grace(pod, grace_limit))
                    evicted.append(pod.key)
                except EvictionError as exc:
                    if not exc.retryable:
                        failure = DeletionFailed.of(
                            node, "evict", f"evicting pod {pod.key}", exc, pod=pod.key
                        )
                        if required:
                            failure.pods = (pod.key,)
                            raise failure from exc
                        # Best effort (DaemonSet pods): logged, and the node goes on.
                        log.warning(
                            "eviction_failed",
                            node=node,
                            pod=pod.key,
                            **failure.info.fields(),
                        )
                        continue
                    last = (pod, exc)
                    retry.append(pod)
            pending = retry
            if not pending:
                break
            if clock.now() + timedelta(seconds=EVICTION_RETRY_SECONDS) > deadline:
                if required and last is not None:
                    refused, refusal = last
                    info = describe(refusal)
                    timed_out = DeletionFailed(
                        f"node {node}: failed to evict {len(pending)} pods within "
                        f"--max-pod-eviction-time: pod {refused.key}: {info}",
                        info,
                        "evict",
                        pod=refused.key,
                    )
                    timed_out.pods = tuple(p.key for p in pending)
                    raise timed_out
                break
            clock.sleep(EVICTION_RETRY_SECONDS)
        if required and pods:
            wait = max(self._grace(p, grace_limit) for p in pods) + TERMINATION_EXTRA_SECONDS
            end = clock.now() + timedelta(seconds=wait)
            while True:
                remaining = [p for p in pods if self._still_there(node, p)]
                if not remaining:
                    break
                if clock.now() >= end:
                    raise DeletionFailed(
                        f"node {node}: {len(remaining)} pods still running {wait}s after "
                        f"eviction, e.g. {remaining[0].key}",
                        ErrorInfo(ErrorType.TRANSIENT, "PodsRemaining"),
                        "wait_for_pods",
                        pod=remaining[0].key,
                    )
                clock.sleep(TERMINATION_POLL_SECONDS)
        return evicted

    def _still_there(self, node: str, pod: Pod) -> bool:
        """Whether an evicted pod still exists. As CA, a failed read counts as still there
        (logged): the wait goes on until its deadline instead of failing the drain."""
        try:
            return self.actions.pod_exists(pod)
        except LoopAbortedError:
            raise
        except Exception as exc:
            log.warning("pod_check_failed", node=node, pod=pod.key, **describe(exc).fields(exc))
            return True
