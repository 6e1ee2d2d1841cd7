"""CapacityBuffers, ResourceQuotas and PodTemplates read from the fake API server; the
managed PodTemplate and the buffers' status written as CA's buffer controller writes them,
conflict-safe, never in --dry-run."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clusterscaler.kube.capacitybuffer import CapacityBufferWriter
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.loop.capacitybuffers import (
    BufferResult,
    BufferStatus,
    CapacityBufferProcessor,
)
from clusterscaler.model.provisioning import Condition
from clusterscaler.testing.fakekube import FakeKubeServer, capacity_buffer_resources

T = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
GROUP = "autoscaling.x-k8s.io"


def buffer(name: str = "spare", **spec: Any) -> dict[str, Any]:
    spec.setdefault("podTemplateRef", {"name": "spare"})
    spec.setdefault("replicas", 2)
    return {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": "web"},
        "spec": {"provisioningStrategy": "buffer.x-k8s.io/active-capacity", **spec},
    }


def template() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "spare", "namespace": "web"},
        "template": {
            "metadata": {"labels": {"app": "spare"}},
            "spec": {"containers": [
                {"name": "c", "image": "pause", "resources": {"limits": {"cpu": "1"}}}
            ]},
        },
    }


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer(resources=capacity_buffer_resources()) as server:
        yield server


def synced(server: FakeKubeServer) -> KubeClusterSource:
    source = KubeClusterSource(server.api_client(), capacity_buffers=True)
    source.start()
    assert source.wait_for_sync(20)
    return source


def reconcile(server: FakeKubeServer, writer: CapacityBufferWriter) -> tuple[BufferResult, ...]:
    """One loop's buffer step over what the server holds, and its writes."""
    source = synced(server)
    try:
        objects = source.snapshot()
    finally:
        source.stop()
    processor = CapacityBufferProcessor(controller_enabled=True, injection_enabled=True)
    processor.run(objects.capacity_buffers, objects.pod_templates, pods=objects.pods,
                  controllers=objects.controllers, quotas=objects.resource_quotas, now=T)
    results = processor.results()
    writer.write(results, T)
    return results


def get_buffer(server: FakeKubeServer, name: str = "spare") -> dict[str, Any]:
    obj = server.get("capacitybuffers", name, "web")
    assert obj is not None
    return obj


def test_buffers_quotas_and_templates_are_cached_when_enabled(kube: FakeKubeServer) -> None:
    kube.create(buffer())
    bad = buffer("bad", replicas=-1)
    kube.create(bad)
    kube.create(template())
    kube.create({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "compute", "namespace": "web"},
        "spec": {"hard": {"requests.cpu": "4"}},
        "status": {"hard": {"requests.cpu": "4"}, "used": {"requests.cpu": "1"}},
    })
    source = synced(kube)
    try:
        objects = source.snapshot()
        assert [b.key for b in objects.capacity_buffers] == ["web/spare"]
        assert [t.key for t in objects.pod_templates] == ["web/spare"]
        assert [(q.key, q.hard, q.used) for q in objects.resource_quotas] == [
            ("web/compute", (("requests.cpu", 4000),), (("requests.cpu", 1000),))
        ]
        # The bad buffer is left out, named with its field, and the others are read.
        [unreadable] = [u for u in objects.unreadable if u.kind == "CapacityBuffer"]
        assert "web/bad" in unreadable.error and "spec.replicas" in unreadable.error
    finally:
        source.stop()


