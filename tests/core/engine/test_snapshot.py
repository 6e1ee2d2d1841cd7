from __future__ import annotations

import pytest
from clusterscaler.model import (
    ClusterObjects,
    LabelSelector,
    PodAffinityTerm,
    Resources,
    Volume,
)
from clusterscaler.simulator import ClusterSnapshot, SnapshotError
from clusterscaler.simulator.builders import make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st


def state(snap: ClusterSnapshot):
    """Everything observable about a snapshot, for comparing before/after."""
    return (
        {
            ni.name: (
                sorted(ni.pods),
                ni.requested(),
                sorted((p.port, p.protocol) for p in ni.ports),
                {driver: dict(ids) for driver, ids in ni.csi_volumes.items()},
            )
            for ni in snap.node_infos()
        },
        sorted((p.key, node) for p, node in snap.pods()),
        {p.key: snap.pod_node(p.key) for p, _ in snap.pods()},
        sorted(snap.namespaces()),
        {ns: sorted(p.key for p, _ in snap.pods_in_namespace(ns)) for ns in snap.namespaces()},
        sorted(p.key for p, _ in snap.anti_affinity_pods()),
    )


def small_snapshot() -> ClusterSnapshot:
    snap = ClusterSnapshot()
    snap.add_node(make_node("n1", "2", "4Gi"), [make_pod("a", "500m", "1Gi", host_ports=[80])])
    snap.add_node(make_node("n2", "2", "4Gi"))
    return snap


def test_requested_resources_follow_pods():
    snap = small_snapshot()
    ni = snap.get("n1")
    assert ni.requested() == Resources(500, 1 << 30, 1)
    assert ni.free() == Resources(1500, 3 << 30, 109)
    snap.add_pod(make_pod("b", "1", "1Gi"), "n1")
    assert ni.requested() == Resources(1500, 2 << 30, 2)
    snap.remove_pod("default/b")
    assert ni.requested() == Resources(500, 1 << 30, 1)
    assert snap.pod_node("default/a") == "n1"


def test_revert_undoes_everything_since_fork():
    snap = small_snapshot()
    before = state(snap)
    snap.fork()
    snap.add_pod(make_pod("b", "1"), "n2")
    snap.remove_pod("default/a")
    snap.add_node(make_node("n3"), [make_pod("c", "1")])
    snap.remove_node("n1")
    assert "n1" not in snap and "n3" in snap
    snap.revert()
    assert state(snap) == before
    assert snap.depth == 0


def test_commit_keeps_changes_and_nested_forks():
    snap = small_snapshot()
    before = state(snap)
    snap.fork()
    snap.add_pod(make_pod("b", "1"), "n2")
    snap.fork()
    snap.add_pod(make_pod("c", "1"), "n2")
    snap.commit()  # c joins the outer fork
    after_inner = state(snap)
    snap.fork()
    snap.add_node(make_node("n3"))
    snap.revert()
    assert state(snap) == after_inner
    snap.revert()  # undoes b and c
    assert state(snap) == before


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda s: s.add_node(make_node("n1")), "already in the snapshot"),
        (lambda s: s.add_pod(make_pod("x"), "nope"), "node 'nope' is not in the snapshot"),
        (lambda s: s.add_pod(make_pod("a"), "n2"), "already on node 'n1'"),
        (lambda s: s.remove_pod("default/zzz"), "not in the snapshot"),
        (lambda s: s.revert(), "without a matching fork"),
        (lambda s: s.commit(), "without a matching fork"),
    ],
    ids=["duplicate node", "unknown node", "duplicate pod", "unknown pod", "revert", "commit"],
)
def test_impossible_changes_are_errors(action, message):
    with pytest.raises(SnapshotError, match=message):
        action(small_snapshot())


def test_from_objects_binds_non_terminal_pods():
    objs = ClusterObjects(
        nodes=[make_node("n1")],
        pods=[
            make_pod("run", "1", node_name="n1"),
            make_pod("done", "1", node_name="n1", phase="Succeeded"),
            make_pod("pending", "1"),
            make_pod("elsewhere", "1", node_name="gone"),
        ],
    )
    snap = ClusterSnapshot.from_objects(objs)
    assert list(snap.get("n1").pods) == ["default/run"]


ops = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "add_pod",
                "add_pods",
                "remove_pod",
                "add_node",
                "remove_node",
                "fork",
                "commit",
                "revert",
            ]
        ),
        st.integers(0, 5),
    ),
    max_size=40,
)

