"""Informer health that cannot lie, against the fake API server.

A watch must stream watch events: anything else, or a stream that ends at once without
one, is a failure with a reason and a backoff, after which the cache is relisted. A cache
that is not watching and whose last list or event is older than its bound is stale, says
why, and is current again as soon as a watch is open.
"""

from __future__ import annotations

import pytest
from clusterscaler.kube.actions import KubeClusterActions
from clusterscaler.kube.source import KubeClusterSource, StaleCacheError
from test_kube_source import eventually, node, node_informer, pod


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_cache_is_stale_while_watches_fail_and_current_once_one_is_open(fake_kube):
    fake_kube.create(node("n1"))
    clock = Clock()
    informer = node_informer(fake_kube, stale_after=30.0, clock=clock)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: fake_kube.open_watches == 1 and informer.watching)
        clock.now += 3600
        assert informer.stale_reason() == ""  # an open watch keeps it current
        fault = fake_kube.add_fault(watch=True, status=500, message="etcd unavailable")
        fake_kube.drop_watches()
        eventually(lambda: "HTTP 500" in informer.last_error)
        # Stale at once, not after `stale_after`: changes made while it retries are missing.
        reason = informer.stale_reason()
        assert reason.startswith("retrying after a failure (HTTP 500"), reason
        fake_kube.remove_fault(fault)
        eventually(lambda: informer.stale_reason() == "")
    finally:
        informer.stop()


def test_watch_that_ends_at_once_without_events_is_a_failure(fake_kube):
    fake_kube.create(node("n1"))
    clock = Clock()  # frozen: every watch "ends at once"
    informer = node_informer(fake_kube, clock=clock)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: fake_kube.open_watches == 1 and informer.watching)
        fake_kube.drop_watches(clean=True)
        eventually(lambda: informer.relists >= 2)
        assert informer.last_error == "watch: the watch ended at once without any event"
        assert informer.watch_restarts == 0
    finally:
        informer.stop()


def test_cache_between_two_healthy_watches_stays_current_within_its_bound(fake_kube):
    fake_kube.create(node("n1"))
    clock = Clock()
    informer = node_informer(fake_kube, stale_after=30.0, clock=clock)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: fake_kube.open_watches == 1 and informer.watching)
        informer.stop()  # not watching, nothing failed: as between two watches
        clock.now += 29
        assert informer.stale_reason() == ""
        clock.now += 2
        assert informer.stale_reason().startswith("last list or watch event 31s ago")
    finally:
        informer.stop()


def test_watch_that_ends_cleanly_after_a_while_is_resumed_without_failure(fake_kube):
    fake_kube.create(node("n1"))
    clock = Clock()
    informer = node_informer(fake_kube, clock=clock)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: fake_kube.open_watches == 1 and informer.watching)
        clock.now += 300  # the server's watch timeout
        fake_kube.drop_watches(clean=True)
        eventually(lambda: informer.watch_restarts == 1 and fake_kube.open_watches == 1)
        assert informer.last_error == "" and informer.relists == 1
        fake_kube.create(node("n2"))
        eventually(lambda: {n.name for n in informer.items()} == {"n1", "n2"})
    finally:
        informer.stop()


def test_event_of_unknown_type_is_a_failure_and_the_cache_relists(fake_kube):
    fake_kube.create(node("n1"))
    informer = node_informer(fake_kube)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        eventually(lambda: fake_kube.open_watches == 1 and informer.watching)
        fake_kube.send_raw_watch_event("nodes", "SOMETIMES", node("n1"))
        eventually(lambda: informer.relists >= 2)
        assert informer.last_error == "watch: a watch event of unknown type 'SOMETIMES'"
        fake_kube.create(node("n2"))
        eventually(lambda: {n.name for n in informer.items()} == {"n1", "n2"})
    finally:
        informer.stop()


def test_stale_pod_cache_refuses_the_pods_of_a_node_and_is_named(fake_kube):
    fake_kube.create(node("n1"))
    fake_kube.create(pod("a", node_name="n1"))
    with KubeClusterSource(fake_kube.api_client(), stale_after=0.05) as source:
        assert source.wait_for_sync(5)
        eventually(
            lambda: (
                fake_kube.open_watches == len(source.informers)
                and all(i.watching for i in source.informers.values())
            )
        )
        assert source.stale_caches() == ()
        assert [p.key for p in source.pods_on_node("n1")] == ["default/a"]
        fault = fake_kube.add_fault(path="/api/v1/pods", status=503)
        fake_kube.drop_watches()

        def pods_stale() -> str:
            return next((c for c in source.stale_caches() if c.startswith("pods: ")), "")

        eventually(lambda: "HTTP 503" in pods_stale())
        with pytest.raises(StaleCacheError, match="the pod cache is stale"):
            source.pods_on_node("n1")
        fake_kube.remove_fault(fault)
        eventually(lambda: source.stale_caches() == ())
        assert [p.key for p in source.pods_on_node("n1")] == ["default/a"]


def test_registered_instances_reads_the_nodes_afresh_page_by_page(fake_kube):
    for i in range(3):
        n = node(f"n{i}")
        n["spec"]["providerID"] = f"aws:///us-east-1a/i-{i}"
        fake_kube.create(n)
    actions = KubeClusterActions(fake_kube.api_client(), dry_run=True)
    wanted = {"aws:///us-east-1a/i-1", "aws:///us-east-1a/i-2", "aws:///us-east-1a/i-9"}
    assert actions.registered_instances(wanted) == wanted - {"aws:///us-east-1a/i-9"}
    lists = [r for r in fake_kube.requests if r.verb == "list" and r.resource == "nodes"]
    assert len(lists) == 1
    assert actions.registered_instances(set()) == set()
    fake_kube.add_fault(method="GET", path="/api/v1/nodes", status=500)
    with pytest.raises(Exception, match="500"):
        actions.registered_instances(wanted)


def test_read_pods_on_node_asks_the_api_server_by_node_name(fake_kube):
    fake_kube.create(node("n1"))
    fake_kube.create(pod("a", node_name="n1"))
    fake_kube.create(pod("b", node_name="n2"))
    fake_kube.create(pod("c", namespace="other", node_name="n1"))
    actions = KubeClusterActions(fake_kube.api_client(), dry_run=True)
    assert sorted(p.key for p in actions.read_pods_on_node("n1")) == ["default/a", "other/c"]
    (request,) = [r for r in fake_kube.requests if r.verb == "list" and r.resource == "pods"]
    assert request.query.get("fieldSelector") == "spec.nodeName=n1"


def test_read_node_is_a_fresh_get_and_none_when_gone(fake_kube):
    fake_kube.create(node("n1"))
    actions = KubeClusterActions(fake_kube.api_client(), dry_run=True)
    read = actions.read_node("n1")
    assert read is not None and read.name == "n1"
    assert actions.read_node("gone") is None
    gets = [r for r in fake_kube.requests if r.verb == "get" and r.resource == "nodes"]
    assert [r.name for r in gets] == ["n1", "gone"]
