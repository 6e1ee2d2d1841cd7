"""Consumable capacity: a device that allows multiple allocations is shared by the claims
allocated it, each consuming part of its capacities as its request and the capacity's
request policy say (k8s.io/dynamic-resource-allocation's structured allocator, with
DRAConsumableCapacity)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from clusterscaler.loop.estimationlimits import EstimationLimits, ThresholdLimiter
from clusterscaler.model import NodeInfo
from clusterscaler.model.dra import CapacityPolicy, parse_resource_claim, parse_resource_slice
from clusterscaler.plugins.estimators import BinpackingEstimator
from clusterscaler.simulator import ClusterSnapshot
from clusterscaler.simulator.builders import make_node
from clusterscaler.simulator.dra import consumed_capacity, violates_policy
from clusterscaler.simulator.equivalence import group_pods

from tests.core.simulator.test_dra_allocation import (
    DRIVER,
    NODE,
    V1,
    devices_of,
    pod,
    slice_,
    state,
    template,
)

GI = 1 << 30


def shared_gpu(name: str = "gpu-0", *, memory: str = "40Gi",
               policy: dict[str, Any] | None = None, multiple: bool = True) -> dict[str, Any]:
    capacity: dict[str, Any] = {"value": memory}
    if policy is not None:
        capacity["requestPolicy"] = policy
    d: dict[str, Any] = {"name": name, "attributes": {"model": {"string": "a100"}},
                         "capacity": {"memory": capacity}}
    if multiple:
        d["allowMultipleAllocations"] = True
    return d


def memory_request(amount: str | None, name: str = "gpu") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu"}
    if amount is not None:
        exactly["capacity"] = {"requests": {"memory": amount}}
    return {"name": name, "exactly": exactly}


def place(dra: Any, pods: int) -> int:
    """How many pods of template `t`, one after the other, get devices on NODE."""
    for i in range(pods):
        p = pod(f"p{i}")
        found = dra.allocate(p, NODE)
        if isinstance(found, str):
            return i
        dra.reserve(p, found)
    return pods


def test_the_model_reads_shared_devices_requests_and_shares() -> None:
    sl = parse_resource_slice(slice_([shared_gpu(policy={
        "default": "8Gi", "validRange": {"min": "4Gi", "max": "40Gi", "step": "4Gi"}})]))
    device = sl.devices[0]
    assert device.allow_multiple_allocations
    assert device.capacity_policies[f"{DRIVER}/memory"] == CapacityPolicy(
        Fraction(8 * GI), (), Fraction(4 * GI), Fraction(40 * GI), Fraction(4 * GI))
    claim = parse_resource_claim({
        "apiVersion": V1, "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [memory_request("10Gi")]}},
        "status": {"allocation": {"devices": {"results": [{
            "request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0",
            "shareID": "5f1c", "consumedCapacity": {"memory": "12Gi"}}]}}}})
    assert claim.spec.requests[0].capacity_requests == {"memory": Fraction(10 * GI)}
    assert claim.allocation is not None
    result = claim.allocation.results[0]
    assert (result.share_id, result.consumed) == (
        "5f1c", ((f"{DRIVER}/memory", Fraction(12 * GI)),))


def test_claims_share_a_device_until_its_capacity_is_used() -> None:
    dra = state([slice_([shared_gpu()])], [template(memory_request("10Gi"))])
    assert place(dra, 6) == 4
    found = dra.allocate(pod("p9"), NODE)
    assert isinstance(found, str)
    assert "1 more without enough capacity" in found


def test_each_share_has_its_own_id_and_consumption() -> None:
    dra = state([slice_([shared_gpu()])], [template(memory_request("10Gi"))])
    assert place(dra, 2) == 2
    shares = [a.results[0] for a in dra.allocations.values()]
    assert len({r.share_id for r in shares}) == 2
    assert all(r.consumed == ((f"{DRIVER}/memory", Fraction(10 * GI)),) for r in shares)
    assert dra.shared_use[(DRIVER, "n1", "gpu-0")] == {f"{DRIVER}/memory": Fraction(20 * GI)}


@pytest.mark.parametrize(
    ("policy", "request_", "fits"),
    [
        pytest.param(None, "10Gi", 4, id="no-policy-exact"),
        pytest.param({"validRange": {"min": "4Gi", "step": "4Gi"}}, "5Gi", 5,
                     id="range-rounds-up-to-step"),
        pytest.param({"validRange": {"min": "16Gi"}}, "1Gi", 2, id="range-rounds-up-to-min"),
        pytest.param({"validValues": ["10Gi", "20Gi"]}, "15Gi", 2, id="valid-values-round-up"),
        pytest.param({"validValues": ["10Gi", "20Gi"]}, "25Gi", 0, id="above-valid-values"),
        pytest.param({"validRange": {"min": "4Gi", "max": "8Gi"}}, "10Gi", 0,
                     id="above-range-max"),
        pytest.param({"default": "5Gi"}, None, 8, id="default-when-not-requested"),
        pytest.param(None, None, 1, id="whole-capacity-when-not-requested"),
    ],
)
def test_request_policies(policy: dict[str, Any] | None, request_: str | None, fits: int) -> None:
    dra = state([slice_([shared_gpu(policy=policy)])], [template(memory_request(request_))])
    assert place(dra, 10) == fits


def test_a_request_for_a_capacity_the_device_lacks_gets_nothing() -> None:
    req = {"name": "gpu", "exactly": {"deviceClassName": "gpu",
                                      "capacity": {"requests": {"bandwidth": "1G"}}}}
    dra = state([slice_([shared_gpu()])], [template(req)])
    assert isinstance(dra.allocate(pod(), NODE), str)


def test_a_dedicated_device_is_checked_against_the_request_too() -> None:
    dra = state([slice_([shared_gpu(multiple=False, memory="8Gi")])],
                [template(memory_request("10Gi"))])
    assert isinstance(dra.allocate(pod(), NODE), str)
    dedicated = state([slice_([shared_gpu(multiple=False)])], [template(memory_request("10Gi"))])
    assert place(dedicated, 3) == 1


def test_shares_in_claim_statuses_count_and_a_released_share_returns_its_capacity() -> None:
    held = {"apiVersion": V1, "kind": "ResourceClaim",
            "metadata": {"name": "other", "namespace": "default"},
            "spec": {"devices": {"requests": [memory_request("30Gi")]}},
            "status": {"allocation": {"devices": {"results": [{
                "request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0",
                "shareID": "a", "consumedCapacity": {"memory": "30Gi"}}]}}}}
    dra = state([slice_([shared_gpu()])], [template(memory_request("10Gi"))], [held])
    first = pod("p0")
    found = dra.allocate(first, NODE)
    assert devices_of(found) == ["gpu-0"]
    dra.reserve(first, found)  # type: ignore[arg-type]
    assert isinstance(dra.allocate(pod("p1"), NODE), str)
    undo = dra.release(first)
    assert devices_of(dra.allocate(pod("p1"), NODE)) == ["gpu-0"]
    undo()
    assert isinstance(dra.allocate(pod("p1"), NODE), str)


def test_a_shared_device_in_use_keeps_its_node_busy() -> None:
    dra = state([slice_([shared_gpu(), shared_gpu("gpu-1")])], [template(memory_request("1Gi"))])
    assert place(dra, 1) == 1
    [pool] = dra.node_pool_utilization("n1")
    assert (pool.devices, pool.allocated, pool.utilization) == (2, 1, 0.5)


def test_binpacking_puts_as_many_pods_on_a_node_as_its_shared_device_holds() -> None:
    """Eight pods each asking 10Gi of a 40Gi shared GPU: two new nodes."""
    tmpl_slice = parse_resource_slice(slice_([shared_gpu()], node="tmpl", pool="tmpl"))
    tmpl = NodeInfo(make_node("tmpl", "8", "32Gi", 110), (), resource_slices=(tmpl_slice,))
    pods = [pod(f"p{i}") for i in range(8)]
    dra = state([], [template(memory_request("10Gi"))])
    result = BinpackingEstimator().estimate(
        group_pods(pods), tmpl, ClusterSnapshot(dra=dra),
        ThresholdLimiter(EstimationLimits(max_nodes_per_scale_up=None, max_duration=None)),
    )
    assert result.node_count == 2
    assert [len(ni.pods) for ni in result.new_nodes] == [4, 4]


@pytest.mark.parametrize(
    ("requested", "policy", "consumed", "violates"),
    [
        pytest.param(None, None, 40, False, id="whole"),
        pytest.param(3, CapacityPolicy(range_min=Fraction(4), range_step=Fraction(4)), 4,
                     False, id="min"),
        pytest.param(9, CapacityPolicy(range_min=Fraction(4), range_step=Fraction(4)), 12,
                     False, id="step"),
        pytest.param(50, CapacityPolicy(range_min=Fraction(4), range_max=Fraction(40)), 50,
                     True, id="max"),
        pytest.param(None, CapacityPolicy(default=Fraction(7), range_min=Fraction(4),
                                          range_step=Fraction(4)), 7, False,
                     id="default-off-step-is-allowed"),
    ],
)
def test_consumed_capacity(requested: int | None, policy: CapacityPolicy | None,
                           consumed: int, violates: bool) -> None:
    amount = consumed_capacity(
        None if requested is None else Fraction(requested), Fraction(40), policy)
    assert amount == consumed
    assert (policy is not None and violates_policy(amount, policy)) is violates


def test_selectors_see_whether_a_device_is_shared() -> None:
    dedicated = {"name": "gpu", "exactly": {
        "deviceClassName": "gpu",
        "selectors": [{"cel": {"expression": "!device.allowMultipleAllocations"}}]}}
    dra = state([slice_([shared_gpu(), shared_gpu("gpu-1", multiple=False)])],
                [template(dedicated)])
    assert devices_of(dra.allocate(pod(), NODE)) == ["gpu-1"]


def test_a_shared_device_draws_its_counters_once_for_all_its_shares() -> None:
    """The counters a shared device consumes are drawn when its first share is allocated
    and returned with its last: its shares do not draw them again, and a second device of
    the same counter set fits only where the counters allow both."""
    devices = [{**shared_gpu(name), "consumesCounters": [
        {"counterSet": "gpu", "counters": {"memory": {"value": "20Gi"}}}]}
        for name in ("gpu-0", "gpu-1")]
    dra = state([slice_(devices, counters={"gpu": {"memory": "30Gi"}})],
                [template(memory_request("10Gi"))])
    # gpu-0 holds four shares of 10Gi; gpu-1 would take the counter set to 40Gi of 30Gi.
    assert place(dra, 8) == 4
    assert dra.used_counters[(DRIVER, "n1")]["gpu"]["memory"] == 20 * GI
    for i in range(4):
        dra.release(pod(f"p{i}"))
    assert dra.used_counters[(DRIVER, "n1")]["gpu"]["memory"] == 0
    assert place(dra, 1) == 1
