"""Generated clusters for the safety properties, and the real loop run over them.

`clusters()` draws small clusters that call for scale-up and for scale-down at once: one to
three node groups of different shapes (min and max sizes, some of them zero-or-max), running
pods of varied sizes and kinds on the existing nodes (replicated, DaemonSet, bare, with a
host port, covered by one of two PodDisruptionBudgets), pending pods of varied sizes (some
pinned to a group, some too big for any), an optional node of no group, cluster-wide limits
drawn close to the cluster's size, and a few options (expander, balancing, min-size
enforcement, drain budgets).

`simulate()` runs the real `Autoscaler` loop over the cluster (through `safetykit.World`) for
a few loops, each past --scale-down-unneeded-time, playing the rest of the cluster between
loops: the cloud registers requested instances (at once or a loop later), the scheduler
binds pending pods, and each evicted pod is re-created on the node the removal simulation
chose for it. It records what each property needs in a `Trace`; the properties are asserted
by the tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from clusterscaler.framework.clusteractions import EvictionError
from clusterscaler.framework.options import AutoscalingOptions, MinMax
from clusterscaler.interfaces.cloudprovider import NodeGroupOptions
from clusterscaler.loop.decisions import LoopResult
from clusterscaler.model import Pod
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from clusterscaler.simulator.builders import make_node
from clusterscaler.testing.fakecloud import GROUP_LABEL
from hypothesis import strategies as st
from safetykit import DS, PAST_UNNEEDED, StorageCluster, World, pending, pod

# Node shapes: (cores, GiB). Two of them are alike so that balancing has similar groups.
SHAPES: Mapping[str, tuple[int, int]] = {
    "small": (2, 4),
    "std": (4, 16),
    "std2": (4, 16),
    "big": (8, 32),
    "mem": (2, 16),
}
POOL_LABEL = "pool"
# Pods running on the existing nodes: cpu in millicores, memory in MiB.
RUNNING_CPU = (100, 200, 300, 500, 800, 1200, 2500)
RUNNING_MEMORY = (128, 256, 512, 1024, 2048, 6144)
# Pending pods, some bigger than any node shape.
PENDING_CPU = (250, 500, 1000, 1500, 2000, 3000, 6000, 12000)
PENDING_MEMORY = (256, 512, 1024, 4096, 12288, 24576, 49152)
# rs: a ReplicaSet pod; ds: a DaemonSet pod; bare: a pod of no controller (blocks a drain).
KINDS = ("rs", "rs", "rs", "rs", "rs", "ds", "bare")
# The apps the two PodDisruptionBudgets cover ("web" has none).
APPS = ("web", "db", "cache")
PDB_APPS = ("db", "cache")
EXPANDERS = ("least-waste", "most-pods", "least-nodes", "random")
PORT = 8080
# Loops after the first, each PAST_UNNEEDED later.
LATER_LOOPS = 3
DEFAULTS = AutoscalingOptions()


@dataclass(frozen=True)
class PodSpec:
    cpu: int
    memory: int
    app: str
    kind: str
    port: bool


@dataclass(frozen=True)
class GroupSpec:
    shape: str
    min_size: int
    max_size: int
    zero_or_max: bool
    # The pods of each running node.
    nodes: tuple[tuple[PodSpec, ...], ...]


@dataclass(frozen=True)
class PendingSpec:
    cpu: int
    memory: int
    # Index of the group whose nodes the pod selects, or None.
    pool: int | None
    port: bool


@dataclass(frozen=True)
class ClusterSpec:
    groups: tuple[GroupSpec, ...]
    # The pods of a running node of no node group, or None for no such node.
    static: tuple[PodSpec, ...] | None
    pending: tuple[PendingSpec, ...]
    # Disruptions allowed by the budgets of the `db` and `cache` pods.
    pdb_allowed: tuple[int, int]
    max_nodes_total: int
    cores_total: MinMax
    memory_total: MinMax
    enforce_min_size: bool
    balance: bool
    expander: str
    max_drain_parallelism: int
    max_scale_down_parallelism: int
    utilization_threshold: float
    # Loops after which requested instances register: 0 before the next loop, 1 a loop later.
    register_lag: int

    def options(self) -> dict[str, Any]:
        return {
            "max_nodes_total": self.max_nodes_total,
            "cores_total": self.cores_total,
            "memory_total": self.memory_total,
            "enforce_node_group_min_size": self.enforce_min_size,
            "balance_similar_node_groups": self.balance,
            # Groups of the same shape differ in these labels only: similar when balancing.
            "balancing_ignore_label": [GROUP_LABEL, POOL_LABEL],
            "expander": [self.expander],
            "max_drain_parallelism": self.max_drain_parallelism,
            "max_scale_down_parallelism": self.max_scale_down_parallelism,
            "scale_down_utilization_threshold": self.utilization_threshold,
        }


def group_id(index: int) -> str:
    return f"g{index}"


def _fitting(pods: Sequence[PodSpec], shape: str) -> tuple[PodSpec, ...]:
    """The pods, in order, that fit a node of `shape` together (at most one host port)."""
    cores, gib = SHAPES[shape]
    cpu, memory, port = 0, 0, False
    out = []
    for p in pods:
        if cpu + p.cpu > cores * 1000 or memory + p.memory > gib * 1024 or (p.port and port):
            continue
        cpu, memory, port = cpu + p.cpu, memory + p.memory, port or p.port
        out.append(p)
    return tuple(out)


running_pods = st.builds(
    PodSpec,
    st.sampled_from(RUNNING_CPU),
    st.sampled_from(RUNNING_MEMORY),
    st.sampled_from(APPS),
    st.sampled_from(KINDS),
    st.booleans(),
)


@st.composite
def _group(draw: st.DrawFn, zero_or_max: bool) -> GroupSpec:
    shape = draw(st.sampled_from(sorted(SHAPES)))
    if zero_or_max:
        # All or nothing: no minimum, and the group is either empty or full.
        min_size, max_size = 0, draw(st.integers(1, 3))
        count = draw(st.sampled_from((0, max_size)))
    else:
        min_size = draw(st.integers(0, 2))
        max_size = draw(st.integers(min_size + 1, min_size + 5))
        # Sometimes below the min size, as a group whose min was raised.
        count = draw(st.integers(0, min(max_size, 3)))
    nodes = tuple(_fitting(draw(st.lists(running_pods, max_size=3)), shape) for _ in range(count))
    return GroupSpec(shape, min_size, max_size, zero_or_max, nodes)


@st.composite
def clusters(draw: st.DrawFn, *, zero_or_max: bool = False) -> ClusterSpec:
    """A generated cluster; with `zero_or_max`, its first group scales zero-or-max."""
    n_groups = draw(st.integers(1, 3))
    groups = tuple(
        # One group in four scales zero-or-max, besides the first one when asked.
        draw(_group((zero_or_max and i == 0) or draw(st.integers(0, 3)) == 0))
        for i in range(n_groups)
    )
    static = (
        _fitting(draw(st.lists(running_pods, max_size=3)), "std") if draw(st.booleans()) else None
    )
    pending_pods = tuple(
        draw(
            st.lists(
                st.builds(
                    PendingSpec,
                    st.sampled_from(PENDING_CPU),
                    st.sampled_from(PENDING_MEMORY),
                    st.sampled_from((None, None, *range(n_groups))),
                    st.booleans(),
                ),
                max_size=5,
            )
        )
    )
    # Limits drawn around the cluster's size, so that they bind in both directions.
    nodes = 1 if static is not None else 0
    cores = SHAPES["std"][0] * nodes
    gib = SHAPES["std"][1] * nodes
    for g in groups:
        nodes += len(g.nodes)
        cores += SHAPES[g.shape][0] * len(g.nodes)
        gib += SHAPES[g.shape][1] * len(g.nodes)
    if draw(st.booleans()):
        max_nodes_total = max(1, nodes + draw(st.integers(-1, 4)))
    else:
        max_nodes_total = 0
    cores_total = _min_max(draw, cores, step=2, default=DEFAULTS.cores_total)
    memory_total = _min_max(draw, gib, step=8, default=DEFAULTS.memory_total)
    return ClusterSpec(
        groups=groups,
        static=static,
        pending=pending_pods,
        pdb_allowed=(draw(st.integers(0, 2)), draw(st.integers(0, 2))),
        max_nodes_total=max_nodes_total,
        cores_total=cores_total,
        memory_total=memory_total,
        enforce_min_size=draw(st.booleans()),
        balance=draw(st.booleans()),
        expander=draw(st.sampled_from(EXPANDERS)),
        max_drain_parallelism=draw(st.integers(1, 3)),
        max_scale_down_parallelism=draw(st.integers(1, 5)),
        utilization_threshold=draw(st.sampled_from((0.5, 0.7, 0.9))),
        register_lag=draw(st.integers(0, 1)),
    )


def _min_max(draw: st.DrawFn, current: int, *, step: int, default: MinMax) -> MinMax:
    """The flag's default, or a min and a max a few `step`s around `current`."""
    if draw(st.integers(0, 2)):
        return default
    low = max(0, current - step * draw(st.integers(0, 3))) if draw(st.booleans()) else 0
    high = max(low, current + step * draw(st.integers(-1, 6)))
    return MinMax(low, high)


