"""`PendingPods.unschedulable_groups` returns the groups `drop_schedulable` ended with
only when they are what grouping the pods again gives: the scale-up plan must see the same
groups either way, also past the per-controller group cap."""

from __future__ import annotations

from clusterscaler.loop.pending import PendingPods, drop_schedulable
from clusterscaler.model import OwnerRef, Pod
from clusterscaler.simulator import ClusterSnapshot, HintingSimulator
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.simulator.equivalence import (
    MAX_GROUPS_PER_CONTROLLER,
    group_pods,
    regroups_alike,
)
from hypothesis import given, settings
from hypothesis import strategies as st

OWNERS = [
    None,
    OwnerRef("ReplicaSet", "web", "rs-web", True, "apps/v1"),
    OwnerRef("ReplicaSet", "db", "rs-db", True, "apps/v1"),
    OwnerRef("DaemonSet", "agent", "ds-agent", True, "apps/v1"),
]
# More variants than a controller may have groups, so that the cap is reached.
CPUS = [f"{100 * (i + 1)}m" for i in range(MAX_GROUPS_PER_CONTROLLER + 3)] + ["5"]


@st.composite
def pending_pods(draw: st.DrawFn) -> list[Pod]:
    return [
        make_pod(
            f"p{i}",
            draw(st.sampled_from(CPUS)),
            "256Mi",
            labels={"app": "web"},
            owner=draw(st.sampled_from(OWNERS)),
        )
        for i in range(draw(st.integers(0, 40)))
    ]


def shape(groups: list) -> list[list[int]]:  # type: ignore[type-arg]
    return [[id(p) for p in g.pods] for g in groups]


@settings(max_examples=300, deadline=None)
@given(
    pending_pods(),
    st.lists(st.sampled_from(["1", "2", "4"]), max_size=4),
    st.lists(st.sampled_from(["1", "2", "4"]), max_size=3),
)
def test_reused_groups_are_the_groups_of_the_pods(
    pods: list[Pod], existing: list[str], upcoming: list[str]
) -> None:
    snap = ClusterSnapshot()
    for i, cpu in enumerate(existing):
        snap.add_node(make_node(f"n{i}", cpu, "8Gi"))
    pending = PendingPods(unschedulable=list(pods))
    sim = HintingSimulator()
    drop_schedulable(pending, snap, sim)
    assert shape(pending.unschedulable_groups()) == shape(group_pods(pending.unschedulable))
    # Upcoming nodes: the second pass starts from the groups the first one left.
    for i, cpu in enumerate(upcoming):
        snap.add_node(make_node(f"u{i}", cpu, "8Gi"))
    drop_schedulable(pending, snap, sim)
    assert shape(pending.unschedulable_groups()) == shape(group_pods(pending.unschedulable))


def test_groups_are_dropped_when_the_list_changes() -> None:
    owner = OWNERS[1]
    pods = [make_pod(f"a{i}", "1", owner=owner, labels={"app": "web"}) for i in range(3)]
    pending = PendingPods(unschedulable=list(pods))
    drop_schedulable(pending, ClusterSnapshot(), HintingSimulator())
    assert pending.unschedulable_groups() is pending.unschedulable_groups()
    extra = make_pod("b", "2", owner=owner, labels={"app": "web"})
    pending.unschedulable.append(extra)
    assert shape(pending.unschedulable_groups()) == shape(group_pods(pending.unschedulable))
    pending.unschedulable = list(pods)
    assert pending.unschedulable_groups() is not pending.unschedulable_groups()


def test_capped_singletons_of_one_variant_would_merge_once_others_are_gone() -> None:
    # A controller past the cap: its last two pods are singletons of one variant. Once the
    # capped groups are placed, regrouping the rest merges them, so the groups of the first
    # grouping must not be reused.
    owner = OWNERS[1]
    variants = [
        make_pod(f"v{i}", CPUS[i], owner=owner, labels={"app": "web"})
        for i in range(MAX_GROUPS_PER_CONTROLLER)
    ]
    late = [make_pod(f"late{i}", "5", owner=owner, labels={"app": "web"}) for i in range(2)]
    groups = group_pods([*variants, *late])
    assert len(groups) == MAX_GROUPS_PER_CONTROLLER + 2
    assert not regroups_alike(groups)
    snap = ClusterSnapshot()
    snap.add_node(make_node("n0", "8", "8Gi"))  # room for the variants (5.5), not for "5"
    pending = PendingPods(unschedulable=[*variants, *late])
    drop_schedulable(pending, snap, HintingSimulator())
    assert [p.name for p in pending.unschedulable] == ["late0", "late1"]
    assert shape(pending.unschedulable_groups()) == [[id(late[0]), id(late[1])]]
