"""Pods that claim devices (DRA) are filled onto template copies as copies of the first pod
of their group, each with the devices the allocator would give it placed alone: the
estimate is the one of placing every pod on its own and trying every node, for templates
with plain, tainted and partitionable devices and workloads with one or two requests,
several devices each, a constraint, claims shared between pods, and pods without claims."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clusterscaler.interfaces.estimator import Estimate
from clusterscaler.loop.estimationlimits import EstimationLimits, ThresholdLimiter
from clusterscaler.model import NodeInfo, OwnerRef, Pod
from clusterscaler.model.dra import (
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from clusterscaler.model.pod import parse_pod
from clusterscaler.plugins.estimators import BinpackingEstimator
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from clusterscaler.simulator.builders import make_node
from clusterscaler.simulator.dra import DraState, template_slices
from clusterscaler.simulator.equivalence import group_pods
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.estimators.test_binpacking_node_scan import EveryNodeEstimator

DRIVER = "gpu.example.com"
V1 = "resource.k8s.io/v1"
CLASS = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}

device_st = st.fixed_dictionaries({
    "model": st.sampled_from(["a", "a", "b"]),
    "numa": st.integers(0, 1),
    "tainted": st.sampled_from([False, False, False, True]),
    "memory": st.sampled_from([0, 0, 10, 20]),
    # Shared by the claims allocated it (consumable capacity), with 40 units of bandwidth.
    "shared": st.sampled_from([False, False, True]),
})
request_st = st.fixed_dictionaries({
    "count": st.integers(1, 3),
    "only_a": st.booleans(),
    "tolerates": st.sampled_from([False, False, True]),
    # What it asks of a shared device's bandwidth (None: its policy's default, 10).
    "bandwidth": st.sampled_from([None, None, "5", "15", "25"]),
})
workload_st = st.fixed_dictionaries({
    "pods": st.integers(1, 12),
    "cpu": st.sampled_from(["100m", "500m", "1"]),
    "requests": st.lists(request_st, min_size=0, max_size=2),
    "constraint": st.sampled_from(["", "", "matchAttribute", "distinctAttribute"]),
    "owned": st.booleans(),
    # Claims made by the ResourceClaim controller (named in the pod's status), one per
    # pod, rather than the template's spec; "shared": one ResourceClaim for every pod.
    "claims": st.sampled_from(["template", "template", "generated", "shared"]),
    # Workloads of one label look alike to the estimator but for their claims.
    "app": st.sampled_from(["x", "own"]),
})


def template_node(devices: list[dict[str, Any]]) -> NodeInfo:
    slice_devices = []
    for i, d in enumerate(devices):
        doc: dict[str, Any] = {"name": f"d{i}", "attributes": {
            "model": {"string": d["model"]}, "numa": {"int": d["numa"]}}}
        if d["tainted"]:
            doc["taints"] = [{"key": "broken", "effect": "NoSchedule"}]
        if d["memory"]:
            doc["consumesCounters"] = [{"counterSet": "gpu", "counters": {
                "memory": {"value": f"{d['memory']}Gi"}}}]
        if d.get("shared"):
            doc["allowMultipleAllocations"] = True
            doc["capacity"] = {"bandwidth": {"value": "40", "requestPolicy": {
                "default": "10", "validRange": {"min": "5", "step": "5"}}}}
        slice_devices.append(doc)
    sl = parse_resource_slice({
        "apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": DRIVER, "nodeName": "tmpl",
                 "pool": {"name": "tmpl", "generation": 1, "resourceSliceCount": 1},
                 "sharedCounters": [{"name": "gpu", "counters": {"memory": {"value": "30Gi"}}}],
                 "devices": slice_devices}})
    return NodeInfo(make_node("tmpl", "4", "16Gi", 110), (), resource_slices=(sl,))


def claim_spec(w: dict[str, Any]) -> dict[str, Any]:
    reqs = []
    for j, r in enumerate(w["requests"]):
        exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": r["count"]}
        if r["only_a"]:
            exactly["selectors"] = [
                {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "a"'}}]
        if r["tolerates"]:
            exactly["tolerations"] = [{"key": "broken", "operator": "Exists"}]
        if r.get("bandwidth") is not None:
            exactly["capacity"] = {"requests": {"bandwidth": r["bandwidth"]}}
        reqs.append({"name": f"r{j}", "exactly": exactly})
    devices: dict[str, Any] = {"requests": reqs}
    if w["constraint"]:
        devices["constraints"] = [{w["constraint"]: f"{DRIVER}/numa"}]
    return {"devices": devices}


def workload_objects(workloads: list[dict[str, Any]]) -> tuple[list[Pod], list[Any], list[Any]]:
    """The pods, ResourceClaims and ResourceClaimTemplates of the workloads."""
    pods: list[Pod] = []
    claims: list[Any] = []
    templates: list[Any] = []
    for w, spec in enumerate(workloads):
        with_claims = bool(spec["requests"])
        if with_claims:
            templates.append(parse_resource_claim_template({
                "apiVersion": V1, "kind": "ResourceClaimTemplate",
                "metadata": {"name": f"t{w}", "namespace": "default"},
                "spec": {"spec": claim_spec(spec)}}))
            if spec["claims"] == "shared":
                claims.append(parse_resource_claim({
                    "apiVersion": V1, "kind": "ResourceClaim",
                    "metadata": {"name": f"shared-{w}", "namespace": "default"},
                    "spec": claim_spec(spec)}))
        owner = OwnerRef("ReplicaSet", f"rs{w}", f"rs-{w}", True) if spec["owned"] else None
        for i in range(spec["pods"]):
            name = f"w{w}-{i}"
            doc: dict[str, Any] = {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                             "labels": {"app": spec.get("app", "x") if spec.get("app") == "x"
                                        else f"w{w}"}},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {
                    "requests": {"cpu": spec["cpu"], "memory": "100Mi"}}}]},
            }
            if owner is not None:
                doc["metadata"]["ownerReferences"] = [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner.name,
                    "uid": owner.uid, "controller": True}]
            if with_claims:
                if spec["claims"] == "shared":
                    doc["spec"]["resourceClaims"] = [
                        {"name": "gpu", "resourceClaimName": f"shared-{w}"}]
                else:
                    doc["spec"]["resourceClaims"] = [
                        {"name": "gpu", "resourceClaimTemplateName": f"t{w}"}]
                if spec["claims"] == "generated":
                    doc["status"] = {"resourceClaimStatuses": [
                        {"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}
                    claims.append(parse_resource_claim({
                        "apiVersion": V1, "kind": "ResourceClaim",
                        "metadata": {"name": f"{name}-gpu", "namespace": "default",
                                     "ownerReferences": [{
                                         "apiVersion": "v1", "kind": "Pod", "name": name,
                                         "uid": f"uid-{name}", "controller": True}]},
                        "spec": claim_spec(spec)}))
            pods.append(parse_pod(doc))
    return pods, claims, templates


def estimate(estimator: BinpackingEstimator, workloads: list[dict[str, Any]],
             devices: list[dict[str, Any]], cap: int | None) -> Estimate:
    pods, claims, templates = workload_objects(workloads)
    dra = DraState.build([], [parse_device_class(CLASS)], claims, templates)
    snapshot = ClusterSnapshot(dra=dra)
    limits = EstimationLimits(max_nodes_per_scale_up=cap, max_duration=None)
    return estimator.estimate(
        group_pods(pods), template_node(devices), snapshot, ThresholdLimiter(limits)
    )


def without_share_ids(allocations: dict[str, Any]) -> dict[str, Any]:
    """Allocations with each share's id replaced by whether it has one (the ids are the
    simulation's own, numbered as they are made)."""
    return {
        key: (
            tuple(replace(r, share_id=bool(r.share_id)) for r in a.results),
            a.node_selector,
        )
        for key, a in allocations.items()
    }