# ---------------------------------------------------------------------- building


class RecordingCluster(StorageCluster):
    """A `StorageCluster` that also records the evictions the API server refused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refused: list[tuple[Pod, str]] = []

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        try:
            super().evict(pod, grace_period_seconds)
        except EvictionError as exc:
            self.refused.append((pod, str(exc)))
            raise


def _pod(name: str, node: str, spec: PodSpec) -> Pod:
    kw: dict[str, Any] = {
        "labels": {"app": spec.app},
        "host_ports": [PORT] if spec.port else [],
    }
    if spec.kind == "ds":
        kw["owner"] = DS
    elif spec.kind == "bare":
        kw["owner"] = None
    return pod(name, node, cpu=f"{spec.cpu}m", memory=f"{spec.memory}Mi", **kw)


def build(spec: ClusterSpec) -> World:
    w = World(cluster_class=RecordingCluster, **spec.options())
    for i, g in enumerate(spec.groups):
        gid = group_id(i)
        cores, gib = SHAPES[g.shape]
        w.group(
            gid,
            g.min_size,
            g.max_size,
            nodes=len(g.nodes),
            cpu=str(cores),
            memory=f"{gib}Gi",
            labels={POOL_LABEL: gid},
            options=NodeGroupOptions(zero_or_max_node_scaling=True) if g.zero_or_max else None,
        )
        for n, pods in enumerate(g.nodes, start=1):
            for j, p in enumerate(pods):
                w.pods(_pod(f"{gid}-{n}-p{j}", f"{gid}-{n}", p))
    if spec.static is not None:
        cores, gib = SHAPES["std"]
        w.cluster.add_node(make_node("static-1", str(cores), f"{gib}Gi"))
        for j, p in enumerate(spec.static):
            w.pods(_pod(f"static-1-p{j}", "static-1", p))
    for k, p in enumerate(spec.pending):
        w.pods(
            pending(
                f"pending-{k}",
                cpu=f"{p.cpu}m",
                memory=f"{p.memory}Mi",
                labels={"app": "web"},
                node_selector={POOL_LABEL: group_id(p.pool)} if p.pool is not None else None,
                host_ports=[PORT] if p.port else [],
            )
        )
    for app, allowed in zip(PDB_APPS, spec.pdb_allowed, strict=True):
        w.pdb(app, {"app": app}, allowed)
    return w


# ---------------------------------------------------------------------- running


@dataclass(frozen=True)
class Capacity:
    """Nodes, cores and GiB of the cluster, counting each group at its target size."""

    nodes: int
    cores: int
    gib: int


@dataclass
class LoopRecord:
    """One loop: the result, and the cluster and cloud around it."""

    result: LoopResult
    targets_before: dict[str, int]
    targets_after: dict[str, int]
    # The cloud calls of this loop, per group.
    calls: dict[str, list[tuple[str, Any]]]
    capacity_before: Capacity
    capacity_after: Capacity
    # Evictions the API server refused in this loop, with its message.
    refused: list[tuple[Pod, str]]
    # Pods evicted in this loop, each with the node it was evicted from.
    evicted: list[Pod]
    # Evicted pods left without a home, with the reason.
    homeless: list[str] = field(default_factory=list)


@dataclass
class Trace:
    spec: ClusterSpec
    loops: list[LoopRecord]
    world: World


def capacity(w: World, spec: ClusterSpec) -> Capacity:
    nodes = cores = gib = 0
    if spec.static is not None and "static-1" in w.cluster.nodes:
        nodes, cores, gib = 1, *SHAPES["std"]
    for i, g in enumerate(spec.groups):
        target = w.cloud.groups[group_id(i)].target
        nodes += target
        cores += SHAPES[g.shape][0] * target
        gib += SHAPES[g.shape][1] * target
    return Capacity(nodes, cores, gib)


def _rehome(w: World, cluster: RecordingCluster, result: LoopResult, keys: list[str]) -> list[str]:
    """Re-create each pod evicted in this loop where the removal simulation placed it (a
    pod moved onto a node drained in the same loop moves on with it). Returns the pods that
    had no such place, or whose place no longer admits them."""
    deleted = {d.node for d in result.scale_down.deletions if d.ok}
    plans = {u.node: u.destinations for u in result.scale_down.unneeded}
    snapshot = ClusterSnapshot.from_objects(cluster.snapshot())
    out: list[str] = []
    for key in keys:
        original = cluster.evicted_objects[key]
        if original.is_daemonset:
            continue
        if original.owner is None:
            out.append(f"{key}: evicted from {original.node_name}, no controller re-creates it")
            continue
        dest = plans.get(original.node_name, {}).get(key)
        seen = {original.node_name}
        while dest in deleted and dest not in seen:
            seen.add(dest)
            dest = plans.get(dest, {}).get(key)
        if dest is None:
            out.append(f"{key}: evicted from {original.node_name} without a destination")
            continue
        ni = snapshot.node_info(dest)
        if dest not in w.alive() or ni is None:
            out.append(f"{key}: was to go to {dest}, which is gone")
            continue
        moved = original.with_(node_name="")
        reason = check_predicates(moved, ni, snapshot)
        if reason is not None:
            out.append(f"{key}: does not fit {dest} any more: {reason}")
            continue
        placed = original.with_(node_name=dest)
        snapshot.add_pod(placed, dest)
        cluster.add_pod(placed)
    return out


def simulate(spec: ClusterSpec) -> Trace:
    w = build(spec)
    cluster = w.cluster
    assert isinstance(cluster, RecordingCluster)
    groups = w.cloud.node_groups()
    loops: list[LoopRecord] = []
    # Instances requested per group at each loop, for a cloud that registers them late.
    requested: list[dict[str, int]] = []
    for step in range(1 + LATER_LOOPS):
        if step:
            for g in groups:
                if spec.register_lag == 0:
                    g.register()
                elif step >= 2 and requested[step - 2][g.id]:
                    # Those of the loop before the last (the earlier ones are nodes by now).
                    g.register(requested[step - 2][g.id])
            w.bind_pending()
        targets_before = {g.id: g.target for g in groups}
        calls_before = {g.id: len(g.calls) for g in groups}
        capacity_before = capacity(w, spec)
        refused_before = len(cluster.refused)
        evicted_before = len(cluster.evicted)
        result = w.run(PAST_UNNEEDED if step else timedelta(0))
        calls = {g.id: list(g.calls[calls_before[g.id] :]) for g in groups}
        requested.append(
            {g.id: sum(d for c, d in calls[g.id] if c == "increase_size") for g in groups}
        )
        keys = cluster.evicted[evicted_before:]
        record = LoopRecord(
            result=result,
            targets_before=targets_before,
            targets_after={g.id: g.target for g in groups},
            calls=calls,
            capacity_before=capacity_before,
            capacity_after=capacity(w, spec),
            refused=cluster.refused[refused_before:],
            evicted=[cluster.evicted_objects[k] for k in keys],
        )
        if keys:
            record.homeless = _rehome(w, cluster, result, keys)
        loops.append(record)
    return Trace(spec, loops, w)


def describe(trace: Trace) -> str:
    """The loops in a few lines, for an assertion message."""
    lines = []
    for i, rec in enumerate(trace.loops):
        r = rec.result
        up = {d.node_group: d.delta for d in r.scale_up.decisions}
        down = [(d.node, d.kind.value, d.error) for d in r.scale_down.deletions]
        lines.append(
            f"loop {i}: targets {rec.targets_before} -> {rec.targets_after}; up {up}; "
            f"down {down}; errors {list(r.errors)}; halted {r.halted!r}"
        )
    return "\n".join(lines)
