"""Taints, cordons, evictions and deletions through KubeClusterActions."""

from __future__ import annotations

import pytest
from clusterscaler.framework.clusteractions import ClusterActions, EvictionError, NodeNotFoundError
from clusterscaler.kube.actions import ConflictRetriesExhaustedError, KubeClusterActions
from clusterscaler.model import Pod, Taint, parse_pod

TO_BE_DELETED = Taint("ToBeDeletedByClusterAutoscaler", "1700000000", "NoSchedule")


def node(name: str, taints: list[dict] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "spec": {"taints": taints or []},
    }


def pod(name: str, labels: dict | None = None, phase: str = "Running") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.fixture
def actions(fake_kube) -> KubeClusterActions:
    return KubeClusterActions(fake_kube.api_client())


def model_pod(fake_kube, name: str) -> Pod:
    return parse_pod(fake_kube.get("pods", name, "default"))


def taints_of(fake_kube, name: str) -> list[dict]:
    return fake_kube.get("nodes", name)["spec"].get("taints") or []


def test_implements_cluster_actions(actions):
    assert isinstance(actions, ClusterActions)


def test_add_taint_keeps_other_taints_and_replaces_same_key_and_effect(fake_kube, actions):
    fake_kube.create(node("n1", [{"key": "other", "effect": "NoExecute"}]))
    actions.add_taint("n1", Taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule"))
    actions.add_taint("n1", TO_BE_DELETED)
    assert taints_of(fake_kube, "n1") == [
        {"key": "other", "effect": "NoExecute"},
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000", "effect": "NoSchedule"},
    ]
    updates = [r for r in fake_kube.requests if r.verb == "update" and r.resource == "nodes"]
    assert len(updates) == 2


def test_add_existing_taint_writes_nothing(fake_kube, actions):
    fake_kube.create(node("n1", [TO_BE_DELETED.to_k8s()]))
    actions.add_taint("n1", TO_BE_DELETED)
    assert not [r for r in fake_kube.requests if r.verb == "update"]


def test_remove_taint_reports_whether_present(fake_kube, actions):
    fake_kube.create(node("n1", [TO_BE_DELETED.to_k8s(), {"key": "keep", "effect": "NoSchedule"}]))
    assert actions.remove_taint("n1", TO_BE_DELETED.key) is True
    assert actions.remove_taint("n1", TO_BE_DELETED.key) is False
    assert taints_of(fake_kube, "n1") == [{"key": "keep", "effect": "NoSchedule"}]


def test_taint_update_retries_on_conflict(fake_kube, actions):
    fake_kube.create(node("n1"))
    fake_kube.add_fault(method="PUT", path="/api/v1/nodes/n1", status=409, times=2)
    actions.add_taint("n1", TO_BE_DELETED)
    assert taints_of(fake_kube, "n1") == [TO_BE_DELETED.to_k8s()]
    assert [r.status for r in fake_kube.requests if r.verb == "update"] == [409, 409, 200]


def test_taint_update_gives_up_after_retries(fake_kube):
    fake_kube.create(node("n1"))
    fake_kube.add_fault(method="PUT", path="/api/v1/nodes/n1", status=409)
    actions = KubeClusterActions(fake_kube.api_client(), conflict_retries=3)
    with pytest.raises(ConflictRetriesExhaustedError, match="node n1"):
        actions.add_taint("n1", TO_BE_DELETED)


def test_concurrent_change_is_not_lost(fake_kube, actions):
    """A label added between our read and write survives: the write conflicts and is redone."""
    fake_kube.create(node("n1"))
    done = []

    def kubelet_writes_first(method, path):
        if method == "PUT" and not done:
            done.append(True)
            fake_kube.patch("nodes", "n1", {"metadata": {"labels": {"kubelet": "wrote"}}})

    fake_kube.on_request = kubelet_writes_first
    actions.add_taint("n1", TO_BE_DELETED)
    stored = fake_kube.get("nodes", "n1")
    assert stored["metadata"]["labels"] == {"kubelet": "wrote"}
    assert stored["spec"]["taints"] == [TO_BE_DELETED.to_k8s()]
    assert [r.status for r in fake_kube.requests if r.verb == "update"] == [409, 200]


def test_missing_node_raises_node_not_found(actions):
    with pytest.raises(NodeNotFoundError):
        actions.add_taint("ghost", TO_BE_DELETED)


def test_cordon_and_uncordon(fake_kube, actions):
    fake_kube.create(node("n1"))
    actions.set_unschedulable("n1", True)
    assert fake_kube.get("nodes", "n1")["spec"]["unschedulable"] is True
    actions.set_unschedulable("n1", False)
    assert "unschedulable" not in fake_kube.get("nodes", "n1")["spec"]


def test_evict_uses_policy_v1_eviction(fake_kube, actions):
    fake_kube.create(pod("p1"))
    target = model_pod(fake_kube, "p1")
    actions.evict(target, 30)
    assert fake_kube.get("pods", "p1", "default") is None
    eviction = next(r for r in fake_kube.requests if r.subresource == "eviction")
    assert (eviction.verb, eviction.resource, eviction.status) == ("create", "pods", 201)
    assert not actions.pod_exists(target)


def test_evict_blocked_by_pdb_is_retryable(fake_kube, actions):
    fake_kube.create(pod("p1", {"app": "web"}))
    fake_kube.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1},
        }
    )
    target = model_pod(fake_kube, "p1")
    with pytest.raises(EvictionError) as exc:
        actions.evict(target, None)
    assert exc.value.retryable
    assert "disruption budget" in str(exc.value)
    assert actions.pod_exists(target)


@pytest.mark.parametrize("status", [500, 403, 422, 429, 503])
def test_every_eviction_error_but_not_found_is_retryable(fake_kube, actions, status):
    """As CA's drain, which retries every error but NotFound until --max-pod-eviction-time:
    a webhook's 500 on one attempt must not abort a drain whose other pods already moved."""
    fake_kube.create(pod("p1"))
    fake_kube.add_fault(path="eviction", status=status)
    with pytest.raises(EvictionError) as exc:
        actions.evict(model_pod(fake_kube, "p1"), None)
    assert exc.value.retryable


def test_evict_pod_already_gone_or_replaced_counts_as_evicted(fake_kube, actions):
    fake_kube.create(pod("p1"))
    old = model_pod(fake_kube, "p1")
    actions.evict(old, None)
    actions.evict(old, None)  # 404: already gone
    fake_kube.create(pod("p1"))  # a namesake with a new uid
    actions.evict(old, None)
    assert fake_kube.get("pods", "p1", "default") is not None
    assert not actions.pod_exists(old)


def test_dry_run_changes_nothing(fake_kube):
    fake_kube.create(node("n1"))
    fake_kube.create(pod("p1"))
    actions = KubeClusterActions(fake_kube.api_client(), dry_run=True)
    actions.add_taint("n1", TO_BE_DELETED)
    actions.set_unschedulable("n1", True)
    actions.evict(model_pod(fake_kube, "p1"), None)
    assert taints_of(fake_kube, "n1") == []
    assert fake_kube.get("pods", "p1", "default") is not None
    assert {r.verb for r in fake_kube.requests} <= {"get", "list"}
