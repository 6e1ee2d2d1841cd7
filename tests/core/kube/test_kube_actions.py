"""Taints, cordons, evictions and deletions through KubeClusterActions."""

from __future__ import annotations

import pytest
from clusterscaler.framework.clusteractions import ClusterActions, EvictionError, NodeNotFoundError
from clusterscaler.kube.actions import ConflictRetriesExhaustedError, KubeClusterActions
from clusterscaler.model import Node, Pod, Taint, parse_pod

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


def bare_node(name: str) -> dict:
    """A node with no taint list at all, as the API server keeps an untainted node."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}


def node_requests(fake_kube) -> list[tuple[str, int]]:
    return [(r.verb, r.status) for r in fake_kube.requests if r.resource == "nodes"]


def test_add_taint_keeps_other_taints_and_replaces_same_key_and_effect(fake_kube, actions):
    fake_kube.create(node("n1", [{"key": "other", "effect": "NoExecute"}]))
    actions.add_taint("n1", Taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule"))
    actions.add_taint("n1", TO_BE_DELETED)
    assert taints_of(fake_kube, "n1") == [
        {"key": "other", "effect": "NoExecute"},
        {"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000", "effect": "NoSchedule"},
    ]
    # The first taint is appended by one patch; the second, of the same key and effect, is
    # refused as a duplicate by the server and replaces the first by read and update.
    assert node_requests(fake_kube) == [
        ("patch", 200),
        ("patch", 422),
        ("get", 200),
        ("update", 200),
    ]


def test_add_taint_is_one_request(fake_kube, actions):
    """Each request takes a token of --kube-client-qps: a taint costs one, as CA's update
    of its cached node does, not a read and a write."""
    fake_kube.create(node("n1", [{"key": "kwok-provider", "value": "true", "effect": "NoSchedule"}]))
    actions.add_taint("n1", TO_BE_DELETED)
    assert taints_of(fake_kube, "n1") == [
        {"key": "kwok-provider", "value": "true", "effect": "NoSchedule"},
        TO_BE_DELETED.to_k8s(),
    ]
    assert node_requests(fake_kube) == [("patch", 200)]


def test_add_taint_to_a_node_without_taints(fake_kube, actions):
    fake_kube.create(bare_node("n1"))
    actions.add_taint("n1", TO_BE_DELETED)
    assert taints_of(fake_kube, "n1") == [TO_BE_DELETED.to_k8s()]


@pytest.mark.parametrize(
    ("cached", "requests"),
    [
        pytest.param([], [("get", 200), ("update", 200)], id="cache-shows-no-taints"),
        pytest.param(
            [Taint(TO_BE_DELETED.key, "1", "NoSchedule")],
            [("get", 200), ("update", 200)],
            id="cache-shows-same-key-and-effect",
        ),
        pytest.param([Taint("other", "", "NoExecute")], [("patch", 200)], id="cache-shows-others"),
    ],
)
def test_cached_node_chooses_the_write_not_its_content(fake_kube, cached, requests):
    """Where the cache says the patch would be refused, the node is read and updated at
    once; what is written is decided by the node as read, never by the cache."""
    fake_kube.create(node("n1", [{"key": "other", "effect": "NoExecute"}]))
    actions = KubeClusterActions(
        fake_kube.api_client(), cached_node=lambda name: Node(name, taints=tuple(cached))
    )
    actions.add_taint("n1", TO_BE_DELETED)
    assert taints_of(fake_kube, "n1") == [
        {"key": "other", "effect": "NoExecute"},
        TO_BE_DELETED.to_k8s(),
    ]
    assert node_requests(fake_kube) == requests


def test_taint_patch_keeps_a_change_made_since_the_cache_saw_the_node(fake_kube, actions):
    """The patch is applied by the server to the node as it is: a taint another writer
    added after our cache saw the node stays."""
    fake_kube.create(node("n1", [{"key": "a", "effect": "NoSchedule"}]))
    fake_kube.patch("nodes", "n1", {"spec": {"taints": [
        {"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}]}})
    actions = KubeClusterActions(
        fake_kube.api_client(),
        cached_node=lambda name: Node(name, taints=(Taint("a", "", "NoSchedule"),)),
    )
    actions.add_taint("n1", TO_BE_DELETED)
    assert taints_of(fake_kube, "n1") == [
        {"key": "a", "effect": "NoSchedule"},
        {"key": "b", "effect": "NoExecute"},
        TO_BE_DELETED.to_k8s(),
    ]


def test_without_patch_permission_nodes_are_read_and_updated(fake_kube, actions):
    """A ClusterRole written for CA grants nodes get and update, not patch: the taints and
    cordons still happen, and after the first refusal no patch is tried again."""
    fake_kube.create(node("n1", [{"key": "other", "effect": "NoExecute"}]))
    fake_kube.add_fault(method="PATCH", path="^/api/v1/nodes/", status=403)
    actions.add_taint("n1", TO_BE_DELETED)
    actions.set_unschedulable("n1", True)
    stored = fake_kube.get("nodes", "n1")["spec"]
    assert stored["taints"] == [{"key": "other", "effect": "NoExecute"}, TO_BE_DELETED.to_k8s()]
    assert stored["unschedulable"] is True
    assert node_requests(fake_kube) == [
        ("patch", 403),
        ("get", 200),
        ("update", 200),
        ("get", 200),
        ("update", 200),
    ]


def test_taint_update_retries_on_conflict(fake_kube, actions):
    fake_kube.create(bare_node("n1"))
    fake_kube.add_fault(method="PUT", path="/api/v1/nodes/n1", status=409, times=2)
    actions.add_taint("n1", TO_BE_DELETED)
    assert taints_of(fake_kube, "n1") == [TO_BE_DELETED.to_k8s()]
    assert [r.status for r in fake_kube.requests if r.verb == "update"] == [409, 409, 200]


def test_taint_update_gives_up_after_retries(fake_kube):
    fake_kube.create(bare_node("n1"))
    fake_kube.add_fault(method="PUT", path="/api/v1/nodes/n1", status=409)
    actions = KubeClusterActions(fake_kube.api_client(), conflict_retries=3)
    with pytest.raises(ConflictRetriesExhaustedError, match="node n1"):
        actions.add_taint("n1", TO_BE_DELETED)


def test_concurrent_change_is_not_lost(fake_kube, actions):
    """A label added between our read and write survives: the write conflicts and is redone."""
    fake_kube.create(bare_node("n1"))
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
    # One request each, as CA's cordon goes with its taint in one update.
    assert node_requests(fake_kube) == [("patch", 200), ("patch", 200)]


def test_taint_and_cordon_is_one_request(fake_kube, actions):
    """As CA's `MarkToBeDeleted`, one write taints and cordons a node to delete."""
    fake_kube.create(node("n1", [{"key": "kwok-provider", "value": "true", "effect": "NoSchedule"}]))
    actions.add_taint_and_cordon("n1", TO_BE_DELETED)
    spec = fake_kube.get("nodes", "n1")["spec"]
    assert spec["taints"][-1] == TO_BE_DELETED.to_k8s()
    assert spec["unschedulable"] is True
    assert node_requests(fake_kube) == [("patch", 200)]


def test_taint_and_cordon_of_a_node_without_taints(fake_kube, actions):
    fake_kube.create(bare_node("n1"))
    actions.add_taint_and_cordon("n1", TO_BE_DELETED)
    spec = fake_kube.get("nodes", "n1")["spec"]
    assert spec["taints"] == [TO_BE_DELETED.to_k8s()]
    assert spec["unschedulable"] is True


def test_uncordon_of_a_schedulable_node_writes_nothing(fake_kube, actions):
    fake_kube.create(node("n1"))
    actions.set_unschedulable("n1", False)
    assert "unschedulable" not in fake_kube.get("nodes", "n1")["spec"]
    assert not [r for r in fake_kube.requests if r.verb == "update"]


def test_cordon_keeps_a_taint_added_meanwhile(fake_kube, actions):
    """The cordon is applied by the server to the node as it is: the rest of the node
    (a taint another writer just added) is left as it is."""
    fake_kube.create(node("n1"))
    fake_kube.patch("nodes", "n1", {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}})
    actions.set_unschedulable("n1", True)
    spec = fake_kube.get("nodes", "n1")["spec"]
    assert spec["unschedulable"] is True
    assert spec["taints"] == [{"key": "b", "effect": "NoExecute"}]


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
