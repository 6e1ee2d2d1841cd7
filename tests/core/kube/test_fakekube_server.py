"""The fake API server, exercised through the official kubernetes client."""

from __future__ import annotations

import threading
import time

import pytest
import urllib3
from clusterscaler.testing.fakekube import (
    FakeKubeServer,
    cluster_api_resources,
    openshift_machine_api_resources,
)
from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException


def node(name: str, labels: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    node_name: str = "",
    phase: str = "Running",
    labels: dict[str, str] | None = None,
    ready: bool = True,
) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "x"}]},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


@pytest.fixture
def core(fake_kube_client) -> client.CoreV1Api:
    return client.CoreV1Api(fake_kube_client)


def status_of(exc: pytest.ExceptionInfo[ApiException]) -> int:
    return int(exc.value.status)


# --------------------------------------------------------------------------- CRUD


def test_create_returns_201_with_resource_version_and_uid(fake_kube, core):
    created = core.create_node(node("n1"))
    assert created.metadata.resource_version
    assert created.metadata.uid
    assert fake_kube.requests[-1].status == 201
    stored = fake_kube.get("nodes", "n1")
    assert stored["metadata"]["resourceVersion"] == created.metadata.resource_version


def test_create_existing_name_conflicts_with_already_exists(fake_kube, core):
    fake_kube.create(node("n1"))
    with pytest.raises(ApiException) as exc:
        core.create_node(node("n1"))
    assert status_of(exc) == 409
    assert "AlreadyExists" in exc.value.body


def test_update_with_stale_resource_version_conflicts(fake_kube, core):
    fake_kube.create(node("n1"))
    first = core.read_node("n1")
    stale = core.read_node("n1")
    first.spec.unschedulable = True
    updated = core.replace_node("n1", first)
    assert int(updated.metadata.resource_version) > int(stale.metadata.resource_version)
    stale.metadata.labels = {"x": "y"}
    with pytest.raises(ApiException) as exc:
        core.replace_node("n1", stale)
    assert status_of(exc) == 409
    assert fake_kube.get("nodes", "n1")["spec"]["unschedulable"] is True


def test_read_missing_object_is_404(core):
    with pytest.raises(ApiException) as exc:
        core.read_node("ghost")
    assert status_of(exc) == 404


def test_list_carries_resource_version_and_items_in_name_order(fake_kube, core):
    for name in ("b", "a", "c"):
        fake_kube.create(node(name))
    result = core.list_node()
    assert [n.metadata.name for n in result.items] == ["a", "b", "c"]
    assert int(result.metadata.resource_version) == fake_kube.resource_version


def test_namespaced_list_is_scoped_and_all_namespaces_sees_all(fake_kube, core):
    fake_kube.create(pod("p1", namespace="a"))
    fake_kube.create(pod("p2", namespace="b"))
    assert [p.metadata.name for p in core.list_namespaced_pod("a").items] == ["p1"]
    assert {p.metadata.name for p in core.list_pod_for_all_namespaces().items} == {"p1", "p2"}


def test_pagination_with_limit_and_continue(fake_kube, core):
    for i in range(5):
        fake_kube.create(node(f"n{i}"))
    page = core.list_node(limit=2)
    names = [n.metadata.name for n in page.items]
    assert page.metadata.remaining_item_count == 3
    while page.metadata._continue:
        page = core.list_node(limit=2, _continue=page.metadata._continue)
        names += [n.metadata.name for n in page.items]
    assert names == [f"n{i}" for i in range(5)]


def test_delete_returns_object_and_removes_it(fake_kube, core):
    fake_kube.create(node("n1"))
    core.delete_node("n1")
    assert fake_kube.get("nodes", "n1") is None


def test_delete_with_finalizer_marks_deletion_until_finalizer_removed(fake_kube):
    custom = client.CustomObjectsApi(fake_kube.api_client())
    fake_kube.register_resource(openshift_machine_api_resources()[1])
    fake_kube.create(
        {
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": "Machine",
            "metadata": {"name": "m1", "namespace": "openshift-machine-api", "finalizers": ["f"]},
        }
    )
    custom.delete_namespaced_custom_object(
        "machine.openshift.io", "v1beta1", "openshift-machine-api", "machines", "m1"
    )
    marked = fake_kube.get("machines", "m1", "openshift-machine-api")
    assert marked["metadata"]["deletionTimestamp"]
    custom.patch_namespaced_custom_object(
        "machine.openshift.io",
        "v1beta1",
        "openshift-machine-api",
        "machines",
        "m1",
        {"metadata": {"finalizers": None}},
    )
    assert fake_kube.get("machines", "m1", "openshift-machine-api") is None


