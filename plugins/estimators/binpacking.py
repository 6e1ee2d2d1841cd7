"""The `binpacking` estimator: first-fit decreasing onto copies of a node group's template.

Groups are ordered by the representative pod's request relative to the template's
allocatable (cpu share + memory share, largest first). For each group, pods first go onto
nodes already added in this estimation (stopping at the first pod that fits none), then
onto the last added node, then onto a fresh template copy; when a pod does not fit even a
fresh copy (or the last added node is still empty), more nodes would not help and the group
stops. The limiter is asked before every node is added.

A group of identical pods that only needs resources (no host ports or volumes, pod affinity
or topology spread only if they cannot reject the pods from the template's copies, and
selected by no anti-affinity term of a pod already placed) is packed arithmetically: one
predicate check per node, then as many pods as the node's free resources allow. Nodes only
gain pods during an estimate, so a node such a pod does not fit stays closed to every later
pod with the same requests and node constraints; the scan skips those nodes, which keeps
the estimate linear in groups + nodes when many bare pods form one-pod groups. Groups that
follow one another with such pods alike, without pod affinity or topology spread (bare
pods, a group each), are packed as one group: then only resources and the nodes' own
properties decide where each pod fits, and the fill places each where it would go alone.

Both paths pass over nodes without the free room for a pod's requests, and the pod-by-pod
path over nodes an equal pod failed for a lasting reason (`node_scan`); neither changes
which node a pod goes to.

Long on purpose: the pod-by-pod path, the arithmetic fill and the runs of alike groups
decide the same placements and share the node scan and the limiter; kept together so the
rules that make them agree are read side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.api import (
    HOSTNAME_LABEL,
    ClusterSnapshot,
    Estimate,
    EstimationLimiter,
    NodeInfo,
    Pod,
    PodGroup,
    SimNodeInfo,
    TemplateCopier,
    check_predicates,
    pod_affinity_cannot_reject,
    prepare_indexes,
    selected_by_existing_anti_affinity,
    spread_cannot_reject,
    volumes_constrain_scheduling,
)
from clusterscaler.plugins.estimators.node_scan import (
    FreeRoom,
    OpenNodes,
    closes_for_node_fit,
    closes_for_pod_terms,
    next_open_of_both,
    node_fit_key,
    pod_terms_key,
    same_closure_keys,
)

if TYPE_CHECKING:
    from clusterscaler.api import AutoscalingOptions

__all__ = ["BinpackingEstimator", "order_groups"]

log = structlog.get_logger()


def _share(request: int, allocatable: int) -> float:
    return request / allocatable if allocatable > 0 else 0.0


def order_groups(groups: Sequence[PodGroup], template: NodeInfo) -> list[PodGroup]:
    """Largest first by cpu share + memory share of the template's allocatable (stable)."""
    alloc = template.node.allocatable
    present = [g for g in groups if g.pods]
    # Scored once per requests object: the groups of bare pods, one pod each, mostly share
    # their requests.
    scores: dict[int, float] = {}
    keys: list[float] = []
    for group in present:
        r = group.pods[0].requests
        score = scores.get(id(r))
        if score is None:
            score = scores[id(r)] = _share(r.cpu, alloc.cpu) + _share(r.memory, alloc.memory)
        keys.append(score)
    order = sorted(range(len(present)), key=keys.__getitem__, reverse=True)
    return [present[i] for i in order]


def _has_pod_affinity(pod: Pod) -> bool:
    return pod.affinity is not None and pod.affinity.pod is not None


def _template_domains(template: NodeInfo) -> dict[str, str]:
    """The labels every copy of `template` carries (all but the hostname, which
    `sanitize_template` makes each copy's own)."""
    return {k: v for k, v in template.node.labels.items() if k != HOSTNAME_LABEL}