def shape(result: Estimate) -> tuple[object, ...]:
    return (
        result.node_count,
        result.limited_by,
        [p.key for p in result.scheduled_pods],
        [p.key for p in result.unscheduled_pods],
        [(ni.node.name, [p.key for p in ni.pods]) for ni in result.new_nodes],
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workloads=st.lists(workload_st, min_size=1, max_size=4),
    devices=st.lists(device_st, min_size=1, max_size=6),
    cap=st.one_of(st.none(), st.integers(0, 10)),
)
def test_claiming_pods_are_filled_where_each_would_go_on_its_own(
    workloads: list[dict[str, Any]], devices: list[dict[str, Any]], cap: int | None
) -> None:
    fast = estimate(BinpackingEstimator(), workloads, devices, cap)
    slow = estimate(EveryNodeEstimator(), workloads, devices, cap)
    assert shape(fast) == shape(slow)


def test_each_copy_takes_devices_of_its_own() -> None:
    """Three GPUs a node, nine pods of one workload claiming one each: three nodes, three
    pods each, every pod on the node whose device it would get."""
    workload = {"pods": 9, "cpu": "100m", "owned": True, "constraint": "", "claims": "template",
                "app": "own",
                "requests": [{"count": 1, "only_a": False, "tolerates": False}]}
    plain = {"model": "a", "numa": 0, "tainted": False, "memory": 0}
    result = estimate(BinpackingEstimator(), [workload], [plain] * 3, None)
    assert result.node_count == 3
    assert [len(ni.pods) for ni in result.new_nodes] == [3, 3, 3]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workload=workload_st.filter(lambda w: bool(w["requests"]) and w["claims"] != "shared"),
    devices=st.lists(device_st, min_size=1, max_size=6),
)
def test_copies_get_the_devices_they_would_get_one_by_one(
    workload: dict[str, Any], devices: list[dict[str, Any]]
) -> None:
    """What `copies_fit` counts is what placing the pods one by one allocates, device for
    device, and placing them after it records those allocations."""
    # Small pods: the node's devices, not its cpu, decide how many fit.
    workload = {**workload, "cpu": "100m"}
    tmpl = template_node(devices)

    def snapshot() -> tuple[ClusterSnapshot, list[Pod]]:
        pods, claims, templates = workload_objects([workload])
        snap = ClusterSnapshot(dra=DraState.build([], [parse_device_class(CLASS)], claims,
                                                  templates))
        snap.add_node(tmpl.node, (), tmpl.resource_slices)
        return snap, pods

    one_by_one, pods = snapshot()
    placed = 0
    for pod in pods:
        if check_predicates(pod, one_by_one.get("tmpl"), one_by_one) is not None:
            break
        one_by_one.add_pod(pod, "tmpl")
        placed += 1
    copies, pods = snapshot()
    assert copies.dra is not None and copies.dra.claims_alike(pods)
    if check_predicates(pods[0], copies.get("tmpl"), copies) is None:
        assert copies.dra.copies_fit(pods[0], tmpl.node, len(pods)) == placed
    else:
        assert placed == 0
    copies.fork()
    copies.add_pods(pods[:placed], "tmpl")
    assert one_by_one.dra is not None
    assert without_share_ids(copies.dra.allocations) == without_share_ids(
        one_by_one.dra.allocations
    )
    shares = [r.share_id for a in copies.dra.allocations.values() for r in a.results
              if r.share_id]
    assert len(shares) == len(set(shares))  # each share its own id
    assert copies.dra.allocated == one_by_one.dra.allocated
    assert copies.dra.shared_use == one_by_one.dra.shared_use
    assert copies.dra.consumers == one_by_one.dra.consumers
    # Undone as one: no device held, no claim in use.
    copies.revert()
    assert not copies.dra.allocations and not copies.dra.allocated
    assert not any(copies.dra.consumers.values())


