from __future__ import annotations

import pytest
from clusterscaler.model import OwnerRef, Toleration, Volume
from clusterscaler.simulator.builders import make_pod
from clusterscaler.simulator.equivalence import MAX_GROUPS_PER_CONTROLLER, group_pods

RS = OwnerRef("ReplicaSet", "web", "rs-1", True)
RS2 = OwnerRef("ReplicaSet", "api", "rs-2", True)
DS = OwnerRef("DaemonSet", "agent", "ds-1", True)

CASES = [
    (
        "same controller same spec",
        [make_pod(f"p{i}", "1", owner=RS, labels={"a": "1"}) for i in range(3)],
        [3],
    ),
    ("bare pods are singletons", [make_pod(f"p{i}", "1") for i in range(3)], [1, 1, 1]),
    ("daemonset pods are singletons", [make_pod(f"p{i}", "1", owner=DS) for i in range(2)], [1, 1]),
    (
        "different controllers",
        [make_pod("a", "1", owner=RS), make_pod("b", "1", owner=RS2)],
        [1, 1],
    ),
    (
        "labels differ",
        [
            make_pod("a", "1", owner=RS, labels={"v": "1"}),
            make_pod("b", "1", owner=RS, labels={"v": "2"}),
        ],
        [1, 1],
    ),
    ("requests differ", [make_pod("a", "1", owner=RS), make_pod("b", "2", owner=RS)], [1, 1]),
    (
        "tolerations differ",
        [
            make_pod("a", "1", owner=RS),
            make_pod("b", "1", owner=RS, tolerations=[Toleration("k", "Exists")]),
        ],
        [1, 1],
    ),
    (
        # Each pod's ephemeral volume has its own claim, named after the pod: whether it
        # exists and is the pod's differs from pod to pod.
        "equal ephemeral volumes",
        [make_pod(f"p{i}", "1", owner=RS, volumes=(Volume("scratch", "ephemeral"),))
         for i in range(3)],
        [1, 1, 1],
    ),
    (
        "order of first appearance",
        [make_pod("a", "1", owner=RS), make_pod("b", "2", owner=RS), make_pod("c", "1", owner=RS)],
        [2, 1],
    ),
]


@pytest.mark.parametrize(("pods", "sizes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_group_pods(pods, sizes):
    groups = group_pods(pods)
    assert [len(g) for g in groups] == sizes
    # Every pod lands in exactly one group.
    assert sorted(p.name for g in groups for p in g) == sorted(p.name for p in pods)


def test_at_most_ten_groups_per_controller():
    pods = [make_pod(f"p{i}", f"{i + 1}", owner=RS) for i in range(MAX_GROUPS_PER_CONTROLLER + 3)]
    pods.append(make_pod("again", "1", owner=RS))  # joins the first group
    pods.append(
        make_pod("late", f"{MAX_GROUPS_PER_CONTROLLER + 1}", owner=RS)
    )  # variant 11: singleton
    groups = group_pods(pods)
    assert len(groups) == MAX_GROUPS_PER_CONTROLLER + 4
    assert [p.name for p in groups[0]] == ["p0", "again"]
    assert all(len(g) == 1 for g in groups[1:])