def test_delete_precondition_on_resource_version(fake_kube, core):
    fake_kube.create(node("n1"))
    with pytest.raises(ApiException) as exc:
        core.delete_node(
            "n1",
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1")),
        )
    assert status_of(exc) == 409
    assert fake_kube.get("nodes", "n1") is not None


# --------------------------------------------------------------------------- selectors


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("pool=a", ["n1", "n2"]),
        ("pool==a,zone=z1", ["n1"]),
        ("pool!=a", ["n3", "n4"]),
        ("pool in (a,b)", ["n1", "n2", "n3"]),
        ("pool notin (a)", ["n3", "n4"]),
        ("zone", ["n1", "n3"]),
        ("!zone", ["n2", "n4"]),
    ],
    ids=[
        "equals",
        "double-equals-and",
        "not-equals-includes-missing",
        "in",
        "notin",
        "exists",
        "not-exists",
    ],
)
def test_label_selectors(fake_kube, core, selector, expected):
    fake_kube.create(node("n1", {"pool": "a", "zone": "z1"}))
    fake_kube.create(node("n2", {"pool": "a"}))
    fake_kube.create(node("n3", {"pool": "b", "zone": "z2"}))
    fake_kube.create(node("n4", {}))
    assert [n.metadata.name for n in core.list_node(label_selector=selector).items] == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.nodeName=n1", ["p1", "p3"]),
        ("spec.nodeName=", ["p4"]),
        ("status.phase!=Succeeded,spec.nodeName=n1", ["p1"]),
        ("status.phase=Running", ["p1", "p2"]),
        ("metadata.name=p2", ["p2"]),
        ("metadata.namespace=other", ["p2"]),
    ],
    ids=["node-name", "unscheduled", "phase-and-node", "phase", "name", "namespace"],
)
def test_field_selectors(fake_kube, core, selector, expected):
    fake_kube.create(pod("p1", node_name="n1"))
    fake_kube.create(pod("p2", namespace="other", node_name="n2"))
    fake_kube.create(pod("p3", node_name="n1", phase="Succeeded"))
    fake_kube.create(pod("p4", phase="Pending"))
    found = core.list_pod_for_all_namespaces(field_selector=selector).items
    assert sorted(p.metadata.name for p in found) == expected


def test_malformed_label_selector_is_400(core):
    with pytest.raises(ApiException) as exc:
        core.list_node(label_selector="a in (b")
    assert status_of(exc) == 400


# --------------------------------------------------------------------------- patch


def test_strategic_merge_patch_merges_taints_by_key(fake_kube, core):
    n = node("n1")
    n["spec"] = {"taints": [{"key": "a", "value": "1", "effect": "NoSchedule"}]}
    fake_kube.create(n)
    core.patch_node("n1", {"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}})
    assert [t["key"] for t in fake_kube.get("nodes", "n1")["spec"]["taints"]] == ["a", "b"]
    core.patch_node("n1", {"spec": {"taints": [{"key": "a", "$patch": "delete"}]}})
    assert [t["key"] for t in fake_kube.get("nodes", "n1")["spec"]["taints"]] == ["b"]


def test_merge_patch_replaces_lists(fake_kube, core):
    n = node("n1")
    n["spec"] = {"taints": [{"key": "a", "effect": "NoSchedule"}]}
    fake_kube.create(n)
    core.patch_node(
        "n1",
        {"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}},
        _content_type="application/merge-patch+json",
    )
    assert [t["key"] for t in fake_kube.get("nodes", "n1")["spec"]["taints"]] == ["b"]


def test_json_patch_with_test_on_resource_version(fake_kube, core):
    fake_kube.create(node("n1"))
    rv = fake_kube.get("nodes", "n1")["metadata"]["resourceVersion"]
    core.patch_node(
        "n1",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/spec", "value": {"unschedulable": True}},
        ],
    )
    assert fake_kube.get("nodes", "n1")["spec"]["unschedulable"] is True
    with pytest.raises(ApiException) as exc:
        core.patch_node("n1", [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}])
    assert status_of(exc) == 422


def test_patch_carrying_stale_resource_version_conflicts(fake_kube, core):
    fake_kube.create(node("n1"))
    with pytest.raises(ApiException) as exc:
        core.patch_node("n1", {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}})
    assert status_of(exc) == 409


