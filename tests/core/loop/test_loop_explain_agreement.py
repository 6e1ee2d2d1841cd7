"""`explain` says what the loop decided: a node group's own --scale-down-unneeded-time
(a per-group override, as ASG tags and Machine API annotations give) sets when its nodes
become removable, in the loop and in the answer alike."""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.commands.explain import explain
from clusterscaler.interfaces.cloudprovider import NodeGroupOptions
from clusterscaler.offline import output
from loopkit import Harness, running_pod


def test_explain_and_the_loop_agree_on_a_group_with_its_own_unneeded_time() -> None:
    h = Harness(scale_down_unneeded_time=timedelta(minutes=10))
    h.provider.add_group(
        "fast", 0, 10, nodes=2, options=NodeGroupOptions(scale_down_unneeded_time=timedelta(minutes=2))
    )
    h.add_pods([running_pod("busy", "fast-1", cpu="3")])
    h.run()
    result = h.run(timedelta(minutes=1))
    (unneeded,) = result.scale_down.unneeded
    assert unneeded.removable_at - unneeded.since == timedelta(minutes=2)
    report = explain(result, h.cluster.snapshot(), h.options, result.time, h.provider)
    node = next(n for n in report.nodes if n.node == "fast-2")
    assert node.removable
    assert node.reason.endswith("removable after 1m0s more unneeded"), node.reason
    # `simulate --once --json` does not list it yet: its time has not come.
    assert output.decision_json(result)["scaleDown"] == []

    later = h.run(timedelta(minutes=1, seconds=1))
    assert [(d.node, d.ok) for d in later.scale_down.deletions] == [("fast-2", True)]
