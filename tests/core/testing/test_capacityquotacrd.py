"""The CapacityQuota CRD written from the API's types is upstream's, descriptions aside."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.testing.capacityquotacrd import capacity_quota_crd, crd_from_types, upstream_crd


def _without_descriptions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_without_descriptions(v) for v in value]
    return value


def test_the_crd_written_from_the_types_is_upstreams() -> None:
    found = upstream_crd()
    if found is None:
        pytest.skip("upstream's CRD is neither served by the module proxy nor in the cache "
                    "(python -m bench peer unpacks upstream CA's source)")
    upstream, _ = found
    upstream = _without_descriptions(upstream)
    upstream["metadata"].pop("annotations", None)
    assert crd_from_types() == upstream


def test_the_crd_installed_is_cluster_scoped_v1alpha1_with_status() -> None:
    crd, origin = capacity_quota_crd()
    assert origin
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["plural"], spec["names"]["shortNames"]) == (
        "autoscaling.x-k8s.io", "Cluster", "capacityquotas", ["cq"])
    [version] = spec["versions"]
    assert version["name"] == "v1alpha1" and version["storage"] and version["served"]
    assert version["subresources"] == {"status": {}}
