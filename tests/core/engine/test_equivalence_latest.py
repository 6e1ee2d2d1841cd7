"""`group_pods` compares a pod with its controller's latest pod before building keys: the
groups must be those of grouping by `scheduling_key` alone."""

from __future__ import annotations

from collections.abc import Hashable

from clusterscaler.model import OwnerRef, Pod, Toleration
from clusterscaler.simulator.builders import make_pod
from clusterscaler.simulator.equivalence import PodGroup, group_pods, scheduling_key
from hypothesis import given, settings
from hypothesis import strategies as st

OWNERS = [
    None,
    OwnerRef("ReplicaSet", "web", "rs-1", True),
    OwnerRef("ReplicaSet", "api", "rs-2", True),
    OwnerRef("DaemonSet", "agent", "ds-1", True),
    OwnerRef("ReplicaSet", "nouid", "", True),
]


def by_key(pods: list[Pod], cap: int) -> list[PodGroup]:
    """Grouping by the key alone."""
    groups: list[PodGroup] = []
    by_controller: dict[str, dict[Hashable, PodGroup]] = {}
    for pod in pods:
        owner = pod.owner
        if owner is None or owner.kind == "DaemonSet" or not owner.uid:
            groups.append(PodGroup([pod]))
            continue
        known = by_controller.setdefault(owner.uid, {})
        key = scheduling_key(pod)
        if key in known:
            known[key].pods.append(pod)
        elif len(known) < cap:
            known[key] = PodGroup([pod])
            groups.append(known[key])
        else:
            groups.append(PodGroup([pod]))
    return groups


@st.composite
def pods(draw: st.DrawFn) -> list[Pod]:
    out = []
    for i in range(draw(st.integers(0, 40))):
        labels = draw(
            st.sampled_from(
                [{"app": "web"}, {"app": "web", "v": "2"}, {"v": "2", "app": "web"}, {}]
            )
        )
        out.append(
            make_pod(
                f"p{i}",
                draw(st.sampled_from(["1", "1000m", "2"])),
                owner=draw(st.sampled_from(OWNERS)),
                labels=labels,
                tolerations=draw(st.sampled_from([(), (Toleration("k", "Exists"),)])),
                node_selector=draw(st.sampled_from([None, {"zone": "a"}])),
                priority=draw(st.sampled_from([None, 0, 10])),
            )
        )
    return out


@settings(max_examples=300, deadline=None)
@given(pods(), st.integers(1, 4))
def test_same_groups_as_grouping_by_key(pods: list[Pod], cap: int) -> None:
    got = [[p.name for p in g.pods] for g in group_pods(pods, cap)]
    assert got == [[p.name for p in g.pods] for g in by_key(pods, cap)]


def test_pods_of_one_controller_uid_in_two_namespaces_are_not_alike() -> None:
    # A uid is one object's, but a hand-written snapshot may reuse it across namespaces:
    # the pods are then not one group, which the estimator would pack as copies.
    owner = OwnerRef("ReplicaSet", "web", "rs-1", True)
    pods = [make_pod(f"p{i}", "1", owner=owner, namespace=("a", "b")[i % 2]) for i in range(4)]
    groups = group_pods(pods)
    assert [[p.key for p in g.pods] for g in groups] == [["a/p0", "a/p2"], ["b/p1", "b/p3"]]
    assert all(g.alike for g in groups)
    assert not PodGroup(pods).alike
