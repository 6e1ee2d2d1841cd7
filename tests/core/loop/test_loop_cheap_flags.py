"""Behavioural flags of Cluster Autoscaler that change one decision of the loop, each
checked against what it changes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.framework.dryrun import GuardedNodeGroup
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.interfaces.cloudprovider import (
    ForceDeletingNodeGroup,
    InstanceErrorClass,
    InstanceErrorInfo,
    delete_nodes,
)
from clusterscaler.loop.decisions import DeletionKind, ScaleDownStatus
from clusterscaler.loop.scaledown.actuator import priority_groups
from clusterscaler.loop.taints import DELETION_CANDIDATE_TAINT
from clusterscaler.model import Node, OwnerRef, Pod, Taint
from loopkit import GROUP_LABEL, Harness, pending_pod, running_pod


def ds_owner() -> OwnerRef:
    return OwnerRef("DaemonSet", "agent", "uid-ds-agent", True, "apps/v1")


def two_groups(**options: object) -> Harness:
    """Group a is full; group b has an empty node (b-2, a DaemonSet pod only)."""
    h = Harness(**options)
    h.provider.add_group("a", 0, 10, nodes=1, labels={"pool": "a"})
    h.provider.add_group("b", 0, 10, nodes=2, labels={"pool": "b"})
    h.add_pods([running_pod("busy-a", "a-1", cpu="3")])
    h.add_pods([running_pod("busy-b", "b-1", cpu="3")])
    h.add_pods([running_pod("agent-b", "b-2", owner=ds_owner())])
    return h


@pytest.mark.parametrize(("local", "deleted"), [(False, []), (True, ["b-2"])], ids=["global", "local"])
def test_scale_down_delay_type_local_holds_back_only_the_group_that_scaled_up(
    local: bool, deleted: list[str]
) -> None:
    h = two_groups(scale_down_delay_type_local=local)
    first = h.run()
    assert [u.node for u in first.scale_down.unneeded] == ["b-2"]
    # Nine minutes later group a grows for a pod only it can run.
    h.add_pods([pending_pod("wants-a", cpu="2", node_selector={"pool": "a"})])
    grew = h.run(timedelta(minutes=9))
    assert [(d.node_group, d.delta) for d in grew.scale_up.decisions] == [("a", 1)]
    # Two minutes after that b-2 has been unneeded for 11 minutes, while the scale-up is
    # within --scale-down-delay-after-add (10m).
    result = h.run(timedelta(minutes=2))
    assert [d.node for d in result.scale_down.deletions if d.ok] == deleted
    if local:
        assert result.scale_down.status is ScaleDownStatus.NODE_DELETE_STARTED
        # Group a's nodes are no candidates until its delay has passed.
        assert not {u.node for u in result.scale_down.unneeded} & {"a-1", "a-2"}
    else:
        assert result.scale_down.status is ScaleDownStatus.IN_COOLDOWN
        assert result.scale_down.cooldown_reason == "--scale-down-delay-after-add"


@pytest.mark.parametrize(
    ("local", "deleted_next"), [(False, []), (True, ["c-2"])], ids=["global", "local"]
)
def test_scale_down_delay_after_delete_per_group(local: bool, deleted_next: list[str]) -> None:
    h = Harness(
        scale_down_delay_type_local=local,
        scale_down_delay_after_delete=timedelta(minutes=30),
        max_scale_down_parallelism=1,
    )
    h.provider.add_group("b", 0, 10, nodes=3)
    h.provider.add_group("c", 0, 10, nodes=2)
    h.add_pods([running_pod("busy-b", "b-1", cpu="3"), running_pod("busy-c", "c-1", cpu="3")])
    for node in ("b-2", "b-3", "c-2"):
        h.add_pods([running_pod(f"agent-{node}", node, owner=ds_owner())])
    h.run()
    first = h.run(timedelta(minutes=11))
    assert [d.node for d in first.scale_down.deletions if d.ok] == ["b-2"]
    # Group b deleted a node: b-3 waits --scale-down-delay-after-delete; with the local
    # delay type, group c does not.
    second = h.run(timedelta(seconds=10))
    assert [d.node for d in second.scale_down.deletions if d.ok] == deleted_next
    assert "b-3" in h.cluster.nodes


@pytest.mark.parametrize(
    ("scale_from_unschedulable", "delta"), [(False, []), (True, [("zero", 1)])], ids=["off", "on"]
)
def test_scale_from_unschedulable_ignores_a_cordoned_template(
    scale_from_unschedulable: bool, delta: list[tuple[str, int]]
) -> None:
    h = Harness(scale_from_unschedulable=scale_from_unschedulable)
    group = h.provider.add_group("zero", 0, 10, nodes=0)
    # The provider describes its new nodes as cordoned (.spec.unschedulable).
    group.template = group.template.with_(unschedulable=True)
    h.add_pods([pending_pod("p")])
    result = h.run()
    template = h.autoscaler.templates.last["zero"].node_info
    assert template is not None and template.node.unschedulable is not scale_from_unschedulable
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == delta


@pytest.mark.parametrize(
    ("ttl", "tainted_ago", "deleted"),
    [
        (timedelta(0), timedelta(minutes=8), []),
        (timedelta(hours=1), timedelta(minutes=8), ["b-2"]),
        (timedelta(minutes=5), timedelta(minutes=8), []),
    ],
    ids=["no-ttl", "within-ttl", "stale"],
)
def test_node_deletion_candidate_ttl_keeps_the_unneeded_time_of_an_earlier_run(
    ttl: timedelta, tainted_ago: timedelta, deleted: list[str]
) -> None:
    h = two_groups(node_deletion_candidate_ttl=ttl)
    # An earlier autoscaler found b-2 unneeded `tainted_ago`, then stopped.
    since = h.clock.now() - tainted_ago
    h.cluster.add_taint(
        "b-2", Taint(DELETION_CANDIDATE_TAINT, str(int(since.timestamp())), "PreferNoSchedule")
    )
    first = h.run()
    (unneeded,) = first.scale_down.unneeded
    assert unneeded.node == "b-2"
    assert unneeded.since == (since if deleted else h.clock.now())
    # Three minutes on, b-2 has been unneeded for 11 minutes only if that time was kept.
    result = h.run(timedelta(minutes=3))
    assert [d.node for d in result.scale_down.deletions if d.ok] == deleted


@pytest.mark.parametrize("parallel", [False, True], ids=["one-after-another", "parallel"])
def test_parallel_scale_up_asks_every_group_despite_a_failure(parallel: bool) -> None:
    h = Harness(
        balance_similar_node_groups=True,
        balancing_ignore_label=[GROUP_LABEL],
        parallel_scale_up=parallel,
    )
    a = h.provider.add_group("a", 0, 10, labels={"topology.kubernetes.io/zone": "za"})
    b = h.provider.add_group("b", 0, 10, labels={"topology.kubernetes.io/zone": "zb"})
    a.fail_increase = "quota exceeded"
    h.add_pods([pending_pod(f"p{i}", cpu="3") for i in range(4)])
    result = h.run()
    # Group a comes first; its failure ends a scale-up made one group after another.
    assert a.increases == [2]
    assert b.increases == ([2] if parallel else [])
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == (
        [("b", 2)] if parallel else []
    )
    assert b.target == (2 if parallel else 0)
    assert any("quota exceeded" in e for e in result.errors)


class RecordingCluster(InMemoryCluster):
    """Records each eviction with its grace period, in order."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.evictions: list[tuple[str, int | None]] = []

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        self.evictions.append((pod.key, grace_period_seconds))
        super().evict(pod, grace_period_seconds)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # All at once, at most --max-graceful-termination-sec; DaemonSet pods after.
        ([], [("default/high", 300), ("default/low", 60), ("default/agent-2", 30)]),
        (
            [(1000, 100), (0, 20)],
            [("default/low", 20), ("default/agent-2", 20), ("default/high", 100)],
        ),
    ],
    ids=["max-graceful-termination-sec", "by-priority"],
)
def test_drain_priority_config_evicts_lowest_priority_first_with_its_grace_period(
    config: list[tuple[int, int]], expected: list[tuple[str, int]]
) -> None:
    h = Harness(
        cluster_class=RecordingCluster,
        drain_priority_config=config,
        max_graceful_termination_sec=300,
    )
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m")])
    h.add_pods(
        [
            running_pod("high", "g-2", cpu="100m", priority=2000, termination_grace_seconds=600),
            running_pod("low", "g-2", cpu="100m", priority=0, termination_grace_seconds=60),
            running_pod("agent-2", "g-2", owner=ds_owner()),
        ]
    )
    h.run()
    (deletion,) = h.run(timedelta(minutes=11)).scale_down.deletions
    assert deletion.ok
    cluster = h.cluster
    assert isinstance(cluster, RecordingCluster)
    assert cluster.evictions == expected


