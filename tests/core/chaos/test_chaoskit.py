"""The chaos tests' stand-ins and checks: the workload's controller and scheduler, and the
audit, which must catch each unsafe request (the chaos tests are only as good as these)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from chaoskit import (
    APP,
    NAMESPACE,
    TO_BE_DELETED,
    Audit,
    Workload,
    convergence_gaps,
    group_node,
    taint_keys,
    workload_objects,
)
from clusterscaler.testing.fakekube import FakeKubeServer
from kubernetes import client
from kubernetes.client.rest import ApiException


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer() as server:
        for obj in workload_objects():
            server.create(obj)
        yield server


@pytest.fixture
def core(kube: FakeKubeServer) -> Iterator[client.CoreV1Api]:
    api_client = kube.api_client()
    try:
        yield client.CoreV1Api(api_client)
    finally:
        api_client.close()


def settle(workload: Workload, passes: int = 3) -> None:
    for _ in range(passes):
        workload.step()


def taint(
    kube: FakeKubeServer, node: str, key: str = TO_BE_DELETED, added: float | None = None
) -> None:
    # The value of our deletion taint: when it was added, in seconds.
    value = str(int(time.time() if added is None else added))
    kube.patch(
        "nodes", node, {"spec": {"taints": [{"key": key, "value": value, "effect": "NoSchedule"}]}}
    )


def test_workload_keeps_replicas_packs_them_and_collects_orphans(kube: FakeKubeServer) -> None:
    for name in ("n-a", "n-b", "n-c"):
        kube.create(group_node(name))
    taint(kube, "n-c")
    workload = Workload(kube)
    workload.set_replicas(3)
    settle(workload)
    # Two per node, most allocated first, never on a node tainted NoSchedule.
    assert {n: len(p) for n, p in workload.placement().items()} == {"n-a": 2, "n-b": 1}
    assert all(p["status"]["phase"] == "Running" for p in kube.list("pods", NAMESPACE))
    kube.delete("nodes", "n-a")
    settle(workload)
    # The pods of the deleted node are gone, their replacements pending: no room left.
    assert {n: len(p) for n, p in workload.placement().items()} == {"n-b": 2, "": 1}
    workload.set_replicas(1)
    settle(workload)
    assert {n: len(p) for n, p in workload.placement().items()} == {"n-b": 1}
    assert convergence_gaps(kube, workload) == [
        "node n-c tainted ['ToBeDeletedByClusterAutoscaler']",
        "2 nodes instead of 1: {'n-b': 1}",
    ]


def test_audit_flags_a_node_deleted_without_our_taint(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    kube.create(group_node("n-a"))
    audit = Audit(kube, Workload(kube))
    audit.install()
    core.delete_node("n-a")
    [breach] = audit.breaches()
    assert "n-a deleted while its Node exists, without the ToBeDeleted" in breach


def test_audit_flags_a_node_deleted_with_pods_or_with_no_room_left(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    for name in ("n-a", "n-b"):
        kube.create(group_node(name))
    workload = Workload(kube)
    workload.set_replicas(3)
    settle(workload)
    audit = Audit(kube, workload)
    audit.install()
    # Chosen well after the workload asked for its 3 replicas.
    taint(kube, "n-a", added=time.time() + 2)
    core.delete_node("n-a")
    breaches = audit.breaches()
    assert len(breaches) == 2, breaches
    assert "n-a deleted with pods still bound" in breaches[0]
    assert "needs 3 slots and the schedulable nodes left have 2" in breaches[1]


def test_audit_accepts_a_safe_deletion_and_notes_nodes_already_gone(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    for name in ("n-a", "n-b", "n-c"):
        kube.create(group_node(name))
    workload = Workload(kube)
    workload.set_replicas(3)
    settle(workload)
    audit = Audit(kube, workload)
    audit.install()
    assert "n-c" not in workload.placement()
    taint(kube, "n-c")
    core.delete_node("n-c")
    with pytest.raises(ApiException):
        core.delete_node("n-c")
    assert audit.breaches() == []
    assert [d.name for d in audit.deletions] == ["n-c"]
    assert audit.deleted_missing == ["n-c"]


def test_audit_flags_pods_deleted_instead_of_evicted_and_checks_the_budget(
    kube: FakeKubeServer, core: client.CoreV1Api
) -> None:
    for name in ("n-a", "n-b"):
        kube.create(group_node(name))
    workload = Workload(kube)
    workload.set_replicas(3)
    settle(workload)
    audit = Audit(kube, workload)
    audit.install()
    first, second, third = sorted(
        p["metadata"]["name"] for p in kube.list("pods", NAMESPACE, label_selector=f"app={APP}")
    )
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=first, namespace=NAMESPACE))
    core.create_namespaced_pod_eviction(first, NAMESPACE, body)
    # maxUnavailable 1: a second eviction before the replacement runs is refused.
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=second, namespace=NAMESPACE))
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction(second, NAMESPACE, body)
    assert refused.value.status == 429
    assert audit.breaches() == []
    assert (audit.evictions, audit.refused) == (2, {second})
    core.delete_namespaced_pod(third, NAMESPACE)
    [breach] = audit.breaches()
    assert f"pod {NAMESPACE}/{third}" in breach and "deleted, not evicted" in breach


def test_taint_keys_reads_the_node() -> None:
    node = group_node("n-a")
    assert taint_keys(node) == set()
    node["spec"]["taints"] = [{"key": TO_BE_DELETED, "effect": "NoSchedule"}]
    assert taint_keys(node) == {TO_BE_DELETED}
