"""`drop_schedulable` skips the search for twins of a pod that found no node, and every
search when there is no node: the outcome must be the plain group-by-group search's."""

from __future__ import annotations

from clusterscaler.loop.pending import PendingPods, drop_schedulable
from clusterscaler.model import OwnerRef, Pod
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
from clusterscaler.simulator.builders import affinity_term, make_node, make_pod, spread
from clusterscaler.simulator.equivalence import group_pods
from hypothesis import given, settings
from hypothesis import strategies as st

ZONE = "topology.kubernetes.io/zone"
OWNERS = [None, OwnerRef("ReplicaSet", "web", "rs-web", True, "apps/v1")]


@st.composite
def pending_pods(draw: st.DrawFn) -> list[Pod]:
    out = []
    for i in range(draw(st.integers(0, 30))):
        app = draw(st.sampled_from(["web", "db"]))
        kind = draw(st.sampled_from(["plain", "plain", "plain", "affinity", "anti", "spread"]))
        extra: dict[str, object] = {}
        if kind == "affinity":
            extra["affinity"] = [affinity_term(ZONE, {"app": "db"})]
        elif kind == "anti":
            extra["anti_affinity"] = [affinity_term("kubernetes.io/hostname", {"app": app})]
        elif kind == "spread":
            extra["topology_spread"] = [spread(ZONE, {"app": app})]
        out.append(
            make_pod(
                f"p{i}",
                draw(st.sampled_from(["500m", "1", "3"])),
                draw(st.sampled_from(["256Mi", "2Gi"])),
                namespace=draw(st.sampled_from(["default", "default", "batch"])),
                labels={"app": app},
                owner=draw(st.sampled_from(OWNERS)),
                **extra,  # type: ignore[arg-type]
            )
        )
    return out


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[tuple[str, str, str]], list[int]]:
    nodes = [
        (f"n{i}", draw(st.sampled_from(["2", "4"])), draw(st.sampled_from(["a", "b"])))
        for i in range(draw(st.integers(0, 5)))
    ]
    # Pods already running, by node index: they take room and attract or repel.
    running = draw(st.lists(st.integers(0, max(len(nodes) - 1, 0)), max_size=6)) if nodes else []
    return nodes, running


def build(nodes: list[tuple[str, str, str]], running: list[int]) -> ClusterSnapshot:
    snap = ClusterSnapshot()
    for name, cpu, zone in nodes:
        snap.add_node(make_node(name, cpu, "8Gi", labels={ZONE: zone}))
    for j, index in enumerate(running):
        name = nodes[index][0]
        snap.add_pod(make_pod(f"run{j}", "1", "1Gi", labels={"app": "db"}, node_name=name), name)
    return snap


def reference(pods: list[Pod], snap: ClusterSnapshot, unusable: set[str]) -> PendingPods:
    """The plain search: every group tried in turn."""
    out = PendingPods(unschedulable=list(pods))
    sim = HintingSimulator()
    node_filter = (lambda ni: ni.node.name not in unusable) if unusable else None
    remaining: list[Pod] = []
    for group in group_pods(out.unschedulable):
        result = sim.try_schedule_pods(
            snap, group.pods, node_filter=node_filter, break_on_failure=True
        )
        out.fit_existing.extend(p.pod for p in result.scheduled)
        remaining.extend(group.pods[len(result.scheduled) :])
    out.unschedulable = remaining
    return out


@settings(max_examples=300, deadline=None)
@given(pending_pods(), clusters(), st.booleans())
def test_same_outcome_as_searching_every_group(
    pods: list[Pod], cluster: tuple[list[tuple[str, str, str]], list[int]], cordon_first: bool
) -> None:
    nodes, running = cluster
    unusable = {nodes[0][0]} if cordon_first and nodes else set()
    expected_snap = build(nodes, running)
    expected = reference(pods, expected_snap, unusable)
    snap = build(nodes, running)
    pending = PendingPods(unschedulable=list(pods))
    drop_schedulable(pending, snap, HintingSimulator(), unusable=unusable)
    assert [p.key for p in pending.fit_existing] == [p.key for p in expected.fit_existing]
    assert [p.key for p in pending.unschedulable] == [p.key for p in expected.unschedulable]
    assert sorted((p.key, n) for p, n in snap.pods()) == sorted(
        (p.key, n) for p, n in expected_snap.pods()
    )


def test_no_node_keeps_every_pod_in_group_order() -> None:
    owner = OWNERS[1]
    pods = [
        make_pod("a", "1", owner=owner, labels={"app": "web"}),
        make_pod("bare", "1"),
        make_pod("b", "1", owner=owner, labels={"app": "web"}),
    ]
    pending = PendingPods(unschedulable=list(pods))
    drop_schedulable(pending, ClusterSnapshot(), HintingSimulator())
    assert [p.name for p in pending.unschedulable] == ["a", "b", "bare"]
    assert pending.fit_existing == []
