"""A scale-up the cloud refuses at once, classified by the provider (`InstanceCreationError`:
a stockout, a quota, a size not offered), backs the group off with that class and code, so
scale-up turns to another group in the same way as for instances that failed to be created."""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.interfaces.cloudprovider import (
    InstanceCreationError,
    InstanceErrorClass,
    InstanceErrorInfo,
)
from loopkit import Harness, pending_pod


def test_classified_refusal_backs_the_group_off_as_out_of_resources() -> None:
    h = Harness()
    refused = h.provider.add_group("a-refusing", 0, 10)
    h.provider.add_group("b-fallback", 0, 10, cpu="8")
    info = InstanceErrorInfo(InstanceErrorClass.OUT_OF_RESOURCES, "SkuNotAvailable", "no capacity")

    def refuse(delta: int) -> None:
        raise InstanceCreationError("node group a-refusing: size not available", info)

    refused.increase_size = refuse  # type: ignore[method-assign]
    h.add_pods([pending_pod("p", cpu="3")])
    first = h.run()
    assert first.errors
    second = h.run(timedelta(seconds=10))
    status = next(s for s in second.node_groups if s.name == "a-refusing")
    assert status.backoff is not None
    assert (status.backoff.error_class, status.backoff.error_code) == (
        "OutOfResources",
        "SkuNotAvailable",
    )
    assert [d.node_group for d in second.scale_up.decisions] == ["b-fallback"]


def test_failed_min_size_enforcement_does_not_stop_the_pods_scale_up() -> None:
    """CA runs --enforce-node-group-min-size and the pending pods' scale-up as two
    executions: one failing does not hold back the other, even one at a time."""
    h = Harness(enforce_node_group_min_size=True)
    below = h.provider.add_group("a-below-min", 2, 10)
    below.fail_increase = "quota exceeded"
    h.provider.add_group("b-pods", 0, 10, cpu="8")
    h.add_pods([pending_pod("p", cpu="6")])
    result = h.run()
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("b-pods", 1)]
    assert any("a-below-min" in e for e in result.errors)
