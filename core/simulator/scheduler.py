"""Placing pods on a snapshot as kube-scheduler would (filters only, first fit).

`find_fitting_node` answers "where could this pod go?". `HintingSimulator` places many pods,
remembering where each pod went last time (hints survive between loops, which makes
repeated scale-down simulations cheap) and resuming the node scan where the previous
placement succeeded, so packing many similar pods does not rescan full nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from clusterscaler.model import Pod, field_replacer
from clusterscaler.simulator.equivalence import scheduling_key
from clusterscaler.simulator.predicates import check_predicates
from clusterscaler.simulator.snapshot import ClusterSnapshot, SimNodeInfo, SnapshotError

__all__ = [
    "HintingSimulator",
    "NodeFilter",
    "Placement",
    "SchedulingResult",
    "find_fitting_node",
    "format_unschedulable",
    "unbound",
    "unschedulable_reasons",
]

NodeFilter = Callable[[SimNodeInfo], bool]


def find_fitting_node(
    pod: Pod,
    snapshot: ClusterSnapshot,
    hint: str | None = None,
    node_filter: NodeFilter | None = None,
) -> str | None:
    """The name of the first node `pod` fits on (trying `hint` first), or `None`."""
    if hint is not None:
        ni = snapshot.node_info(hint)
        if (
            ni is not None
            and (node_filter is None or node_filter(ni))
            and check_predicates(pod, ni, snapshot) is None
        ):
            return hint
    for ni in snapshot.node_infos():
        if node_filter is not None and not node_filter(ni):
            continue
        if check_predicates(pod, ni, snapshot) is None:
            return ni.node.name
    return None


def _split_reason(reason: str) -> list[str]:
    """The scheduler counts each missing resource as its own reason."""
    parts = reason.split(", ")
    if len(parts) > 1 and all(p.startswith("Insufficient ") for p in parts):
        return parts
    return [reason]


def unschedulable_reasons(
    pod: Pod, snapshot: ClusterSnapshot, node_filter: NodeFilter | None = None
) -> Counter[str]:
    """How many nodes reject `pod` for each reason (empty when some node fits)."""
    reasons: Counter[str] = Counter()
    for ni in snapshot.node_infos():
        if node_filter is not None and not node_filter(ni):
            continue
        reason = check_predicates(pod, ni, snapshot)
        if reason is None:
            return Counter()
        for part in _split_reason(reason):
            reasons[part] += 1
    return reasons


def format_unschedulable(reasons: Counter[str], total_nodes: int) -> str:
    """The scheduler's summary: `0/5 nodes are available: 2 Insufficient cpu, 3 ...`.

    Entries are `<count> <reason>` sorted as strings, as kube-scheduler sorts them.
    """
    parts = sorted(f"{n} {r}" for r, n in reasons.items())
    if not parts:
        return f"0/{total_nodes} nodes are available."
    return f"0/{total_nodes} nodes are available: {', '.join(parts)}."


def twin_key(pod: Pod) -> Hashable | None:
    """A key under which a pod that found no node makes its twins fail without a search:
    its namespace and everything that decides where it schedules.

    Placing pods only takes room away, except for pods that need other pods (required pod
    affinity) or balance against them (topology spread): those have no key and are always
    searched.
    """
    if pod.topology_spread:
        return None
    affinity = pod.affinity
    if affinity is not None and affinity.pod is not None and affinity.pod.affinity:
        return None
    return (pod.namespace, scheduling_key(pod))


class Placement(NamedTuple):
    """A pod and the node the simulation put it on."""

    pod: Pod
    node_name: str


@dataclass(slots=True)
class SchedulingResult:
    scheduled: list[Placement] = field(default_factory=list)
    unschedulable: list[Pod] = field(default_factory=list)


# The removal simulation copies every pod it moves: `field_replacer` writes the slots
# directly, about a quarter of the cost of `dataclasses.replace`.
_with_node_name: Callable[[Pod, str], Pod] = field_replacer(Pod, ("node_name",))


def _copy_without_node_name(pod: Pod) -> Pod:
    return _with_node_name(pod, "")


def unbound(pod: Pod) -> Pod:
    """`pod` as it looks while it moves to another node: without `node_name`, which
    kube-scheduler's NodeName filter would otherwise hold to its old node. The same
    object when it is not bound."""
    return _copy_without_node_name(pod) if pod.node_name else pod


class HintingSimulator:
    """Places pods one by one on the first fitting node, using hints.

    Placed pods are added to the snapshot (the same `Pod` objects; their `node_name` field
    is not rewritten — `snapshot.pod_node(key)` says where they are).
    """

    def __init__(self) -> None:
        self.hints: dict[str, str] = {}

    def drop_old_hints(self, keep: Iterable[str]) -> None:
        """Forget hints of pods not in `keep` (call once per loop)."""
        wanted = set(keep)
        self.hints = {k: v for k, v in self.hints.items() if k in wanted}

    def try_schedule_pods(
        self,
        snapshot: ClusterSnapshot,
        pods: Sequence[Pod],
        *,
        node_filter: NodeFilter | None = None,
        break_on_failure: bool = False,
        nodes: Sequence[SimNodeInfo] | None = None,
        unbind: bool = False,
    ) -> SchedulingResult:
        """Place `pods` in order, each on its hinted node if it fits there, else on the first
        fitting node from where the previous pod went (wrapping around).

        `nodes`: the nodes to scan, in snapshot order, when the caller already knows they
        all pass `node_filter` (which then vets only hinted nodes). The removal simulation
        keeps that list as nodes go, instead of filtering every node for every pod.
        `unbind`: the pods are moving off their nodes and are placed as `unbound` copies,
        each made when its turn comes (a search stopping at the first failure copies one).
        """
        result = SchedulingResult()
        scheduled = result.scheduled
        if nodes is None:
            infos: Sequence[SimNodeInfo] = snapshot.node_infos()
            scan_filter = node_filter
        else:
            infos = nodes
            scan_filter = None
        count = len(infos)
        last = 0
        # The skip of full nodes below stands for NodeResourcesFit; not when the scheduler's
        # configuration leaves it out.
        skip_full = snapshot.checks_resources
        hints = self.hints
        node_info = snapshot.node_info
        where = snapshot._pod_node
        failed: set[Hashable] = set()
        for pod in pods:
            if unbind and pod.node_name:
                pod = _copy_without_node_name(pod)
            key = pod.namespace + "/" + pod.name
            if key in where:
                raise SnapshotError(f"pod {key} is already on node {where[key]!r} in the snapshot")
            target: SimNodeInfo | None = None
            hint = hints.get(key)
            if hint is not None:
                ni = node_info(hint)
                if (
                    ni is not None
                    and (node_filter is None or node_filter(ni))
                    and check_predicates(pod, ni, snapshot) is None
                ):
                    target = ni
            signature: Hashable | None = None
            if target is None and failed:
                signature = twin_key(pod)
                if signature is not None and signature in failed:
                    # An identical pod found no node, and placing pods since cannot have
                    # made room for it.
                    result.unschedulable.append(pod)
                    continue
            if target is None:
                # Resume where the previous pod fitted: nodes before it are likely full.
                r = pod.requests
                slots = r.pods
                cpu = r.cpu
                memory = r.memory
                index = last
                for _ in range(count):
                    ni = infos[index]
                    alloc = ni.node.allocatable
                    # Most nodes a long scan passes are full: skip them before the
                    # predicates when NodeResourcesFit certainly rejects the pod (pod slots,
                    # or a non-zero cpu or memory request beyond what is left; exactly the
                    # cases where `check_resources` returns a reason).
                    if not (
                        skip_full
                        and (
                            ni.req_pods + slots > alloc.pods
                            or (cpu != 0 and ni.req_cpu + cpu > alloc.cpu)
                            or (memory != 0 and ni.req_memory + memory > alloc.memory)
                        )
                    ) and (
                        (scan_filter is None or scan_filter(ni))
                        and check_predicates(pod, ni, snapshot) is None
                    ):
                        target = ni
                        last = index
                        break
                    index += 1
                    if index == count:
                        index = 0
            if target is None:
                result.unschedulable.append(pod)
                if break_on_failure:
                    break
                if signature is None:
                    signature = twin_key(pod)
                if signature is not None:
                    failed.add(signature)
                continue
            snapshot._place(target, key, pod)
            node_name = target.node.name
            hints[key] = node_name
            scheduled.append(Placement(pod, node_name))
        return result
