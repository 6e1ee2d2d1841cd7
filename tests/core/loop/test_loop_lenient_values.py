"""Values Cluster Autoscaler reads leniently are read the same way here, and said once in a
warning naming the object: a `safe-to-evict` annotation that is neither "true" nor "false" is
ignored (the pod is judged as without it), and a node kept only by a pod without a
controller says which pod keeps it and how to let it go."""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.interfaces.podfilter import BlockingPodReason
from clusterscaler.loop.decisions import UnremovableReason
from loopkit import Harness, running_pod
from structlog.testing import capture_logs

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
ELEVEN_MINUTES = timedelta(minutes=11)


def test_an_odd_safe_to_evict_value_is_ignored_with_one_warning() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("busy", "g-2", cpu="3"),
                running_pod("odd", "g-1", annotations={SAFE_TO_EVICT: "maybe"})])
    with capture_logs() as logs:
        h.run()
        later = h.run(ELEVEN_MINUTES)
    warnings = [e for e in logs if e["event"] == "annotation_value_ignored"]
    assert warnings == [
        {"event": "annotation_value_ignored", "log_level": "warning", "pod": "default/odd",
         "annotation": SAFE_TO_EVICT, "value": "maybe", "expected": '"true" or "false"'}
    ]
    # As without the annotation: a replicated pod moves, and its node goes.
    assert [d.node for d in later.scale_down.deletions if d.ok] == ["g-1"]
    assert h.cluster.evicted == ["default/odd"]


def test_false_and_true_are_not_warned_about() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=3)
    h.add_pods([running_pod("busy", "g-3", cpu="3"),
                running_pod("stays", "g-1", annotations={SAFE_TO_EVICT: "false"}),
                running_pod("goes", "g-2", annotations={SAFE_TO_EVICT: "true"})])
    with capture_logs() as logs:
        h.run()
        h.run(ELEVEN_MINUTES)
    assert not [e for e in logs if e["event"] == "annotation_value_ignored"]


def test_a_node_kept_by_a_pod_without_a_controller_says_so_once() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("busy", "g-2", cpu="3"), running_pod("orphan", "g-1", owner=None)])
    with capture_logs() as logs:
        first = h.run()
        later = h.run(ELEVEN_MINUTES)
        h.run(ELEVEN_MINUTES)
    [kept] = [u for u in later.scale_down.unremovable if u.node == "g-1"]
    assert kept.reason is UnremovableReason.BLOCKED_BY_POD
    assert kept.blocking_pod is not None
    assert kept.blocking_pod.reason is BlockingPodReason.NOT_REPLICATED
    assert not later.scale_down.deletions and h.cluster.evicted == []
    warnings = [e for e in logs if e["event"] == "node_kept_by_pod_without_controller"]
    assert len(warnings) == 1, warnings
    assert (warnings[0]["node"], warnings[0]["pod"]) == ("g-1", "default/orphan")
    assert f"{SAFE_TO_EVICT}=true" in warnings[0]["fix"]
    assert first.scale_down.unremovable  # the first loop already judged it