def test_strategic_merge_patch_on_custom_resource_is_415(fake_kube):
    fake_kube.register_resource(openshift_machine_api_resources()[1])
    fake_kube.create(
        {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": {"name": "m"}}
    )
    api = fake_kube.api_client()
    with pytest.raises(ApiException) as exc:
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            "machine.openshift.io",
            "v1beta1",
            "default",
            "machines",
            "m",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert status_of(exc) == 415


def test_main_resource_write_keeps_status_and_status_subresource_keeps_spec(fake_kube, core):
    fake_kube.create(pod("p1", node_name="n1"))
    core.patch_namespaced_pod(
        "p1", "default", {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}}
    )
    stored = fake_kube.get("pods", "p1", "default")
    assert stored["status"]["phase"] == "Running"
    assert stored["metadata"]["labels"] == {"a": "b"}
    core.patch_namespaced_pod_status(
        "p1", "default", {"status": {"phase": "Failed"}, "spec": {"nodeName": "x"}}
    )
    stored = fake_kube.get("pods", "p1", "default")
    assert stored["status"]["phase"] == "Failed"
    assert stored["spec"]["nodeName"] == "n1"


# --------------------------------------------------------------------------- eviction


def pdb(name: str, selector: dict, **spec) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": selector, **spec},
    }


def evict(core: client.CoreV1Api, name: str, namespace: str = "default") -> None:
    core.create_namespaced_pod_eviction(
        name,
        namespace,
        client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace)),
    )


def test_eviction_without_pdb_deletes_pod(fake_kube, core):
    fake_kube.create(pod("p1"))
    evict(core, "p1")
    assert fake_kube.requests[-1].status == 201
    assert fake_kube.get("pods", "p1", "default") is None


def test_eviction_answers_429_while_pdb_forbids_and_succeeds_once_allowed(fake_kube, core):
    for i in range(2):
        fake_kube.create(pod(f"p{i}", labels={"app": "web"}))
    fake_kube.create(pdb("web", {"matchLabels": {"app": "web"}}, minAvailable=1))
    assert fake_kube.get("pdb", "web", "default")["status"]["disruptionsAllowed"] == 1
    evict(core, "p0")
    assert fake_kube.get("pods", "p0", "default") is None
    assert fake_kube.get("pdb", "web", "default")["status"]["disruptionsAllowed"] == 0
    with pytest.raises(ApiException) as exc:
        evict(core, "p1")
    assert status_of(exc) == 429
    assert "disruption budget" in exc.value.body
    assert fake_kube.get("pods", "p1", "default") is not None
    fake_kube.create(pod("p2", labels={"app": "web"}))
    evict(core, "p1")
    assert fake_kube.get("pods", "p1", "default") is None


def test_pdb_counts_only_ready_running_pods(fake_kube, core):
    fake_kube.create(pod("p0", labels={"app": "web"}))
    fake_kube.create(pod("p1", labels={"app": "web"}, ready=False))
    fake_kube.create(pdb("web", {"matchLabels": {"app": "web"}}, maxUnavailable=1))
    status = fake_kube.get("pdb", "web", "default")["status"]
    assert (status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"]) == (
        1,
        1,
        0,
    )
    with pytest.raises(ApiException) as exc:
        evict(core, "p0")
    assert status_of(exc) == 429


def test_eviction_of_pending_pod_ignores_pdb(fake_kube, core):
    fake_kube.create(pod("p0", labels={"app": "web"}, phase="Pending"))
    fake_kube.create(pdb("web", {"matchLabels": {"app": "web"}}, minAvailable="100%"))
    evict(core, "p0")
    assert fake_kube.get("pods", "p0", "default") is None


def test_eviction_with_two_matching_pdbs_is_500(fake_kube, core):
    fake_kube.create(pod("p0", labels={"app": "web"}))
    fake_kube.create(pdb("a", {"matchLabels": {"app": "web"}}, maxUnavailable=1))
    fake_kube.create(pdb("b", {}, maxUnavailable=1))
    with pytest.raises(ApiException) as exc:
        evict(core, "p0")
    assert status_of(exc) == 500