def test_copies_on_nodes_of_one_layout_are_recorded_as_placed_one_by_one() -> None:
    """Three copies of a template node with three GPUs, nine pods of one workload: the
    copies the second and third nodes take (given as the first node's positions) are
    recorded as one record per node, and hold what placing the pods one by one holds."""
    workload = {"pods": 9, "cpu": "100m", "owned": True, "constraint": "", "claims": "template",
                "app": "own",
                "requests": [{"count": 1, "only_a": False, "tolerates": False}]}
    plain = {"model": "a", "numa": 0, "tainted": False, "memory": 0}
    tmpl = template_node([plain] * 3)
    names = ["n1", "n2", "n3"]

    def snapshot() -> tuple[ClusterSnapshot, list[Pod]]:
        pods, claims, templates = workload_objects([workload])
        snap = ClusterSnapshot(dra=DraState.build([], [parse_device_class(CLASS)], claims,
                                                  templates))
        for name in names:
            snap.add_node(make_node(name, "4", "16Gi", 110), (),
                          template_slices(tmpl.resource_slices, name))
        return snap, pods

    one_by_one, pods = snapshot()
    for i, pod in enumerate(pods):
        name = names[i // 3]
        assert check_predicates(pod, one_by_one.get(name), one_by_one) is None
        one_by_one.add_pod(pod, name)
    copies, pods = snapshot()
    dra = copies.dra
    assert dra is not None and dra.claims_alike(pods)
    copies.fork()
    for i, name in enumerate(names):
        assert dra.copies_fit(pods[3 * i], copies.get(name).node, len(pods) - 3 * i) == 3
        copies.add_pods(pods[3 * i : 3 * i + 3], name)
    assert one_by_one.dra is not None
    assert dra.allocations == one_by_one.dra.allocations
    assert dra.allocated == one_by_one.dra.allocated
    assert dra.consumers == one_by_one.dra.consumers
    copies.revert()
    assert not dra.allocations and not dra.allocated
    assert not any(dra.consumers.values())


def test_claims_recorded_as_copies_read_and_free_as_placed_one_by_one() -> None:
    """The claims of copies recorded together on nodes of one layout are allocated as
    placing the pods one by one allocates them: a pod of theirs is refused on another
    node for its claim, and removing it frees its device, and its undo holds it again."""
    workload = {"pods": 6, "cpu": "100m", "owned": True, "constraint": "", "claims": "template",
                "app": "own",
                "requests": [{"count": 1, "only_a": False, "tolerates": False}]}
    plain = {"model": "a", "numa": 0, "tainted": False, "memory": 0}
    tmpl = template_node([plain] * 3)
    names = ["n1", "n2"]

    def snapshot() -> tuple[ClusterSnapshot, list[Pod]]:
        pods, claims, templates = workload_objects([workload])
        snap = ClusterSnapshot(dra=DraState.build([], [parse_device_class(CLASS)], claims,
                                                  templates))
        for name in names:
            snap.add_node(make_node(name, "4", "16Gi", 110), (),
                          template_slices(tmpl.resource_slices, name))
        return snap, pods

    one_by_one, pods = snapshot()
    for i, pod in enumerate(pods):
        one_by_one.add_pod(pod, names[i // 3])
    copies, copied = snapshot()
    dra = copies.dra
    assert dra is not None and dra.claims_alike(copied)
    copies.fork()
    for i, name in enumerate(names):
        assert dra.copies_fit(copied[3 * i], copies.get(name).node, 6 - 3 * i) == 3
        copies.add_pods(copied[3 * i : 3 * i + 3], name)
    assert one_by_one.dra is not None
    key = "default/w0-4#gpu"  # the second pod on n2, recorded with its node's copies
    assert dra.allocation(key) == one_by_one.dra.allocation(key) is not None
    refused = dra.allocate(copied[4], copies.get("n1").node)
    assert isinstance(refused, str) and refused.startswith("resourceclaim not available")
    assert refused == one_by_one.dra.allocate(pods[4], one_by_one.get("n1").node)
    before = dra.allocations, dict(dra.allocated)
    for snap in (copies, one_by_one):
        snap.fork()
        snap.remove_pod("default/w0-4")
    assert dra.allocation(key) is None and key not in dra.allocated.values()
    assert dra.allocations == one_by_one.dra.allocations
    assert dra.allocated == one_by_one.dra.allocated
    copies.revert()
    assert (dra.allocations, dra.allocated) == before
    copies.revert()
    assert not dra.allocations and not dra.allocated


def test_nodes_of_two_layouts_in_turn_get_the_copies_of_their_own() -> None:
    """Copies of two templates in turn (two GPUs a node, then three, in slices alike but
    for their devices): each node's copies are those of its own layout, as placing the
    pods one by one finds them."""
    workload = {"pods": 10, "cpu": "100m", "owned": True, "constraint": "", "claims": "template",
                "app": "own",
                "requests": [{"count": 1, "only_a": False, "tolerates": False}]}
    plain = {"model": "a", "numa": 0, "tainted": False, "memory": 0}
    two = template_node([plain] * 2)
    [two_gpus] = two.resource_slices
    [three_gpus] = template_node([plain] * 3).resource_slices
    three = replace(two, resource_slices=(replace(two_gpus, devices=three_gpus.devices),))
    nodes = [("n1", two), ("n2", three), ("n3", two), ("n4", three)]

    def snapshot() -> tuple[ClusterSnapshot, list[Pod]]:
        pods, claims, templates = workload_objects([workload])
        snap = ClusterSnapshot(dra=DraState.build([], [parse_device_class(CLASS)], claims,
                                                  templates))
        for name, tmpl in nodes:
            snap.add_node(make_node(name, "4", "16Gi", 110), (),
                          template_slices(tmpl.resource_slices, name))
        return snap, pods

    one_by_one, pods = snapshot()
    placed = 0
    for name, _ in nodes:
        while placed < len(pods) and check_predicates(
            pods[placed], one_by_one.get(name), one_by_one
        ) is None:
            one_by_one.add_pod(pods[placed], name)
            placed += 1
    copies, copied = snapshot()
    dra = copies.dra
    assert dra is not None and dra.claims_alike(copied)
    copies.fork()
    done = 0
    counts = []
    for name, _ in nodes:
        n = dra.copies_fit(copied[done], copies.get(name).node, len(copied) - done)
        assert check_predicates(copied[done], copies.get(name), copies) is None
        copies.add_pods(copied[done : done + n], name)
        counts.append(n)
        done += n
    assert counts == [2, 3, 2, 3] and placed == done
    assert one_by_one.dra is not None
    assert dra.allocations == one_by_one.dra.allocations
    assert dra.allocated == one_by_one.dra.allocated