def _all_alike(group: PodGroup) -> bool:
    """Whether every pod is identical to the first for scheduling, with no host ports or
    volumes that can decide where it fits (what the arithmetic fill needs whatever the
    cluster). Volumes that cannot (the projected service-account token every pod carries,
    configMaps, secrets, emptyDirs) are no obstacle, and their names, unique per pod, are
    not compared. A group that promises its pods are alike (`PodGroup.alike`) is judged
    by its representative, without a pass over its pods."""
    pods = group.pods
    rep = pods[0]
    if rep.host_ports or (rep.volumes and volumes_constrain_scheduling(rep)):
        return False
    if group.alike:
        return True
    return all(_alike_to(p, rep) for p in pods)


def _alike_to(p: Pod, rep: Pod) -> bool:
    """Whether `p` is `rep` for the filters, with no host ports or volumes that can decide
    where it fits."""
    # Parsed pods of one workload share these objects, so identity settles most checks.
    return not (
        (p.requests is not rep.requests and p.requests != rep.requests)
        or (p.labels is not rep.labels and p.labels != rep.labels)
        or p.namespace != rep.namespace
        or (p.tolerations is not rep.tolerations and p.tolerations != rep.tolerations)
        or (p.node_selector is not rep.node_selector and p.node_selector != rep.node_selector)
        or (p.affinity is not rep.affinity and p.affinity != rep.affinity)
        or p.node_name != rep.node_name
        or (
            p.topology_spread is not rep.topology_spread
            and p.topology_spread != rep.topology_spread
        )
        or p.host_ports
        or (p.volumes and volumes_constrain_scheduling(p))
        or p.resource_claims != rep.resource_claims
    )


def _is_resource_only(pods: Sequence[Pod], snapshot: ClusterSnapshot, template: NodeInfo) -> bool:
    """Whether, the pods being alike (`_all_alike`), only resources and static node
    properties (taints, selectors, node affinity) decide where they fit: a topology
    spread or pod affinity that cannot reject them from the template's copies is no
    obstacle. Not so when the scheduler's configuration changed the filters (the
    arithmetic counts every resource): then each pod is placed through them."""
    rep = pods[0]
    return snapshot.filters is None and not (
        # Pods with DRA claims are filled as copies of the first only when each claim is
        # the pod's own, unallocated, asking what the first pod's ask; else one at a time.
        (rep.resource_claims and (snapshot.dra is None or not snapshot.dra.claims_alike(pods)))
        or (
            rep.topology_spread
            and not spread_cannot_reject(rep, _template_domains(template), snapshot)
        )
        or (
            _has_pod_affinity(rep)
            and not pod_affinity_cannot_reject(rep, _template_domains(template), snapshot)
        )
        # Template pods land on every new node; their anti-affinity could reject ours.
        or any(_has_pod_affinity(p) for p in template.pods)
        # Placed pods' anti-affinity terms that select these pods could reject them (the
        # group itself adds no terms, so none selecting them now means none later).
        or selected_by_existing_anti_affinity(rep, snapshot)
    )