# --------------------------------------------------------------------------- scale


def test_scale_subresource_of_deployment(fake_kube, fake_kube_client):
    apps = client.AppsV1Api(fake_kube_client)
    fake_kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": 2},
        }
    )
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (2, 2, "app=web")
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 5}})
    assert fake_kube.get("deployments", "web", "default")["spec"]["replicas"] == 5
    scale = apps.read_namespaced_deployment_scale("web", "default")
    scale.spec.replicas = 3
    apps.replace_namespaced_deployment_scale("web", "default", scale)
    assert fake_kube.get("deployments", "web", "default")["spec"]["replicas"] == 3
    scale.spec.replicas = 4  # still carries the resourceVersion read before the last write
    with pytest.raises(ApiException) as exc:
        apps.replace_namespaced_deployment_scale("web", "default", scale)
    assert status_of(exc) == 409


@pytest.mark.parametrize(
    ("rtypes", "group", "version", "plural", "selector_path"),
    [
        (
            openshift_machine_api_resources(),
            "machine.openshift.io",
            "v1beta1",
            "machinesets",
            "labelSelector",
        ),
        (cluster_api_resources(), "cluster.x-k8s.io", "v1beta1", "machinesets", "selector"),
        (cluster_api_resources(), "cluster.x-k8s.io", "v1beta1", "machinedeployments", "selector"),
    ],
    ids=["openshift-machineset", "capi-machineset", "capi-machinedeployment"],
)
def test_scale_subresource_of_custom_resources(
    fake_kube, rtypes, group, version, plural, selector_path
):
    for rtype in rtypes:
        fake_kube.register_resource(rtype)
    kind = next(t.kind for t in rtypes if t.plural == plural)
    fake_kube.create(
        {
            "apiVersion": f"{group}/{version}",
            "kind": kind,
            "metadata": {"name": "ms", "namespace": "ns"},
            "spec": {"replicas": 1},
            "status": {"replicas": 1, selector_path: "pool=a"},
        }
    )
    custom = client.CustomObjectsApi(fake_kube.api_client())
    scale = custom.get_namespaced_custom_object_scale(group, version, "ns", plural, "ms")
    assert scale["spec"]["replicas"] == 1
    assert scale["status"]["selector"] == "pool=a"
    custom.patch_namespaced_custom_object_scale(
        group, version, "ns", plural, "ms", {"spec": {"replicas": 4}}
    )
    assert fake_kube.get(f"{plural}.{group}", "ms", "ns")["spec"]["replicas"] == 4


def test_scale_rejects_negative_replicas(fake_kube, fake_kube_client):
    fake_kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "rs", "namespace": "default"},
            "spec": {"replicas": 1},
        }
    )
    with pytest.raises(ApiException) as exc:
        client.AppsV1Api(fake_kube_client).patch_namespaced_replica_set_scale(
            "rs", "default", {"spec": {"replicas": -1}}
        )
    assert status_of(exc) == 422


# --------------------------------------------------------------------------- leases


def test_lease_optimistic_concurrency(fake_kube, fake_kube_client):
    coordination = client.CoordinationV1Api(fake_kube_client)
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="ca", namespace="kube-system"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
    )
    coordination.create_namespaced_lease("kube-system", lease)
    seen_by_a = coordination.read_namespaced_lease("ca", "kube-system")
    seen_by_b = coordination.read_namespaced_lease("ca", "kube-system")
    seen_by_b.spec.holder_identity = "b"
    coordination.replace_namespaced_lease("ca", "kube-system", seen_by_b)
    seen_by_a.spec.lease_transitions = 1
    with pytest.raises(ApiException) as exc:
        coordination.replace_namespaced_lease("ca", "kube-system", seen_by_a)
    assert status_of(exc) == 409
    assert fake_kube.get("leases", "ca", "kube-system")["spec"]["holderIdentity"] == "b"


# --------------------------------------------------------------------------- watch


def collect(stream, count: int) -> list[tuple[str, str]]:
    out = []
    for event in stream:
        out.append((event["type"], event["object"]["metadata"]["name"]))
        if len(out) == count:
            break
    return out


