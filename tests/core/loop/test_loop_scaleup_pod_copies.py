"""The scale-up plan is the same whether the estimator returns the pending pods themselves
or copies of them (an estimator plugin may build its own pod objects)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from clusterscaler.interfaces.estimator import Estimate, Estimator
from clusterscaler.loop.autoscaler import Autoscaler, build_estimator, build_expander
from clusterscaler.simulator.drain import build_pod_filters
from clusterscaler.simulator.equivalence import PodGroup
from loopkit import Harness, pending_pod, registry


class CopyingEstimator:
    """The configured estimator, with every pod of its result replaced by an equal copy."""

    def __init__(self, inner: Estimator) -> None:
        self.inner = inner
        self.name = "copying"

    def estimate(self, groups: Sequence[PodGroup], *args: Any, **kwargs: Any) -> Estimate:
        result = self.inner.estimate(groups, *args, **kwargs)
        return dataclasses.replace(
            result,
            scheduled_pods=tuple(dataclasses.replace(p) for p in result.scheduled_pods),
            unscheduled_pods=tuple(dataclasses.replace(p) for p in result.unscheduled_pods),
        )


def harness(copying: bool, **options: Any) -> Harness:
    h = Harness(**options)
    h.provider.add_group("small", 0, 10, cpu="1", memory="2Gi")
    h.provider.add_group("tight", 0, 2, cpu="4", memory="16Gi")
    h.provider.add_group("big", 0, 3, cpu="8", memory="32Gi")
    h.add_pods(pending_pod(f"web-{i}", cpu="2", memory="2Gi") for i in range(14))
    h.add_pods(pending_pod(f"huge-{i}", cpu="16", memory="1Gi") for i in range(2))
    h.add_pods(pending_pod(f"bare-{i}", cpu="500m", memory="512Mi", owner=None) for i in range(3))
    if copying:
        reg = registry()
        h._autoscaler = Autoscaler(
            options=h.options,
            provider=h.provider,
            source=h.cluster,
            actions=h.cluster,
            estimator=CopyingEstimator(build_estimator(reg, h.options)),
            expander=build_expander(reg, h.options, h.provider),
            pod_filters=build_pod_filters(reg, h.options),
            clock=h.clock,
        )
    return h


@pytest.mark.parametrize(
    "options",
    [{}, {"expander": ["most-pods"]}, {"max_nodes_total": 2}],
    ids=["least-waste", "most-pods", "node-limit"],
)
def test_plan_does_not_depend_on_pod_identity(options: dict[str, Any]) -> None:
    same = harness(False, **options).run().scale_up
    copied = harness(True, **options).run().scale_up
    assert same.decisions, "the scenario must scale up"
    assert same.pods_remaining, "the scenario must leave pods unhelped"
    assert copied == same
