"""CapacityQuotas read from the fake API server behind --capacity-quotas-enabled, and the
status upstream's controller keeps (usage, Valid, Reconciled) written to their status
subresource, conflict-safe, never in --dry-run."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from clusterscaler.kube.capacityquota import CapacityQuotaStatusWriter
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.loop.quotas import quota_statuses
from clusterscaler.model import parse_capacity_quota
from clusterscaler.simulator.builders import make_node
from clusterscaler.testing.fakekube import FakeKubeServer, capacity_quota_resources

T = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def quota(name: str = "pool-a", nodes: Any = 3) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
        "kind": "CapacityQuota",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"pool": "a"}},
            "limits": {"resources": {"nodes": nodes, "cpu": "64"}},
        },
    }


@pytest.fixture
def crd_kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(resources=capacity_quota_resources()) as server:
        yield server


def synced(server: FakeKubeServer, **kwargs: Any) -> KubeClusterSource:
    source = KubeClusterSource(server.api_client(), **kwargs)
    source.start()
    assert source.wait_for_sync(20)
    return source


def test_quotas_are_cached_with_the_flag_only(crd_kube: FakeKubeServer) -> None:
    crd_kube.create(quota())
    crd_kube.create(quota("bad", nodes="500m"))
    source = synced(crd_kube, capacity_quotas=True)
    try:
        quotas = {q.name: q for q in source.snapshot().capacity_quotas}
        assert set(quotas) == {"bad", "pool-a"}
        assert quotas["pool-a"].limits == {"nodes": 3, "cpu": 64}
        # Read, named, and not enforced.
        assert "spec.limits.resources['nodes']" in quotas["bad"].error
    finally:
        source.stop()
    crd_kube.requests.clear()
    source = synced(crd_kube)
    try:
        assert source.snapshot().capacity_quotas == []
        assert not any("capacityquotas" in r.path for r in crd_kube.requests)
    finally:
        source.stop()


def test_a_cluster_without_the_crd_has_no_quotas(fake_kube: FakeKubeServer) -> None:
    source = synced(fake_kube, capacity_quotas=True)
    try:
        assert source.snapshot().capacity_quotas == []
    finally:
        source.stop()


def read(server: FakeKubeServer, name: str = "pool-a") -> dict[str, Any]:
    obj = server.get("capacityquotas", name)
    assert obj is not None
    return obj


NODES = [
    make_node("a1", cpu="4", labels={"pool": "a"}),
    make_node("a2", cpu="4", labels={"pool": "a"}),
    make_node("b1", cpu="8", labels={"pool": "b"}),
]


def test_usage_and_conditions_are_written_and_others_kept(crd_kube: FakeKubeServer) -> None:
    created = crd_kube.create(
        {
            **quota(),
            "status": {
                "conditions": [
                    {"type": "Audited", "status": "True", "reason": "R", "message": "",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]
            },
        }
    )
    statuses = quota_statuses([parse_capacity_quota(created)], NODES, T)
    writer = CapacityQuotaStatusWriter(crd_kube.api_client())
    assert writer.write(statuses) == 1
    status = read(crd_kube)["status"]
    assert status["used"] == {"resources": {"nodes": "2", "cpu": "8"}}
    held = {c["type"]: c for c in status["conditions"]}
    assert set(held) == {"Audited", "Valid", "Reconciled"}
    assert held["Valid"]["status"] == "True"
    assert held["Valid"]["reason"] == "ValidationSucceeded"
    assert held["Reconciled"]["reason"] == "ReconciliationSucceeded"
    assert held["Valid"]["lastTransitionTime"] == "2026-03-04T05:06:07Z"
    writes = [r for r in crd_kube.requests if r.method == "PUT"]
    assert [w.path for w in writes] == [
        "/apis/autoscaling.x-k8s.io/v1alpha1/capacityquotas/pool-a/status"
    ]
    # Read back, nothing changed: nothing to write.
    again = quota_statuses([parse_capacity_quota(read(crd_kube))], NODES, T)
    assert [s.changed for s in again] == [False]
    assert writer.write(again) == 0


def test_an_invalid_quota_is_marked_not_valid(crd_kube: FakeKubeServer) -> None:
    created = crd_kube.create(quota(nodes="1.5"))
    writer = CapacityQuotaStatusWriter(crd_kube.api_client())
    assert writer.write(quota_statuses([parse_capacity_quota(created)], NODES, T)) == 1
    status = read(crd_kube)["status"]
    assert "used" not in status
    held = {c["type"]: c for c in status["conditions"]}
    assert (held["Valid"]["status"], held["Valid"]["reason"]) == ("False", "ValidationFailed")
    assert "spec.limits.resources['nodes']" in held["Valid"]["message"]
    assert held["Reconciled"]["message"] == "Validation failed"


def test_a_conflicting_change_is_kept_and_the_write_retried(crd_kube: FakeKubeServer) -> None:
    created = crd_kube.create(quota())
    writes = {"n": 0}

    def meanwhile(method: str, path: str) -> None:
        if method == "PUT" and writes["n"] == 0:
            writes["n"] += 1
            obj = read(crd_kube)
            obj["status"] = {"conditions": [
                {"type": "Other", "status": "True", "reason": "R", "message": "",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
            crd_kube.update(obj)

    crd_kube.on_request = meanwhile
    writer = CapacityQuotaStatusWriter(crd_kube.api_client())
    assert writer.write(quota_statuses([parse_capacity_quota(created)], NODES, T)) == 1
    held = {c["type"] for c in read(crd_kube)["status"]["conditions"]}
    assert held == {"Other", "Valid", "Reconciled"}
    assert writer.failures == 0
    assert [r.status for r in crd_kube.requests if r.subresource == "status"] == [409, 200]


def test_dry_run_deleted_recreated_and_failures_never_raise(crd_kube: FakeKubeServer) -> None:
    created = crd_kube.create(quota())
    statuses = quota_statuses([parse_capacity_quota(created)], NODES, T)
    assert CapacityQuotaStatusWriter(crd_kube.api_client(), dry_run=True).write(statuses) == 0
    assert not read(crd_kube).get("status")
    errors: list[Any] = []
    writer = CapacityQuotaStatusWriter(crd_kube.api_client(), on_error=errors.append)
    crd_kube.add_fault(method="PUT", status=500, times=1)
    assert writer.write(statuses) == 0
    assert writer.failures == 1 and len(errors) == 1
    # Created again under the same name: another object, left for the next loop.
    crd_kube.delete("capacityquotas", "pool-a")
    crd_kube.create(quota())
    assert writer.write(statuses) == 0
    assert not read(crd_kube).get("status")
    crd_kube.delete("capacityquotas", "pool-a")
    assert writer.write(statuses) == 0
    assert writer.failures == 1