def test_watch_from_resource_version_streams_changes(fake_kube, core):
    fake_kube.create(node("old"))
    rv = core.list_node().metadata.resource_version

    def mutate() -> None:
        time.sleep(0.1)
        fake_kube.create(node("n1"))
        fake_kube.patch("nodes", "n1", {"metadata": {"labels": {"a": "b"}}})
        fake_kube.delete("nodes", "n1")

    threading.Thread(target=mutate).start()
    w = watch.Watch()
    events = collect(
        w.stream(core.list_node, resource_version=rv, timeout_seconds=5, deserialize=False), 3
    )
    w.stop()
    assert events == [("ADDED", "n1"), ("MODIFIED", "n1"), ("DELETED", "n1")]


def test_watch_without_resource_version_starts_with_current_state(fake_kube, core):
    fake_kube.create(node("a"))
    fake_kube.create(node("b"))
    w = watch.Watch()
    events = collect(w.stream(core.list_node, timeout_seconds=5, deserialize=False), 2)
    w.stop()
    assert events == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_selector_turns_relabels_into_added_and_deleted(fake_kube, core):
    fake_kube.create(node("n1", {"pool": "a"}))
    rv = str(fake_kube.resource_version)

    def mutate() -> None:
        time.sleep(0.1)
        fake_kube.patch("nodes", "n1", {"metadata": {"labels": {"pool": "b"}}})
        fake_kube.patch("nodes", "n1", {"metadata": {"labels": {"pool": "a"}}})

    threading.Thread(target=mutate).start()
    w = watch.Watch()
    events = collect(
        w.stream(
            core.list_node,
            label_selector="pool=a",
            resource_version=rv,
            timeout_seconds=5,
            deserialize=False,
        ),
        2,
    )
    w.stop()
    assert events == [("DELETED", "n1"), ("ADDED", "n1")]


def test_watch_sends_bookmarks_when_asked(core, fake_kube):
    fake_kube.bookmark_interval = 0.1
    fake_kube.create(node("a"))
    rv = str(fake_kube.resource_version)
    response = core.list_node(
        watch=True,
        allow_watch_bookmarks=True,
        resource_version=rv,
        timeout_seconds=1,
        _preload_content=False,
    )
    lines = [line for line in response.read().decode().splitlines() if line]
    assert lines
    assert all('"BOOKMARK"' in line for line in lines)
    assert f'"resourceVersion": "{rv}"' in lines[0]


def test_watch_from_compacted_resource_version_gets_410(fake_kube, core):
    fake_kube.create(node("a"))
    old_rv = str(fake_kube.resource_version)
    fake_kube.create(node("b"))
    fake_kube.compact()
    w = watch.Watch()
    with pytest.raises(ApiException) as exc:
        list(w.stream(core.list_node, resource_version=old_rv, timeout_seconds=2))
    assert status_of(exc) == 410


def test_list_exact_resource_version_that_is_gone_is_410(fake_kube, core):
    fake_kube.create(node("a"))
    with pytest.raises(ApiException) as exc:
        core.list_node(resource_version="1", resource_version_match="Exact")
    assert status_of(exc) == 410


def test_history_limit_expires_old_resource_versions(core):
    with FakeKubeServer(history_limit=2) as kube:
        api = client.CoreV1Api(kube.api_client())
        start = str(kube.resource_version)
        for i in range(6):
            kube.create(node(f"n{i}"))
        response = api.list_node(
            watch=True, resource_version=start, timeout_seconds=1, _preload_content=False
        )
        body = response.read().decode()
        assert '"code": 410' in body


# --------------------------------------------------------------------------- faults