def test_the_managed_template_and_the_status_are_written_once(kube: FakeKubeServer) -> None:
    kube.create(buffer())
    kube.create(template())
    writer = CapacityBufferWriter(kube.api_client(), dry_run_pods=True)
    reconcile(kube, writer)
    managed = kube.get("podtemplates", "capacitybuffer-spare-pod-template", "web")
    assert managed is not None
    assert managed["metadata"]["ownerReferences"][0]["kind"] == "CapacityBuffer"
    assert managed["metadata"]["ownerReferences"][0]["controller"] is True
    assert managed["template"]["metadata"]["labels"] == {"app": "spare"}
    status = get_buffer(kube)["status"]
    assert status["podTemplateRef"] == {"name": "capacitybuffer-spare-pod-template"}
    assert status["replicas"] == 2
    assert status["podTemplateGeneration"] == managed["metadata"]["generation"]
    assert status["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    assert {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]} == {
        "ReadyForProvisioning": ("True", "AttributesSetSuccessfully"),
        "LimitedByQuotas": ("False", "ResourceQuotasAllocated"),
        "Provisioning": ("True", "FakePodsInjected"),
    }
    # The pod was built by a server-side dry-run, which created none.
    assert [r.query.get("dryRun") for r in kube.requests
            if r.resource == "pods" and r.method == "POST"] == ["All"]
    assert kube.list("pods") == []
    version = get_buffer(kube)["metadata"]["resourceVersion"]
    writes = len([r for r in kube.requests if r.method in ("PUT", "POST")])
    reconcile(kube, writer)
    assert get_buffer(kube)["metadata"]["resourceVersion"] == version
    assert len([r for r in kube.requests if r.method in ("PUT", "POST")]) == writes


