"""A node group whose provider says it may not shrink now (`ScaleDownBlockingNodeGroup`).

Its nodes are no scale-down candidates, with the group's reason on each node, in the status
message and in the node group's status; they still take the pods of other nodes; the other
groups scale down as usual; and a group without the method is never blocked.
"""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.framework.dryrun import GuardedCloudProvider, dry_run_guard
from clusterscaler.interfaces.cloudprovider import (
    CloudProviderError,
    ScaleDownBlockingNodeGroup,
    scale_down_blocked,
)
from clusterscaler.loop.decisions import UnremovableReason
from clusterscaler.report.status import status_from_result
from loopkit import Harness, running_pod

ELEVEN_MINUTES = timedelta(minutes=11)


def test_a_blocked_group_keeps_its_nodes_and_says_why_while_others_shrink() -> None:
    h = Harness()
    held = h.provider.add_group("held", 0, 10, nodes=2)
    h.provider.add_group("free", 0, 10, nodes=1)
    h.add_pods([running_pod("big", "held-1", cpu="3")])
    h.add_pods([running_pod("small", "free-1", cpu="200m")])
    reason = ["MachineDeployment ns/md is rolling out"]
    held.scale_down_blocked = lambda: reason[0] or None  # type: ignore[attr-defined]
    assert isinstance(held, ScaleDownBlockingNodeGroup)

    first = h.run()
    for name in ("held-1", "held-2"):
        [u] = [u for u in first.scale_down.unremovable if u.node == name]
        assert u.reason is UnremovableReason.NOT_UNNEEDED_OTHER_REASON
        assert u.detail == "node group held: scale-down blocked: MachineDeployment ns/md is rolling out"
    assert {g.name: g.scale_down_blocked for g in first.node_groups} == {
        "free": "",
        "held": "MachineDeployment ns/md is rolling out",
    }
    assert "held: scale-down blocked: MachineDeployment ns/md is rolling out" in (
        status_from_result(first).message
    )
    # free-1's pod may move to the (blocked, empty) held-2: free-1 goes, held-2 stays.
    second = h.run(ELEVEN_MINUTES)
    assert [(d.node, d.ok) for d in second.scale_down.deletions] == [("free-1", True)]
    assert h.cluster.evicted == ["default/small"]
    assert "held-2" in h.cluster.nodes

    # Unblocked: the empty held-2 is unneeded from now on and goes after the unneeded time.
    reason[0] = ""
    third = h.run(timedelta(minutes=1))
    assert all(not g.scale_down_blocked for g in third.node_groups)
    assert "scale-down blocked" not in status_from_result(third).message
    later = h.run(ELEVEN_MINUTES)
    assert [d.node for d in later.scale_down.deletions if d.ok] == ["held-2"]


def test_a_provider_error_blocks_the_group_with_that_error() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10, nodes=1)

    def fails() -> str | None:
        raise CloudProviderError("listing MachineSets failed: 503")

    g.scale_down_blocked = fails  # type: ignore[attr-defined]
    result = h.run()
    [u] = result.scale_down.unremovable
    assert u.node == "g-1"
    assert "could not tell whether its nodes may be removed: listing MachineSets failed: 503" in u.detail
    assert h.run(ELEVEN_MINUTES).scale_down.deletions == ()


def test_groups_without_the_method_are_never_blocked_and_the_guard_passes_it_on() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10, nodes=1)
    assert not isinstance(g, ScaleDownBlockingNodeGroup)
    assert scale_down_blocked(g) is None
    guarded = GuardedCloudProvider(h.provider, dry_run_guard)
    [wrapped] = guarded.node_groups()
    assert scale_down_blocked(wrapped) is None
    g.scale_down_blocked = lambda: "rolling out"  # type: ignore[attr-defined]
    assert scale_down_blocked(wrapped) == "rolling out"
