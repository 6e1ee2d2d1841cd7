"""Counting nodes and cores the way the cluster-proportional-autoscaler does.

A node is schedulable when it is not cordoned (`spec.unschedulable`) and its `Ready`
condition is `True`. Cores are the sum of `status.allocatable.cpu`, rounded up to whole
cores after summing: three nodes of `3920m` count as 12 cores (11.76 rounded up), the way
upstream rounds the summed quantity.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from clusterscaler.proportional.calculator import ClusterSize

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_DECIMAL_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_BINARY_SUFFIX = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
QUANTITY_FORM = "a Kubernetes quantity such as 4, 3920m or 0.5"
LABELS_FORM = "a comma separated list of key=value pairs, e.g. pool=dns,zone=a"


def parse_cpu_millis(text: str) -> int:
    """Milli-CPUs in a quantity, rounded up (`"3920m"` -> 3920, `"2"` -> 2000)."""
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"expected {QUANTITY_FORM}, got {text!r}")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        value = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"expected {QUANTITY_FORM}, got {text!r}") from exc
    if suffix in _BINARY_SUFFIX:
        value *= Decimal(1024) ** _BINARY_SUFFIX[suffix]
    elif suffix in _DECIMAL_SUFFIX:
        value *= _DECIMAL_SUFFIX[suffix]
    elif suffix:
        value *= Decimal(10) ** int(suffix[1:])
    if value < 0:
        raise ValueError(f"expected a non-negative quantity, got {text!r}")
    millis = (value * 1000).to_integral_value(rounding="ROUND_CEILING")
    return int(millis)


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


def node_matches(node: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether the node carries every label in `labels`."""
    node_labels = (node.get("metadata") or {}).get("labels") or {}
    return all(node_labels.get(k) == v for k, v in labels.items())


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
    try:
        return parse_cpu_millis(str(raw))
    except ValueError as exc:
        raise ValueError(f"node {_name(node)}: status.allocatable.cpu: {exc}") from exc


def _whole_cores(millis: int) -> int:
    return -(-millis // 1000)


def count_cluster(
    nodes: Iterable[Mapping[str, Any]], labels: Mapping[str, str] | None = None
) -> ClusterSize:
    """Count the nodes (carrying `labels`) and their cores, all and schedulable."""
    total_nodes = schedulable_nodes = 0
    total_millis = schedulable_millis = 0
    for node in nodes:
        if labels and not node_matches(node, labels):
            continue
        millis = node_cpu_millis(node)
        total_nodes += 1
        total_millis += millis
        if is_schedulable(node):
            schedulable_nodes += 1
            schedulable_millis += millis
    return ClusterSize(
        nodes=total_nodes,
        cores=_whole_cores(total_millis),
        schedulable_nodes=schedulable_nodes,
        schedulable_cores=_whole_cores(schedulable_millis),
    )
