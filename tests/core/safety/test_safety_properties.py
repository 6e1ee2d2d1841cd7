"""Scale-down invariants over generated clusters, checked against the real cluster.

For random small clusters (pods of random sizes, host ports, a PodDisruptionBudget, a
min size) the loop runs past --scale-down-unneeded-time several times. After every loop:
- every pod evicted by a drain is re-created on the node the removal simulation chose for
  it (following the chain when that node was itself drained), and that node still exists
  and passes the scheduler predicates for it: no evicted pod is left without a home;
- no eviction was refused by the API server (the PDB budget was never overspent) and no
  more pods of the budget were evicted than it allowed;
- the node group never goes below its min size;
- nothing is bought: scale-down never creates the pending pods that would call for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterscaler.loop.decisions import DeletionKind, LoopResult
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetykit import PAST_UNNEEDED, World, pod

CPU_SIZES = ("200m", "500m", "1", "1500m", "2500m")
CPU_MILLIS = {"200m": 200, "500m": 500, "1": 1000, "1500m": 1500, "2500m": 2500}


@dataclass(frozen=True)
class PodSpec:
    cpu: str
    db: bool
    port: bool


@dataclass(frozen=True)
class ClusterSpec:
    min_size: int
    allowed: int
    nodes: tuple[tuple[PodSpec, ...], ...]


def _fits(pods: list[PodSpec]) -> bool:
    # 4 cores a node, one host port 8080 at most: the generated cluster is itself valid.
    return sum(CPU_MILLIS[p.cpu] for p in pods) <= 3800 and sum(p.port for p in pods) <= 1


pod_specs = st.builds(PodSpec, st.sampled_from(CPU_SIZES), st.booleans(), st.booleans())
node_pods = st.lists(pod_specs, max_size=3).filter(_fits).map(tuple)
clusters = st.builds(
    ClusterSpec,
    min_size=st.integers(0, 2),
    allowed=st.integers(0, 2),
    nodes=st.lists(node_pods, min_size=2, max_size=5).map(tuple),
)


def build(spec: ClusterSpec) -> World:
    w = World(max_drain_parallelism=3, max_scale_down_parallelism=5)
    w.group("g", spec.min_size, 10, nodes=len(spec.nodes))
    for i, pods in enumerate(spec.nodes, start=1):
        for j, p in enumerate(pods):
            w.pods(
                pod(
                    f"p{i}-{j}",
                    f"g-{i}",
                    cpu=p.cpu,
                    labels={"app": "db" if p.db else "web"},
                    host_ports=[8080] if p.port else [],
                )
            )
    w.pdb("db", {"app": "db"}, spec.allowed)
    return w


def rehome(w: World, result: LoopResult) -> None:
    """Re-create each evicted pod where the simulation placed it, checking that the place
    exists and admits the pod now."""
    deleted = {d.node for d in result.scale_down.deletions if d.ok}
    plans = {u.node: u.destinations for u in result.scale_down.unneeded}
    snapshot = ClusterSnapshot.from_objects(w.cluster.snapshot())
    for d in result.scale_down.deletions:
        if not d.ok or d.kind is not DeletionKind.DRAIN:
            continue
        for key in d.evicted_pods:
            if w.cluster.evicted_objects[key].is_daemonset:
                continue
            dest = plans[d.node].get(key)
            # A pod moved onto a node drained in the same loop moves again with it.
            while dest in deleted:
                dest = plans[dest].get(key)
            assert dest is not None, f"{key} evicted from {d.node} without a destination"
            assert dest in w.alive(), f"{key} was to go to {dest}, which is gone"
            original = w.cluster.evicted_objects[key]
            moved = original.with_(node_name=dest)
            ni = snapshot.node_info(dest)
            assert ni is not None
            reason = check_predicates(moved.with_(node_name=""), ni, snapshot)
            assert reason is None, f"{key} does not fit {dest} any more: {reason}"
            snapshot.add_pod(moved, dest)
            w.cluster.add_pod(moved)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(clusters)
def test_scale_down_invariants_hold_on_generated_clusters(spec: ClusterSpec) -> None:
    """CA's guarantees: evicted pods have a home, PDBs hold, min size holds, and a
    scale-down never calls for a scale-up."""
    w = build(spec)
    db_pods = sum(p.db for pods in spec.nodes for p in pods)
    w.run()
    for _ in range(3):
        result = w.run(PAST_UNNEEDED)
        assert all(d.ok for d in result.scale_down.deletions), result.scale_down.deletions
        rehome(w, result)
        group = w.cloud.groups["g"]
        assert group.target >= spec.min_size
        assert group.increases == []
    evicted_db = [
        k for k in w.cluster.evicted if w.cluster.evicted_objects[k].labels.get("app") == "db"
    ]
    assert len(evicted_db) <= min(spec.allowed, db_pods)
