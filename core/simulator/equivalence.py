"""Pod equivalence groups: pods the scheduler would treat identically, simulated as one.

Pods of one controller (same controller UID) with equal labels and an equal
scheduling-relevant spec form a group. A controller contributes at most
`MAX_GROUPS_PER_CONTROLLER` groups; further variants become singletons, as do pods without
a controller and DaemonSet pods.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from clusterscaler.model import Pod
from clusterscaler.simulator.predicates import scheduling_volumes

__all__ = [
    "MAX_GROUPS_PER_CONTROLLER",
    "PodGroup",
    "flatten",
    "group_pods",
    "regroups_alike",
    "scheduling_key",
]

MAX_GROUPS_PER_CONTROLLER = 10


def scheduling_key(pod: Pod) -> Hashable:
    """Everything about a pod that can change where it schedules, except its identity."""
    return (
        pod.namespace,
        frozenset(pod.labels.items()),
        pod.requests,
        pod.tolerations,
        frozenset(pod.node_selector.items()),
        pod.affinity,
        pod.topology_spread,
        pod.host_ports,
        scheduling_volumes(pod),
        _own_claims(pod),
        pod.scheduler_name,
        pod.priority,
        pod.node_name,
        pod.resource_claims,
    )


def _own_claims(pod: Pod) -> str:
    """The pod's name when it has a generic ephemeral volume, else "": such a volume's
    claim is named after the pod and serves it alone (it may not exist yet, or be
    another's), so pods with equal ephemeral volumes still differ for scheduling."""
    volumes = pod.volumes
    if volumes and any(v.kind == "ephemeral" for v in volumes):
        return pod.name
    return ""


@dataclass(slots=True)
class PodGroup:
    """Equivalent pods; `pods[0]` represents the group in simulations.

    `alike` promises that every pod has the representative's `scheduling_key` (its
    namespace included), as in the groups `group_pods` makes (and their tails), so that a
    consumer may judge the group by its representative. A group built otherwise promises
    nothing and is checked pod by pod.
    """

    pods: list[Pod] = field(default_factory=list)
    alike: bool = False

    @property
    def representative(self) -> Pod:
        return self.pods[0]

    @property
    def controller_uid(self) -> str:
        owner = self.pods[0].owner
        return owner.uid if owner is not None else ""

    def __len__(self) -> int:
        return len(self.pods)

    def __iter__(self) -> Iterator[Pod]:
        return iter(self.pods)


def group_pods(
    pods: Iterable[Pod], max_groups_per_controller: int = MAX_GROUPS_PER_CONTROLLER
) -> list[PodGroup]:
    """Group pods in order of first appearance."""
    groups: list[PodGroup] = []
    by_controller: dict[str, dict[Hashable, PodGroup]] = {}
    # Per controller, its latest pod and the group it joined (None: a singleton past the
    # cap). The pods of a workload mostly come in a row and alike: comparing the fields
    # with that pod's is cheaper than building the key, and lands in the same group.
    latest: dict[str, tuple[Pod, PodGroup | None]] = {}
    for pod in pods:
        owner = pod.owner
        if owner is None or owner.kind == "DaemonSet" or not owner.uid:
            groups.append(PodGroup([pod], True))
            continue
        uid = owner.uid
        previous = latest.get(uid)
        if previous is not None and _same_scheduling(pod, previous[0]):
            group = previous[1]
            if group is not None:
                group.pods.append(pod)
            else:
                groups.append(PodGroup([pod], True))
            continue
        known = by_controller.setdefault(uid, {})
        key = scheduling_key(pod)
        group = known.get(key)
        if group is not None:
            group.pods.append(pod)
        elif len(known) < max_groups_per_controller:
            group = PodGroup([pod], True)
            known[key] = group
            groups.append(group)
        else:
            groups.append(PodGroup([pod], True))
            group = None
        latest[uid] = (pod, group)
    return groups


def _same_scheduling(a: Pod, b: Pod) -> bool:
    """Whether `scheduling_key(a) == scheduling_key(b)`, without building either key."""
    # Pods of one workload share most of these objects: identity settles them first.
    return (
        a.namespace == b.namespace
        and (a.requests is b.requests or a.requests == b.requests)
        and a.labels == b.labels
        and (a.tolerations is b.tolerations or a.tolerations == b.tolerations)
        and (a.node_selector is b.node_selector or a.node_selector == b.node_selector)
        and (a.affinity is b.affinity or a.affinity == b.affinity)
        and (a.topology_spread is b.topology_spread or a.topology_spread == b.topology_spread)
        and a.host_ports == b.host_ports
        and (a.volumes is b.volumes or scheduling_volumes(a) == scheduling_volumes(b))
        and _own_claims(a) == _own_claims(b)
        and a.scheduler_name == b.scheduler_name
        and a.priority == b.priority
        and a.node_name == b.node_name
        and a.resource_claims == b.resource_claims
    )


def regroups_alike(
    groups: Sequence[PodGroup], max_groups_per_controller: int = MAX_GROUPS_PER_CONTROLLER
) -> bool:
    """Whether `groups`, as `group_pods` returned them, come back unchanged from
    `group_pods` of their pods in group order, and so do any non-empty tails of them.

    Below the per-controller cap a group is exactly the pods of one controller and one
    scheduling key (or a single pod without a controller), and groups come in the order of
    their first pod: regrouping them, whole or cut to tails, finds the same groups in the
    same order. A controller that reached the cap left its later variants as singletons,
    and in group order another variant may come first and take a capped slot: those
    groups are not reusable. The cap is counted conservatively (as many groups as the cap
    counts as reached).
    """
    per_controller: dict[str, int] = {}
    for group in groups:
        owner = group.pods[0].owner
        if owner is None or owner.kind == "DaemonSet" or not owner.uid:
            continue
        count = per_controller.get(owner.uid, 0) + 1
        if count >= max_groups_per_controller:
            return False
        per_controller[owner.uid] = count
    return True


def flatten(groups: Sequence[PodGroup]) -> list[Pod]:
    return [p for g in groups for p in g.pods]
