"""Objects the API server would have refused (a toleration effect `Sometimes`, a taint
effect it does not know) are refused by the same parsers the caches use: such an object is
logged by name and left out of the cache, and the rest of the cluster is cached, whether it
comes in a list or a watch event."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from clusterscaler.kube.informer import Backoff, Informer, ListerSpec
from clusterscaler.model import parse_node, parse_pod
from clusterscaler.testing.fakekube import FakeKubeServer
from kubernetes import client
from structlog.testing import capture_logs


def pod(name: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def node(name: str, taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    }


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def pod_informer(kube: FakeKubeServer) -> Informer[Any]:
    api = client.CoreV1Api(kube.api_client())
    return Informer(
        ListerSpec("pods", "Pod", api.list_pod_for_all_namespaces, parse_pod),
        backoff=Backoff(initial=0.05, maximum=0.2),
    )


def node_informer(kube: FakeKubeServer) -> Informer[Any]:
    api = client.CoreV1Api(kube.api_client())
    return Informer(
        ListerSpec("nodes", "Node", api.list_node, parse_node),
        backoff=Backoff(initial=0.05, maximum=0.2),
    )


BAD_TOLERATIONS = [
    pytest.param([{"key": "gpu", "operator": "Exists", "effect": "Sometimes"}], "effect", id="effect"),
    pytest.param([{"key": "gpu", "operator": "Among", "value": "x"}], "operator", id="operator"),
]


@pytest.mark.parametrize(("tolerations", "field"), BAD_TOLERATIONS)
def test_listed_pod_with_an_invalid_toleration_is_logged_and_skipped(
    fake_kube: FakeKubeServer, tolerations: list[dict[str, Any]], field: str
) -> None:
    fake_kube.create(pod("good", [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]))
    fake_kube.create(pod("bad", tolerations))
    fake_kube.create(pod("also-good"))
    informer = pod_informer(fake_kube)
    with capture_logs() as logs:
        informer.list_once()
    assert sorted(p.name for p in informer.items()) == ["also-good", "good"]
    assert informer.parse_errors == 1
    (warning,) = [e for e in logs if e["event"] == "informer_parse_error"]
    assert warning["object"] == "default/bad"
    assert f"Pod default/bad: spec.tolerations[0].{field}: expected" in warning["error"]


def test_watched_objects_with_an_invalid_effect_are_logged_and_skipped(
    fake_kube: FakeKubeServer,
) -> None:
    fake_kube.create(node("n0"))
    informer = node_informer(fake_kube)
    with capture_logs() as logs:
        informer.start()
        try:
            assert informer.wait_for_sync(5)
            fake_kube.create(node("bad", [{"key": "gpu", "effect": "Sometimes"}]))
            fake_kube.create(node("n1", [{"key": "gpu", "effect": "NoSchedule"}]))
            eventually(lambda: {n.name for n in informer.items()} == {"n0", "n1"})
            eventually(lambda: informer.parse_errors == 1)
        finally:
            informer.stop()
    errors = [e for e in logs if e["event"] == "informer_parse_error"]
    assert [e["object"] for e in errors] == ["bad"]
    assert "Node bad: spec.taints[0].effect: expected one of NoSchedule" in errors[0]["error"]


def bound_pod(name: str, node_name: str) -> dict[str, Any]:
    doc = pod(name)
    doc["spec"]["nodeName"] = node_name
    doc["status"] = {"phase": "Running"}
    return doc


# Shapes no parser expects: each used to escape the cache's guard and fail every relist.
HOSTILE_PODS = [
    pytest.param({"status": ["Running"]}, id="status-is-a-list"),
    pytest.param({"metadata": {"name": "bad", "namespace": "default", "labels": ["a"]}},
                 id="labels-is-a-list"),
    pytest.param({"spec": {"nodeName": "n1", "containers": "app"}}, id="containers-is-a-string"),
]


@pytest.mark.parametrize("change", HOSTILE_PODS)
def test_a_pod_of_any_shape_is_left_out_and_its_node_remembered(
    fake_kube: FakeKubeServer, change: dict[str, Any]
) -> None:
    bad = bound_pod("bad", "n1")
    for key, value in change.items():
        bad[key] = value if key != "spec" else {**bad["spec"], **value}
    fake_kube.create(bound_pod("good", "n1"))
    fake_kube.create(bad)
    informer = pod_informer(fake_kube)
    informer.list_once()
    assert [p.name for p in informer.items()] == ["good"]
    (unreadable,) = informer.unreadable()
    assert (unreadable.kind, unreadable.key, unreadable.node_name) == ("Pod", "default/bad", "n1")
    assert unreadable.error


def test_an_unreadable_pod_is_forgotten_once_fixed_or_deleted(fake_kube: FakeKubeServer) -> None:
    informer = pod_informer(fake_kube)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        bad = bound_pod("bad", "n1")
        bad["status"] = ["Running"]
        fake_kube.create(bad)
        eventually(lambda: [u.key for u in informer.unreadable()] == ["default/bad"])
        fake_kube.update(bound_pod("bad", "n1"))
        eventually(lambda: [p.name for p in informer.items()] == ["bad"])
        assert informer.unreadable() == []
        broken = bound_pod("bad", "n1")
        broken["status"] = ["Running"]
        fake_kube.update(broken)
        eventually(lambda: [u.key for u in informer.unreadable()] == ["default/bad"])
        assert informer.items() == []
        fake_kube.delete("pods", "bad", "default")
        eventually(lambda: informer.unreadable() == [])
    finally:
        informer.stop()


def widgets_informer(kube: FakeKubeServer, *, optional: bool) -> Informer[Any]:
    custom = client.CustomObjectsApi(kube.api_client())

    def list_widgets(**kwargs: Any) -> Any:
        return custom.list_cluster_custom_object("example.com", "v1", "widgets", **kwargs)

    return Informer(
        ListerSpec("widgets", "Widget", list_widgets, dict, optional=optional),
        backoff=Backoff(initial=0.05, maximum=0.2),
    )


def test_an_optional_resource_the_server_does_not_serve_is_synced_and_empty(
    fake_kube: FakeKubeServer,
) -> None:
    """resource.k8s.io/v1 on a cluster older than 1.34: no DRA objects, and the loop runs."""
    informer = widgets_informer(fake_kube, optional=True)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        assert informer.items() == [] and informer.not_served
        assert informer.stale_reason() == ""
    finally:
        informer.stop()


def test_a_required_resource_the_server_does_not_serve_never_syncs(
    fake_kube: FakeKubeServer,
) -> None:
    informer = widgets_informer(fake_kube, optional=False)
    informer.start()
    try:
        assert not informer.wait_for_sync(1)
        assert "404" in informer.last_error
    finally:
        informer.stop()
