"""The scenarios of `python -m bench peer`: node groups, workload and flags, as plain data.

Each scenario is run on a fresh control plane, once with upstream Cluster Autoscaler and
once with clusterscaler, with the same kwok node groups (`NodeGroup`, one template node
each in the kwok provider's templates ConfigMap), the same Deployments (`Workload`) and the
same flags. A Workload with a `pool` selects its node group by the label `workload-pool`,
as teams pin workloads to node pools; the node groups differ in size so that the
estimator's packing matters.

`--scan-interval=1s` is the one flag every scenario sets over CA's defaults: with CA's
10 s, the time to the first increase would mostly measure where in its interval the loop
was when the workload appeared, not the autoscaler. A scale-down scenario also sets the
scale-down timers (`SCALE_DOWN_FLAGS`), short and the same for both.
"""

from __future__ import annotations

from dataclasses import dataclass

POOL_LABEL = "workload-pool"
ZONE_LABEL = "topology.kubernetes.io/zone"
COMMON_FLAGS = ("--scan-interval=1s",)
# A node is removed after 30 s unneeded (CA's default is 10 min), scale-down waits 30 s
# after a scale-up (default 10 min), and an empty node is deleted as soon as it is tainted
# (default 5 s later: with 10 deletions in flight at most, 800 nodes would take CA 11
# minutes of waiting); the other scale-down settings are CA's defaults.
SCALE_DOWN_FLAGS = (*COMMON_FLAGS, "--scale-down-unneeded-time=30s",
                    "--scale-down-delay-after-add=30s", "--node-delete-delay-after-taint=0s")


@dataclass(frozen=True)
class NodeGroup:
    """A kwok node group: one template node of this size, at most `max_count` nodes."""

    name: str
    cpu: int  # cores
    memory_gi: int
    max_count: int = 200
    pods: int = 110
    zone: str | None = None  # the template's topology.kubernetes.io/zone label


@dataclass(frozen=True)
class PodTerm:
    """A required pod (anti-)affinity term: the pods of Deployment `app`, in the same
    domain of `topology_key`."""

    app: str
    topology_key: str


@dataclass(frozen=True)
class Workload:
    """A Deployment of real-shaped pods: an app container with `cpu_m` / `memory_mi`
    requests and a log sidecar of 50m / 64Mi (limits twice the requests), pinned to node
    group `pool` when set.

    The constraints between pods: `anti_affinity` and `affinity`, a required pod
    anti-affinity or affinity to the pods of a Deployment (this one's included) in a
    topology domain; `spread`, a topology key over which the Deployment's pods spread with
    a max skew of 1 that they must not break (`DoNotSchedule`).
    """

    name: str
    replicas: int
    cpu_m: int
    memory_mi: int
    pool: str | None = None
    anti_affinity: PodTerm | None = None
    affinity: PodTerm | None = None
    spread: str | None = None

    @property
    def pod_cpu_m(self) -> int:
        return self.cpu_m + SIDECAR_CPU_M

    @property
    def pod_memory_mi(self) -> int:
        return self.memory_mi + SIDECAR_MEMORY_MI


SIDECAR_CPU_M = 50
SIDECAR_MEMORY_MI = 64
HOSTNAME_LABEL = "kubernetes.io/hostname"


SCALE_UP = "scale-up"
STEADY = "steady"
SCALE_DOWN = "scale-down"


@dataclass(frozen=True)
class PeerScenario:
    """One row of the side-by-side table.

    A `scale-up` scenario applies its workload once the autoscaler runs and times the
    autoscaler's answer. A `steady` one builds its cluster first (`existing` nodes per
    group, made as the kwok provider makes them, and the workload bound to them), then
    starts the autoscaler and measures its loops for `observe_s` seconds, with nothing
    to do. A `scale-down` one builds its cluster as a steady one does, starts the
    autoscaler, then scales each Deployment down to its `remaining` replicas and times the
    nodes removed, until `expect_removed` nodes are gone (then `settle_s` more, so that an
    excess removal is counted) or the timeout.
    """

    name: str
    title: str
    groups: tuple[NodeGroup, ...]
    workloads: tuple[Workload, ...]
    flags: tuple[str, ...] = COMMON_FLAGS
    namespace: str = "peer"
    # Seconds from the workload's creation until every pod must be bound.
    timeout_s: float = 300.0
    # Seconds to keep watching after the last pod is bound, so that a late or excess
    # increase is counted.
    settle_s: float = 5.0
    kind: str = SCALE_UP
    existing: tuple[tuple[str, int], ...] = ()  # (node group, nodes) made before the run
    observe_s: float = 60.0
    remaining: tuple[tuple[str, int], ...] = ()  # (Deployment, replicas) after a scale-down
    expect_removed: int = 0
    # A steady scenario whose pods the harness binds to the existing nodes itself (as
    # kube-scheduler would place them: the same number on each node), made as their
    # ReplicaSet's own, instead of waiting for kube-scheduler to place them: on 2 cores,
    # kube-scheduler placed 9,807 of steady-5k's 10,000 pods in 29 minutes.
    prebound: bool = False

    @property
    def pods(self) -> int:
        return sum(w.replicas for w in self.workloads)

    @property
    def pods_at_end(self) -> int:
        """The pods that must be bound at the end: a scale-down's `remaining` ones."""
        remaining = dict(self.remaining)
        return sum(remaining.get(w.name, w.replicas) for w in self.workloads)

    def group(self, name: str) -> NodeGroup:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(f"scenario {self.name}: no node group {name!r}")