def test_fault_injection_fails_matching_requests_then_recovers(fake_kube, core):
    fake_kube.create(node("a"))
    fault = fake_kube.add_fault(method="GET", path=r"/api/v1/nodes$", status=503, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as exc:
            core.list_node()
        assert status_of(exc) == 503
    assert [n.metadata.name for n in core.list_node().items] == ["a"]
    assert fault.hits == 2
    core.read_node("a")  # other paths were never affected


def test_slow_responses(fake_kube, core):
    fake_kube.add_fault(path="/api/v1/nodes", delay=0.3)
    started = time.monotonic()
    core.list_node()
    assert time.monotonic() - started >= 0.3
    fake_kube.clear_faults()
    # urllib3 retries reads that time out, so every attempt must be slow.
    fake_kube.add_fault(path="/api/v1/nodes", delay=0.5)
    # MaxRetryError or ReadTimeoutError, depending on the urllib3 version.
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.list_node(_request_timeout=0.2)


def test_drop_watches_resets_open_streams(fake_kube, core):
    response = core.list_node(watch=True, _preload_content=False, timeout_seconds=10)
    deadline = time.monotonic() + 2
    while fake_kube.open_watches == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake_kube.drop_watches() == 1
    with pytest.raises((urllib3.exceptions.ProtocolError, urllib3.exceptions.HTTPError)):
        response.read()


def test_clean_drop_ends_stream(fake_kube, core):
    fake_kube.create(node("a"))
    response = core.list_node(watch=True, _preload_content=False, timeout_seconds=10)
    deadline = time.monotonic() + 2
    while fake_kube.open_watches == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    fake_kube.drop_watches(clean=True)
    body = response.read().decode()
    assert body.count('"ADDED"') == 1


# --------------------------------------------------------------------------- discovery and config


def test_dynamic_client_discovers_builtin_and_custom_resources(fake_kube):
    for rtype in cluster_api_resources(("v1beta1",)):
        fake_kube.register_resource(rtype)
    dyn = dynamic.DynamicClient(fake_kube.api_client())
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert deployments.namespaced
    machinesets = dyn.resources.get(group="cluster.x-k8s.io", kind="MachineSet")
    assert machinesets.group_version == "cluster.x-k8s.io/v1beta1"
    fake_kube.create(
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineSet",
            "metadata": {"name": "ms", "namespace": "ns"},
        }
    )
    assert [item.metadata.name for item in machinesets.get(namespace="ns").items] == ["ms"]


def test_apis_group_list_includes_registered_groups(fake_kube, fake_kube_client):
    fake_kube.register_resource(openshift_machine_api_resources()[0])
    groups = client.ApisApi(fake_kube_client).get_api_versions().groups
    names = {g.name for g in groups}
    assert {
        "apps",
        "policy",
        "coordination.k8s.io",
        "events.k8s.io",
        "storage.k8s.io",
        "machine.openshift.io",
    } <= names
    resources = client.CoreV1Api(fake_kube_client).get_api_resources().resources
    assert {"pods", "pods/eviction", "nodes", "replicationcontrollers/scale"} <= {
        r.name for r in resources
    }


def test_kubeconfig_file_configures_the_client(fake_kube, tmp_path):
    path = fake_kube.kubeconfig(tmp_path / "kubeconfig")
    fake_kube.create(node("n1"))
    api_client = config.new_client_from_config(config_file=str(path))
    assert [n.metadata.name for n in client.CoreV1Api(api_client).list_node().items] == ["n1"]


def test_requests_are_recorded_with_rbac_attributes(fake_kube, core):
    fake_kube.create(pod("p1"))
    evict(core, "p1")
    core.list_node(watch=False)
    recorded = [(r.verb, r.group, r.resource, r.subresource) for r in fake_kube.requests]
    assert ("create", "", "pods", "eviction") in recorded
    assert ("list", "", "nodes", "") in recorded


def test_direct_access_resolves_ambiguous_names(fake_kube):
    for rtype in (*openshift_machine_api_resources(), *cluster_api_resources()):
        fake_kube.register_resource(rtype)
    with pytest.raises(KeyError, match="ambiguous"):
        fake_kube.list("machinesets")
    assert fake_kube.list("machinesets.cluster.x-k8s.io") == []
    assert fake_kube.list("events") == []  # core events, as kubectl resolves it


# --------------------------------------------------------------------------- more of the API


def bind(core: client.CoreV1Api, pod_name: str, node_name: str) -> None:
    # The server answers with a Status, which the client cannot read as a V1Binding: read raw.
    core.create_namespaced_pod_binding(
        pod_name,
        "default",
        client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod_name),
            target=client.V1ObjectReference(kind="Node", name=node_name),
        ),
        _preload_content=False,
    ).read()


def test_binding_subresource_assigns_the_node_once(fake_kube, core):
    fake_kube.create(pod("p1", phase="Pending"))
    bind(core, "p1", "n1")
    stored = fake_kube.get("pods", "p1", "default")
    assert stored["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"} in stored["status"]["conditions"]
    with pytest.raises(ApiException) as exc:
        bind(core, "p1", "n2")
    assert status_of(exc) == 409


