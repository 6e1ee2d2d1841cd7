"""Which pending pods call for a scale-up.

A pod is considered when the scheduler marked it unschedulable (PodScheduled=False,
reason Unschedulable) — or, for schedulers in --bypassed-scheduler-names, as soon as it is
pending. Expendable pods (priority below --expendable-pods-priority-cutoff), pods waiting
for preemption (nominatedNodeName set; the loop puts them on that node in its snapshot) and pods younger than --new-pod-scale-up-delay (or
their `pod-scale-up-delay` annotation) are left out, and so are pods that fit on existing or
upcoming capacity.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import structlog
from clusterscaler.framework.durations import parse_duration
from clusterscaler.framework.errors import ErrorType, LoopError
from clusterscaler.model import DEFAULT_SCHEDULER, Pod
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
from clusterscaler.simulator.equivalence import PodGroup, group_pods, regroups_alike
from clusterscaler.simulator.scheduler import twin_key

if TYPE_CHECKING:
    from clusterscaler.framework.options import AutoscalingOptions

log = structlog.get_logger()

SCALE_UP_DELAY_ANNOTATION = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"


@dataclass
class PendingPods:
    """Pending pods sorted by what the loop does with them."""

    # Pods a scale-up should help.
    unschedulable: list[Pod] = field(default_factory=list)
    expendable: list[Pod] = field(default_factory=list)
    too_young: list[Pod] = field(default_factory=list)
    awaiting_preemption: list[Pod] = field(default_factory=list)
    # Pods that fit on existing or upcoming nodes (filled by `drop_schedulable`).
    fit_existing: list[Pod] = field(default_factory=list)
    # Bad annotations, as "<pod>: <problem>".
    errors: list[str] = field(default_factory=list)
    # The equivalence groups `drop_schedulable` left `unschedulable` in, with the list they
    # describe and its length: kept only when grouping that list again gives them.
    _groups: tuple[list[Pod], int, list[PodGroup]] | None = field(
        default=None, repr=False, compare=False
    )
    # The keys of `unschedulable`, with the list they describe and its length.
    _keys: tuple[list[Pod], int, list[str]] | None = field(
        default=None, repr=False, compare=False
    )

    def unschedulable_keys(self) -> list[str]:
        """The `namespace/name` key of each unschedulable pod, in order, built once per
        list (the plan, the loop's result and the scheduler's hints all ask for them).
        Callers must not change the list returned."""
        known = self._keys
        pods = self.unschedulable
        if known is not None and _describes(known, pods):
            return known[2]
        keys = [p.key for p in pods]
        self._keys = (pods, len(pods), keys)
        return keys

    def unschedulable_groups(self) -> list[PodGroup]:
        """`group_pods(self.unschedulable)`.

        Grouping costs a pass over every pending pod; the groups `drop_schedulable` ended
        with are returned instead while they are provably the same: the list is the one it
        left (same object, same length) and no controller reached the per-controller group
        cap (`regroups_alike`). Callers must not change the groups returned.
        """
        known = self._groups
        if known is not None and _describes(known, self.unschedulable):
            return known[2]
        return group_pods(self.unschedulable)


def _describes(known: tuple[list[Pod], int, object], pods: list[Pod]) -> bool:
    """Whether a value kept as `(list, its length, value)` was derived from `pods` as it
    is now: the same list object, of the same length."""
    return known[0] is pods and known[1] == len(pods)


def scale_up_delay(pod: Pod, default: timedelta) -> tuple[timedelta, str]:
    """The pod's scale-up delay and an error message when its annotation is malformed.

    The annotation can only lengthen the delay: a shorter value keeps the flag's.
    """
    raw = pod.annotations.get(SCALE_UP_DELAY_ANNOTATION)
    if raw is None:
        return default, ""
    try:
        value = parse_duration(raw)
    except ValueError:
        return default, (
            f"Pod {pod.key}: annotation {SCALE_UP_DELAY_ANNOTATION}: expected a Go duration "
            f"such as 30s or 5m, got {raw!r}"
        )
    return max(value, default), ""


def classify_pending(
    pods: Iterable[Pod],
    options: AutoscalingOptions,
    now: datetime,
    *,
    node_names: Collection[str] | None = None,
) -> PendingPods:
    """Sort pending pods by what the loop does with them.

    With `node_names` (the nodes of the cluster), a pod nominated to a node that does not
    exist is not waiting for preemption anywhere and is treated as any unschedulable pod,
    as CA's FilterOutExpendableAndSplit does; without it every nominated pod is set aside.
    """
    out = PendingPods()
    allowed = {DEFAULT_SCHEDULER, *options.allowed_scheduler_names}
    bypassed = set(options.bypassed_scheduler_names)
    cutoff = options.expendable_pods_priority_cutoff
    for pod in pods:
        if pod.node_name or pod.is_terminal or pod.deletion_time is not None:
            continue
        if pod.scheduler_name in bypassed:
            pass
        elif pod.scheduler_name not in allowed or not pod.unschedulable:
            continue
        if pod.priority is not None and pod.priority < cutoff:
            out.expendable.append(pod)
            continue
        if pod.nominated_node_name and (
            node_names is None or pod.nominated_node_name in node_names
        ):
            out.awaiting_preemption.append(pod)
            continue
        delay, error = scale_up_delay(pod, options.new_pod_scale_up_delay)
        if error:
            # A pod annotation is the user's configuration.
            out.errors.append(LoopError(error, ErrorType.CONFIGURATION))
            log.warning("bad_pod_annotation", pod=pod.key, error=error)
        if delay and pod.creation_time is not None and now - pod.creation_time < delay:
            out.too_young.append(pod)
            continue
        out.unschedulable.append(pod)
    return out


def drop_schedulable(
    pending: PendingPods,
    snapshot: ClusterSnapshot,
    simulator: HintingSimulator,
    *,
    unusable: Collection[str] = (),
) -> None:
    """Place what fits on the snapshot (existing and upcoming nodes) and keep the rest.

    Nodes in `unusable` (unready, being deleted) receive nothing. Placed pods stay in the
    snapshot, so capacity they take is not offered twice.
    """
    groups = pending.unschedulable_groups()
    if not len(snapshot):
        # No node at all (a cluster scaling from zero): nothing fits, and no search can
        # say otherwise. The pods stay in group order, as below.
        _keep(pending, [PodGroup(list(g.pods), g.alike) for g in groups], regroups_alike(groups))
        return
    node_filter = (lambda ni: ni.node.name not in unusable) if unusable else None
    kept: list[PodGroup] = []
    # Twins (see `twin_key`) of a pod that found no node: placing pods since has only
    # taken room away, so they find none either and skip the search (bare pods, one
    # group each, are where this counts).
    failed: set[Hashable] = set()
    for group in groups:
        first = group.pods[0]
        twin = twin_key(first)
        if twin is not None and twin in failed and snapshot.pod_node(first.key) is None:
            kept.append(PodGroup(list(group.pods), group.alike))
            continue
        result = simulator.try_schedule_pods(
            snapshot, group.pods, node_filter=node_filter, break_on_failure=True
        )
        pending.fit_existing.extend(p.pod for p in result.scheduled)
        # Equivalent pods fail alike: once one does not fit, the others will not either.
        placed = len(result.scheduled)
        if placed < len(group.pods):
            kept.append(PodGroup(group.pods[placed:], group.alike))
            failed_twin = twin if placed == 0 else twin_key(group.pods[placed])
            if failed_twin is not None:
                failed.add(failed_twin)
    _keep(pending, kept, regroups_alike(groups))


def _keep(pending: PendingPods, kept: list[PodGroup], reusable: bool) -> None:
    """Leave the pods of `kept` (tails of the groups of the unschedulable pods) as the
    unschedulable ones, in group order, and remember the groups when `reusable`: when the
    groups they were cut from regroup alike (`regroups_alike`), and so do their tails.
    Checking the tails alone would not do: two capped singletons of one variant regroup
    as one group once enough other groups are gone."""
    pods = [p for g in kept for p in g.pods]
    pending.unschedulable = pods
    pending._groups = (pods, len(pods), kept) if reusable else None

