"""The loop over an in-memory cluster whose actions fail: a failure is that node's (or that
pod's) only, reported with CA's error type, and only a `LoopAbortedError` ends the loop."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.framework.clusteractions import EvictionError
from clusterscaler.framework.errors import ErrorType, LoopAbortedError, error_type_of
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.loop.taints import DELETION_CANDIDATE_TAINT, TO_BE_DELETED_TAINT
from clusterscaler.model import Pod, Taint
from clusterscaler.report.metrics import Metrics
from loopkit import Harness, running_pod
from structlog.testing import capture_logs

ELEVEN_MINUTES = timedelta(minutes=11)


class Refused(LoopAbortedError):
    """What the guarded actions raise once this process may no longer act."""


class FlakyCluster(InMemoryCluster):
    """An API server failing the calls the test names: `fail_taints` maps (node, taint key)
    to the exception its taint raises, `abort_after_taints` refuses every deletion taint
    after that many, `fail_evictions` maps a pod to its eviction's exception, and
    `fail_reads` is how many pod reads time out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fail_taints: dict[tuple[str, str], BaseException] = {}
        self.abort_after_taints: int | None = None
        self.fail_evictions: dict[str, BaseException] = {}
        self.fail_reads = 0

    def add_taint(self, node_name: str, taint: Taint) -> None:
        failure = self.fail_taints.get((node_name, taint.key))
        if failure is not None:
            raise failure
        if taint.key == TO_BE_DELETED_TAINT and self.abort_after_taints is not None:
            if self.abort_after_taints <= 0:
                raise Refused(f"taint node {node_name} refused: this process may no longer act")
            self.abort_after_taints -= 1
        super().add_taint(node_name, taint)

    def evict(self, pod: Pod, grace_period_seconds: int | None) -> None:
        failure = self.fail_evictions.get(pod.key)
        if failure is not None:
            raise failure
        super().evict(pod, grace_period_seconds)

    def pod_exists(self, pod: Pod) -> bool:
        if self.fail_reads:
            self.fail_reads -= 1
            raise TimeoutError("read timed out")
        return super().pod_exists(pod)


def flaky(**options: Any) -> tuple[Harness, FlakyCluster]:
    h = Harness(cluster_class=FlakyCluster, **options)
    assert isinstance(h.cluster, FlakyCluster)
    return h, h.cluster


def taint_keys(h: Harness, node: str) -> set[str]:
    return {t.key for t in h.cluster.nodes[node].taints}


def test_a_failed_soft_taint_is_that_nodes_only_and_reaches_the_result() -> None:
    h, cluster = flaky()
    h.provider.add_group("g", 0, 10, nodes=3)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    cluster.fail_taints[("g-2", DELETION_CANDIDATE_TAINT)] = TimeoutError("write timed out")
    with capture_logs() as logs:
        result = h.run()
    assert DELETION_CANDIDATE_TAINT in taint_keys(h, "g-3")
    assert DELETION_CANDIDATE_TAINT not in taint_keys(h, "g-2")
    [error] = result.errors
    assert error_type_of(error) is ErrorType.API_CALL
    assert "g-2" in error and "add_soft_taint" in error
    [line] = [e for e in logs if e["log_level"] == "error"]
    assert (line["event"], line["node"], line["action"]) == (
        "soft_taint_failed",
        "g-2",
        "add_soft_taint",
    )
    metrics = Metrics()
    metrics.record_loop(result)
    assert (
        metrics.registry.get_sample_value(
            "cluster_autoscaler_errors_total", {"type": "apiCallError"}
        )
        == 1.0
    )
    # Retried by the next loop, once the API server answers.
    del cluster.fail_taints[("g-2", DELETION_CANDIDATE_TAINT)]
    assert h.run(timedelta(seconds=10)).errors == ()
    assert DELETION_CANDIDATE_TAINT in taint_keys(h, "g-2")


def test_lost_leadership_while_tainting_ends_the_loop_and_deletes_nothing() -> None:
    h, cluster = flaky()
    h.provider.add_group("g", 0, 10, nodes=3)
    h.add_pods([running_pod("big", "g-1", cpu="3")])
    h.run()
    cluster.abort_after_taints = 1
    with pytest.raises(Refused):
        h.run(ELEVEN_MINUTES)
    # Both empty nodes are still there: the one tainted before the refusal is not handed
    # to the executor, and its deletion is reported as interrupted, not left in flight.
    assert {"g-2", "g-3"} <= set(h.cluster.nodes)
    assert h.autoscaler.deletions_in_flight() == {}
    [interrupted] = h.autoscaler.actuator.tracker.take_finished()
    assert interrupted.error.startswith("interrupted: ")
    assert interrupted.error_type is ErrorType.TRANSIENT
    assert TO_BE_DELETED_TAINT in taint_keys(h, interrupted.node)


@pytest.mark.parametrize(
    ("failure", "error_type", "fragment"),
    [
        (
            EvictionError("default/small", "HTTP 500: boom", retryable=False),
            ErrorType.API_CALL,
            "evicting pod default/small failed",
        ),
        (
            EvictionError("default/small", "disruption budget", retryable=True),
            ErrorType.API_CALL,
            "--max-pod-eviction-time",
        ),
        (RuntimeError("a bug"), ErrorType.INTERNAL, "RuntimeError: a bug"),
    ],
    ids=["server-error", "refused-until-timeout", "bug"],
)
def test_a_failed_drain_has_the_type_of_its_failure(
    failure: BaseException, error_type: ErrorType, fragment: str
) -> None:
    h, cluster = flaky()
    h.provider.add_group("g", 0, 10, nodes=3)
    h.add_pods([running_pod("big", "g-1", cpu="2500m", memory="1Gi")])
    h.add_pods([running_pod("small", "g-2", cpu="200m")])
    h.run()
    cluster.fail_evictions["default/small"] = failure
    with capture_logs() as logs:
        result = h.run(ELEVEN_MINUTES)
    by_node = {d.node: d for d in result.scale_down.deletions}
    # The empty node went on; the drained one failed alone and was rolled back.
    assert by_node["g-3"].ok and "g-3" not in h.cluster.nodes
    failed = by_node["g-2"]
    assert failed.error_type is error_type and fragment in failed.error
    assert taint_keys(h, "g-2").isdisjoint({TO_BE_DELETED_TAINT})
    assert not h.cluster.nodes["g-2"].unschedulable
    [line] = [e for e in logs if e["log_level"] == "error" and e.get("node") == "g-2"]
    assert line["event"] == "scale_down_failed" and line["error_type"] == error_type.value
    assert ("traceback" in line) is (error_type is ErrorType.INTERNAL)


def test_a_failed_read_of_an_evicted_pod_counts_as_still_running() -> None:
    h, cluster = flaky()
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m", memory="1Gi")])
    h.add_pods([running_pod("small", "g-2", cpu="200m")])
    h.run()
    cluster.fail_reads = 2
    with capture_logs() as logs:
        result = h.run(ELEVEN_MINUTES)
    (deletion,) = result.scale_down.deletions
    assert deletion.ok and "g-2" not in h.cluster.nodes
    checks = [e for e in logs if e["event"] == "pod_check_failed"]
    assert len(checks) == 2 and {e["pod"] for e in checks} == {"default/small"}
