"""Devices with binding conditions (DRADeviceBindingConditions, on by default in
Kubernetes 1.36): they are allocated like any other, and a device that `bindsToNode`
pins its allocation to the node it was made for, as the allocator's createNodeSelector
does, even when its slice serves every node."""

from __future__ import annotations

from typing import Any

from clusterscaler.model.dra import parse_resource_slice
from clusterscaler.model.pod import parse_pod
from clusterscaler.model.scheduling import node_selector_matches
from clusterscaler.simulator.builders import make_node

from tests.core.simulator.test_dra_allocation import (
    DRIVER,
    NODE,
    V1,
    devices_of,
    pod,
    request,
    state,
    template,
)

OTHER = make_node("n2", cpu="8", memory="32Gi")


def attached(binds_to_node: bool) -> dict[str, Any]:
    """A slice of network-attached devices every node can reach."""
    device: dict[str, Any] = {
        "name": "fabric-0",
        "attributes": {"model": {"string": "a100"}},
        "bindingConditions": ["dra.example.com/attached"],
        "bindingFailureConditions": ["dra.example.com/failed"],
    }
    if binds_to_node:
        device["bindsToNode"] = True
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": "fabric"},
            "spec": {"driver": DRIVER, "allNodes": True,
                     "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                     "devices": [device]}}


def test_the_model_reads_binding_conditions() -> None:
    device = parse_resource_slice(attached(True)).devices[0]
    assert device.binding_conditions == ("dra.example.com/attached",)
    assert device.binding_failure_conditions == ("dra.example.com/failed",)
    assert device.binds_to_node


def test_a_device_with_binding_conditions_is_allocated() -> None:
    dra = state([attached(False)], [template(request())])
    found = dra.allocate(pod(), NODE)
    assert devices_of(found) == ["fabric-0"]
    # Not pinned: the slice serves every node.
    assert isinstance(found, dict)
    assert found["default/p#c0"].node_selector is None


def test_a_device_that_binds_to_its_node_pins_the_allocation_there() -> None:
    dra = state([attached(True)], [template(request())])
    found = dra.allocate(pod(), NODE)
    assert isinstance(found, dict)
    selector = found["default/p#c0"].node_selector
    assert selector is not None
    assert node_selector_matches(selector, NODE.name, NODE.labels)
    assert not node_selector_matches(selector, OTHER.name, OTHER.labels)


def test_a_shared_claim_on_a_binding_device_keeps_its_other_pods_on_that_node() -> None:
    claim = {"apiVersion": V1, "kind": "ResourceClaim",
             "metadata": {"name": "shared", "namespace": "default"},
             "spec": {"devices": {"requests": [request()]}}}
    dra = state([attached(True)], [], [claim])

    def user(name: str) -> Any:
        return parse_pod({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                     "resourceClaims": [{"name": "c", "resourceClaimName": "shared"}]},
        })

    first = user("a")
    found = dra.allocate(first, NODE)
    assert isinstance(found, dict)
    dra.reserve(first, found)
    assert dra.allocate(user("b"), NODE) == {}
    elsewhere = dra.allocate(user("b"), OTHER)
    assert isinstance(elsewhere, str)
    assert "allocated to other nodes" in elsewhere
