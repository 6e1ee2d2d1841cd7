"""The scheduler profile of `--scheduler-config-file` applied to the simulation.

`configured_filters` turns a `SchedulerConfig` into the filters a `ClusterSnapshot` runs
(`None` when the configuration changes none, so that `check_predicates` keeps its inlined
path); `with_default_spread` gives the pods without topology spread constraints of their
own the profile's List default constraints, as kube-scheduler's PodTopologySpread does.

The default constraints select, as kube-scheduler derives it, the pods matching every
ReplicaSet, ReplicationController and StatefulSet that selects the pod (the requirements of
all of them together). Services are not read: a pod selected by no such controller gets no
default constraints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from clusterscaler.framework.schedulerconfig import SchedulerConfig
from clusterscaler.model import (
    ClusterObjects,
    Controller,
    LabelSelector,
    LabelSelectorRequirement,
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

_SELECTING_KINDS = ("ReplicaSet", "ReplicationController", "StatefulSet")
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
    """The selector kube-scheduler derives for `pod`'s default constraints: every
    requirement of the controllers (of `controllers`, all in the pod's namespace) whose
    non-empty selector matches the pod; `None` when none does."""
    labels: dict[str, str] = {}
    expressions: list[LabelSelectorRequirement] = []
    for c in controllers:
        selector = c.selector
        if selector is None or selector.is_empty() or not selector.matches(pod.labels):
            continue
        labels.update(selector.match_labels)
        expressions.extend(e for e in selector.match_expressions if e not in expressions)
    if not labels and not expressions:
        return None
    return LabelSelector(tuple(sorted(labels.items())), tuple(expressions))


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
        # Controllers by one label their selector requires (any will do: the pod must
        # carry it), so that a pod is matched against the few that may select it;
        # selectors made of expressions only are tried on every pod of their namespace.
        by_label: dict[tuple[str, str, str], list[Controller]] = {}
        by_expressions: dict[str, list[Controller]] = {}
        namespaces: set[str] = set()
        for c in objects.controllers:
            if c.kind not in _SELECTING_KINDS or c.selector is None or c.selector.is_empty():
                continue
            namespaces.add(c.namespace)
            if c.selector.match_labels:
                key, value = c.selector.match_labels[0]
                by_label.setdefault((c.namespace, key, value), []).append(c)
            else:
                by_expressions.setdefault(c.namespace, []).append(c)
        if len(self._shared) > _SHARED_LIMIT:
            self._shared.clear()
        shared = self._shared
        previous = self._copies
        copies: dict[int, tuple[Pod, tuple[TopologySpreadConstraint, ...], Pod]] = {}
        pods: list[Pod] = []
        changed = False
        for pod in objects.pods:
            ns = pod.namespace
            if pod.topology_spread or ns not in namespaces or not pod.labels:
                pods.append(pod)
                continue
            controllers = list(by_expressions.get(ns, ()))
            for key, value in pod.labels.items():
                controllers += by_label.get((ns, key, value), ())
            selector = default_spread_selector(pod, controllers) if controllers else None
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
