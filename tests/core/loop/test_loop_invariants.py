"""Properties that must hold for any cluster: scale-down only removes nodes whose pods fit
elsewhere, never spends more PDB disruptions than allowed, never goes below a group's min
size; scale-up never goes past a limit."""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.framework.options import MinMax
from clusterscaler.model import LabelSelector, PodDisruptionBudget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopkit import Harness, pending_pod, running_pod

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Each node starts within its 4 cores.
node_pods = st.lists(
    st.lists(st.integers(min_value=100, max_value=2500), max_size=5).filter(
        lambda cpus: sum(cpus) <= 4000
    ),
    min_size=2,
    max_size=7,
)


@SETTINGS
@given(
    layout=node_pods,
    min_size=st.integers(min_value=0, max_value=4),
    pdb_allowed=st.integers(min_value=0, max_value=3),
    web_every=st.integers(min_value=1, max_value=3),
    drain_parallelism=st.integers(min_value=1, max_value=4),
    pending=st.lists(st.integers(min_value=100, max_value=3000), max_size=3),
)
def test_scale_down_invariants(
    layout, min_size, pdb_allowed, web_every, drain_parallelism, pending
):
    h = Harness(max_drain_parallelism=drain_parallelism, scale_down_utilization_threshold=0.9)
    h.cluster.recreate_evicted = True
    g = h.provider.add_group("g", min(min_size, len(layout)), 20, nodes=len(layout))
    h.cluster.pdbs["default/web"] = PodDisruptionBudget(
        "default", "web", selector=LabelSelector((("app", "web"),)), disruptions_allowed=pdb_allowed
    )
    seq = 0
    for i, pods in enumerate(layout, start=1):
        for cpu in pods:
            labels = {"app": "web"} if seq % web_every == 0 else {}
            h.add_pods([running_pod(f"p{seq}", f"g-{i}", cpu=f"{cpu}m", labels=labels)])
            seq += 1
    h.add_pods(
        [pending_pod(f"pending{i}", cpu=f"{c}m", memory="10Mi") for i, c in enumerate(pending)]
    )
    before = {n: list(h.pods_on(n)) for n in h.cluster.nodes}
    h.run()
    result = h.run(timedelta(minutes=11))
    destinations = {u.node: u.destinations for u in result.scale_down.unneeded}
    deleted = [d.node for d in result.scale_down.deletions if d.ok]
    assert all(d.ok for d in result.scale_down.deletions)
    assert g.target >= g.min_size
    # Every deleted node was found removable, and its pods had places on nodes that stay.
    remaining = [n for n in before if n not in deleted]
    load = {n: sum(p.requests.cpu for p in before[n]) for n in remaining}
    for node in deleted:
        assert node in destinations
        moved = [p for p in before[node] if not p.is_daemonset]
        for pod in moved:
            target = destinations[node][pod.key]
            assert target in remaining
            load[target] += pod.requests.cpu
    for n in remaining:
        assert load[n] <= 4000
    # The PDB allowed `pdb_allowed` disruptions; no more web pods were evicted.
    evicted_web = [
        k
        for k in h.cluster.evicted
        if any(k == p.key and p.labels.get("app") == "web" for ps in before.values() for p in ps)
    ]
    assert len(evicted_web) <= pdb_allowed
    # Pending pods are never evicted.
    assert not [k for k in h.cluster.evicted if k.startswith("default/pending")]


@SETTINGS
@given(
    pending=st.lists(st.integers(min_value=100, max_value=3900), min_size=1, max_size=30),
    existing=st.integers(min_value=0, max_value=4),
    max_nodes_total=st.integers(min_value=0, max_value=8),
    max_cores=st.integers(min_value=4, max_value=40),
    group_max=st.integers(min_value=0, max_value=6),
    balance=st.booleans(),
)
def test_scale_up_never_exceeds_limits(
    pending, existing, max_nodes_total, max_cores, group_max, balance
):
    h = Harness(
        max_nodes_total=max_nodes_total,
        cores_total=MinMax(0, max_cores),
        balance_similar_node_groups=balance,
    )
    a = h.provider.add_group("a", 0, max(group_max, existing), nodes=existing)
    b = h.provider.add_group("b", 0, group_max, labels={"topology.kubernetes.io/zone": "z2"})
    for i in range(1, existing + 1):
        h.add_pods([running_pod(f"fill{i}", f"a-{i}", cpu="3900m")])
    h.add_pods(
        [pending_pod(f"p{i}", cpu=f"{cpu}m", memory="100Mi") for i, cpu in enumerate(pending)]
    )
    h.run()
    total = a.target + b.target
    assert a.target <= a.max_size and b.target <= b.max_size
    if max_nodes_total > 0:
        assert total <= max(max_nodes_total, existing)
    assert total * 4 <= max(max_cores, existing * 4)


@SETTINGS
@given(
    sizes=st.lists(
        st.tuples(st.integers(min_value=0, max_value=20), st.integers(min_value=0, max_value=20)),
        min_size=1,
        max_size=5,
    ),
    new=st.integers(min_value=0, max_value=60),
)
def test_balance_is_even_and_respects_max(sizes, new):
    from clusterscaler.loop.balancing import GroupSize, balance

    groups = [GroupSize(f"g{i}", min(c, m), m) for i, (c, m) in enumerate(sizes)]
    out = balance(groups, new)
    room = sum(g.max_size - g.current for g in groups)
    assert sum(out.values()) == min(new, room)
    final = {g.node_group: g.current + out.get(g.node_group, 0) for g in groups}
    assert all(final[g.node_group] <= g.max_size for g in groups)
    # Groups that still have room are within one node of each other and not below any
    # group that received nodes.
    open_sizes = [final[g.node_group] for g in groups if final[g.node_group] < g.max_size]
    grown = [final[g] for g in out]
    if open_sizes and grown:
        assert max(grown) <= min(open_sizes) + 1
