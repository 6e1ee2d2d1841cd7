"""Skipping, during one estimate, the added nodes a pod cannot go to.

An estimate only adds nodes and pods, so a node's free resources only shrink and the
pods whose terms could repel a pod only grow: some filter failures, once seen, hold for
the rest of the estimate. The estimator uses two structures to skip such nodes without
running the filters on them again; both only skip nodes on which the filters would fail,
so the first node that takes a pod is the one a plain scan finds.

- `OpenNodes`: per closure key (what decides a kind of failure), the nodes not yet seen
  failing for it, as a union-find "next" array.
- `FreeRoom`: the free cpu, memory and pod slots of every added node, with the largest
  of each per block of nodes, so a scan passes over a block of nodes too full for the
  pod's requests in one step.
"""

from __future__ import annotations

from typing import Any

from clusterscaler.api import (
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
    REASON_NODE_AFFINITY,
    REASON_NODE_NAME,
    REASON_PORTS,
    REASON_TOO_MANY_PODS,
    REASON_UNSCHEDULABLE,
    Pod,
    SimNodeInfo,
)

__all__ = [
    "FreeRoom",
    "OpenNodes",
    "closes_for_node_fit",
    "closes_for_pod_terms",
    "next_open_of_both",
    "node_fit_key",
    "pod_terms_key",
    "same_closure_keys",
]

ClosureKey = tuple[Any, ...]


def node_fit_key(pod: Pod) -> ClosureKey:
    """What decides the filters that, once failed, fail for the rest of an estimate
    whatever the pod's labels: the node's own properties (unschedulable, name, taints,
    node selector and required node affinity), host ports and resources."""
    affinity = pod.affinity
    node_affinity = affinity.node if affinity is not None else None
    selector = pod.node_selector
    return (
        pod.requests,
        pod.tolerations,
        tuple(sorted(selector.items())) if selector else (),
        node_affinity.required if node_affinity is not None else None,
        pod.node_name,
        pod.host_ports,
    )


def pod_terms_key(pod: Pod) -> ClosureKey:
    """What also decides the anti-affinity filters: the pod's own terms, and its namespace
    and labels (which the terms of the pods already placed select)."""
    return (node_fit_key(pod), pod.namespace, tuple(sorted(pod.labels.items())), pod.affinity)


def same_closure_keys(pod: Pod, rep: Pod) -> bool:
    """Whether `pod` has `rep`'s closure keys (pods of one workload share the objects, so
    identity settles most checks)."""
    return (
        (pod.requests is rep.requests or pod.requests == rep.requests)
        and (pod.tolerations is rep.tolerations or pod.tolerations == rep.tolerations)
        and (pod.node_selector is rep.node_selector or pod.node_selector == rep.node_selector)
        and (pod.affinity is rep.affinity or pod.affinity == rep.affinity)
        and (pod.labels is rep.labels or pod.labels == rep.labels)
        and pod.host_ports == rep.host_ports
        and pod.node_name == rep.node_name
        and pod.namespace == rep.namespace
    )


# The node's own properties, host ports and resources depend on the node fit key alone.
_NODE_FIT_REASONS = frozenset(
    {
        REASON_UNSCHEDULABLE,
        REASON_NODE_NAME,
        REASON_NODE_AFFINITY,
        REASON_PORTS,
        REASON_TOO_MANY_PODS,
    }
)
_INSUFFICIENT = "Insufficient "
_UNTOLERATED_TAINT = "node(s) had untolerated taint "
# Anti-affinity, the pod's own and the placed pods' (whose matches only grow).
_POD_TERMS_REASONS = frozenset({REASON_ANTI_AFFINITY, REASON_EXISTING_ANTI_AFFINITY})


def closes_for_node_fit(reason: str) -> bool:
    """Whether a failure for `reason` holds for every pod with the same node fit key for
    the rest of the estimate. Topology spread and pod affinity may pass later, and volume
    filters depend on the pod's own claims: those never close a node."""
    return (
        reason in _NODE_FIT_REASONS
        or reason.startswith(_INSUFFICIENT)
        or reason.startswith(_UNTOLERATED_TAINT)
    )


def closes_for_pod_terms(reason: str) -> bool:
    """Whether a failure for `reason` holds for every pod with the same pod terms key."""
    return reason in _POD_TERMS_REASONS


