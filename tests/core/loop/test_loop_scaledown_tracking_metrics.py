"""The metrics CA feeds only from its scale-down and limit checks, fed here from real loops
over the simulated cluster: node_removal_latency_seconds{deleted}
(--node-removal-latency-tracking-enabled), max_node_skip_eval_duration_seconds
(--max-node-skip-eval-time-tracker-enabled) and skipped_scale_events_count{direction,reason}."""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.framework.options import MinMax
from clusterscaler.loop.decisions import ScaleDownStatus, UnremovableReason
from clusterscaler.report.metrics import Metrics
from loopkit import Harness, pending_pod, running_pod


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def skipped(metrics: Metrics, direction: str, reason: str) -> float:
    return sample(
        metrics,
        "cluster_autoscaler_skipped_scale_events_count",
        direction=direction,
        reason=reason,
    )


def latency(metrics: Metrics, deleted: str) -> tuple[float, float]:
    """(count, sum) of node_removal_latency_seconds{deleted}."""
    base = "cluster_autoscaler_node_removal_latency_seconds"
    return (
        sample(metrics, base + "_count", deleted=deleted),
        sample(metrics, base + "_sum", deleted=deleted),
    )


def two_nodes(**options: object) -> Harness:
    """g-1 is busy; g-2 holds a small pod that fits on g-1, so g-2 is unneeded."""
    h = Harness(**options)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m", memory="1Gi")])
    h.add_pods([running_pod("small", "g-2", cpu="200m")])
    return h


def test_removal_latency_is_the_wait_past_the_unneeded_time_until_deletion() -> None:
    h = two_nodes()
    metrics = Metrics(node_removal_latency_tracking=True)
    metrics.record_loop(h.run())
    # --scale-down-unneeded-time is 10 minutes: g-2 may go from minute 10, and goes at 13.
    result = h.run(timedelta(minutes=13))
    metrics.record_loop(result)
    assert result.scale_down.status is ScaleDownStatus.NODE_DELETE_STARTED
    assert latency(metrics, "true") == (1.0, 180.0)
    assert latency(metrics, "false") == (0.0, 0.0)
    assert "g-2" not in h.cluster.nodes
    # The deleted node is not observed a second time.
    metrics.record_loop(h.run(timedelta(minutes=1)))
    assert latency(metrics, "true") == (1.0, 180.0)
    assert latency(metrics, "false") == (0.0, 0.0)


def test_removal_latency_of_a_node_needed_again_after_its_threshold() -> None:
    # In cooldown after a scale-up nothing is deleted, so g-2 overstays its threshold.
    h = two_nodes(scale_down_delay_after_add=timedelta(hours=1))
    metrics = Metrics(node_removal_latency_tracking=True)
    h.autoscaler.last_scale_up = h.clock.now()
    metrics.record_loop(h.run())
    metrics.record_loop(h.run(timedelta(minutes=12)))
    assert latency(metrics, "true") == (0.0, 0.0)
    # g-2 fills up: needed again 2 minutes past its threshold.
    h.add_pods([running_pod("filler", "g-2", cpu="3")])
    metrics.record_loop(h.run(timedelta(seconds=30)))
    assert latency(metrics, "false") == (1.0, 150.0)
    assert latency(metrics, "true") == (0.0, 0.0)


def test_a_node_needed_again_before_its_threshold_is_not_observed() -> None:
    h = two_nodes()
    metrics = Metrics(node_removal_latency_tracking=True)
    metrics.record_loop(h.run())
    h.add_pods([running_pod("filler", "g-2", cpu="3")])
    metrics.record_loop(h.run(timedelta(minutes=5)))
    assert latency(metrics, "false") == (0.0, 0.0)


def test_removal_latency_is_not_observed_without_the_flag() -> None:
    h = two_nodes()
    metrics = Metrics()
    metrics.record_loop(h.run())
    metrics.record_loop(h.run(timedelta(minutes=13)))
    assert "g-2" not in h.cluster.nodes
    assert latency(metrics, "true") == (0.0, 0.0)


def six_nodes_two_simulated(**options: object) -> Harness:
    """Five nodes with a small pod each, of which only two are simulated per loop
    (--scale-down-non-empty-candidates-count=2): the other three, and the busy g-1, are
    skipped."""
    h = Harness(scale_down_non_empty_candidates_count=2, **options)
    h.provider.add_group("g", 0, 10, nodes=6)
    h.add_pods([running_pod("big", "g-1", cpu="1")])
    for i in range(2, 7):
        h.add_pods([running_pod(f"s{i}", f"g-{i}")])
    return h