def _scale_up(name: str, title: str, factor: int, *, timeout_s: float) -> PeerScenario:
    """Four Deployments onto three node groups of 4, 8 and 16 cores: `factor` x 1,000 pods."""
    groups = (
        NodeGroup("pool-a", cpu=4, memory_gi=16, max_count=100 * factor),
        NodeGroup("pool-b", cpu=8, memory_gi=32, max_count=100 * factor),
        NodeGroup("pool-c", cpu=16, memory_gi=64, max_count=100 * factor),
    )
    workloads = (
        Workload("web", 400 * factor, cpu_m=450, memory_mi=900, pool="pool-b"),
        Workload("api", 300 * factor, cpu_m=950, memory_mi=1900, pool="pool-c"),
        Workload("worker", 200 * factor, cpu_m=200, memory_mi=400, pool="pool-a"),
        Workload("report", 100 * factor, cpu_m=1450, memory_mi=2900, pool="pool-c"),
    )
    return PeerScenario(name, title, groups, workloads, timeout_s=timeout_s)


def _steady(name: str, title: str, nodes: int, *, timeout_s: float,
            prebound: bool = False) -> PeerScenario:
    """`nodes` nodes of 8 cores, each running two pods of 2.8 cores (70% of its CPU: above
    the scale-down utilization threshold, so nothing is to do)."""
    group = NodeGroup("pool-b", cpu=8, memory_gi=32, max_count=nodes + nodes // 5)
    workload = Workload("web", 2 * nodes, cpu_m=2750, memory_mi=5000, pool="pool-b")
    return PeerScenario(name, title, (group,), (workload,), timeout_s=timeout_s,
                        kind=STEADY, existing=((group.name, nodes),), prebound=prebound)


def _scale_down(name: str, title: str, nodes: int, *, timeout_s: float) -> PeerScenario:
    """`nodes` nodes of 8 cores, one pod of 4.4 cores each (55% of its CPU: only one fits,
    and a node keeping its pod stays above the utilization threshold); the Deployment is
    then scaled down to a fifth, so four nodes in five are left empty and are removed."""
    group = NodeGroup("pool-b", cpu=8, memory_gi=32, max_count=nodes + nodes // 5)
    workload = Workload("web", nodes, cpu_m=4350, memory_mi=4000, pool="pool-b")
    keep = nodes // 5
    return PeerScenario(name, title, (group,), (workload,), flags=SCALE_DOWN_FLAGS,
                        timeout_s=timeout_s, settle_s=15.0, kind=SCALE_DOWN,
                        existing=((group.name, nodes),), remaining=((workload.name, keep),),
                        expect_removed=nodes - keep)


def _affinity_mix(name: str, title: str, *, timeout_s: float) -> PeerScenario:
    """Three Deployments onto three empty node groups, one per zone, each with a constraint
    between pods that both schedulers evaluate at every placement: the cache a required
    anti-affinity to the web pods' zone, the web pods a topology spread over the zones, the
    workers a required affinity to each other's zone.

    The constraints are keyed on the zone, not the hostname: upstream's kwok provider
    gives every node it creates its template's `kubernetes.io/hostname`, so on a hostname
    key all nodes of a group are one domain for the scheduler while CA's estimator counts
    each new node as its own (see bench/RESULTS.md). The pod sizes fill a node to the same
    count with or without the 100m kube-proxy pod upstream's kwok templates carry, so
    neither quirk of upstream's kwok provider decides the node counts.
    """
    groups = (
        NodeGroup("pool-a", cpu=4, memory_gi=16, max_count=100, zone="zone-a"),
        NodeGroup("pool-b", cpu=8, memory_gi=32, max_count=100, zone="zone-b"),
        NodeGroup("pool-c", cpu=16, memory_gi=64, max_count=100, zone="zone-c"),
    )
    workloads = (
        Workload("cache", 30, cpu_m=900, memory_mi=1900, pool="pool-a",
                 anti_affinity=PodTerm("web", ZONE_LABEL)),
        Workload("web", 300, cpu_m=440, memory_mi=900, pool="pool-b", spread=ZONE_LABEL),
        Workload("worker", 200, cpu_m=190, memory_mi=400, pool="pool-c",
                 affinity=PodTerm("worker", ZONE_LABEL)),
    )
    return PeerScenario(name, title, groups, workloads, timeout_s=timeout_s)


SCENARIOS: dict[str, PeerScenario] = {
    s.name: s
    for s in (
        _scale_up("scale-up-1k", "1,000 pending pods of 4 Deployments onto 3 empty node groups",
                  1, timeout_s=300.0),
        _scale_up("scale-up-5k", "5,000 pending pods of 4 Deployments onto 3 empty node groups",
                  5, timeout_s=900.0),
        # The control plane binds the pods at about 30 a second at first and 7 a second
        # once about 1,000 nodes exist, on 2 cores: about 40 minutes a side.
        _scale_up("scale-up-20k", "20,000 pending pods of 4 Deployments onto 3 empty node groups",
                  20, timeout_s=3600.0),
        _steady("steady-1k", "1,000 kwok nodes running 2,000 pods, nothing to do", 1000,
                timeout_s=900.0),
        _steady("steady-5k", "5,000 kwok nodes running 10,000 pods, nothing to do", 5000,
                timeout_s=2400.0, prebound=True),
        _scale_down("scale-down-1k", "1,000 kwok nodes, 800 of them emptied: removed with the "
                    "same timers", 1000, timeout_s=900.0),
        _affinity_mix("affinity-mix", "530 pending pods with anti-affinity, topology spread "
                      "and affinity onto 3 empty node groups", timeout_s=300.0),
    )
}
