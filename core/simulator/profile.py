"""The scheduler profile of `--scheduler-config-file` applied to the simulation.

`configured_filters` turns a `SchedulerConfig` into the filters a `ClusterSnapshot` runs
(`None` when the configuration changes none, so that `check_predicates` keeps its inlined
path); `with_default_spread` gives the pods without topology spread constraints of their
own the profile's List default constraints, as kube-scheduler's PodTopologySpread does.

The default constraints select the pods the pod's controller selects: kube-scheduler
derives the selector from the Services selecting the pod and from the pod's controller
owner (its owner reference with `controller: true`) when that is a ReplicaSet,
ReplicationController or StatefulSet. Services are not read here, so the selector is the
controller's alone, and a pod without such a controller (or whose controller has an empty
selector) gets no default constraints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from clusterscaler.framework.schedulerconfig import SchedulerConfig
from clusterscaler.model import (
    ClusterObjects,
    Controller,
    LabelSelector,
    NodeSelectorTerm,
    Pod,
    TopologySpreadConstraint,
    node_selector_matches,
)
from clusterscaler.simulator.predicates import (
    PREDICATES,
    REASON_NODE_AFFINITY,
    Predicate,
    check_node_affinity,
    check_volume_binding,
    check_volume_zone,
    resources_check_ignoring,
)
from clusterscaler.simulator.snapshot import ClusterSnapshot, SimNodeInfo

__all__ = [
    "DefaultSpread",
    "configured_filters",
    "default_spread_selector",
    "node_affinity_adding",
    "with_default_spread",
]

# The controller kinds kube-scheduler's DefaultSelector reads, with their API group.
_SELECTING_KINDS = {"ReplicaSet": "apps", "ReplicationController": "", "StatefulSet": "apps"}
# Bound on the constraints kept per selector across calls (then dropped and rebuilt).
_SHARED_LIMIT = 10_000


def configured_filters(config: SchedulerConfig) -> tuple[tuple[str, Predicate], ...] | None:
    """The filters to run, in kube-scheduler's order, or `None` for the defaults."""
    if not config.changes_filters:
        return None
    out: list[tuple[str, Predicate]] = []
    for name, predicate in PREDICATES:
        if name == "VolumeBinding":
            # One check by default; the two plugins apart when configured.
            out += [("VolumeBinding", check_volume_binding), ("VolumeZone", check_volume_zone)]
            continue
        if name == "NodeAffinity" and config.added_node_affinity is not None:
            predicate = node_affinity_adding(config.added_node_affinity)
        if name == "NodeResourcesFit" and (
            config.ignored_resources or config.ignored_resource_groups
        ):
            predicate = resources_check_ignoring(config.ignores_resource)
        out.append((name, predicate))
    return tuple((n, p) for n, p in out if n not in config.disabled_filters)


def node_affinity_adding(terms: tuple[NodeSelectorTerm, ...]) -> Predicate:
    """NodeAffinity with the profile's addedAffinity: a node must match one of `terms` as
    well as the pod's own node selector and affinity."""

    def check(pod: Pod, ni: SimNodeInfo, snapshot: ClusterSnapshot) -> str | None:
        if not node_selector_matches(terms, ni.node.name, ni.node.labels):
            return REASON_NODE_AFFINITY
        return check_node_affinity(pod, ni, snapshot)

    return check


def default_spread_selector(pod: Pod, controllers: Sequence[Controller]) -> LabelSelector | None:
    """The selector kube-scheduler derives for `pod`'s default constraints, Services left
    out: that of the pod's controller owner, found among `controllers` by kind, namespace
    and name; `None` when the pod has no such controller or its selector is empty."""
    return _owner_selector(pod, _by_owner(controllers))


def _by_owner(
    controllers: Iterable[Controller],
) -> dict[tuple[str, str, str], LabelSelector]:
    """The non-empty selectors of the controllers kube-scheduler reads, by kind,
    namespace and name."""
    return {
        (c.kind, c.namespace, c.name): c.selector
        for c in controllers
        if c.kind in _SELECTING_KINDS and c.selector is not None and not c.selector.is_empty()
    }


def _owner_selector(
    pod: Pod, selectors: Mapping[tuple[str, str, str], LabelSelector]
) -> LabelSelector | None:
    owner = pod.owner
    if owner is None or owner.kind not in _SELECTING_KINDS:
        return None
    if owner.api_version:
        # kube-scheduler matches the owner's group and kind (apps/v1 ReplicaSet, ...).
        group = owner.api_version.rpartition("/")[0]
        if group != _SELECTING_KINDS[owner.kind]:
            return None
    return selectors.get((owner.kind, pod.namespace, owner.name))


def with_default_spread(objects: ClusterObjects, config: SchedulerConfig) -> ClusterObjects:
    """`objects` with the profile's default constraints on the pods that take them; the
    same `objects` when no default constraint filters."""
    return DefaultSpread(config)(objects)


class DefaultSpread:
    """`with_default_spread` for a sequence of snapshots of one cluster: a pod seen in the
    previous call, still taking the same constraints, is not copied again (the loop calls
    it on every snapshot, and pods are parsed once and kept)."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        # One constraints tuple per selector, so pods of a workload share it (the
        # simulation compares such values by identity first).
        self._shared: dict[LabelSelector, tuple[TopologySpreadConstraint, ...]] = {}
        # By id of the pod as given: the pod, its constraints, its copy carrying them.
        self._copies: dict[int, tuple[Pod, tuple[TopologySpreadConstraint, ...], Pod]] = {}

    def __call__(self, objects: ClusterObjects) -> ClusterObjects:
        if not self.config.filters_default_spread:
            return objects
        selectors = _by_owner(objects.controllers)
        if len(self._shared) > _SHARED_LIMIT:
            self._shared.clear()
        shared = self._shared
        previous = self._copies
        copies: dict[int, tuple[Pod, tuple[TopologySpreadConstraint, ...], Pod]] = {}
        pods: list[Pod] = []
        changed = False
        for pod in objects.pods:
            selector = None if pod.topology_spread else _owner_selector(pod, selectors)
            if selector is None:
                pods.append(pod)
                continue
            constraints = shared.get(selector)
            if constraints is None:
                constraints = shared[selector] = tuple(
                    dataclasses.replace(c, label_selector=selector)
                    for c in self.config.default_spread
                )
            entry = previous.get(id(pod))
            if entry is None or entry[0] is not pod or entry[1] is not constraints:
                entry = (pod, constraints, pod.with_(topology_spread=constraints))
            copies[id(pod)] = entry
            pods.append(entry[2])
            changed = True
        self._copies = copies
        if not changed:
            return objects
        return dataclasses.replace(objects, pods=pods)