def test_max_node_skip_eval_duration_is_the_longest_unbroken_run_of_skips() -> None:
    h = six_nodes_two_simulated(scale_down_delay_after_add=timedelta(hours=1))
    h.autoscaler.last_scale_up = h.clock.now()
    metrics = Metrics(max_node_skip_eval_time_tracking=True)
    gauge = "cluster_autoscaler_max_node_skip_eval_duration_seconds"
    first = h.run()
    metrics.record_loop(first)
    skipped_first = {u.node for u in first.scale_down.unremovable if u.skipped}
    assert len(skipped_first) == 4
    assert sample(metrics, gauge) == 0.0
    for minutes in (1, 2, 3):
        metrics.record_loop(h.run(timedelta(minutes=1)))
        # The same nodes stay skipped: the run started at the first loop.
        assert sample(metrics, gauge) == 60.0 * minutes
    # Every node fits in the simulation again: nothing is skipped any more.
    h.set_options(scale_down_non_empty_candidates_count=30)
    metrics.record_loop(h.run(timedelta(minutes=1)))
    assert sample(metrics, gauge) == 0.0


def test_nodes_left_out_for_other_reasons_are_not_skipped_nodes() -> None:
    """A node that has not started yet is no candidate (NotUnneededOtherReason too), but
    the simulation did not skip it."""
    h = Harness(scale_down_delay_after_add=timedelta(hours=1))
    h.provider.add_group("g", 0, 10, nodes=2)
    h.provider.add_group("new", 0, 10, nodes=1, ready=False, created=h.clock.now())
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.autoscaler.last_scale_up = h.clock.now()
    metrics = Metrics(max_node_skip_eval_time_tracking=True)
    gauge = "cluster_autoscaler_max_node_skip_eval_duration_seconds"
    for _ in range(3):
        result = h.run(timedelta(minutes=1))
        metrics.record_loop(result)
        reasons = {u.node: (u.reason, u.skipped) for u in result.scale_down.unremovable}
        assert reasons["new-1"] == (UnremovableReason.NOT_UNNEEDED_OTHER_REASON, False)
        assert sample(metrics, gauge) == 0.0


def test_max_node_skip_eval_duration_stays_unset_without_the_flag() -> None:
    h = six_nodes_two_simulated()
    metrics = Metrics()
    metrics.record_loop(h.run())
    metrics.record_loop(h.run(timedelta(minutes=5)))
    assert sample(metrics, "cluster_autoscaler_max_node_skip_eval_duration_seconds") == 0.0


def test_scale_up_skipped_by_the_cpu_limit_is_counted_once_per_group() -> None:
    h = Harness(cores_total=MinMax(0, 8))
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([pending_pod("p", cpu="3500m"), pending_pod("q", cpu="3500m")])
    h.add_pods([running_pod("a", "g-1", cpu="3"), running_pod("b", "g-2", cpu="3")])
    metrics = Metrics()
    result = h.run()
    metrics.record_loop(result)
    assert result.scale_up.decisions == ()
    assert skipped(metrics, "up", "CpuResourceLimit") == 1.0
    assert skipped(metrics, "up", "MemoryResourceLimit") == 0.0
    assert skipped(metrics, "down", "CpuResourceLimit") == 0.0
    metrics.record_loop(h.run(timedelta(seconds=10)))
    assert skipped(metrics, "up", "CpuResourceLimit") == 2.0


def test_scale_up_skipped_by_both_limits_counts_both() -> None:
    h = Harness(cores_total=MinMax(0, 8), memory_total=MinMax(0, 16))
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([pending_pod("p", cpu="3500m")])
    h.add_pods([running_pod("a", "g-1", cpu="3"), running_pod("b", "g-2", cpu="3")])
    metrics = Metrics()
    metrics.record_loop(h.run())
    assert skipped(metrics, "up", "CpuResourceLimit") == 1.0
    assert skipped(metrics, "up", "MemoryResourceLimit") == 1.0


def test_scale_down_skipped_by_the_cpu_minimum_is_counted_per_node() -> None:
    h = Harness(cores_total=MinMax(8, 100))
    h.provider.add_group("g", 0, 10, nodes=2)
    metrics = Metrics()
    metrics.record_loop(h.run())
    result = h.run(timedelta(minutes=11))
    metrics.record_loop(result)
    blocked = [
        u
        for u in result.scale_down.unremovable
        if u.reason is UnremovableReason.MINIMAL_RESOURCE_LIMIT_EXCEEDED
    ]
    assert blocked and all(u.exceeded == ("cpu",) for u in blocked)
    assert skipped(metrics, "down", "CpuResourceLimit") == float(len(blocked))
    assert skipped(metrics, "down", "MemoryResourceLimit") == 0.0
    assert skipped(metrics, "up", "CpuResourceLimit") == 0.0