def test_dry_run_writes_nothing(fake_kube, core):
    core.create_node(node("n1"), dry_run="All")
    assert fake_kube.get("nodes", "n1") is None
    fake_kube.create(node("n1"))
    core.delete_node("n1", dry_run="All")
    assert fake_kube.get("nodes", "n1") is not None


def test_generate_name_creates_unique_names(fake_kube, core):
    names = {
        core.create_namespaced_config_map(
            "default", {"metadata": {"generateName": "cm-"}, "data": {}}
        ).metadata.name
        for _ in range(3)
    }
    assert len(names) == 3
    assert all(n.startswith("cm-") for n in names)


def test_server_side_apply_creates_then_merges(fake_kube, core):
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg"},
        "data": {"a": "1"},
    }
    core.patch_namespaced_config_map(
        "cfg", "default", body, field_manager="t", _content_type="application/apply-patch+yaml"
    )
    assert fake_kube.requests[-1].status == 201
    assert fake_kube.get("configmaps", "cfg", "default")["data"] == {"a": "1"}
    core.patch_namespaced_config_map(
        "cfg",
        "default",
        {**body, "data": {"b": "2"}},
        field_manager="t",
        _content_type="application/apply-patch+yaml",
    )
    assert fake_kube.get("configmaps", "cfg", "default")["data"] == {"a": "1", "b": "2"}


def test_namespaced_watch_sees_only_its_namespace(fake_kube, core):
    rv = str(fake_kube.resource_version)

    def mutate() -> None:
        time.sleep(0.1)
        fake_kube.create(pod("elsewhere", namespace="other"))
        fake_kube.create(pod("here", namespace="mine"))

    threading.Thread(target=mutate).start()
    w = watch.Watch()
    events = collect(
        w.stream(
            core.list_namespaced_pod,
            "mine",
            resource_version=rv,
            timeout_seconds=5,
            deserialize=False,
        ),
        1,
    )
    w.stop()
    assert events == [("ADDED", "here")]


def test_send_initial_events_ends_with_marked_bookmark(fake_kube, core):
    fake_kube.create(node("a"))
    response = core.list_node(
        watch=True,
        allow_watch_bookmarks=True,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        timeout_seconds=1,
        _preload_content=False,
    )
    lines = [line for line in response.read().decode().splitlines() if line]
    assert '"ADDED"' in lines[0]
    assert '"BOOKMARK"' in lines[1]
    assert "k8s.io/initial-events-end" in lines[1]


def test_custom_resource_update_requires_resource_version(fake_kube):
    for rtype in cluster_api_resources():
        fake_kube.register_resource(rtype)
    fake_kube.create(
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineSet",
            "metadata": {"name": "ms", "namespace": "ns"},
        }
    )
    custom = client.CustomObjectsApi(fake_kube.api_client())
    body = {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "MachineSet",
        "metadata": {"name": "ms"},
        "spec": {"replicas": 2},
    }
    with pytest.raises(ApiException) as exc:
        custom.replace_namespaced_custom_object(
            "cluster.x-k8s.io", "v1beta1", "ns", "machinesets", "ms", body
        )
    assert status_of(exc) == 422
    body["metadata"]["resourceVersion"] = fake_kube.get("machinesets.cluster.x-k8s.io", "ms", "ns")[
        "metadata"
    ]["resourceVersion"]
    custom.replace_namespaced_custom_object(
        "cluster.x-k8s.io", "v1beta1", "ns", "machinesets", "ms", body
    )
    assert fake_kube.get("machinesets.cluster.x-k8s.io", "ms", "ns")["spec"]["replicas"] == 2


def test_pods_terminate_for_a_while_when_asked():
    with FakeKubeServer(pod_termination_seconds=0.3) as kube:
        kube.create(pod("p1", node_name="n1"))
        kube.create(pod("p2", node_name="n1"))
        core = client.CoreV1Api(kube.api_client())
        evict(core, "p1")
        core.delete_namespaced_pod("p2", "default")
        for name in ("p1", "p2"):
            assert kube.get("pods", name, "default")["metadata"]["deletionTimestamp"]
        deadline = time.monotonic() + 3
        while (
            kube.get("pods", "p1", "default") or kube.get("pods", "p2", "default")
        ) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert kube.get("pods", "p1", "default") is None
        assert kube.get("pods", "p2", "default") is None
