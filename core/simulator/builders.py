"""Concise constructors for nodes and pods, for scenarios, templates and tests.

Quantities are given in Kubernetes form (`"500m"`, `"2Gi"`) and parsed once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from clusterscaler.model import (
    HOSTNAME_LABEL,
    POD_SLOT,
    Affinity,
    HostPort,
    LabelSelector,
    Node,
    NodeAffinity,
    NodeCondition,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerRef,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    Resources,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)

__all__ = ["affinity_term", "make_node", "make_pod", "node_term", "resources", "spread"]


def resources(
    cpu: str | int = 0,
    memory: str | int = 0,
    pods: int = 0,
    ephemeral_storage: str | int = 0,
    extended: Mapping[str, int] | None = None,
    *,
    obj: str = "resources",
) -> Resources:
    """A resource vector from Kubernetes quantities."""
    raw: dict[str, Any] = {}
    if cpu:
        raw["cpu"] = cpu
    if memory:
        raw["memory"] = memory
    if pods:
        raw["pods"] = pods
    if ephemeral_storage:
        raw["ephemeral-storage"] = ephemeral_storage
    for k, v in (extended or {}).items():
        raw[k] = v
    return Resources.from_k8s(raw, obj=obj, field="resources")


def make_node(
    name: str,
    cpu: str | int = "4",
    memory: str | int = "16Gi",
    pods: int = 110,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    extended: Mapping[str, int] | None = None,
    ephemeral_storage: str | int = 0,
    unschedulable: bool = False,
    ready: bool = True,
    provider_id: str = "",
    annotations: Mapping[str, str] | None = None,
) -> Node:
    """A ready node whose capacity equals its allocatable."""
    alloc = resources(cpu, memory, pods, ephemeral_storage, extended, obj=f"Node {name}")
    all_labels = {HOSTNAME_LABEL: name}
    all_labels.update(labels or {})
    return Node(
        name=name,
        labels=all_labels,
        annotations=dict(annotations or {}),
        taints=tuple(taints),
        capacity=alloc,
        allocatable=alloc,
        unschedulable=unschedulable,
        ready=ready,
        provider_id=provider_id,
        uid=f"uid-{name}",
        conditions=(NodeCondition("Ready", "True" if ready else "False"),),
    )


def make_pod(
    name: str,
    cpu: str | int = 0,
    memory: str | int = 0,
    *,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    owner: OwnerRef | None = None,
    node_name: str = "",
    extended: Mapping[str, int] | None = None,
    ephemeral_storage: str | int = 0,
    tolerations: Iterable[Toleration] = (),
    node_selector: Mapping[str, str] | None = None,
    required_node_terms: Iterable[NodeSelectorTerm] | None = None,
    affinity: Iterable[PodAffinityTerm] = (),
    anti_affinity: Iterable[PodAffinityTerm] = (),
    topology_spread: Iterable[TopologySpreadConstraint] = (),
    host_ports: Iterable[int | HostPort] = (),
    annotations: Mapping[str, str] | None = None,
    priority: int | None = None,
    phase: str = "Pending",
    **extra: Any,
) -> Pod:
    """A pod with the given effective requests (a pod slot is added)."""
    req = resources(cpu, memory, 0, ephemeral_storage, extended, obj=f"Pod {namespace}/{name}")
    node_aff = NodeAffinity(tuple(required_node_terms)) if required_node_terms is not None else None
    aff_terms = tuple(affinity)
    anti_terms = tuple(anti_affinity)
    pod_aff = PodAffinity(aff_terms, anti_terms) if aff_terms or anti_terms else None
    aff = Affinity(node_aff, pod_aff) if node_aff is not None or pod_aff is not None else None
    ports = tuple(p if isinstance(p, HostPort) else HostPort(p) for p in host_ports)
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        labels=dict(labels or {}),
        annotations=dict(annotations or {}),
        node_name=node_name,
        phase=phase,
        priority=priority,
        owner=owner,
        owners=(owner,) if owner is not None else (),
        requests=req + POD_SLOT,
        tolerations=tuple(tolerations),
        node_selector=dict(node_selector or {}),
        affinity=aff,
        topology_spread=tuple(topology_spread),
        host_ports=ports,
        **extra,
    )


def affinity_term(
    topology_key: str,
    match_labels: Mapping[str, str],
    *,
    namespaces: Iterable[str] = ("default",),
    namespace_selector: LabelSelector | None = None,
) -> PodAffinityTerm:
    """A required pod (anti-)affinity term selecting pods by labels."""
    return PodAffinityTerm(
        topology_key,
        LabelSelector(tuple(sorted(match_labels.items()))),
        frozenset(namespaces),
        namespace_selector,
    )


def spread(
    topology_key: str,
    match_labels: Mapping[str, str],
    max_skew: int = 1,
    *,
    when_unsatisfiable: str = "DoNotSchedule",
    min_domains: int | None = None,
    node_affinity_policy: str = "Honor",
    node_taints_policy: str = "Ignore",
) -> TopologySpreadConstraint:
    """A topology spread constraint selecting pods by labels."""
    return TopologySpreadConstraint(
        max_skew,
        topology_key,
        when_unsatisfiable,
        LabelSelector(tuple(sorted(match_labels.items()))),
        min_domains,
        node_affinity_policy,
        node_taints_policy,
    )


def node_term(key: str, operator: str, *values: str) -> NodeSelectorTerm:
    """A node selector term with one label requirement."""
    return NodeSelectorTerm((NodeSelectorRequirement(key, operator, tuple(values)),))
