"""CapacityQuota objects as the API defines them: limits, selector, and what makes one
invalid (then read, not enforced, and reported with the field and the expected form)."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.model import ClusterObjects, ModelError, parse_capacity_quota


def quota(resources: Any, selector: Any = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"limits": {"resources": resources}}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
        "kind": "CapacityQuota",
        "metadata": {"name": "team-a", "uid": "u1", "resourceVersion": "7", "generation": 2},
        "spec": spec,
        **extra,
    }


def test_limits_and_selector_are_read() -> None:
    q = parse_capacity_quota(
        quota(
            {"nodes": 3, "cpu": "64", "memory": "256Gi", "nvidia-tesla-t4": "2"},
            {"matchLabels": {"pool": "a"}},
        )
    )
    assert q.valid and q.error == ""
    assert dict(q.limits) == {"nodes": 3, "cpu": 64, "memory": 256 * 1024**3, "nvidia-tesla-t4": 2}
    assert q.id == "CapacityQuota/team-a"
    assert q.applies_to({"pool": "a", "x": "y"})
    assert not q.applies_to({"pool": "b"})
    assert (q.uid, q.resource_version, q.generation) == ("u1", "7", 2)


def test_missing_or_empty_selector_covers_every_node() -> None:
    assert parse_capacity_quota(quota({"nodes": 1})).applies_to({})
    assert parse_capacity_quota(quota({"nodes": 1}, {})).applies_to({"any": "thing"})


def test_decimal_suffix_counts_as_integer() -> None:
    assert parse_capacity_quota(quota({"cpu": "2k"})).limits == {"cpu": 2000}


@pytest.mark.parametrize(
    ("resources", "selector", "field"),
    [
        ({"cpu": "500m"}, None, "spec.limits.resources['cpu']"),
        # The API refuses milli quantities even when they are whole.
        ({"cpu": "1000m"}, None, "spec.limits.resources['cpu']"),
        ({"memory": "3.67Gi"}, None, "spec.limits.resources['memory']"),
        ({"nodes": -1}, None, "spec.limits.resources['nodes']"),
        ({"nodes": "many"}, None, "spec.limits.resources['nodes']"),
        ("cpu=4", None, "spec.limits.resources"),
        ({f"r{i}": 1 for i in range(21)}, None, "spec.limits.resources"),
        ({"x" * 64: 1}, None, "spec.limits.resources"),
        (
            {"nodes": 1},
            {"matchExpressions": [{"key": "pool", "operator": "Near"}]},
            "spec.selector.matchExpressions[0].operator",
        ),
    ],
    ids=[
        "milli",
        "whole-milli",
        "fraction",
        "negative",
        "not-a-quantity",
        "not-a-map",
        "too-many",
        "long-name",
        "bad-operator",
    ],
)
def test_invalid_spec_is_read_with_the_field_named(resources, selector, field) -> None:
    q = parse_capacity_quota(quota(resources, selector))
    assert not q.valid
    assert q.error.startswith("CapacityQuota team-a: ")
    assert field in q.error
    assert "expected" in q.error
    assert not q.limits


def test_status_is_read() -> None:
    q = parse_capacity_quota(
        quota(
            {"nodes": 3},
            status={
                "used": {"resources": {"nodes": "2"}},
                "conditions": [
                    {"type": "Valid", "status": "True", "reason": "ValidationSucceeded"}
                ],
            },
        )
    )
    assert q.used == {"nodes": "2"}
    cond = q.condition("Valid")
    assert cond is not None and cond.is_true


def test_wrong_api_version_is_an_error() -> None:
    with pytest.raises(ModelError, match=r"apiVersion: expected autoscaling\.x-k8s\.io/v1alpha1"):
        parse_capacity_quota({**quota({"nodes": 1}), "apiVersion": "autoscaling.x-k8s.io/v1"})


def test_snapshot_lists_hold_quotas() -> None:
    objects = ClusterObjects.from_list({"kind": "List", "items": [quota({"nodes": 2})]})
    assert [q.name for q in objects.capacity_quotas] == ["team-a"]
    assert list(objects) == objects.capacity_quotas
