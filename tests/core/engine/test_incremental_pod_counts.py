"""The snapshot's incremental spread and affinity counts agree with a from-scratch count.

Topology spread and inter-pod affinity keep per-shape counts in the snapshot, updated as
pods and nodes come and go (and as `revert()` undoes them). These properties drive random
clusters through random changes and compare, after every change, the incremental state of
a set of probe pods with the state computed from every node and pod.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from clusterscaler.model import (
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    Pod,
    Taint,
    Toleration,
)
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from clusterscaler.simulator.builders import affinity_term, make_node, make_pod, node_term, spread
from clusterscaler.simulator.predicates import (
    _affinity_state,
    _affinity_state_scratch,
    _spread_state,
    _spread_state_scratch,
)
from clusterscaler.simulator.snapshot import _WATCHER_LIMIT
from hypothesis import given, settings
from hypothesis import strategies as st

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
RACK = "example.com/rack"
TAINT = Taint("dedicated", "batch", "NoSchedule")
APPS = ("web", "db", "cache")
NAMESPACES = ("default", "team-a")
NAMESPACE_LABELS = {"default": {"env": "prod"}, "team-a": {"env": "dev"}}
DELETED = datetime(2026, 1, 1, tzinfo=UTC)


@st.composite
def nodes(draw: st.DrawFn, index: int) -> Node:
    name = f"n{index}"
    labels = {HOST: name}
    if draw(st.integers(0, 5)):  # mostly zoned; a node without the key is not a domain
        labels[ZONE] = draw(st.sampled_from("abc"))
    if draw(st.booleans()):
        labels[RACK] = draw(st.sampled_from(["r1", "r2"]))
    if draw(st.booleans()):
        labels["disk"] = "ssd"
    return make_node(
        name, "64", "256Gi", 500, labels=labels, taints=[TAINT] if draw(st.booleans()) else []
    )


@st.composite
def selectors(draw: st.DrawFn) -> LabelSelector | None:
    """Selectors by label, by expression (no single label is necessary), every pod, none."""
    app = draw(st.sampled_from(APPS))
    kind = draw(st.sampled_from(["labels", "labels", "labels", "in", "not-in", "all", "none"]))
    if kind == "labels":
        return LabelSelector((("app", app),))
    if kind == "in":
        return LabelSelector((), (LabelSelectorRequirement("app", "In", (app, "db")),))
    if kind == "not-in":
        return LabelSelector((), (LabelSelectorRequirement("app", "NotIn", (app,)),))
    return LabelSelector() if kind == "all" else None


@st.composite
def pods(draw: st.DrawFn, name: str) -> Pod:
    app = draw(st.sampled_from(APPS))
    namespace = draw(st.sampled_from(NAMESPACES))
    constraints = []
    for _ in range(draw(st.integers(0, 2))):
        constraints.append(
            replace(
                spread(
                    draw(st.sampled_from([ZONE, HOST, RACK])),
                    {"app": draw(st.sampled_from(APPS))},
                    draw(st.integers(1, 2)),
                    when_unsatisfiable=draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                    min_domains=draw(st.sampled_from([None, 2, 5])),
                    node_affinity_policy=draw(st.sampled_from(["Honor", "Ignore"])),
                    node_taints_policy=draw(st.sampled_from(["Honor", "Ignore"])),
                ),
                label_selector=draw(selectors()),
            )
        )

    def term() -> object:
        key = draw(st.sampled_from([ZONE, HOST, RACK]))
        match = {"app": draw(st.sampled_from(APPS))}
        if draw(st.integers(0, 3)) == 0:
            made = affinity_term(key, match, namespace_selector=LabelSelector((("env", "prod"),)))
        else:
            made = affinity_term(key, match, namespaces=(namespace,))
        return replace(made, label_selector=draw(selectors()))

    return make_pod(
        name,
        "10m",
        namespace=namespace,
        labels={"app": app},
        node_selector={"disk": "ssd"} if draw(st.integers(0, 3)) == 0 else {},
        required_node_terms=(
            [node_term(ZONE, "In", "a", "b")] if draw(st.integers(0, 3)) == 0 else None
        ),
        tolerations=[Toleration("dedicated", "Exists")] if draw(st.booleans()) else [],
        topology_spread=constraints,
        affinity=[term() for _ in range(draw(st.integers(0, 2)))],
        anti_affinity=[term() for _ in range(draw(st.integers(0, 1)))],
        deletion_time=DELETED if draw(st.integers(0, 7)) == 0 else None,
    )


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[tuple[str, object]], list[Pod]]:
    """Random changes to a snapshot, and probe pods to check after each one."""
    ops: list[tuple[str, object]] = []
    next_node = next_pod = 0
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(
            st.sampled_from(
                ["node", "pod", "pod", "pod", "drop-pod", "drop-node", "fork", "revert", "commit"]
            )
        )
        if kind == "node":
            ops.append(("node", draw(nodes(next_node))))
            next_node += 1
        elif kind == "pod":
            ops.append(("pod", (draw(pods(f"p{next_pod}")), draw(st.integers(0, 1000)))))
            next_pod += 1
        elif kind in ("drop-pod", "drop-node"):
            ops.append((kind, draw(st.integers(0, 1000))))
        else:
            ops.append((kind, None))
    probes = [draw(pods(f"probe{i}")) for i in range(draw(st.integers(1, 4)))]
    return ops, probes


def apply(snap: ClusterSnapshot, op: str, arg: object) -> None:
    names = snap.node_names()
    if op == "node":
        assert isinstance(arg, Node)
        snap.add_node(arg)
    elif op == "pod" and names:
        pod, pick = arg  # type: ignore[misc]
        snap.add_pod(pod, names[pick % len(names)])
    elif op == "drop-pod":
        placed = sorted(p.key for p, _ in snap.pods())
        if placed:
            snap.remove_pod(placed[arg % len(placed)])  # type: ignore[operator]
    elif op == "drop-node" and names:
        snap.remove_node(names[arg % len(names)])  # type: ignore[operator]
    elif op == "fork":
        snap.fork()
    elif op == "revert" and snap.depth:
        snap.revert()
    elif op == "commit" and snap.depth:
        snap.commit()


def assert_same_state(pod: Pod, snap: ClusterSnapshot) -> None:
    if pod.topology_spread:
        fast, slow = _spread_state(pod, snap), _spread_state_scratch(pod, snap)
        assert fast.constraints == slow.constraints
        assert [dict(c) for c in fast.counts] == [dict(c) for c in slow.counts]
        assert fast.minimum == slow.minimum
        assert fast.self_match == slow.self_match
    fast_a, slow_a = _affinity_state(pod, snap), _affinity_state_scratch(pod, snap)
    assert dict(fast_a.affinity_counts) == slow_a.affinity_counts
    assert dict(fast_a.anti_counts) == slow_a.anti_counts
    assert fast_a.matches_own_terms == slow_a.matches_own_terms
    # Existing pods' anti-affinity: the per-term counts add up to the scratch totals.
    existing = dict(fast_a.existing_anti)
    for key, counts in fast_a.existing_terms:
        for value, n in counts.items():
            existing[(key, value)] = existing.get((key, value), 0) + n
    assert existing == slow_a.existing_anti


@settings(max_examples=150, deadline=None)
@given(histories())
def test_incremental_counts_match_a_from_scratch_count(history):
    ops, probes = history
    snap = ClusterSnapshot(namespace_labels=NAMESPACE_LABELS)
    for op, arg in ops:
        apply(snap, op, arg)
        for probe in probes:
            assert_same_state(probe, snap)
    # A pod already in the snapshot never counts itself.
    for placed, _node in list(snap.pods())[:3]:
        assert_same_state(placed, snap)


def test_states_stay_right_after_the_watchers_are_dropped():
    snap = ClusterSnapshot()
    for i, zone in enumerate("aab"):
        snap.add_node(make_node(f"n{i}", "64", labels={ZONE: zone, HOST: f"n{i}"}))
    web = {"app": "web"}
    first = make_pod("first", labels=web, topology_spread=[spread(ZONE, web)])
    assert check_predicates(first, snap.get("n0"), snap) is None
    epoch = snap.watch_epoch
    # Enough distinct shapes to drop every watcher, the first pod's included.
    for i in range(_WATCHER_LIMIT + 1):
        shape = {"app": f"w{i}"}
        check_predicates(
            make_pod(f"s{i}", labels=shape, topology_spread=[spread(ZONE, shape)]),
            snap.get("n0"),
            snap,
        )
    assert snap.watch_epoch > epoch
    snap.add_pod(make_pod("w1", labels=web), "n2")
    snap.add_pod(make_pod("w2", labels=web), "n2")
    # Zone b holds two web pods, zone a none: a third one in b would skew by 3.
    assert check_predicates(first, snap.get("n0"), snap) is None
    assert check_predicates(first, snap.get("n2"), snap) is not None
    assert_same_state(first, snap)
