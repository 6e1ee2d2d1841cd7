"""The comparison of a template's DRA devices with those a node publishes, case by case as
Cluster Autoscaler's resource pool comparator reports them (missing, extra, mismatch)."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.model.dra import ResourceSlice, parse_resource_slice
from clusterscaler.simulator.dra_compare import compare_resource_pools, count_by_driver

SHAPE_A = {"model": {"string": "a100"}, "memory": {"int": 40}}
SHAPE_B = {"model": {"string": "a100"}, "numa": {"int": 0}}


def sl(driver: str, pool: str, count: int, shape: dict[str, Any] = SHAPE_A, *,
       slices: int = 1, generation: int = 1, name: str = "") -> ResourceSlice:
    return parse_resource_slice({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name or f"{driver}-{pool}-{count}-{generation}"},
        "spec": {"driver": driver, "nodeName": "n",
                 "pool": {"name": pool, "generation": generation, "resourceSliceCount": slices},
                 "devices": [{"name": f"d{i}", "attributes": shape} for i in range(count)]},
    })


CASES = [
    pytest.param([], [], {}, id="nothing"),
    pytest.param([sl("gpu", "tpl", 2)], [sl("gpu", "node", 2)], {}, id="pool-names-ignored"),
    pytest.param([sl("gpu", "p", 2)], [], {"gpu": {"missing": 1}}, id="missing-pool"),
    pytest.param([], [sl("gpu", "p", 2)], {"gpu": {"extra": 1}}, id="extra-pool"),
    pytest.param([sl("gpu", "p", 2)], [sl("gpu", "p", 1)], {"gpu": {"mismatch": 1}},
                 id="fewer-devices"),
    pytest.param([sl("gpu", "p", 2)], [sl("gpu", "p", 2, SHAPE_B)], {"gpu": {"mismatch": 1}},
                 id="other-attribute-names"),
    pytest.param([sl("gpu", "p", 2, {"model": {"string": "a100"}})],
                 [sl("gpu", "p", 2, {"model": {"string": "h100"}})], {},
                 id="attribute-values-not-compared"),
    pytest.param([sl("gpu", "p", 2)], [sl("nic", "p", 2)],
                 {"gpu": {"missing": 1}, "nic": {"extra": 1}}, id="other-driver"),
    pytest.param([sl("gpu", "p", 2), sl("gpu", "q", 4)], [sl("gpu", "x", 4), sl("gpu", "y", 3)],
                 {"gpu": {"mismatch": 1}}, id="closest-count-paired"),
    pytest.param([sl("gpu", "p", 2)], [sl("gpu", "p", 1, slices=2)], {},
                 id="driver-being-updated-not-compared"),
]


@pytest.mark.parametrize(("template", "node", "want"), CASES)
def test_compare(template: list[ResourceSlice], node: list[ResourceSlice],
                 want: dict[str, dict[str, int]]) -> None:
    counts = count_by_driver(compare_resource_pools(template, node))
    assert {d: {k: v for k, v in c.items() if v} for d, c in counts.items()} == want


def test_a_mismatch_names_the_device_difference() -> None:
    [delta] = compare_resource_pools([sl("gpu", "tpl", 4)], [sl("gpu", "node", 3)])
    assert (delta.kind, delta.device_delta) == ("mismatch", 1)
    assert delta.summary() == "gpu: pool node differs from the template's tpl by +1 device(s)"
