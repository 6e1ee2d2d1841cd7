"""The hinting scheduler's scan: an explicit node list, unbinding moved pods, skipping full
nodes. Each must place pods exactly where the plain first-fit over the predicates does."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime

from clusterscaler.model import (
    Affinity,
    HostPort,
    NodeAffinity,
    OwnerRef,
    Pod,
    Taint,
    Toleration,
    Volume,
)
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator, SimNodeInfo
from clusterscaler.simulator.builders import make_node, make_pod, node_term, spread
from clusterscaler.simulator.predicates import check_predicates
from clusterscaler.simulator.scheduler import unbound
from hypothesis import given, settings
from hypothesis import strategies as st

T = datetime(2026, 1, 1, tzinfo=UTC)


def test_unbound_copy_differs_only_in_node_name() -> None:
    owner = OwnerRef("ReplicaSet", "web", "uid-rs", True, "apps/v1")
    pod = dataclasses.replace(
        make_pod(
            "p",
            "250m",
            "1Gi",
            labels={"app": "web"},
            annotations={"a": "b"},
            owner=owner,
            node_name="n1",
            extended={"example.com/dev": 1},
            ephemeral_storage="1Gi",
            tolerations=[Toleration("k", "Exists")],
            node_selector={"zone": "a"},
            topology_spread=[spread("zone", {"app": "web"})],
            host_ports=[HostPort(80)],
            priority=7,
            phase="Running",
        ),
        affinity=Affinity(NodeAffinity((node_term("zone", "In", "a"),)), None),
        volumes=(Volume("data", "persistentVolumeClaim", claim_name="data"),),
        creation_time=T,
        deletion_time=T,
        termination_grace_seconds=5,
        nominated_node_name="n2",
        unschedulable=True,
        scheduler_name="other",
        priority_class_name="high",
        preemption_policy="Never",
    )
    copy = unbound(pod)
    assert copy is not pod
    assert copy == dataclasses.replace(pod, node_name="")
    assert pod.node_name == "n1"
    pending = make_pod("q", "1")
    assert unbound(pending) is pending


def test_twins_of_an_unschedulable_pod_search_once() -> None:
    snap = ClusterSnapshot()
    for i in range(50):
        snap.add_node(make_node(f"n{i}", "1"))
    seen: list[str] = []

    def counting(ni: SimNodeInfo) -> bool:
        seen.append(ni.node.name)
        return True

    # Requests within every node's room, so the full predicates decide (taints).
    tainted = [make_node(f"t{i}", "4", taints=[Taint("k", "v", "NoSchedule")]) for i in range(5)]
    for node in tainted:
        snap.add_node(node)
    pods = [make_pod(f"p{i}", "500m", labels={"app": "x"}) for i in range(20)]
    for i in range(50):
        snap.add_pod(make_pod(f"fill{i}", "800m"), f"n{i}")
    result = HintingSimulator().try_schedule_pods(snap, pods, node_filter=counting)
    assert [p.name for p in result.unschedulable] == [p.name for p in pods]
    # The five nodes with room are vetted once, for the first pod; full nodes never are.
    assert seen == [n.name for n in tainted]


@dataclasses.dataclass
class Case:
    nodes: list[tuple[int, int, int, bool, int]]  # cpu milli, pods, gpus, tainted, preload milli
    pods: list[tuple[int, int, int, int, bool]]  # cpu milli, memory Mi, gpus, bound to, tolerates
    allowed: list[bool]
    hints: dict[int, int]


cases = st.builds(
    Case,
    nodes=st.lists(
        st.tuples(
            st.integers(0, 3000),
            st.integers(1, 4),
            st.integers(0, 1),
            st.booleans(),
            st.sampled_from([0, 0, 1000, 4000]),
        ),
        min_size=1,
        max_size=7,
    ),
    pods=st.lists(
        st.tuples(
            st.sampled_from([0, 0, 100, 500, 1500]),
            st.sampled_from([0, 0, 512, 4096]),
            st.sampled_from([0, 0, 1]),
            st.integers(-1, 6),
            st.booleans(),
        ),
        max_size=12,
    ),
    allowed=st.lists(st.booleans(), min_size=7, max_size=7),
    hints=st.dictionaries(st.integers(0, 11), st.integers(0, 8), max_size=6),
)


def _build(case: Case) -> tuple[ClusterSnapshot, list[Pod]]:
    snap = ClusterSnapshot()
    for i, (cpu, slots, gpus, tainted, preload) in enumerate(case.nodes):
        snap.add_node(
            make_node(
                f"n{i}",
                f"{cpu}m",
                "2Gi",
                pods=slots + 1,
                extended={"example.com/gpu": gpus} if gpus else None,
                taints=[Taint("dedicated", "x", "NoSchedule")] if tainted else (),
            )
        )
        # Preloaded pods may overcommit the node: zero requests must still fit there.
        snap.add_pod(make_pod(f"load{i}", f"{preload}m"), f"n{i}")
    pods = [
        make_pod(
            f"p{i}",
            f"{cpu}m",
            f"{memory}Mi",
            extended={"example.com/gpu": gpus} if gpus else None,
            node_name=f"n{bound}" if bound >= 0 else "",
            tolerations=[Toleration("dedicated", "Exists")] if tolerates else (),
        )
        for i, (cpu, memory, gpus, bound, tolerates) in enumerate(case.pods)
    ]
    return snap, pods


def _reference(
    snap: ClusterSnapshot,
    pods: Sequence[Pod],
    allowed: set[str],
    hints: dict[str, str],
    *,
    unbind: bool,
) -> tuple[list[tuple[str, str]], list[str]]:
    """First fit by the predicates alone: the hinted node, else from where the previous pod
    went, wrapping around."""
    infos = snap.node_infos()
    placed: list[tuple[str, str]] = []
    failed: list[str] = []
    last = 0
    for pod in pods:
        if unbind:
            pod = dataclasses.replace(pod, node_name="")
        target = None
        hint = hints.get(pod.key)
        if hint is not None:
            ni = snap.get(hint)
            if hint in allowed and check_predicates(pod, ni, snap) is None:
                target = ni
        if target is None:
            for step in range(len(infos)):
                at = (last + step) % len(infos)
                ni = infos[at]
                if ni.node.name in allowed and check_predicates(pod, ni, snap) is None:
                    target, last = ni, at
                    break
        if target is None:
            failed.append(pod.key)
            break
        snap.add_pod(pod, target.node.name)
        placed.append((pod.key, target.node.name))
    return placed, failed


@settings(max_examples=300, deadline=None)
@given(case=cases, explicit=st.booleans(), unbind=st.booleans())
def test_scan_places_pods_as_first_fit_over_the_predicates(
    case: Case, explicit: bool, unbind: bool
) -> None:
    snap, pods = _build(case)
    names = [ni.node.name for ni in snap.node_infos()]
    allowed = {n for n, ok in zip(names, case.allowed, strict=False) if ok}
    hints = {f"default/p{p}": f"n{n}" for p, n in case.hints.items() if n < len(names)}
    expected = _reference(*_build(case), allowed, hints, unbind=unbind)

    scheduler = HintingSimulator()
    scheduler.hints = dict(hints)
    nodes = [ni for ni in snap.node_infos() if ni.node.name in allowed] if explicit else None
    result = scheduler.try_schedule_pods(
        snap,
        pods,
        node_filter=lambda ni: ni.node.name in allowed,
        nodes=nodes,
        unbind=unbind,
        break_on_failure=True,
    )
    got = [(p.pod.key, p.node_name) for p in result.scheduled]
    assert (got, [p.key for p in result.unschedulable]) == expected
    for placement in result.scheduled:
        assert snap.pod_node(placement.pod.key) == placement.node_name
        if unbind:
            assert placement.pod.node_name == ""
