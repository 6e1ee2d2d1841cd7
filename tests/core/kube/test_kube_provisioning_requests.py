"""ProvisioningRequests and PodTemplates read from the fake API server, and the loop's
conditions written to the requests' status subresource, conflict-safe."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from clusterscaler.kube.provreq import ProvisioningRequestStatusWriter
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.loop.decisions import ProvisioningRequestResult
from clusterscaler.model.provisioning import CHECK_CAPACITY, Condition
from clusterscaler.testing.fakekube import FakeKubeServer, provisioning_request_resources

T = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def request(name: str = "train", **status: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "batch"},
        "spec": {
            "provisioningClassName": CHECK_CAPACITY,
            "podSets": [{"podTemplateRef": {"name": "worker"}, "count": 2}],
        },
    }
    if status:
        out["status"] = status
    return out


def template() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "worker", "namespace": "batch"},
        "template": {
            "spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]}
        },
    }


@pytest.fixture
def crd_kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(resources=provisioning_request_resources()) as server:
        yield server


def synced(server: FakeKubeServer, **kwargs: Any) -> KubeClusterSource:
    source = KubeClusterSource(server.api_client(), **kwargs)
    source.start()
    assert source.wait_for_sync(20)
    return source


def eventually(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_requests_and_templates_are_cached_when_enabled(crd_kube: FakeKubeServer) -> None:
    crd_kube.create(request())
    crd_kube.create(template())
    bad = request("bad")
    bad["spec"]["podSets"][0]["count"] = 0
    crd_kube.create(bad)
    source = synced(crd_kube, provisioning_requests=True)
    try:
        objects = source.snapshot()
        assert [r.key for r in objects.provisioning_requests] == ["batch/train"]
        assert [t.key for t in objects.pod_templates] == ["batch/worker"]
        # One bad request is left out, named, and the others are read.
        [unreadable] = [u for u in objects.unreadable if u.kind == "ProvisioningRequest"]
        assert unreadable.key == "batch/bad"
        assert "spec.podSets[0].count: expected an integer of at least 1" in unreadable.error
        crd_kube.create(request("second"))
        eventually(lambda: len(source.snapshot().provisioning_requests) == 2)
    finally:
        source.stop()


def test_without_the_flag_nothing_is_listed(crd_kube: FakeKubeServer) -> None:
    crd_kube.create(request())
    source = synced(crd_kube)
    try:
        assert source.snapshot().provisioning_requests == []
        assert not any("provisioningrequests" in r.path or "podtemplates" in r.path
                       for r in crd_kube.requests)
    finally:
        source.stop()


def test_a_cluster_without_the_crd_has_no_requests(fake_kube: FakeKubeServer) -> None:
    fake_kube.create(template())
    source = synced(fake_kube, provisioning_requests=True)
    try:
        objects = source.snapshot()
        assert objects.provisioning_requests == []
        assert [t.key for t in objects.pod_templates] == ["batch/worker"]
    finally:
        source.stop()


def result(*changed: str) -> ProvisioningRequestResult:
    return ProvisioningRequestResult(
        "batch",
        "train",
        CHECK_CAPACITY,
        (
            Condition("Accepted", "True", "Accepted",
                      "ProvisioningRequest is accepted by ClusterAutoscaler", T, 1),
            Condition("Provisioned", "True", "CapacityIsFound",
                      "Capacity is found in the cluster", T, 1),
        ),
        changed,
    )


def conditions(server: FakeKubeServer) -> dict[str, dict[str, Any]]:
    obj = server.get("provisioningrequests", "train", "batch")
    assert obj is not None
    return {c["type"]: c for c in obj["status"]["conditions"]}


def test_changed_conditions_are_written_and_others_kept(crd_kube: FakeKubeServer) -> None:
    crd_kube.create(request(conditions=[
        {"type": "Provisioned", "status": "False", "reason": "CapacityIsNotFound",
         "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "QueuedByKueue", "status": "True", "reason": "Queued", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
    ]))
    writer = ProvisioningRequestStatusWriter(crd_kube.api_client())
    assert writer.write([result("Accepted", "Provisioned")]) == 1
    held = conditions(crd_kube)
    assert set(held) == {"Accepted", "Provisioned", "QueuedByKueue"}
    assert held["Provisioned"] == {
        "type": "Provisioned", "status": "True", "reason": "CapacityIsFound",
        "message": "Capacity is found in the cluster",
        "lastTransitionTime": "2026-03-04T05:06:07Z", "observedGeneration": 1,
    }
    # Through the status subresource only.
    writes = [r for r in crd_kube.requests if r.method == "PUT"]
    assert [w.path for w in writes] == [
        "/apis/autoscaling.x-k8s.io/v1/namespaces/batch/provisioningrequests/train/status"
    ]
    # Unchanged requests are not written at all.
    assert writer.write([result()]) == 0


def test_a_conflicting_change_is_kept_and_the_write_retried(crd_kube: FakeKubeServer) -> None:
    crd_kube.create(request())
    writes = {"n": 0}

    def meanwhile(method: str, path: str) -> None:
        # Another controller changes the request between our read and our write, once.
        if method == "PUT" and writes["n"] == 0:
            writes["n"] += 1
            obj = crd_kube.get("provisioningrequests", "train", "batch")
            assert obj is not None
            obj["status"] = {"conditions": [
                {"type": "Other", "status": "True", "reason": "R", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
            crd_kube.update(obj)

    crd_kube.on_request = meanwhile
    writer = ProvisioningRequestStatusWriter(crd_kube.api_client())
    assert writer.write([result("Provisioned")]) == 1
    assert set(conditions(crd_kube)) == {"Other", "Provisioned"}
    assert writer.failures == 0
    assert [r.status for r in crd_kube.requests if r.subresource == "status"] == [409, 200]


def test_deleted_requests_dry_run_and_failures_never_raise(crd_kube: FakeKubeServer) -> None:
    errors: list[Any] = []
    writer = ProvisioningRequestStatusWriter(crd_kube.api_client(), on_error=errors.append)
    assert writer.write([result("Provisioned")]) == 0
    assert writer.failures == 0
    crd_kube.create(request())
    dry = ProvisioningRequestStatusWriter(crd_kube.api_client(), dry_run=True)
    assert dry.write([result("Provisioned")]) == 0
    obj = crd_kube.get("provisioningrequests", "train", "batch")
    assert obj is not None and not (obj.get("status") or {}).get("conditions")
    crd_kube.add_fault(method="PUT", status=500)
    assert writer.write([result("Provisioned")]) == 0
    assert writer.failures == 1 and len(errors) == 1


def test_requests_whose_time_is_over_are_deleted(crd_kube: FakeKubeServer) -> None:
    created = crd_kube.create(request())
    old = ProvisioningRequestResult("batch", "train", CHECK_CAPACITY, (), (), delete=True,
                                    uid=created["metadata"]["uid"])
    assert ProvisioningRequestStatusWriter(crd_kube.api_client(), dry_run=True).write([old]) == 0
    assert crd_kube.get("provisioningrequests", "train", "batch") is not None
    writer = ProvisioningRequestStatusWriter(crd_kube.api_client())
    assert writer.write([old]) == 1
    assert crd_kube.get("provisioningrequests", "train", "batch") is None
    # Gone already: nothing to do, no failure.
    assert writer.write([old]) == 0 and writer.failures == 0
