"""Node group backoff counts failed scale-ups, not failed instances."""

from __future__ import annotations

from datetime import timedelta

import pytest
from clusterscaler.interfaces.cloudprovider import InstanceErrorClass, InstanceErrorInfo
from loopkit import Harness, pending_pod

STOCKOUT = InstanceErrorInfo(
    InstanceErrorClass.OUT_OF_RESOURCES, "ZONE_RESOURCE_POOL_EXHAUSTED", "no capacity"
)


@pytest.mark.parametrize("instances", [1, 2, 5], ids=["one", "two", "five"])
def test_failed_scale_up_backs_off_once_whatever_its_size(instances: int) -> None:
    h = Harness()
    g = h.provider.add_group("a-stockout", 0, 10)
    g.create_error = STOCKOUT
    h.add_pods([pending_pod(f"p{i}", cpu="3") for i in range(instances)])
    first = h.run()
    assert [(d.node_group, d.delta) for d in first.scale_up.decisions] == [
        ("a-stockout", instances)
    ]
    failed = h.run(timedelta(seconds=10))
    status = next(s for s in failed.node_groups if s.name == "a-stockout")
    assert status.backoff is not None
    # --initial-node-group-backoff-duration, not doubled once per failed instance.
    assert status.backoff.until - failed.time == h.options.initial_node_group_backoff_duration


def test_each_failed_scale_up_doubles_the_backoff() -> None:
    h = Harness()
    g = h.provider.add_group("a-stockout", 0, 10)
    g.create_error = STOCKOUT
    h.add_pods([pending_pod("p0", cpu="3"), pending_pod("p1", cpu="3")])
    h.run()
    first = h.run(timedelta(seconds=10))
    first_status = next(s for s in first.node_groups if s.name == "a-stockout")
    assert first_status.backoff is not None
    # After the backoff the group is tried again and fails again: that second failed
    # scale-up doubles the backoff.
    retry = h.run(first_status.backoff.until - first.time)
    assert [d.node_group for d in retry.scale_up.decisions] == ["a-stockout"]
    second = h.run(timedelta(seconds=10))
    status = next(s for s in second.node_groups if s.name == "a-stockout")
    assert status.backoff is not None
    assert status.backoff.until - second.time == 2 * h.options.initial_node_group_backoff_duration