class OpenNodes:
    """Indices of the added nodes not yet known to be closed to one closure key.

    `next_open(i)` is the first such index at or after `i` (or the node count when there is
    none): a union-find "next" array with path halving, so skipping closed nodes costs
    amortised near-constant time. Indices at or past the end are open, which is right for
    nodes added later.
    """

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next: list[int] = []

    def next_open(self, i: int) -> int:
        nxt = self._next
        while i < len(nxt):
            j = nxt[i]
            if j == i:
                return i
            # Path halving: point `i` two steps ahead before moving on.
            k = nxt[j] if j < len(nxt) else j
            nxt[i] = k
            i = k
        return i

    def close(self, i: int) -> None:
        nxt = self._next
        while len(nxt) <= i:
            nxt.append(len(nxt))
        nxt[i] = i + 1

    def close_range(self, lo: int, hi: int) -> None:
        """Close every index in [`lo`, `hi`); each open one is touched once, the closed
        ones are skipped."""
        i = self.next_open(lo)
        while i < hi:
            self.close(i)
            i = self.next_open(i + 1)


def next_open_of_both(a: OpenNodes, b: OpenNodes, i: int) -> int:
    """The first index at or after `i` open in both `a` and `b`."""
    while True:
        j = a.next_open(i)
        k = b.next_open(j)
        if k == j:
            return j
        i = k


# Nodes per block of `FreeRoom`: a full block is passed over in one step, a block with
# room for the pod is looked at node by node.
_BLOCK_SHIFT = 5


class FreeRoom:
    """Free cpu, memory and pod slots of the added nodes (allocatable minus requested, as
    the resources filter computes them), and the largest of each per block of nodes.

    A node whose free amount of one of them is below the pod's request fails the
    resources filter; a block whose largest free amount is below it holds only such nodes.
    """

    __slots__ = ("block_cpu", "block_memory", "block_pods", "cpu", "memory", "pods")

    def __init__(self) -> None:
        self.cpu: list[int] = []
        self.memory: list[int] = []
        self.pods: list[int] = []
        self.block_cpu: list[int] = []
        self.block_memory: list[int] = []
        self.block_pods: list[int] = []

    def __len__(self) -> int:
        return len(self.cpu)

    def append(self, ni: SimNodeInfo) -> None:
        """Track a node just added (its index is the number of nodes before it)."""
        index = len(self.cpu)
        alloc = ni.node.allocatable
        cpu = alloc.cpu - ni.req_cpu
        memory = alloc.memory - ni.req_memory
        pods = alloc.pods - ni.req_pods
        self.cpu.append(cpu)
        self.memory.append(memory)
        self.pods.append(pods)
        if index & ((1 << _BLOCK_SHIFT) - 1) == 0:
            self.block_cpu.append(cpu)
            self.block_memory.append(memory)
            self.block_pods.append(pods)
        else:
            b = index >> _BLOCK_SHIFT
            self.block_cpu[b] = max(self.block_cpu[b], cpu)
            self.block_memory[b] = max(self.block_memory[b], memory)
            self.block_pods[b] = max(self.block_pods[b], pods)

    def update(self, index: int, ni: SimNodeInfo) -> None:
        """The node at `index` received (or, in general, lost) pods.

        A block's figure only has to stay an upper bound for the skipping to be right: it
        rises with a node at once, and is brought down to the exact largest amount only
        when a scan finds no node of the block with room (`next_fitting`).
        """
        alloc = ni.node.allocatable
        b = index >> _BLOCK_SHIFT
        cpu = self.cpu[index] = alloc.cpu - ni.req_cpu
        memory = self.memory[index] = alloc.memory - ni.req_memory
        pods = self.pods[index] = alloc.pods - ni.req_pods
        if cpu > self.block_cpu[b]:
            self.block_cpu[b] = cpu
        if memory > self.block_memory[b]:
            self.block_memory[b] = memory
        if pods > self.block_pods[b]:
            self.block_pods[b] = pods

    def next_fitting(self, i: int, hi: int, cpu: int, memory: int, pods: int) -> int:
        """The first index in [`i`, `hi`) with room for the requests, or `hi`."""
        fc, fm, fp = self.cpu, self.memory, self.pods
        bc, bm, bp = self.block_cpu, self.block_memory, self.block_pods
        size = 1 << _BLOCK_SHIFT
        while i < hi:
            b = i >> _BLOCK_SHIFT
            if bc[b] < cpu or bm[b] < memory or bp[b] < pods:
                i = (b + 1) << _BLOCK_SHIFT
                continue
            lo = b << _BLOCK_SHIFT
            whole = i == lo
            end = min(lo + size, hi)
            while i < end:
                if fc[i] >= cpu and fm[i] >= memory and fp[i] >= pods:
                    return i
                i += 1
            if whole and end == lo + size:
                # No node of the block has room although its figures said one might:
                # tighten them to the exact largest amounts.
                bc[b] = max(fc[lo:end])
                bm[b] = max(fm[lo:end])
                bp[b] = max(fp[lo:end])
        return hi
