"""The structured allocator as the simulation runs it (`DraState.allocate`), rule by rule as
kube-scheduler's: device taints and request tolerations, partitionable devices drawing on a
pool's shared counters, admin access, `matchAttribute` and `distinctAttribute` constraints,
`All` mode, incomplete pools, `firstAvailable`; and the DRA utilization of a node as Cluster
Autoscaler computes it for scale-down."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from clusterscaler.model import parse_pod
from clusterscaler.model.dra import (
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from clusterscaler.simulator.builders import make_node
from clusterscaler.simulator.dra import DraState, PoolIncomplete, highest_pool
from clusterscaler.simulator.utilization import node_utilization

DRIVER = "gpu.example.com"
V1 = "resource.k8s.io/v1"
NODE = make_node("n1", cpu="8", memory="32Gi")


def device(name: str, *, taints: list[dict[str, Any]] | None = None,
           consumes: dict[str, dict[str, str]] | None = None, **attrs: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "attributes": {
        k: ({"int": v} if isinstance(v, int) and not isinstance(v, bool) else {"string": v})
        for k, v in attrs.items()}}
    if taints:
        d["taints"] = taints
    if consumes:
        d["consumesCounters"] = [
            {"counterSet": s, "counters": {c: {"value": v} for c, v in counters.items()}}
            for s, counters in consumes.items()]
    return d


def slice_(devices: list[dict[str, Any]], *, pool: str = "n1", name: str = "",
           count: int = 1, generation: int = 1, node: str = "n1",
           counters: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": DRIVER, "nodeName": node,
                            "pool": {"name": pool, "generation": generation,
                                     "resourceSliceCount": count},
                            "devices": devices}
    if counters:
        spec["sharedCounters"] = [
            {"name": s, "counters": {c: {"value": v} for c, v in cs.items()}}
            for s, cs in counters.items()]
    return {"apiVersion": V1, "kind": "ResourceSlice",
            "metadata": {"name": name or f"{pool}-{len(devices)}-{generation}"}, "spec": spec}


CLASS = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def request(name: str = "gpu", count: int = 1, *, mode: str = "ExactCount",
            admin: bool = False, tolerations: list[dict[str, Any]] | None = None,
            selector: str = "") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if admin:
        exactly["adminAccess"] = True
    if tolerations:
        exactly["tolerations"] = tolerations
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": exactly}


def template(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None,
             name: str = "t") -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": V1, "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": {"devices": devices}}}


def pod(name: str = "p", *templates: str) -> Any:
    return parse_pod({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "i"}],
                 "resourceClaims": [{"name": f"c{i}", "resourceClaimTemplateName": t}
                                    for i, t in enumerate(templates or ("t",))]},
    })


def allocated(name: str, *devices: str, admin: bool = False, pool: str = "n1") -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [request(count=len(devices), admin=admin)]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": DRIVER, "pool": pool, "device": d,
                 **({"adminAccess": True} if admin else {})} for d in devices]}}}}


def state(slices: list[dict[str, Any]], templates: list[dict[str, Any]],
          claims: list[dict[str, Any]] = ()) -> DraState:  # type: ignore[assignment]
    return DraState.build(
        [parse_resource_slice(s) for s in slices], [parse_device_class(CLASS)],
        [parse_resource_claim(c) for c in claims],
        [parse_resource_claim_template(t) for t in templates])


def devices_of(found: Any) -> list[str]:
    assert not isinstance(found, str), found
    return [r.device for a in found.values() for r in a.results]


NO_SCHEDULE = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}

ALLOCATION_CASES = [
    pytest.param([slice_([device("g0", taints=[NO_SCHEDULE]), device("g1")])],
                 [template(request())], [], ["g1"], id="tainted-device-skipped"),
    pytest.param([slice_([device("g0", taints=[NO_SCHEDULE])])],
                 [template(request())], [], "1 more tainted", id="only-tainted-device"),
    pytest.param([slice_([device("g0", taints=[{"key": "k", "effect": "NoExecute"}])])],
                 [template(request())], [], "0 free and matching", id="noexecute-blocks"),
    pytest.param([slice_([device("g0", taints=[{"key": "k", "effect": "None"}])])],
                 [template(request())], [], ["g0"], id="effect-none-ignored"),
    pytest.param([slice_([device("g0", taints=[NO_SCHEDULE])])],
                 [template(request(tolerations=[{"key": "maintenance", "operator": "Equal",
                                                  "value": "true", "effect": "NoSchedule"}]))],
                 [], ["g0"], id="tolerated-equal"),
    pytest.param([slice_([device("g0", taints=[NO_SCHEDULE])])],
                 [template(request(tolerations=[{"operator": "Exists"}]))],
                 [], ["g0"], id="tolerated-exists-any-key"),
    pytest.param([slice_([device("g0", taints=[NO_SCHEDULE])])],
                 [template(request(tolerations=[{"key": "maintenance", "operator": "Equal",
                                                  "value": "false"}]))],
                 [], "1 more tainted", id="toleration-wrong-value"),
    pytest.param([slice_([device("g0"), device("g1")])], [template(request(admin=True))],
                 [allocated("busy", "g0")], ["g0"], id="admin-access-uses-a-held-device"),
    pytest.param([slice_([device("g0"), device("g1")])], [template(request())],
                 [allocated("admin", "g0", admin=True)], ["g0"],
                 id="admin-allocation-holds-nothing"),
    pytest.param([slice_([device("g0")])], [template(request())],
                 [allocated("busy", "g0")], "0 free and matching (1 more held by other claims)",
                 id="held-device"),
    pytest.param([slice_([device("g0", model="a"), device("g1", model="b"),
                          device("g2", model="b")])],
                 [template(request("x"), request("y"),
                           constraints=[{"matchAttribute": f"{DRIVER}/model"}])],
                 [], ["g1", "g2"], id="match-attribute-backtracks"),
    pytest.param([slice_([device("g0", numa=0), device("g1", numa=0), device("g2", numa=1)])],
                 [template(request(count=2),
                           constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])],
                 [], ["g0", "g2"], id="distinct-attribute"),
    pytest.param([slice_([device("g0", numa=0), device("g1", numa=0)])],
                 [template(request(count=2),
                           constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])],
                 [], "no devices meet the claim's constraints", id="distinct-attribute-unmet"),
    pytest.param([slice_([device("g0"), device("g1", numa=1)])],
                 [template(request(count=1),
                           constraints=[{"matchAttribute": f"{DRIVER}/numa"}])],
                 [], ["g1"], id="match-attribute-missing-skipped"),
    pytest.param([slice_([device("g0"), device("g1")])], [template(request(mode="All"))],
                 [], ["g0", "g1"], id="all-mode"),
    pytest.param([slice_([device("g0"), device("g1")])], [template(request(mode="All"))],
                 [allocated("busy", "g1")], "all 2 device(s) of class gpu wanted, 1 of them",
                 id="all-mode-needs-every-matching-device"),
    pytest.param([slice_([device("g0")], count=2)], [template(request())], [],
                 "0 free and matching", id="incomplete-pool-not-used"),
    pytest.param([slice_([device("g0")], count=2)], [template(request(mode="All"))], [],
                 "is being updated", id="incomplete-pool-all-mode"),
    pytest.param([slice_([device("g0", model="a")])],
                 [{**template(), "spec": {"spec": {"devices": {"requests": [
                     {"name": "gpu", "firstAvailable": [
                         {"name": "big", "deviceClassName": "gpu", "selectors": [
                             {"cel": {"expression":
                                      f'device.attributes["{DRIVER}"].model == "z"'}}]},
                         {"name": "small", "deviceClassName": "gpu"}]}]}}}}],
                 [], ["g0"], id="first-available-second"),
]


@pytest.mark.parametrize(("slices", "templates", "claims", "want"), ALLOCATION_CASES)
def test_allocation(slices: list[dict[str, Any]], templates: list[dict[str, Any]],
                    claims: list[dict[str, Any]], want: list[str] | str) -> None:
    dra = state(slices, templates, claims)
    found = dra.allocate(pod(), NODE)
    if isinstance(want, str):
        assert isinstance(found, str) and want in found, found
    else:
        assert sorted(devices_of(found)) == want


PARTITIONS = [
    device("whole", consumes={"gpu0": {"memory": "40Gi"}}),
    device("half-0", consumes={"gpu0": {"memory": "20Gi"}}),
    device("half-1", consumes={"gpu0": {"memory": "20Gi"}}),
]
COUNTERS = {"gpu0": {"memory": "40Gi"}}


def test_a_partition_in_use_leaves_the_whole_device_unallocatable() -> None:
    dra = state([slice_(PARTITIONS, counters=COUNTERS)], [template(request())],
                [allocated("busy", "half-0")])
    assert devices_of(dra.allocate(pod(), NODE)) == ["half-1"]
    found = dra.allocate(pod(), NODE)
    dra.reserve(pod(), found)  # type: ignore[arg-type]
    other = dra.allocate(pod("q"), NODE)
    assert isinstance(other, str) and "without enough shared counters" in other, other


def test_one_pod_cannot_take_a_whole_device_and_its_partition() -> None:
    dra = state([slice_(PARTITIONS, counters=COUNTERS)], [template(request(count=2))])
    # whole + a half would need 60Gi of 40Gi: the two halves are the answer.
    assert sorted(devices_of(dra.allocate(pod(), NODE))) == ["half-0", "half-1"]


def test_release_returns_the_counters() -> None:
    dra = state([slice_(PARTITIONS, counters=COUNTERS)], [template(request())])
    p = pod()
    found = dra.allocate(p, NODE)
    assert devices_of(found) == ["whole"]
    undo = dra.reserve(p, found)  # type: ignore[arg-type]
    assert isinstance(dra.allocate(pod("q"), NODE), str)
    undo()
    assert devices_of(dra.allocate(pod("q"), NODE)) == ["whole"]


def test_two_claims_of_one_pod_are_allocated_together() -> None:
    """The first claim must not take the device only the second can use."""
    dra = state([slice_([device("g0", model="a"), device("g1", model="b")])],
                [template(request(), name="any"),
                 template(request(selector=f'device.attributes["{DRIVER}"].model == "a"'),
                          name="only-a")])
    found = dra.allocate(pod("p", "any", "only-a"), NODE)
    assert not isinstance(found, str), found
    by_claim = {k.rsplit("#", 1)[1]: [r.device for r in a.results] for k, a in found.items()}
    assert by_claim == {"c0": ["g1"], "c1": ["g0"]}


def test_a_node_local_allocation_is_pinned_to_its_node() -> None:
    dra = state([slice_([device("g0")])], [template(request())])
    found = dra.allocate(pod(), NODE)
    assert not isinstance(found, str)
    [allocation] = found.values()
    assert allocation.node_selector is not None
    assert allocation.node_selector[0].match_fields[0].values == ("n1",)


# --------------------------------------------------------------------------- utilization

def held(*devices: str, pool: str = "n1") -> list[dict[str, Any]]:
    return [allocated(f"c-{d}", d, pool=pool) for d in devices]


def gpus(n: int, pool: str = "n1") -> list[dict[str, Any]]:
    return [device(f"{pool}-g{i}") for i in range(n)]


def partitioned(name: str, parts: int) -> list[dict[str, Any]]:
    return [device(f"{name}-p{i}", consumes={name: {"memory": "10Gi", "cpu": "100m"}})
            for i in range(parts)] + [
        device(name, consumes={name: {"memory": f"{10 * parts}Gi", "cpu": f"{100 * parts}m"}})]


def share(*names: str, parts: int = 4) -> dict[str, dict[str, str]]:
    return {n: {"memory": f"{10 * parts}Gi", "cpu": f"{100 * parts}m"} for n in names}


UTILIZATION_CASES = [
    pytest.param([slice_(gpus(10))], held(*(f"n1-g{i}" for i in range(6))), {"n1": 0.6},
                 id="6-of-10-devices"),
    pytest.param([slice_(gpus(10))], [], {"n1": 0.0}, id="idle"),
    pytest.param([slice_(gpus(10)), slice_(gpus(20, "p2"), pool="p2")],
                 held("n1-g0") + held(*(f"p2-g{i}" for i in range(18)), pool="p2"),
                 {"n1": 0.1, "p2": 0.9},
                 id="pools-each"),
    pytest.param([slice_(gpus(10), generation=1),
                  slice_(gpus(4), generation=2, name="newer")],
                 held("n1-g0"), {"n1": 0.25}, id="older-generation-ignored"),
    pytest.param([slice_(partitioned("gpu0", 4), counters=share("gpu0"))],
                 held("gpu0-p0", "gpu0-p1"), {"n1": 0.5}, id="partitions-2-of-4"),
    pytest.param([slice_(partitioned("gpu0", 4) + partitioned("gpu1", 4),
                         counters=share("gpu0", "gpu1"))],
                 held("gpu0-p0", "gpu0-p1"), {"n1": 0.25}, id="partitions-mean-over-sets"),
    pytest.param([slice_(partitioned("gpu0", 4), counters=share("gpu0"))],
                 held("gpu0"), {"n1": 1.0}, id="whole-partitionable-device"),
    pytest.param([slice_(gpus(10))],
                 [allocated("admin", *(f"n1-g{i}" for i in range(6)), admin=True)],
                 {"n1": 0.0}, id="admin-access-not-counted"),
]


@pytest.mark.parametrize(("slices", "claims", "want"), UTILIZATION_CASES)
def test_pool_utilization(slices: list[dict[str, Any]], claims: list[dict[str, Any]],
                          want: dict[str, float]) -> None:
    pools = state(slices, [], claims).node_pool_utilization("n1")
    assert {p.pool: p.utilization for p in pools} == pytest.approx(want)
    busiest = highest_pool(pools)
    assert busiest is not None and busiest.utilization == pytest.approx(max(want.values()))


def test_multi_counter_set_utilization_is_the_busiest_counter() -> None:
    # memory 75/100 and cores 16/32: the set is 0.75 used (upstream's table).
    sl = slice_([device("a", consumes={"s": {"memory": "25Gi", "cores": "8"}}),
                 device("b", consumes={"s": {"memory": "50Gi", "cores": "8"}}),
                 device("c", consumes={"s": {"memory": "100Gi", "cores": "32"}})],
                counters={"s": {"memory": "100Gi", "cores": "32"}})
    [p] = state([sl], [], held("a", "b")).node_pool_utilization("n1")
    assert p.utilization == pytest.approx(0.75)


def test_an_incomplete_pool_has_no_utilization() -> None:
    dra = state([slice_(gpus(2), count=2)], [])
    with pytest.raises(PoolIncomplete, match="1 of 2 ResourceSlices"):
        dra.node_pool_utilization("n1")


def test_a_node_without_slices_has_no_pools() -> None:
    assert state([slice_(gpus(2))], []).node_pool_utilization("other") == []


# --------------------------------------------------------------------------- node utilization

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_dra_node_is_measured_by_its_busiest_pool_not_its_cpu() -> None:
    dra = state([slice_(gpus(2))], [], held("n1-g0"))
    u = node_utilization(NODE, [], now=NOW, dra=dra)
    assert (u.value, u.resource, u.dra, u.unknown) == (0.5, f"{DRIVER}/n1", 0.5, "")


def test_allocatable_gpus_are_measured_before_dra_devices() -> None:
    gpu_node = make_node("n1", cpu="8", memory="32Gi", extended={"nvidia.com/gpu": 2})
    dra = state([slice_(gpus(2))], [], held("n1-g0", "n1-g1"))
    u = node_utilization(gpu_node, [], now=NOW, dra=dra)
    assert (u.resource, u.value) == ("gpu", 0.0)


def test_an_incomplete_pool_makes_utilization_unknown() -> None:
    dra = state([slice_(gpus(2), count=2)], [])
    u = node_utilization(NODE, [], now=NOW, dra=dra)
    assert "1 of 2 ResourceSlices" in u.unknown and u.value == 1.0


def test_a_node_without_devices_keeps_cpu_and_memory() -> None:
    dra = state([slice_(gpus(2), node="other", pool="other")], [])
    assert node_utilization(NODE, [], now=NOW, dra=dra).resource == "cpu"


def test_an_answer_is_not_reused_once_another_pod_took_the_device() -> None:
    dra = state([slice_([device("g0")])], [template(request())])
    p, q = pod("p"), pod("q")
    assert devices_of(dra.allocate(p, NODE)) == ["g0"]
    found = dra.allocate(q, NODE)
    dra.reserve(q, found)  # type: ignore[arg-type]
    assert isinstance(dra.allocate(p, NODE), str)


def test_template_copies_share_selector_answers_but_not_devices() -> None:
    from clusterscaler.simulator.dra import template_slices

    dra = state([], [template(request(selector=f'device.attributes["{DRIVER}"].model == "a"'))])
    [live] = [parse_resource_slice(slice_([device("g0", model="a")]))]
    n2, n3 = make_node("n2", cpu="8", memory="32Gi"), make_node("n3", cpu="8", memory="32Gi")
    dra.add_node_slices("n2", template_slices([live], "n2"))
    dra.add_node_slices("n3", template_slices([live], "n3"))
    first = dra.allocate(pod("p"), n2)
    dra.reserve(pod("p"), first)  # type: ignore[arg-type]
    assert isinstance(dra.allocate(pod("q"), n2), str)
    assert devices_of(dra.allocate(pod("q"), n3)) == ["g0"]


def per_device_slice() -> dict[str, Any]:
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "fabric"},
            "spec": {"driver": DRIVER, "perDeviceNodeSelection": True,
                     "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                     "devices": [
                         {"name": "on-n2", "nodeName": "n2"},
                         {"name": "rack-a", "nodeSelector": {"nodeSelectorTerms": [
                             {"matchExpressions": [
                                 {"key": "rack", "operator": "In", "values": ["a"]}]}]}},
                         {"name": "anywhere", "allNodes": True}]}}


@pytest.mark.parametrize(("node", "want", "pinned"), [
    pytest.param(make_node("n2", cpu="8", memory="32Gi"), "on-n2", ("n2",), id="own-node"),
    pytest.param(make_node("n1", cpu="8", memory="32Gi", labels={"rack": "a"}), "rack-a",
                 None, id="selected"),
    pytest.param(NODE, "anywhere", None, id="all-nodes"),
])
def test_per_device_node_selection(node: Any, want: str, pinned: tuple[str, ...] | None) -> None:
    dra = state([per_device_slice()], [template(request())])
    found = dra.allocate(pod(), node)
    assert devices_of(found) == [want]
    [allocation] = found.values()  # type: ignore[union-attr]
    if pinned is None:
        assert allocation.node_selector is None or allocation.node_selector[0].match_expressions
    else:
        assert allocation.node_selector is not None
        assert allocation.node_selector[0].match_fields[0].values == pinned
    # Only the devices the node reaches are listed for it.
    listed = {d.device for d in dra.node_devices(node)}
    assert want in listed and ("on-n2" in listed) == (node.name == "n2")