@pytest.mark.parametrize(
    ("priority", "group"),
    [(None, 0), (-5, 0), (0, 0), (999, 0), (1000, 1), (5000, 2), (10**9, 2)],
    ids=["none", "below-lowest", "at-lowest", "between", "at-boundary", "at-highest", "above"],
)
def test_priority_groups_put_a_pod_with_the_highest_entry_not_above_it(
    priority: int | None, group: int
) -> None:
    pod = running_pod("p", "n", priority=priority)
    groups = priority_groups([(5000, 5), (0, 60), (1000, 30)], [pod])
    assert [grace for grace, _ in groups] == [60, 30, 5]
    assert [i for i, (_, pods) in enumerate(groups) if pods] == [group]


@pytest.mark.parametrize("force", [False, True], ids=["min-size-kept", "forced"])
def test_force_delete_failed_nodes_goes_below_the_min_size(force: bool) -> None:
    h = Harness(force_delete_failed_nodes=force)
    g = h.provider.add_group("a", 2, 10, nodes=1)
    h.add_pods([running_pod("busy", "a-1", cpu="3")])
    g.create_error = InstanceErrorInfo(
        InstanceErrorClass.OUT_OF_RESOURCES, "ZONE_RESOURCE_POOL_EXHAUSTED", "no capacity"
    )
    # Someone raised the group to its min size; the new instance failed to be created.
    g.increase_size(1)
    result = h.run()
    (cleanup,) = result.cleanups
    assert cleanup.kind is DeletionKind.CREATE_ERROR
    assert cleanup.ok is force
    assert g.calls[-1][0] == ("force_delete_nodes" if force else "delete_nodes")
    assert g.target == (1 if force else 2)


def test_forced_deletion_falls_back_to_delete_nodes_where_a_group_cannot_force() -> None:
    class PlainGroup:
        id = "plain"

        def __init__(self) -> None:
            self.calls: list[str] = []

        def delete_nodes(self, nodes: Sequence[Node]) -> None:
            self.calls.append("delete_nodes")

    plain = PlainGroup()
    assert not isinstance(plain, ForceDeletingNodeGroup)
    delete_nodes(plain, [], force=True)  # type: ignore[arg-type]
    assert plain.calls == ["delete_nodes"]
    # Through the dry-run/leadership wrapper, too.
    guarded = GuardedNodeGroup(plain, lambda *args: True)  # type: ignore[arg-type]
    delete_nodes(guarded, [], force=True)
    assert plain.calls == ["delete_nodes", "delete_nodes"]
