"""What the loop's results tell metrics, events and the status ConfigMap."""

from __future__ import annotations

import pytest
from clusterscaler.interfaces.cloudprovider import ProviderProblem
from clusterscaler.report.metrics import Metrics
from clusterscaler.report.status import status_from_result
from clusterscaler.testing.fakecloud import FakeCloud
from loopkit import Harness
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


class ProblemProvider(FakeCloud):
    """A provider that reports configuration problems (as the AWS and Machine API ones do
    for bad tags and annotations)."""

    problem_list: list[ProviderProblem] = []

    def problems(self) -> list[ProviderProblem]:
        return list(self.problem_list)


BAD_MIN = ProviderProblem(
    "asg-a",
    "InvalidMinSize",
    "node group asg-a: tag k8s.io/cluster-autoscaler/node-template/min: expected an integer",
)


@pytest.mark.parametrize(
    ("problems", "unhealthy", "message"),
    [
        ((), False, ""),
        ((BAD_MIN,), False, f"asg-a: InvalidMinSize: {BAD_MIN.message}"),
        ((BAD_MIN,), True, "cluster is unhealthy: "),
    ],
    ids=["no-problem", "misconfigured-group", "halted-and-misconfigured"],
)
def test_provider_problems_reach_the_result_and_the_status_message(
    problems: tuple[ProviderProblem, ...], unhealthy: bool, message: str
) -> None:
    """A misconfigured node group shows in the loop's result and in the status ConfigMap's
    message, after the reason the loop halted, if it did."""
    h = Harness()
    provider = ProblemProvider(h.cluster, h.clock)
    provider.problem_list = list(problems)
    h.provider = provider
    provider.add_group("g", 0, 10, nodes=6)
    if unhealthy:
        for i in range(1, 5):
            h.cluster.add_node(h.cluster.nodes[f"g-{i}"].with_(ready=False))
    result = h.run()
    assert result.problems == problems
    text = status_from_result(result).message
    assert text.startswith(message)
    if problems:
        assert text.endswith(f"asg-a: InvalidMinSize: {BAD_MIN.message}")
    else:
        assert text == ""
    assert result.to_dict()["problems"] == [
        {"node_group": p.node_group, "reason": p.reason, "message": p.message} for p in problems
    ]
