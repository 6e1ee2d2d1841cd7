"""The unschedulable pod signal (--frequent-loops-enabled): the pod cache of
`KubeClusterSource` against the fake API server says when a pod newly becomes
unschedulable, once per pod, and not for pods the first list already held."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.testing.fakekube import FakeKubeServer
from test_kube_source import eventually

UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
QUIET = 0.5  # long enough for a watch event to reach the cache


def pending(name: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": list(conditions)},
    }


@pytest.fixture
def source(fake_kube: FakeKubeServer) -> Iterator[KubeClusterSource]:
    fake_kube.create(pending("before-start", UNSCHEDULABLE))
    with KubeClusterSource(fake_kube.api_client()) as source:
        assert source.wait_for_sync(20)
        yield source


def cached(source: KubeClusterSource, name: str) -> Any:
    return source.informers["pods"].get(f"default/{name}")


def test_a_new_unschedulable_pod_signals_once(
    fake_kube: FakeKubeServer, source: KubeClusterSource
) -> None:
    pods = source.unschedulable_pods
    # The pod the first list held does not signal: the first loop sees it.
    assert not pods.wait(QUIET)

    fake_kube.create(pending("web", UNSCHEDULABLE))
    assert pods.wait(10)
    # Spent: the same pod, updated and still unschedulable, does not signal again.
    fake_kube.patch("pods", "web", {"metadata": {"labels": {"x": "y"}}}, "default")
    eventually(lambda: cached(source, "web").labels == {"x": "y"})
    assert not pods.take()


def test_a_pod_signals_when_the_scheduler_marks_it_unschedulable(
    fake_kube: FakeKubeServer, source: KubeClusterSource
) -> None:
    pods = source.unschedulable_pods
    fake_kube.create(pending("web"))
    eventually(lambda: cached(source, "web") is not None)
    assert not pods.take()
    fake_kube.patch("pods", "web", {"status": {"conditions": [UNSCHEDULABLE]}}, "default")
    assert pods.wait(10)


@pytest.mark.parametrize(
    "patch",
    [
        {"spec": {"nodeName": "n1"}},
        {"status": {"phase": "Failed"}},
        {"status": {"conditions": [{**UNSCHEDULABLE, "reason": "SchedulingGated"}]}},
    ],
    ids=["bound", "finished", "gated"],
)
def test_pods_not_waiting_for_a_node_do_not_signal(
    fake_kube: FakeKubeServer, source: KubeClusterSource, patch: dict[str, Any]
) -> None:
    pods = source.unschedulable_pods
    obj = pending("web", UNSCHEDULABLE)
    for part, fields in patch.items():
        obj[part] = {**obj[part], **fields}
    fake_kube.create(obj)
    eventually(lambda: cached(source, "web") is not None)
    assert not pods.wait(QUIET)


def test_a_storm_of_pods_is_one_signal(
    fake_kube: FakeKubeServer, source: KubeClusterSource
) -> None:
    pods = source.unschedulable_pods
    before = pods.signals
    for i in range(20):
        fake_kube.create(pending(f"web-{i}", UNSCHEDULABLE))
    eventually(lambda: pods.signals == before + 20)
    assert pods.take()
    assert not pods.take()


def test_a_pod_created_again_signals_again(
    fake_kube: FakeKubeServer, source: KubeClusterSource
) -> None:
    pods = source.unschedulable_pods
    fake_kube.create(pending("web", UNSCHEDULABLE))
    assert pods.wait(10)
    fake_kube.delete("pods", "web", "default")
    eventually(lambda: cached(source, "web") is None)
    fake_kube.create(pending("web", UNSCHEDULABLE))
    assert pods.wait(10)


def test_a_relist_signals_only_pods_not_seen_before(
    fake_kube: FakeKubeServer, source: KubeClusterSource
) -> None:
    pods = source.unschedulable_pods
    informer = source.informers["pods"]
    fake_kube.create(pending("web", UNSCHEDULABLE))
    assert pods.wait(10)
    relists = informer.relists
    # The history is gone past the pod cache's resourceVersion: it resumes its watch with
    # 410 Gone and lists again.
    fake_kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    fake_kube.compact()
    fake_kube.drop_watches()
    eventually(lambda: informer.relists > relists)
    assert not pods.take()


def test_interrupt_ends_a_wait_at_once(source: KubeClusterSource) -> None:
    pods = source.unschedulable_pods
    pods.interrupt()
    assert not pods.wait(600)


def test_a_pod_that_became_unschedulable_while_the_watch_was_down_signals_on_relist(
    fake_kube: FakeKubeServer, source: KubeClusterSource
) -> None:
    pods = source.unschedulable_pods
    informer = source.informers["pods"]
    # The pod watch fails; meanwhile a pod appears and the history is compacted past it.
    fault = fake_kube.add_fault(method="GET", path="^/api/v1/pods", status=500, watch=True)
    fake_kube.drop_watches()
    eventually(lambda: bool(informer.stale_reason()))
    fake_kube.create(pending("web", UNSCHEDULABLE))
    fake_kube.compact()
    relists = informer.relists
    fake_kube.remove_fault(fault)
    eventually(lambda: informer.relists > relists)
    assert cached(source, "web") is not None
    assert pods.wait(10)