def _capacity(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> tuple[int, bool]:
    """How many copies of a resource-only `pod` still fit on `ni`, and whether the node is
    spent for them once that many are placed: its devices ran out before its resources,
    so that one more copy gets none (devices are only taken within an estimate)."""
    r = pod.requests
    alloc = ni.node.allocatable
    fits: list[int] = []
    for want, used, have in (
        (r.cpu, ni.req_cpu, alloc.cpu),
        (r.memory, ni.req_memory, alloc.memory),
        (r.pods, ni.req_pods, alloc.pods),
        (r.ephemeral_storage, ni.req_eph, alloc.ephemeral_storage),
    ):
        if want > 0:
            fits.append((have - used) // want)
    for k, want in r.extended.items():
        if want > 0:
            fits.append((alloc.extended.get(k, 0) - ni.req_ext.get(k, 0)) // want)
    # A pod requesting nothing at all (not even a pod slot) fits without bound; the pod
    # slot every parsed pod carries keeps this finite in practice.
    room = max(1, min(fits)) if fits else 1 << 30
    dra = snapshot.dra if pod.resource_claims else None
    if dra is not None:
        # Each copy takes devices of its own, as it would placed alone after the others.
        # Counted before the filters run: a node without a device for the pod is known
        # without the filters' reason, and the filters then read the first copy's devices.
        copies = dra.copies_fit(pod, ni.node, room)
        if not copies:
            return 0, True
        spent = copies < room
        room = copies
    else:
        spent = False
    if check_predicates(pod, ni, snapshot) is not None:
        return 0, False
    return room, spent


_FitKey = tuple[Any, ...]


def _open_nodes(state: _State, pod: Pod, snapshot: ClusterSnapshot) -> OpenNodes:
    """The added nodes open to the arithmetic path's pods of `pod`'s fit key."""
    key = _fit_key(pod, snapshot)
    open_nodes = state.open_nodes.get(key)
    if open_nodes is None:
        open_nodes = state.open_nodes[key] = OpenNodes()
    return open_nodes


def _fit_key(pod: Pod, snapshot: ClusterSnapshot) -> _FitKey:
    """What decides whether a resource-only pod fits a node (its labels do not, because
    the arithmetic path only runs for pods no anti-affinity term in the snapshot selects,
    and so for them only this decides), with what its claims ask: devices, like
    resources, are only taken during an estimate."""
    selector = pod.node_selector
    claims = (
        snapshot.dra.claims_key(pod) if pod.resource_claims and snapshot.dra is not None else ()
    )
    return (
        pod.requests,
        pod.tolerations,
        tuple(sorted(selector.items())) if selector else (),
        pod.affinity,
        pod.node_name,
        pod.topology_spread,
        claims,
    )


@dataclass
class _State:
    node_group_id: str
    template: NodeInfo
    # Makes each added node from the template (the sanitised copy, built per name).
    copier: TemplateCopier
    new_nodes: list[str] = field(default_factory=list)
    with_pods: set[str] = field(default_factory=set)
    scheduled: list[Pod] = field(default_factory=list)
    unscheduled: list[Pod] = field(default_factory=list)
    limited_by: str | None = None
    last_index: int = 0
    counter: int = 0
    # The free room of `new_nodes`, index for index.
    room: FreeRoom = field(default_factory=FreeRoom)
    # Added nodes closed to the arithmetic path's fit keys.
    open_nodes: dict[_FitKey, OpenNodes] = field(default_factory=dict)
    # For pods placed one by one: nodes closed by node fit key, and by pod terms key.
    open_to_fit: dict[_FitKey, OpenNodes] = field(default_factory=dict)
    open_to_terms: dict[_FitKey, OpenNodes] = field(default_factory=dict)

    def closures(self, pod: Pod) -> tuple[OpenNodes, OpenNodes]:
        fit = self.open_to_fit.get(key := node_fit_key(pod))
        if fit is None:
            fit = self.open_to_fit[key] = OpenNodes()
        terms = self.open_to_terms.get(key := pod_terms_key(pod))
        if terms is None:
            terms = self.open_to_terms[key] = OpenNodes()
        return fit, terms

    @property
    def last_node(self) -> str | None:
        return self.new_nodes[-1] if self.new_nodes else None


class BinpackingEstimator:
    """First-fit decreasing estimation, as the upstream Cluster Autoscaler does it."""

    name = "binpacking"

    def __init__(self, options: AutoscalingOptions | None = None) -> None:
        ignored: set[str] = set()
        prefixes: tuple[str, ...] = ()
        if options is not None:
            for taint in (*options.ignore_taint, *options.startup_taint, *options.status_taint):
                # Flags may carry `key`, `key=value` or `key=value:Effect`; the key decides.
                ignored.add(taint.split("=", 1)[0].split(":", 1)[0])
            prefixes = tuple(options.startup_taint_prefix)
        self.ignored_taints = frozenset(ignored)
        self.ignored_prefixes = prefixes
        # Whether each group's pods are alike, for the sequence of groups last estimated:
        # the loop passes the same groups to the estimate of every node group.
        self._alike_for: Sequence[PodGroup] | None = None
        self._alike: dict[int, tuple[PodGroup, int, bool]] = {}

    def _pods_alike(self, groups: Sequence[PodGroup], group: PodGroup) -> bool:
        if self._alike_for is not groups:
            self._alike_for = groups
            self._alike = {}
        known = self._alike.get(id(group))
        if known is not None and known[0] is group and known[1] == len(group.pods):
            return known[2]
        alike = _all_alike(group)
        self._alike[id(group)] = (group, len(group.pods), alike)
        return alike

    def estimate(
        self,
        groups: Sequence[PodGroup],
        template: NodeInfo,
        snapshot: ClusterSnapshot,
        limiter: EstimationLimiter,
        *,
        node_group_id: str = "",
    ) -> Estimate:
        all_pods = [p for g in groups for p in g.pods]
        limiter.start_estimation(all_pods, node_group_id)
        state = _State(
            node_group_id or template.node.name,
            template,
            TemplateCopier(template, self.ignored_taints, self.ignored_prefixes),
        )
        ordered = order_groups(groups, template)
        runs = self._runs(groups, ordered)
        # Indexes registered mid-estimate would be filled by replaying every pod on the
        # template nodes added so far; registered now, they start from the cluster. The
        # groups of a run after the first have its pods' terms and labels: the same indexes.
        for run in runs:
            prepare_indexes(run[0].representative, snapshot)
        snapshot.fork()
        try:
            for run in runs:
                if len(run) > 1:
                    # Every pod of the run: claiming pods are alike only if all their
                    # claims ask the same.
                    run_pods = [p for g in run for p in g.pods]
                    if _is_resource_only(run_pods, snapshot, template):
                        self._place_arithmetic(state, run_pods, snapshot, limiter)
                        continue
                for group in run:
                    pods = group.pods
                    if self._pods_alike(groups, group) and _is_resource_only(
                        pods, snapshot, template
                    ):
                        self._place_arithmetic(state, pods, snapshot, limiter)
                    else:
                        remaining = self._existing(state, pods, snapshot)
                        if remaining:
                            self._new(state, remaining, snapshot, limiter)
            new_nodes = tuple(
                snapshot.get(name).to_node_info()
                for name in state.new_nodes
                if name in state.with_pods
            )
        finally:
            snapshot.revert()
            limiter.end_estimation()
        result = Estimate(
            node_count=len(state.with_pods),
            scheduled_pods=tuple(state.scheduled),
            new_nodes=new_nodes,
            limited_by=state.limited_by,
            unscheduled_pods=tuple(state.unscheduled),
        )
        log.debug(
            "estimate",
            node_group=node_group_id,
            pods=len(all_pods),
            node_count=result.node_count,
            scheduled=len(result.scheduled_pods),
            limited_by=result.limited_by,
        )
        return result

    def _runs(
        self, groups: Sequence[PodGroup], ordered: Sequence[PodGroup]
    ) -> list[Sequence[PodGroup]]:
        """`ordered` cut into runs of groups that the arithmetic fill may take as one.

        Pods without a controller are groups of one, and a workload of thousands of bare
        pods would be packed one call at a time. A run is a group whose pods are alike and
        have neither pod affinity nor topology spread, and the groups that follow it with
        pods alike to its own. When such pods are resource-only (`_is_resource_only`),
        only resources and the node's own properties decide where each of them fits: the
        anti-affinity of pods already placed selects none of them, as for the first, and
        the run adds no terms. So once one of them fits no added node none of the rest
        will, and filling the nodes with the run places each pod where it would go with
        its group on its own. Any other group is a run of its own.
        """
        runs: list[Sequence[PodGroup]] = []
        count = len(ordered)
        start = 0
        while start < count:
            first = ordered[start]
            rep = first.pods[0]
            end = start + 1
            if not (rep.topology_spread or _has_pod_affinity(rep)) and self._pods_alike(
                groups, first
            ):
                while end < count:
                    group = ordered[end]
                    if not _alike_to(group.pods[0], rep) or (
                        len(group.pods) > 1 and not self._pods_alike(groups, group)
                    ):
                        break
                    end += 1
            runs.append(ordered[start:end])
            start = end
        return runs

    # ------------------------------------------------------------------ nodes

    def _add_node(self, state: _State, snapshot: ClusterSnapshot) -> SimNodeInfo:
        while True:
            state.counter += 1
            name = f"template-node-for-{state.node_group_id}-{state.counter}"
            if name not in snapshot:
                break
        node, pods = state.copier.copy(name)
        ni = snapshot.add_node(node, pods, state.copier.slices(name))
        state.new_nodes.append(name)
        state.room.append(ni)
        return ni

    def _place(self, state: _State, snapshot: ClusterSnapshot, pod: Pod, index: int) -> None:
        """Put `pod` on the added node at `index`."""
        name = state.new_nodes[index]
        snapshot.add_pod(pod, name)
        state.room.update(index, snapshot.get(name))
        state.with_pods.add(name)
        state.scheduled.append(pod)

    # ------------------------------------------------------------------ pod by pod

    def _existing(
        self, state: _State, pods: Sequence[Pod], snapshot: ClusterSnapshot
    ) -> Sequence[Pod]:
        """Place pods on nodes added so far; return the pods from the first that fits none.

        Each pod tries the nodes round from `last_index`, as the scheduler's search does,
        but passes over the nodes without the free room for its requests and those a pod
        with the same closure keys already failed for a reason that lasts (`node_scan`):
        the first node that takes the pod is the one a plain scan finds, without running
        the filters on every full node for every pod.
        """
        names = state.new_nodes
        count = len(names)
        if not count:
            return pods
        room = state.room
        # Passing over nodes too full for the pod stands for NodeResourcesFit.
        skip_full = snapshot.checks_resources
        rep: Pod | None = None
        fit = terms = OpenNodes()
        for i, pod in enumerate(pods):
            if rep is None or not same_closure_keys(pod, rep):
                rep = pod
                fit, terms = state.closures(pod)
            r = pod.requests
            cpu, memory, slots = r.cpu, r.memory, r.pods
            start = state.last_index
            for lo, hi in ((start, count), (0, start)):
                index = lo
                while True:
                    if skip_full:
                        index = room.next_fitting(index, hi, cpu, memory, slots)
                    if index >= hi:
                        break
                    after = next_open_of_both(fit, terms, index)
                    if after != index:
                        index = after
                        continue
                    reason = check_predicates(pod, snapshot.get(names[index]), snapshot)
                    if reason is None:
                        break
                    if closes_for_node_fit(reason):
                        fit.close(index)
                    elif closes_for_pod_terms(reason):
                        terms.close(index)
                    index += 1
                if index < hi:
                    self._place(state, snapshot, pod, index)
                    state.last_index = index
                    break
            else:
                return pods[i:]
        return ()

    def _new(
        self,
        state: _State,
        pods: Sequence[Pod],
        snapshot: ClusterSnapshot,
        limiter: EstimationLimiter,
    ) -> None:
        for i, pod in enumerate(pods):
            last = state.last_node
            if last is not None and check_predicates(pod, snapshot.get(last), snapshot) is None:
                self._place(state, snapshot, pod, len(state.new_nodes) - 1)
                continue
            if last is not None and last not in state.with_pods:
                # The last node is still empty: a fresh copy would not take the pod either.
                state.unscheduled.extend(pods[i:])
                return
            reason = limiter.permission_to_add_node()
            if reason is not None:
                state.limited_by = reason
                state.unscheduled.extend(pods[i:])
                return
            ni = self._add_node(state, snapshot)
            if check_predicates(pod, ni, snapshot) is not None:
                state.unscheduled.extend(pods[i:])
                return
            self._place(state, snapshot, pod, len(state.new_nodes) - 1)

    # ------------------------------------------------------------------ arithmetic

    def _fill(
        self,
        state: _State,
        snapshot: ClusterSnapshot,
        pods: Sequence[Pod],
        start: int,
        index: int,
        n: int,
    ) -> int:
        """Put `n` pods from `start` on the added node at `index`; returns the next start."""
        node = state.new_nodes[index]
        batch = pods[start : start + n]
        snapshot.add_pods(batch, node)
        state.scheduled.extend(batch)
        if n:
            state.room.update(index, snapshot.get(node))
            state.with_pods.add(node)
        return start + n

    def _existing_arithmetic(
        self, state: _State, pods: Sequence[Pod], snapshot: ClusterSnapshot
    ) -> Sequence[Pod]:
        """Fill the added nodes from `last_index` round to it again, skipping the nodes
        known to be closed to these pods; return the pods left over."""
        names = state.new_nodes
        count = len(names)
        if not count:
            return pods
        rep = pods[0]
        open_nodes = _open_nodes(state, rep, snapshot)
        total = len(pods)
        done = 0
        start = state.last_index
        room = state.room
        r = rep.requests
        cpu, memory, slots = r.cpu, r.memory, r.pods

        def next_candidate(i: int, hi: int) -> int:
            # Open to the key and with room for one pod (the nodes without fail the
            # resources filter, so `_capacity` would find them closed anyway).
            while True:
                first = open_nodes.next_open(i)
                i = room.next_fitting(first, hi, cpu, memory, slots)
                if i > first:
                    # Too full for these requests, and usage only grows: closed to the
                    # key for good, so the next pods of the key do not pass them again.
                    open_nodes.close_range(first, i)
                if i >= hi or open_nodes.next_open(i) == i:
                    return i

        # The same visiting order as a round trip of `count` steps from `start`.
        for lo, hi in ((start, count), (0, start)):
            index = next_candidate(lo, hi)
            while index < hi and done < total:
                ni = snapshot.get(names[index])
                # The next pod to place stands for the rest: one already placed would be
                # checked as a pod in the snapshot (from scratch, not counting itself).
                k, spent = _capacity(pods[done], ni, snapshot)
                if k:
                    n = min(k, total - done)
                    done = self._fill(state, snapshot, pods, done, index, n)
                    state.last_index = index
                    if spent and n == k:
                        # Its devices are all taken: closed to the key, as a visit finds.
                        open_nodes.close(index)
                else:
                    # Usage only grows within an estimate: the node stays closed to the key.
                    open_nodes.close(index)
                index = next_candidate(index + 1, hi)
        return pods[done:]

    def _place_arithmetic(
        self,
        state: _State,
        pods: Sequence[Pod],
        snapshot: ClusterSnapshot,
        limiter: EstimationLimiter,
    ) -> None:
        remaining = self._existing_arithmetic(state, pods, snapshot)
        if remaining:
            self._new_arithmetic(state, remaining, snapshot, limiter)

    def _new_arithmetic(
        self,
        state: _State,
        pods: Sequence[Pod],
        snapshot: ClusterSnapshot,
        limiter: EstimationLimiter,
    ) -> None:
        rep = pods[0]
        done = 0
        total = len(pods)
        last = state.last_node
        # Nodes whose devices these pods take all are closed to their key, so that the
        # next pods of the key (another group's) do not visit them to find that out.
        open_nodes = _open_nodes(state, rep, snapshot) if rep.resource_claims else None
        if last is not None:
            k, spent = _capacity(rep, snapshot.get(last), snapshot)
            n = min(k, total)
            done = self._fill(state, snapshot, pods, done, len(state.new_nodes) - 1, n)
            if spent and n == k and open_nodes is not None:
                open_nodes.close(len(state.new_nodes) - 1)
        while done < total:
            last = state.last_node
            if last is not None and last not in state.with_pods:
                break
            reason = limiter.permission_to_add_node()
            if reason is not None:
                state.limited_by = reason
                break
            ni = self._add_node(state, snapshot)
            k, spent = _capacity(pods[done], ni, snapshot)
            if not k:
                break
            n = min(k, total - done)
            done = self._fill(state, snapshot, pods, done, len(state.new_nodes) - 1, n)
            if spent and n == k and open_nodes is not None:
                open_nodes.close(len(state.new_nodes) - 1)
        state.unscheduled.extend(pods[done:])
