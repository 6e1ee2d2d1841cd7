"""The allocator's search against an exhaustive reference: for small random pools (devices
with attributes, taints, partitions drawing on shared counters, some held by other claims)
and a claim of one or two requests with a constraint, `allocate` finds an allocation exactly
when one exists, and the one it finds obeys every rule."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

from clusterscaler.model.dra import (
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from clusterscaler.simulator.builders import make_node
from clusterscaler.simulator.dra import DraState, tolerated
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.core.simulator.test_dra_allocation import CLASS, DRIVER, pod, template

NODE = make_node("n1", cpu="8", memory="32Gi")
TAINT = {"key": "broken", "effect": "NoSchedule"}

# Mostly usable devices: the interesting cases are those where an allocation exists only
# for some choices, and the search must go back on its first ones.
RARELY = st.sampled_from([False, False, False, True])
device_st = st.fixed_dictionaries({
    "model": st.sampled_from(["a", "a", "b"]),
    "numa": st.integers(0, 2),
    "tainted": RARELY,
    "memory": st.sampled_from([0, 0, 10, 20]),  # drawn from the shared counter (0: none)
    "held": RARELY,
})
request_st = st.fixed_dictionaries({
    "count": st.integers(1, 3),
    "only_a": st.booleans(),
    "tolerates": RARELY,
})


def build(devices: list[dict[str, Any]], requests: list[dict[str, Any]],
          constraint: str) -> tuple[DraState, Any]:
    slice_devices = []
    for i, d in enumerate(devices):
        doc: dict[str, Any] = {"name": f"d{i}", "attributes": {
            "model": {"string": d["model"]}, "numa": {"int": d["numa"]}}}
        if d["tainted"]:
            doc["taints"] = [TAINT]
        if d["memory"]:
            doc["consumesCounters"] = [{"counterSet": "gpu", "counters": {
                "memory": {"value": f"{d['memory']}Gi"}}}]
        slice_devices.append(doc)
    sl = parse_resource_slice({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": DRIVER, "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "sharedCounters": [{"name": "gpu", "counters": {"memory": {"value": "30Gi"}}}],
                 "devices": slice_devices}})
    held = [f"d{i}" for i, d in enumerate(devices) if d["held"]]
    claims = [parse_resource_claim({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"held-{name}", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "r", "driver": DRIVER, "pool": "n1", "device": name}]}}}})
        for name in held]
    reqs = []
    for j, r in enumerate(requests):
        exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": r["count"]}
        if r["only_a"]:
            exactly["selectors"] = [
                {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "a"'}}]
        if r["tolerates"]:
            exactly["tolerations"] = [{"key": "broken", "operator": "Exists"}]
        reqs.append({"name": f"r{j}", "exactly": exactly})
    constraints = [{constraint: f"{DRIVER}/numa"}] if constraint else []
    dra = DraState.build([sl], [parse_device_class(CLASS)], claims,
                         [parse_resource_claim_template(template(*reqs, constraints=constraints))])
    return dra, sl


def valid(devices: list[dict[str, Any]], requests: list[dict[str, Any]], constraint: str,
          chosen: list[tuple[int, ...]]) -> bool:
    """Whether these device indexes, per request, are an allocation the rules allow."""
    used = [i for group in chosen for i in group]
    if len(used) != len(set(used)):
        return False
    for r, group in zip(requests, chosen, strict=True):
        if len(group) != r["count"]:
            return False
        for i in group:
            d = devices[i]
            if d["held"] or (r["only_a"] and d["model"] != "a"):
                return False
            if d["tainted"] and not r["tolerates"]:
                return False
    # The held devices draw on the shared counter too; a device that draws nothing is not
    # checked against it (even when the held ones overdraw it).
    held = sum(d["memory"] for d in devices if d["held"])
    drawn = sum(devices[i]["memory"] for i in used)
    if drawn and held + drawn > 30:
        return False
    values = [devices[i]["numa"] for i in used]
    if constraint == "matchAttribute" and len(set(values)) > 1:
        return False
    return not (constraint == "distinctAttribute" and len(set(values)) != len(values))


def exists(devices: list[dict[str, Any]], requests: list[dict[str, Any]], constraint: str) -> bool:
    per_request = [itertools.combinations(range(len(devices)), r["count"]) for r in requests]
    return any(valid(devices, requests, constraint, list(choice))
               for choice in itertools.product(*[list(c) for c in per_request]))


def usable(numa: int, memory: int = 0) -> dict[str, Any]:
    return {"model": "a", "numa": numa, "tainted": False, "memory": memory, "held": False}


ONE = {"count": 1, "only_a": False, "tolerates": False}
TWO = {**ONE, "count": 2}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The first device chosen leads nowhere: the search must try the next ones.
@example(devices=[usable(0), usable(1), usable(1)], requests=[TWO], constraint="matchAttribute")
@example(devices=[usable(0, 20), usable(1, 20), usable(2, 10)], requests=[TWO], constraint="")
@example(devices=[usable(0), usable(0), usable(1)], requests=[ONE, ONE],
         constraint="distinctAttribute")
@given(devices=st.lists(device_st, min_size=1, max_size=6),
       requests=st.lists(request_st, min_size=1, max_size=2),
       constraint=st.sampled_from(["", "matchAttribute", "distinctAttribute"]))
def test_the_search_finds_an_allocation_exactly_when_one_exists(
    devices: list[dict[str, Any]], requests: list[dict[str, Any]], constraint: str
) -> None:
    dra, sl = build(devices, requests, constraint)
    found = dra.allocate(pod(), NODE)
    if not exists(devices, requests, constraint):
        assert isinstance(found, str), found
        return
    assert not isinstance(found, str), found
    [allocation] = found.values()
    index = {d.name: i for i, d in enumerate(sl.devices)}
    chosen = [tuple(index[r.device] for r in allocation.results if r.request == f"r{j}")
              for j in range(len(requests))]
    assert valid(devices, requests, constraint, chosen), (chosen, allocation)
    for j, group in enumerate(chosen):
        if not requests[j]["tolerates"]:
            assert all(tolerated(sl.device_taints.get(f"d{i}", ()), ()) for i in group)
    # What the pool's counter has left covers what was chosen.
    left = dra.available((DRIVER, "n1"), "gpu", "memory")
    assert left is not None
    drawn = sum(devices[i]["memory"] for g in chosen for i in g)
    assert not drawn or Fraction(drawn * 2**30) <= left
