"""List+watch caches and KubeClusterSource against the fake API server."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from clusterscaler.kube.informer import Backoff, Informer, ListerSpec
from clusterscaler.kube.source import CacheNotSyncedError, KubeClusterSource
from clusterscaler.model import parse_node
from kubernetes import client


def node(name: str, cpu: str = "2") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"pool": "a"}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "110"}},
    }


def pod(name: str, namespace: str = "default", node_name: str = "") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}],
        },
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def eventually(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def node_informer(fake_kube, **kwargs) -> Informer:
    api = client.CoreV1Api(fake_kube.api_client())
    return Informer(
        ListerSpec("nodes", "Node", api.list_node, parse_node),
        backoff=Backoff(initial=0.05, maximum=0.2),
        **kwargs,
    )


def test_snapshot_refuses_before_sync_and_parses_every_kind_after(fake_kube):
    fake_kube.create(node("n1"))
    fake_kube.create(pod("p1", node_name="n1"))
    fake_kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "rs", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}}},
        }
    )
    fake_kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "cluster-autoscaler-priority-expander",
                "namespace": "kube-system",
            },
            "data": {"priorities": "10:\n- .*"},
        }
    )
    fake_kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "elsewhere", "namespace": "default"},
        }
    )
    source = KubeClusterSource(fake_kube.api_client(), namespace="kube-system")
    with pytest.raises(CacheNotSyncedError, match="nodes"):
        source.snapshot()
    with source:
        assert source.wait_for_sync(5)
        snapshot = source.snapshot()
    assert [n.name for n in snapshot.nodes] == ["n1"]
    assert snapshot.nodes[0].allocatable.get("cpu") == 2000
    assert [(p.name, p.node_name) for p in snapshot.pods] == [("p1", "n1")]
    assert [(c.kind, c.name, c.replicas) for c in snapshot.controllers] == [("ReplicaSet", "rs", 2)]
    assert [c.name for c in snapshot.config_maps] == ["cluster-autoscaler-priority-expander"]


def test_source_lists_with_raw_json_not_client_models(fake_kube):
    fake_kube.create(node("n1"))
    with KubeClusterSource(fake_kube.api_client(), page_size=1) as source:
        assert source.wait_for_sync(5)
    lists = [r for r in fake_kube.requests if r.verb == "list" and r.resource == "nodes"]
    assert lists and all(r.query.get("limit") == "1" for r in lists)


def test_watch_keeps_cache_current(fake_kube):
    informer = node_informer(fake_kube)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        fake_kube.create(node("n1"))
        eventually(lambda: [n.name for n in informer.items()] == ["n1"])
        fake_kube.patch("nodes", "n1", {"status": {"allocatable": {"cpu": "8"}}})
        eventually(lambda: informer.get("n1").allocatable.get("cpu") == 8000)
        fake_kube.delete("nodes", "n1")
        eventually(lambda: informer.items() == [])
    finally:
        informer.stop()


def test_paginated_list_reads_every_page(fake_kube):
    for i in range(7):
        fake_kube.create(node(f"n{i}"))
    informer = node_informer(fake_kube, page_size=3)
    informer.list_once()
    assert sorted(n.name for n in informer.items()) == [f"n{i}" for i in range(7)]
    assert informer.resource_version == str(fake_kube.resource_version)


def test_dropped_watch_resumes_from_last_resource_version_without_relist(fake_kube):
    fake_kube.create(node("n0"))
    informer = node_informer(fake_kube)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: fake_kube.open_watches == 1 and informer.watching)
        fake_kube.drop_watches()
        fake_kube.create(node("n1"))
        eventually(lambda: {n.name for n in informer.items()} == {"n0", "n1"})
        assert informer.relists == 1
        watches = [r for r in fake_kube.requests if r.verb == "watch"]
        assert len(watches) >= 2
        assert watches[-1].query["resourceVersion"] != "0"
    finally:
        informer.stop()


def test_expired_resource_version_relists(fake_kube):
    informer = node_informer(fake_kube)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: fake_kube.open_watches == 1 and informer.watching)
        # The watch falls behind: while its reconnection is held up, the server forgets
        # the history it would need to resume.
        fake_kube.add_fault(method="GET", path="/api/v1/nodes", watch=True, delay=0.5, times=1)
        fake_kube.drop_watches()
        fake_kube.create(node("late"))
        fake_kube.create(node("later"))
        fake_kube.compact()
        eventually(lambda: {n.name for n in informer.items()} == {"late", "later"})
        eventually(lambda: informer.relists >= 2)
    finally:
        informer.stop()


def test_errors_back_off_and_recover(fake_kube):
    fake_kube.create(node("n0"))
    fault = fake_kube.add_fault(method="GET", path="/api/v1/nodes", status=500, times=3)
    informer = node_informer(fake_kube)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        assert fault.hits == 3
        assert "500" in informer.last_error
        assert [n.name for n in informer.items()] == ["n0"]
    finally:
        informer.stop()


def test_malformed_object_is_skipped_not_fatal(fake_kube):
    fake_kube.create(node("good"))
    bad = node("bad")
    bad["status"]["allocatable"]["cpu"] = "lots"
    fake_kube.create(bad)
    informer = node_informer(fake_kube)
    informer.list_once()
    assert [n.name for n in informer.items()] == ["good"]
    assert informer.parse_errors == 1


def test_cache_converges_to_server_state_through_drops_compactions_and_errors(fake_kube):
    """Random writes interleaved with dropped watches, forgotten history and failing requests:
    once the dust settles the cache holds exactly what the server holds."""
    import random

    rng = random.Random(20261122)
    informer = node_informer(fake_kube, watch_timeout_seconds=2)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        names: set[str] = set()
        for step in range(150):
            roll = rng.random()
            if roll < 0.45 or not names:
                name = f"n{step}"
                fake_kube.create(node(name, cpu=str(rng.randint(1, 64))))
                names.add(name)
            elif roll < 0.75:
                name = rng.choice(sorted(names))
                fake_kube.patch(
                    "nodes", name, {"status": {"allocatable": {"cpu": str(rng.randint(1, 64))}}}
                )
            else:
                name = rng.choice(sorted(names))
                fake_kube.delete("nodes", name)
                names.discard(name)
            if step % 25 == 10:
                fake_kube.drop_watches(clean=rng.random() < 0.5)
            if step % 40 == 20:
                fake_kube.compact()
            if step == 60:
                fake_kube.add_fault(method="GET", path="/api/v1/nodes", status=503, times=2)
            if step % 10 == 0:
                time.sleep(0.02)

        def converged() -> bool:
            expected = {
                n["metadata"]["name"]: n["status"]["allocatable"]["cpu"]
                for n in fake_kube.list("nodes")
            }
            cached = {n.name: str(n.allocatable.get("cpu") // 1000) for n in informer.items()}
            return cached == expected

        eventually(converged, timeout=10)
    finally:
        informer.stop()


@pytest.mark.parametrize(
    "chunks",
    [
        [b'{"a":1}\n{"b":2}\n'],
        [b'{"a"', b":1}\n", b'{"b":2}', b"\n"],
        [b'{"a":1}\n\n{"b":2}'],
        ['{"a":1}\n', '{"b":2}\n'],
    ],
    ids=["one-chunk", "split-lines", "blank-line-and-no-final-newline", "text-chunks"],
)
def test_watch_stream_lines_are_reassembled_from_any_chunking(chunks):
    from clusterscaler.kube.informer import _lines

    class Response:
        def stream(self, amt=None, decode_content=False):
            yield from chunks

    assert list(_lines(Response())) == [b'{"a":1}', b'{"b":2}']


def test_unexpected_event_relists_instead_of_ending_the_thread(fake_kube):
    fake_kube.create(node("n0"))
    informer = node_informer(fake_kube)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: fake_kube.open_watches == 1 and informer.watching)
        fake_kube.send_raw_watch_event("nodes", "ADDED", ["not", "an", "object"])
        fake_kube.create(node("n1"))
        eventually(lambda: informer.relists >= 2)
        eventually(lambda: {n.name for n in informer.items()} == {"n0", "n1"})
        fake_kube.create(node("n2"))
        eventually(lambda: {n.name for n in informer.items()} == {"n0", "n1", "n2"})
        assert informer.last_error == "watch: ADDED event whose object is not a JSON object"
    finally:
        informer.stop()


def test_pods_on_node_follows_lists_binds_moves_and_deletes(fake_kube):
    """The actuator re-reads a tainted node's pods through `pods_on_node`: it must see a
    pod bound after the list, lose a deleted one, and never answer from a stale node."""
    fake_kube.create(node("n1"))
    fake_kube.create(node("n2"))
    fake_kube.create(pod("a", node_name="n1"))
    fake_kube.create(pod("b", node_name="n2"))
    fake_kube.create(pod("pending"))
    with KubeClusterSource(fake_kube.api_client()) as source:
        assert source.wait_for_sync(5)

        def on(name: str) -> list[str]:
            return sorted(p.key for p in source.pods_on_node(name))

        assert on("n1") == ["default/a"]
        assert on("n2") == ["default/b"]
        fake_kube.patch("pods", "pending", {"spec": {"nodeName": "n1"}}, "default")
        eventually(lambda: on("n1") == ["default/a", "default/pending"])
        fake_kube.patch("pods", "b", {"spec": {"nodeName": "n1"}}, "default")
        eventually(lambda: on("n1") == ["default/a", "default/b", "default/pending"])
        assert on("n2") == []
        fake_kube.delete("pods", "a", "default")
        eventually(lambda: on("n1") == ["default/b", "default/pending"])
        snapshot_view = sorted(p.key for p in source.snapshot().pods if p.node_name == "n1")
        assert on("n1") == snapshot_view


def test_pods_on_node_refuses_before_the_pod_cache_synced(fake_kube):
    source = KubeClusterSource(fake_kube.api_client())
    with pytest.raises(CacheNotSyncedError):
        source.pods_on_node("n1")
