"""Counting nodes and cores the way the cluster-proportional-autoscaler does.

A node is schedulable when it is not cordoned (`spec.unschedulable`) and its `Ready`
condition is `True`. Cores are the sum of `status.allocatable.cpu`, rounded up to whole
cores after summing: three nodes of `3920m` count as 12 cores (11.76 rounded up), the way
upstream rounds the summed quantity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.model.quantity import parse_cpu_millis
from clusterscaler.proportional.calculator import ClusterSize

LABELS_FORM = "a comma separated list of key=value pairs, e.g. pool=dns,zone=a"


def parse_node_labels(text: str) -> dict[str, str]:
    """Parse `--nodelabels` (`k1=v1,k2=v2`); an empty string selects every node."""
    labels: dict[str, str] = {}
    if not text.strip():
        return labels
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or "=" in value or "!" in key:
            raise ValueError(f"expected {LABELS_FORM}, got {text!r} (bad pair {part!r})")
        if key in labels and labels[key] != value:
            raise ValueError(f"expected {LABELS_FORM}, got {text!r} (key {key!r} repeated)")
        labels[key] = value
    return labels


def label_selector(labels: Mapping[str, str]) -> str:
    """The API server's label selector for `labels` (`""` for all)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", "<unnamed>"))


def is_schedulable(node: Mapping[str, Any]) -> bool:
    """Not cordoned and Ready=True: the nodes new replicas can actually land on."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def node_cpu_millis(node: Mapping[str, Any]) -> int:
    """Allocatable milli-CPUs of a node (0 when the node reports none yet)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    raw = allocatable.get("cpu")
    if raw is None:
        return 0
    return parse_cpu_millis(raw, obj=f"node {_name(node)}", field="status.allocatable.cpu")


@dataclass(frozen=True)
class NodeFacts:
    """What counting needs of a node; the node cache keeps only this."""

    name: str
    cpu_millis: int
    schedulable: bool
    labels: Mapping[str, str] = field(default_factory=dict)


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    """Extract the facts of a raw node; a malformed CPU quantity raises `QuantityError`."""
    return NodeFacts(
        name=_name(node),
        cpu_millis=node_cpu_millis(node),
        schedulable=is_schedulable(node),
        labels=dict((node.get("metadata") or {}).get("labels") or {}),
    )


def _whole_cores(millis: int) -> int:
    return -(-millis // 1000)


def count_cluster(
    nodes: Iterable[Mapping[str, Any] | NodeFacts], labels: Mapping[str, str] | None = None
) -> ClusterSize:
    """Count the nodes (carrying `labels`) and their cores, all and schedulable."""
    total_nodes = schedulable_nodes = 0
    total_millis = schedulable_millis = 0
    for node in nodes:
        facts = node if isinstance(node, NodeFacts) else node_facts(node)
        if labels and any(facts.labels.get(k) != v for k, v in labels.items()):
            continue
        total_nodes += 1
        total_millis += facts.cpu_millis
        if facts.schedulable:
            schedulable_nodes += 1
            schedulable_millis += facts.cpu_millis
    return ClusterSize(
        nodes=total_nodes,
        cores=_whole_cores(total_millis),
        schedulable_nodes=schedulable_nodes,
        schedulable_cores=_whole_cores(schedulable_millis),
    )
