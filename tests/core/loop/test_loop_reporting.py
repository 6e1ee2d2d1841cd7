"""What the loop's results tell metrics, events and the status ConfigMap."""

from __future__ import annotations

from clusterscaler.metrics import Metrics
from test_loop_background_deletion import ELEVEN_MINUTES, RETRY, Background


def _gauge(metrics: Metrics, name: str) -> float:
    value = metrics.registry.get_sample_value(f"cluster_autoscaler_{name}")
    assert value is not None, name
    return value


def test_pending_node_deletions_follow_the_deletions_in_flight() -> None:
    """CA's pending_node_deletions: nodes whose deletion started and has not ended; it
    drops back to 0 once the drain finishes."""
    b = Background(nodes=2)
    try:
        metrics = Metrics()
        b.cluster.refused.add("default/small-2")
        metrics.record_loop(b.run())
        assert _gauge(metrics, "pending_node_deletions") == 0
        started = b.run(ELEVEN_MINUTES)
        metrics.record_loop(started)
        assert started.scale_down.in_flight == ("g-2",)
        assert _gauge(metrics, "pending_node_deletions") == 1
        b.cluster.refused.clear()
        done = b.run(RETRY)
        metrics.record_loop(done)
        assert [d.node for d in done.scale_down.deletions] == ["g-2"]
        assert _gauge(metrics, "pending_node_deletions") == 0
    finally:
        b.close()
