"""PodDisruptionBudgets of the fake API server count what the pods' controllers expect, as
the disruption controller does: an evicted pod not yet replaced is still expected."""

from __future__ import annotations

import pytest
from clusterscaler.testing.fakekube import FakeKubeServer
from kubernetes import client
from kubernetes.client.rest import ApiException


def replica_set(replicas: int) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}},
    }


def pod(name: str, *, owned: bool = True) -> dict:
    meta: dict = {"name": name, "namespace": "default", "labels": {"app": "web"}}
    if owned:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web",
                "uid": "u",
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def budget(**spec: object) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


@pytest.fixture
def core(fake_kube_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(fake_kube_client)


def evict(core: client.CoreV1Api, name: str) -> None:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace="default"))
    core.create_namespaced_pod_eviction(name, "default", body)


def status(kube: FakeKubeServer) -> dict:
    return (kube.get("pdb", "web", "default") or {})["status"]


@pytest.mark.parametrize("spec", [{"maxUnavailable": 1}, {"minAvailable": "66%"}])
def test_an_evicted_pod_not_yet_replaced_still_counts(
    fake_kube: FakeKubeServer, core: client.CoreV1Api, spec: dict
) -> None:
    fake_kube.create(replica_set(3))
    for i in range(3):
        fake_kube.create(pod(f"p{i}"))
    fake_kube.create(budget(**spec))
    assert status(fake_kube)["disruptionsAllowed"] == 1
    evict(core, "p0")
    assert status(fake_kube)["expectedPods"] == 3
    assert status(fake_kube)["disruptionsAllowed"] == 0
    with pytest.raises(ApiException) as refused:
        evict(core, "p1")
    assert refused.value.status == 429
    fake_kube.create(pod("p3"))  # the replacement runs
    assert status(fake_kube)["disruptionsAllowed"] == 1
    evict(core, "p1")


def test_the_controllers_scale_is_followed(fake_kube: FakeKubeServer) -> None:
    fake_kube.create(replica_set(3))
    for i in range(3):
        fake_kube.create(pod(f"p{i}"))
    fake_kube.create(budget(maxUnavailable=1))
    fake_kube.patch("replicasets", "web", {"spec": {"replicas": 5}}, "default")
    assert (status(fake_kube)["expectedPods"], status(fake_kube)["disruptionsAllowed"]) == (5, 0)
    fake_kube.patch("replicasets", "web", {"spec": {"replicas": 3}}, "default")
    assert (status(fake_kube)["expectedPods"], status(fake_kube)["disruptionsAllowed"]) == (3, 1)


def test_pods_without_a_stored_controller_count_one_each(fake_kube: FakeKubeServer) -> None:
    fake_kube.create(pod("p0", owned=False))
    fake_kube.create(pod("p1"))  # its ReplicaSet does not exist
    fake_kube.create(budget(maxUnavailable=1))
    assert (status(fake_kube)["expectedPods"], status(fake_kube)["disruptionsAllowed"]) == (2, 1)
    # An integer minAvailable counts the pods themselves.
    fake_kube.delete("pdb", "web", "default")
    fake_kube.create(replica_set(4))
    fake_kube.create(budget(minAvailable=1))
    assert status(fake_kube)["expectedPods"] == 2