ANTI = PodAffinityTerm("kubernetes.io/hostname", LabelSelector(match_labels=(("app", "b"),)))


def batch_pod(name: str, i: int, n: int):
    """The `i`th pod of a batch: with `n` odd, the pods of a batch span two namespaces
    and some declare anti-affinity; with `n` even they are copies of one workload's pod
    (`add_pods` takes them in one step): with anti-affinity and an extended resource
    (`n` 2), with a configMap and a CSI volume (4: one step only without the CSI one), or
    bare (0)."""
    if n % 2:
        return make_pod(
            name,
            "100m",
            namespace=("default", "other")[i % 2],
            labels={"app": "b"},
            anti_affinity=[ANTI] if i % 3 == 0 else (),
            host_ports=[i],
        )
    if n == 2:
        return make_pod(
            name, "100m", namespace="batch", anti_affinity=[ANTI], extended={"example.com/dev": 1}
        )
    if n == 4:
        volumes = [Volume(f"config-{name}", "configMap")]
        if i % 2:
            volumes.append(Volume("data", "csi", driver="csi.example.com"))
        return make_pod(name, "100m", namespace="batch", volumes=tuple(volumes))
    return make_pod(name, "100m", namespace="batch")


@settings(max_examples=300, deadline=None)
@given(ops)
def test_any_change_sequence_reverts_to_the_original(operations):
    snap = small_snapshot()
    states = [state(snap)]
    snap.fork()
    for counter, (op, n) in enumerate(operations):
        names = snap.node_names()
        if op == "add_pod" and names:
            snap.add_pod(make_pod(f"p{counter}", "100m"), names[n % len(names)])
        elif op == "add_pods" and names:
            # Copies come by the dozen (`add_pods` takes eight or more in one step).
            size = n if n % 2 else 4 * n
            batch = [batch_pod(f"b{counter}-{i}", i, n) for i in range(size)]
            # Often onto the node added last, which a revert may then take away.
            snap.add_pods(batch, names[-1] if n % 2 else names[n % len(names)])
        elif op == "remove_pod":
            pods = [p.key for p, _ in snap.pods()]
            if pods:
                snap.remove_pod(pods[n % len(pods)])
        elif op == "add_node":
            # Names repeat, so that a node removed in a fork may come back in it.
            if f"x{n}" not in snap:
                snap.add_node(make_node(f"x{n}"), [make_pod(f"q{counter}", "1", host_ports=[n])])
        elif op == "remove_node" and names:
            snap.remove_node(names[n % len(names)])
        elif op == "fork":
            states.append(state(snap))
            snap.fork()
        elif op == "commit" and snap.depth > 1:
            states.pop()
            snap.commit()
        elif op == "revert" and snap.depth > 1:
            snap.revert()
            assert state(snap) == states.pop()
    while snap.depth:
        snap.revert()
        assert state(snap) == states.pop()
    assert not states


def test_add_pods_in_bulk_matches_one_by_one():
    one, bulk = small_snapshot(), small_snapshot()
    pods = [make_pod(f"x{i}", "100m", "64Mi", host_ports=[1000 + i]) for i in range(5)]
    for pod in pods:
        one.add_pod(pod, "n2")
    bulk.fork()
    bulk.add_pods(pods, "n2")
    assert state(bulk) == state(one)
    bulk.revert()
    assert state(bulk) == state(small_snapshot())


def test_add_pods_of_copies_matches_one_by_one():
    # Copies of one pod (same requests, namespace and affinity, no host ports and no
    # CSI volume) take the one-step path; the snapshot must not tell the difference.
    for n in (2, 4, 6):
        one, bulk = small_snapshot(), small_snapshot()
        pods = [batch_pod(f"c{i}", i, n) for i in range(4 * n)]
        for pod in pods:
            one.add_pod(pod, "n2")
        bulk.fork()
        bulk.add_pods(pods, "n2")
        assert state(bulk) == state(one)
        assert bulk.get("n2").csi_volumes == one.get("n2").csi_volumes
        bulk.revert()
        assert state(bulk) == state(small_snapshot())


def test_add_pods_is_all_or_nothing():
    snap = small_snapshot()
    before = state(snap)
    with pytest.raises(SnapshotError, match="default/a"):
        snap.add_pods([make_pod("new"), make_pod("a")], "n2")
    assert state(snap) == before