def test_without_the_pod_dry_run_requests_default_to_limits(kube: FakeKubeServer) -> None:
    kube.create(buffer())
    kube.create(template())
    reconcile(kube, CapacityBufferWriter(kube.api_client(), dry_run_pods=False))
    managed = kube.get("podtemplates", "capacitybuffer-spare-pod-template", "web")
    assert managed is not None
    [container] = managed["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "1"}
    assert not [r for r in kube.requests if r.path.endswith("/pods") and r.method == "POST"]


def test_dry_run_writes_nothing(kube: FakeKubeServer) -> None:
    kube.create(buffer())
    kube.create(template())
    reconcile(kube, CapacityBufferWriter(kube.api_client(), dry_run=True))
    assert "status" not in get_buffer(kube)
    assert [t["metadata"]["name"] for t in kube.list("podtemplates")] == ["spare"]


def test_a_conflict_is_retried_on_what_the_server_holds(kube: FakeKubeServer) -> None:
    kube.create(buffer())
    writer = CapacityBufferWriter(kube.api_client())
    status = BufferStatus(
        "spare", 2, 1, "buffer.x-k8s.io/active-capacity",
        (Condition("ReadyForProvisioning", "True", "AttributesSetSuccessfully", "ready", T),),
    )
    result = BufferResult("web", "spare", "", status, BufferStatus())
    real = writer.custom.replace_namespaced_custom_object_status
    calls = {"n": 0}

    def conflicting(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            # Someone else writes first: ours now carries a stale resourceVersion.
            current = get_buffer(kube)
            current["metadata"]["labels"] = {"touched": "yes"}
            kube.update(current)
        return real(*args, **kwargs)

    writer.custom.replace_namespaced_custom_object_status = conflicting  # type: ignore[method-assign]
    assert writer.write([result], T) == 1
    assert calls["n"] == 2
    held = get_buffer(kube)
    assert held["metadata"]["labels"] == {"touched": "yes"}
    assert held["status"]["replicas"] == 2


def test_a_buffer_deleted_meanwhile_is_skipped(kube: FakeKubeServer) -> None:
    writer = CapacityBufferWriter(kube.api_client())
    result = BufferResult("web", "gone", "", BufferStatus(replicas=1), BufferStatus())
    assert writer.write([result], T) == 0
    assert writer.failures == 0


def test_a_buffer_created_again_after_a_pass_without_it_has_its_template_built_anew(
    kube: FakeKubeServer,
) -> None:
    kube.create(buffer())
    kube.create(template())
    writer = CapacityBufferWriter(kube.api_client(), dry_run_pods=True)

    def dry_runs() -> int:
        return len([r for r in kube.requests if r.resource == "pods" and r.method == "POST"])

    reconcile(kube, writer)
    reconcile(kube, writer)
    # Unchanged since its last write: not built again.
    assert dry_runs() == 1
    kube.delete("capacitybuffers", "spare", "web")
    reconcile(kube, writer)
    kube.create(buffer())
    reconcile(kube, writer)
    # What was written for the deleted buffer is not taken for the new one.
    assert dry_runs() == 2
    status = get_buffer(kube)["status"]
    managed = kube.get("podtemplates", "capacitybuffer-spare-pod-template", "web")
    assert managed is not None
    assert status["podTemplateGeneration"] == managed["metadata"]["generation"]


def test_a_template_that_cannot_be_written_leaves_the_buffer_not_ready(
    kube: FakeKubeServer,
) -> None:
    kube.create(buffer())
    kube.create(template())
    source = synced(kube)
    try:
        objects = source.snapshot()
    finally:
        source.stop()
    processor = CapacityBufferProcessor(controller_enabled=True)
    processor.run(objects.capacity_buffers, objects.pod_templates, now=T)
    [result] = processor.results()
    errors: list[Any] = []
    writer = CapacityBufferWriter(kube.api_client(), dry_run_pods=False,
                                  on_error=errors.append)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.rest import ApiException

        raise ApiException(status=403, reason="Forbidden")

    writer.core.create_namespaced_pod_template = refuse  # type: ignore[method-assign]
    writer.write([dataclasses.replace(result)], T)
    status = get_buffer(kube)["status"]
    [ready] = [c for c in status["conditions"] if c["type"] == "ReadyForProvisioning"]
    assert (ready["status"], ready["reason"]) == ("False", "error")
    assert ready["message"].startswith(
        "Buffer not ready for provisioning: failed to create or update managed pod template"
    )
    assert "podTemplateRef" not in status and errors


def test_the_oldest_reconciliation_is_told_for_new_and_reconciled_buffers(
    kube: FakeKubeServer,
) -> None:
    kube.create(buffer())
    kube.create(template())
    writer = CapacityBufferWriter(kube.api_client())
    [result] = reconcile(kube, writer)
    assert writer.oldest_reconciliation([result], T + timedelta(minutes=1)) == (
        T + timedelta(minutes=1), T,
    )
    # A buffer its status was never written for, with no condition yet: its creation time.
    created = T - timedelta(hours=1)
    new = BufferResult("web", "fresh", "uid-fresh", BufferStatus(replicas=1), BufferStatus(),
                       reconciled=True, created=created)
    unwritten = CapacityBufferWriter(kube.api_client(), dry_run=True)
    unwritten.write([new], T)
    assert unwritten.oldest_reconciliation([new], T) == (created, T)


def test_the_metric_is_exported_with_the_controller(kube: FakeKubeServer) -> None:
    from clusterscaler.commands.runtime import KubeRuntime
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.loop.decisions import ClusterHealth, LoopResult, NodeCounts

    kube.create(buffer())
    kube.create(template())
    options = dataclasses.replace(AutoscalingOptions(), capacity_buffer_controller_enabled=True,
                                  write_status_configmap=False, leader_elect=False)
    runtime = KubeRuntime.from_options(options, api_client=kube.api_client(), serve=False)
    try:
        source = synced(kube)
        try:
            objects = source.snapshot()
        finally:
            source.stop()
        processor = CapacityBufferProcessor(controller_enabled=True)
        processor.run(objects.capacity_buffers, objects.pod_templates, now=T)
        runtime.report(LoopResult(time=T, health=ClusterHealth(True, NodeCounts(), ""),
                                  capacity_buffers=processor.results()))
        text = runtime.metrics.render().decode()
    finally:
        runtime.stop()
    name = "cluster_autoscaler_capacity_buffer_oldest_reconciliation_timestamp_seconds"
    values = {
        line.split("}")[0].split('"')[1]: float(line.split()[-1])
        for line in text.splitlines() if line.startswith(name + "{")
    }
    # Reconciled in this loop; no buffer waits for its first reconciliation.
    assert values == {"false": int(T.timestamp()), "true": int(T.timestamp())}
