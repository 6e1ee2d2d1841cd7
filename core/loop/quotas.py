"""CapacityQuotas (--capacity-quotas-enabled) during scale-up: how many more nodes of a
template each quota that covers it allows, as Cluster Autoscaler's `resourcequotas`
tracker counts them.

A quota covers a node when its selector matches the node's labels (a template node's for a
node group). What a node counts for: `cpu` (whole cores of capacity, rounded up), `memory`
(bytes of capacity), `nodes` (one), and, when the cloud provider names a GPU label and the
node has it, its GPUs under the label's value (the GPU type), as upstream's custom-resources
processor reports them. A quota's limit on another resource name constrains nothing here,
as upstream; the usage in its status still counts that resource of the nodes' capacity.

Usage is counted over the registered nodes and the upcoming ones (as their templates);
virtual-kubelet nodes are left out, as upstream leaves them out. Only valid quotas limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from clusterscaler.loop.decisions import GroupRejection, NoScaleUpReason
from clusterscaler.model import GPU_RESOURCE, Node
from clusterscaler.model.capacityquota import (
    RECONCILED,
    RECONCILIATION_FAILED,
    RECONCILIATION_SUCCEEDED,
    RESOURCE_CPU,
    RESOURCE_MEMORY,
    RESOURCE_NODES,
    VALID,
    VALIDATION_FAILED,
    VALIDATION_SUCCEEDED,
    CapacityQuota,
)
from clusterscaler.model.provisioning import Condition, set_condition
from clusterscaler.model.quantity import format_bytes, format_cpu

# The label upstream recognises virtual-kubelet nodes by (`type=virtual-kubelet`).
VIRTUAL_KUBELET_LABEL = "type"
VIRTUAL_KUBELET = "virtual-kubelet"


def is_virtual_kubelet(node: Node) -> bool:
    return node.labels.get(VIRTUAL_KUBELET_LABEL) == VIRTUAL_KUBELET


def node_quota_resources(node: Node, gpu_label: str) -> dict[str, int]:
    """What one node counts for against a quota (see the module docstring)."""
    out = {
        RESOURCE_CPU: -(-node.capacity.cpu // 1000),
        RESOURCE_MEMORY: node.capacity.memory,
        RESOURCE_NODES: 1,
    }
    gpu_type = node.labels.get(gpu_label) if gpu_label else None
    if gpu_type:
        gpus = node.allocatable.extended.get(GPU_RESOURCE, 0)
        if gpus > 0:
            out[gpu_type] = gpus
    return out


@dataclass(frozen=True, slots=True)
class ExceededQuota:
    """A quota that more nodes would exceed, and on which of its resources."""

    quota: str  # "CapacityQuota/<name>", as upstream names it
    resources: tuple[str, ...]

    def rejection(self, node_group: str) -> GroupRejection:
        """Why `node_group` is held back: upstream's reason, `exceeded quota:
        "CapacityQuota/<name>", resources: <names>`."""
        return GroupRejection(
            node_group,
            NoScaleUpReason.CAPACITY_QUOTA_EXCEEDED,
            f'"{self.quota}", resources: {", ".join(self.resources)}',
            exceeded=self.resources,
        )


@dataclass(frozen=True, slots=True)
class QuotaCheck:
    """How many of the nodes asked for the quotas allow (`allowed`, at most the count
    asked), and which quotas would be exceeded by the whole count."""

    allowed: int
    exceeded: tuple[ExceededQuota, ...] = ()


class QuotaTracker:
    """The room each valid quota leaves, per resource, consumed as a scale-up is planned.

    Built once per loop from the nodes; `check` answers without changing anything,
    `consume` takes the room of the nodes it allows (all of them or none)."""

    __slots__ = ("_gpu_label", "_left", "_quotas")

    def __init__(self, quotas: Sequence[CapacityQuota], gpu_label: str = "") -> None:
        self._quotas = tuple(q for q in quotas if q.valid)
        self._gpu_label = gpu_label
        self._left: dict[str, dict[str, int]] = {q.name: dict(q.limits) for q in self._quotas}

    @classmethod
    def build(
        cls,
        quotas: Sequence[CapacityQuota],
        nodes: Iterable[Node],
        gpu_label: str = "",
        upcoming: Iterable[tuple[Node, int]] = (),
    ) -> QuotaTracker:
        """The tracker with the room left after `nodes` (registered) and `upcoming`
        (template node, how many) are counted."""
        tracker = cls(quotas, gpu_label)
        for node in nodes:
            tracker._use(node, 1)
        for node, count in upcoming:
            tracker._use(node, count)
        return tracker

    def __bool__(self) -> bool:
        return bool(self._quotas)

    @property
    def quotas(self) -> tuple[CapacityQuota, ...]:
        return self._quotas

    def left(self) -> dict[str, dict[str, int]]:
        """The room left per quota and resource (a copy)."""
        return {name: dict(room) for name, room in self._left.items()}

    def _use(self, node: Node, count: int) -> None:
        if count <= 0 or is_virtual_kubelet(node):
            return
        per_node = None
        for q in self._quotas:
            if not q.applies_to(node.labels):
                continue
            if per_node is None:
                per_node = node_quota_resources(node, self._gpu_label)
            room = self._left[q.name]
            for name, amount in per_node.items():
                if name in room:
                    room[name] = max(room[name] - amount * count, 0)

    def check(self, node: Node, count: int) -> QuotaCheck:
        """How many of `count` nodes shaped like `node` the quotas allow."""
        if count < 0:
            raise ValueError(f"node count must not be negative, got {count}")
        allowed = count
        exceeded: list[ExceededQuota] = []
        per_node = None
        for q in self._quotas:
            if not q.applies_to(node.labels):
                continue
            if per_node is None:
                per_node = node_quota_resources(node, self._gpu_label)
            room = self._left[q.name]
            over: list[str] = []
            for name, amount in per_node.items():
                left = room.get(name)
                if left is None or amount <= 0:
                    continue
                if left < amount * count:
                    allowed = min(allowed, left // amount)
                    over.append(name)
            if over:
                exceeded.append(ExceededQuota(q.id, tuple(over)))
        return QuotaCheck(allowed, tuple(exceeded))

    def consume(self, node: Node, count: int) -> QuotaCheck:
        """`check`, then take the room of the `count` nodes when all of them fit."""
        result = self.check(node, count)
        if result.allowed == count:
            self._use(node, count)
        return result


def quota_usage(quota: CapacityQuota, nodes: Iterable[Node]) -> dict[str, str]:
    """`status.used.resources` of `quota`, as upstream's controller writes it: for each
    resource of its limits, the sum over the registered nodes it covers (virtual-kubelet
    nodes left out) of their capacity of that resource (`nodes`: their count), as a
    quantity."""
    covered = [n for n in nodes if not is_virtual_kubelet(n) and quota.applies_to(n.labels)]
    out: dict[str, str] = {}
    for name in quota.limits:
        if name == RESOURCE_NODES:
            out[name] = str(len(covered))
        elif name == RESOURCE_CPU:
            out[name] = format_cpu(sum(n.capacity.cpu for n in covered))
        elif name == RESOURCE_MEMORY:
            out[name] = format_bytes(sum(n.capacity.memory for n in covered))
        elif name == "ephemeral-storage":
            out[name] = format_bytes(sum(n.capacity.ephemeral_storage for n in covered))
        elif name == "pods":
            out[name] = str(sum(n.capacity.pods for n in covered))
        else:
            out[name] = str(sum(n.capacity.extended.get(name, 0) for n in covered))
    return out


@dataclass(frozen=True, slots=True)
class CapacityQuotaStatus:
    """The status upstream's CapacityQuota controller gives a quota: `used` (None: left as
    it is, for an invalid quota) and the `Valid` and `Reconciled` conditions. `changed` says
    whether it differs from what the quota holds now (nothing to write otherwise)."""

    name: str
    uid: str
    used: Mapping[str, str] | None
    conditions: tuple[Condition, ...]
    changed: bool


def _same(a: Condition | None, b: Condition) -> bool:
    return a is not None and (a.status, a.reason, a.message, a.observed_generation) == (
        b.status,
        b.reason,
        b.message,
        b.observed_generation,
    )


def quota_status(quota: CapacityQuota, nodes: Sequence[Node], now: datetime) -> CapacityQuotaStatus:
    """What upstream's controller writes for `quota`: an invalid one gets `Valid=False`
    (the error) and `Reconciled=False`, its usage left as it is; a valid one gets its
    usage over the registered `nodes` and both conditions `True`."""
    gen = quota.generation
    if quota.valid:
        used: dict[str, str] | None = quota_usage(quota, nodes)
        wanted = (
            Condition(
                VALID,
                "True",
                VALIDATION_SUCCEEDED,
                "CapacityQuota is valid",
                observed_generation=gen,
            ),
            Condition(
                RECONCILED,
                "True",
                RECONCILIATION_SUCCEEDED,
                "CapacityQuota successfully reconciled",
                observed_generation=gen,
            ),
        )
    else:
        used = None
        wanted = (
            Condition(VALID, "False", VALIDATION_FAILED, quota.error, observed_generation=gen),
            Condition(
                RECONCILED,
                "False",
                RECONCILIATION_FAILED,
                "Validation failed",
                observed_generation=gen,
            ),
        )
    changed = (used is not None and dict(quota.used) != used) or not all(
        _same(quota.condition(c.type), c) for c in wanted
    )
    merged = quota.conditions
    for c in wanted:
        merged = set_condition(merged, dataclasses.replace(c, last_transition_time=now))
    # Only the controller's own conditions are written; the others stay as the server has them.
    by_type = {c.type: c for c in merged}
    conditions = tuple(by_type[c.type] for c in wanted)
    return CapacityQuotaStatus(quota.name, quota.uid, used, conditions, changed)


def quota_statuses(
    quotas: Sequence[CapacityQuota], nodes: Sequence[Node], now: datetime
) -> tuple[CapacityQuotaStatus, ...]:
    """`quota_status` of every quota, in name order."""
    return tuple(quota_status(q, nodes, now) for q in sorted(quotas, key=lambda q: q.name))
