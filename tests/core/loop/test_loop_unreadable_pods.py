"""A node bound to a pod the model cannot read is never removed: dropping the pod would make
the node look empty (tainted, cordoned and announced as ScaleDownEmpty before the last check
rolled it back, again after every recheck timeout)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from clusterscaler.loop.decisions import UnremovableReason
from clusterscaler.model import ClusterObjects, UnreadableObject
from clusterscaler.offline.output import decision_json
from clusterscaler.report.status import status_from_result
from loopkit import Harness

ELEVEN_MINUTES = timedelta(minutes=11)


def test_a_node_with_an_unreadable_pod_is_kept_and_says_why() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=2)
    bad = UnreadableObject("Pod", "default/odd", "g-1",
                           "Pod default/odd: spec.containers[0].resources.requests: expected a mapping")
    snapshot = h.cluster.snapshot

    def with_unreadable() -> ClusterObjects:
        return dataclasses.replace(snapshot(), unreadable=[bad])

    h.cluster.snapshot = with_unreadable  # type: ignore[method-assign]
    first = h.run()
    [u] = [u for u in first.scale_down.unremovable if u.node == "g-1"]
    assert u.reason is UnremovableReason.NOT_UNNEEDED_OTHER_REASON
    assert "default/odd" in u.detail and "cannot be read" in u.detail
    # Said in the status ConfigMap's message and in `explain --json`.
    assert "1 object(s) cannot be read and are left out" in status_from_result(first).message
    assert decision_json(first)["unreadable"] == [
        {"kind": "Pod", "object": "default/odd", "node": "g-1", "error": bad.error}
    ]
    later = h.run(ELEVEN_MINUTES)
    # The empty g-2 goes; g-1, which looks just as empty, stays.
    assert [d.node for d in later.scale_down.deletions if d.ok] == ["g-2"]
    assert "g-1" in h.cluster.nodes
    assert h.cluster.evicted == []


def test_unreadable_objects_are_counted_by_kind() -> None:
    from clusterscaler.report.metrics import Metrics

    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=1)
    bad = [
        UnreadableObject("Pod", "default/a", "g-1", "Pod default/a: status: expected an object"),
        UnreadableObject("Pod", "default/b", "", "Pod default/b: spec: expected an object"),
        UnreadableObject("Node", "n", "", "Node n: status: expected an object"),
    ]
    snapshot = h.cluster.snapshot
    h.cluster.snapshot = lambda: dataclasses.replace(snapshot(), unreadable=bad)  # type: ignore[method-assign]
    metrics = Metrics()
    metrics.record_loop(h.run())
    text = metrics.render().decode()
    assert 'cluster_autoscaler_unreadable_objects_count{kind="Pod"} 2.0' in text
    assert 'cluster_autoscaler_unreadable_objects_count{kind="Node"} 1.0' in text
    h.cluster.snapshot = snapshot  # type: ignore[method-assign]
    metrics.record_loop(h.run())
    assert "cluster_autoscaler_unreadable_objects_count{" not in metrics.render().decode()
