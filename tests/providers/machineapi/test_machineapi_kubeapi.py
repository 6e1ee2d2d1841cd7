"""The raw-JSON Kubernetes calls of the machineapi provider."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler_machineapi.kubeapi import KubeApi, KubeApiError
from machineapi_builders import OPENSHIFT, OPENSHIFT_NS, machine, scalable


def test_list_follows_continue_tokens(kube: FakeKubeServer, api_client: Any) -> None:
    ms = kube.create(scalable("workers", replicas=5))
    for i in range(5):
        kube.create(machine(ms, f"m{i}"))
    api = KubeApi(api_client, page_size=2)
    names = [m["metadata"]["name"] for m in api.list(OPENSHIFT, "v1beta1", "machines", OPENSHIFT_NS)]
    assert names == ["m0", "m1", "m2", "m3", "m4"]
    pages = [r for r in kube.requests if r.resource == "machines" and r.verb == "list"]
    assert len(pages) == 3


def test_scale_subresource_round_trip(kube: FakeKubeServer, api_client: Any) -> None:
    kube.create(scalable("workers", replicas=1))
    api = KubeApi(api_client)
    assert api.get_scale(OPENSHIFT, "v1beta1", "machinesets", OPENSHIFT_NS, "workers") == 1
    assert api.set_scale(OPENSHIFT, "v1beta1", "machinesets", OPENSHIFT_NS, "workers", 4) == 4
    assert kube.get("machinesets.machine.openshift.io", "workers", OPENSHIFT_NS)["spec"]["replicas"] == 4  # type: ignore[index]


def test_errors_carry_the_status_and_the_server_message(kube: FakeKubeServer, api_client: Any) -> None:
    api = KubeApi(api_client)
    with pytest.raises(KubeApiError) as info:
        api.get_scale(OPENSHIFT, "v1beta1", "machinesets", OPENSHIFT_NS, "missing")
    assert info.value.status == 404
    assert "/machinesets/missing/scale" in str(info.value)
    assert "not found" in str(info.value)


def test_annotations_are_set_and_removed_by_merge_patch(kube: FakeKubeServer, api_client: Any) -> None:
    ms = kube.create(scalable("workers", replicas=1))
    kube.create(machine(ms, "m1"))
    api = KubeApi(api_client)
    api.patch_annotations(OPENSHIFT, "v1beta1", "machines", OPENSHIFT_NS, "m1", {"a": "1", "b": "2"})
    api.patch_annotations(OPENSHIFT, "v1beta1", "machines", OPENSHIFT_NS, "m1", {"a": None})
    assert kube.get("machines.machine.openshift.io", "m1", OPENSHIFT_NS)["metadata"]["annotations"] == {"b": "2"}  # type: ignore[index]
