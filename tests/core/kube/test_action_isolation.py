"""One failed action fails that action only: the real loop, actions, events, status writer
and `sim` provider over HTTP against the fake API server, with faults on single requests.

The other nodes' actions still happen, the loop still reports, the failure is logged on one
line without HTTP headers or bodies and counted in errors_total with CA's type, and a node
whose deletion failed is left without our taint.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.commands.run import GuardedActions, run_loop
from clusterscaler.commands.runtime import KubeRuntime
from clusterscaler.framework.errors import ErrorType
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.kube.eventwriter import BackgroundEventSink
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.loop.decisions import LoopResult, NodeDeletion
from clusterscaler.loop.taints import TO_BE_DELETED_TAINT
from clusterscaler.plugins.sim import EMBEDDED_CONFIG_KEY, NODE_GROUP_LABEL
from clusterscaler.testing.fakekube import FakeKubeServer
from structlog.testing import capture_logs

TEMPLATE = {
    "status": {
        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
    }
}
# What an ApiException's str() carries and a log line must not.
LEAKS = ("HTTP response headers", "HTTPHeaderDict", "HTTP response body", "Content-Type")


def node_obj(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, NODE_GROUP_LABEL: group},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"providerID": f"sim://{group}/{name}"},
        "status": {
            **TEMPLATE["status"],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


class Stack:
    """`clusterscaler run`'s components, built as `run` builds them, over `fake_kube`."""

    def __init__(self, kube: FakeKubeServer, tmp_path: Path, **changes: Any) -> None:
        config = {
            "nodeGroups": [
                {"name": g, "minSize": 0, "maxSize": 3, "template": TEMPLATE}
                for g in ("blue", "green")
            ]
        }
        self.kube = kube
        self.options = dataclasses.replace(
            AutoscalingOptions(),
            kubeconfig=str(kube.kubeconfig(tmp_path / "kubeconfig")),
            namespace="kube-system",
            leader_elect=False,
            kube_client_qps=200.0,
            kube_client_burst=100,
            cloud_provider="sim",
            extra={EMBEDDED_CONFIG_KEY: config},
            node_delete_delay_after_taint=timedelta(0),
            scale_down_delay_after_add=timedelta(0),
            scan_interval=timedelta(seconds=0.2),
            **changes,
        )
        self.runtime = KubeRuntime.from_options(self.options, serve=False)
        self.runtime.start()
        assert self.runtime.wait_until_ready(10)
        registry = collect_registry(build_plugin_manager())
        provider = registry.cloud_providers["sim"].factory(
            ProviderContext(options=self.options, kube_api=self.runtime.api_client)
        )
        self.autoscaler = Autoscaler.from_registry(
            registry,
            options=self.options,
            provider=provider,
            source=self.runtime.source,
            actions=GuardedActions(self.runtime.actions, self.runtime.may_act),
        )

    def loop(self, now: datetime) -> LoopResult:
        result = self.autoscaler.run_once(now)
        self.runtime.report(result)
        return result

    def sees(self, check: Callable[[dict[str, Any]], bool], *names: str) -> None:
        """Wait until the node cache shows `check` true of each of `names`."""

        def seen() -> bool:
            nodes = {n.name: n for n in self.runtime.source.snapshot().nodes}
            return all(
                name in nodes and check({"taints": [t.key for t in nodes[name].taints]})
                for name in names
            )

        eventually(seen)

    def flush_events(self) -> None:
        sink = self.runtime.recorder.sink
        assert isinstance(sink, BackgroundEventSink)
        assert sink.flush(10)

    def errors_total(self, error_type: ErrorType) -> float:
        value = self.runtime.metrics.registry.get_sample_value(
            "cluster_autoscaler_errors_total", {"type": error_type.value}
        )
        return value or 0.0

    def stop(self) -> None:
        self.runtime.stop()


@pytest.fixture
def stack_for(fake_kube: FakeKubeServer, tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    built: list[Stack] = []

    def build(**changes: Any) -> Stack:
        stack = Stack(fake_kube, tmp_path, **changes)
        built.append(stack)
        return stack

    yield build
    for stack in built:
        stack.stop()


def taint_keys(kube: FakeKubeServer, name: str) -> list[str]:
    node = kube.get("nodes", name)
    assert node is not None, name
    return [t["key"] for t in (node.get("spec") or {}).get("taints") or []]


def lines_about(logs: list[dict[str, Any]], **match: str) -> list[dict[str, Any]]:
    """The warning and error lines whose fields include `match`."""
    return [
        e
        for e in logs
        if e["log_level"] in ("warning", "error")
        and all(e.get(k) == v for k, v in match.items())
    ]


def assert_no_leak(logs: list[dict[str, Any]]) -> None:
    for entry in logs:
        assert "exc_info" not in entry and "exception" not in entry, entry
        text = repr(entry)
        for leak in LEAKS:
            assert leak not in text, entry


def deletion(result: LoopResult, node: str) -> NodeDeletion:
    [found] = [d for d in result.scale_down.deletions if d.node == node]
    return found


def test_a_500_on_one_nodes_update_fails_that_node_only(
    fake_kube: FakeKubeServer, stack_for: Callable[..., Stack]
) -> None:
    fake_kube.create(node_obj("n1", "blue"))
    fake_kube.create(node_obj("n2", "blue"))
    stack = stack_for()
    now = datetime.now(UTC)
    first = stack.loop(now)
    # Unneeded, soft-tainted, not deleted yet (--scale-down-unneeded-time).
    assert {u.node for u in first.scale_down.unneeded} == {"n1", "n2"}
    stack.sees(lambda n: "DeletionCandidateOfClusterAutoscaler" in n["taints"], "n1", "n2")

    # The taint is appended by a JSON patch (one request); its 500 fails n1.
    fault = fake_kube.add_fault(method="PATCH", path="^/api/v1/nodes/n1$", status=500, times=1)
    with capture_logs() as logs:
        result = stack.loop(now + timedelta(minutes=11))
    stack.flush_events()

    assert fault.hits == 1
    # n2 went on: tainted, deleted through the provider.
    assert deletion(result, "n2").ok
    assert fake_kube.get("nodes", "n2") is None
    # n1 failed alone, reported and counted as an API call error, and kept no taint of ours.
    failed = deletion(result, "n1")
    assert failed.error_type is ErrorType.API_CALL
    assert "HTTP 500 Internal Server Error: injected fault" in failed.error
    assert TO_BE_DELETED_TAINT not in taint_keys(fake_kube, "n1")
    assert stack.errors_total(ErrorType.API_CALL) == 1.0
    assert stack.errors_total(ErrorType.INTERNAL) == 0.0
    # The loop reported: status ConfigMap and events.
    status = fake_kube.get("configmaps", "cluster-autoscaler-status", "kube-system")
    assert status is not None
    assert yaml.safe_load(status["data"]["status"])["autoscalerStatus"] == "Running"
    failures = [
        e["message"]
        for e in fake_kube.list("events")
        if e["reason"] == "ScaleDownFailed" and e["involvedObject"]["name"] == "n1"
    ]
    assert failures and all("HTTP response" not in m for m in failures)
    # In CA's words for a taint that could not be written.
    assert all(
        m.startswith("failed to mark the node as toBeDeleted/unschedulable: ") for m in failures
    )
    # n2's removal on the status ConfigMap, as CA records it; on the node, "nodes removed by
    # cluster autoscaler" is dropped as CA's spam filter drops it: one ScaleDown event a node
    # every 5 minutes, and "marked the node as toBeDeleted/unschedulable" came first.
    events = fake_kube.list("events")
    assert [e["message"] for e in events if e["involvedObject"]["name"] == "n2"] == [
        "marked the node as toBeDeleted/unschedulable"
    ]
    assert any(
        e["involvedObject"]["name"] == "cluster-autoscaler-status"
        and (e["reason"], e["message"]) == ("ScaleDownEmpty", "Scale-down: empty node n2 removed")
        for e in events
    )
    # One line about n1's failure: action, node, status, reason; no headers, no traceback.
    [line] = lines_about(logs, node="n1")
    assert line["event"] == "scale_down_failed"
    assert (line["action"], line["status"], line["reason"], line["error_type"]) == (
        "taint",
        500,
        "Internal Server Error",
        "apiCallError",
    )
    assert line["message"] == "injected fault"
    assert "traceback" not in line
    assert_no_leak(logs)
    assert not [e for e in logs if e["event"] == "loop_failed"]


def test_a_failed_cordon_removes_the_taint_again(
    fake_kube: FakeKubeServer, stack_for: Callable[..., Stack]
) -> None:
    fake_kube.create(node_obj("n1", "blue"))
    fake_kube.create(node_obj("n2", "blue"))
    stack = stack_for(max_bulk_soft_taint_count=0)
    now = datetime.now(UTC)
    stack.loop(now)
    # n1 has no taint (no soft taint either), so its taint is read and updated (PUT) and
    # passes; the cordon, a patch, fails.
    fake_kube.add_fault(method="PATCH", path="^/api/v1/nodes/n1$", status=503, times=1)
    with capture_logs() as logs:
        result = stack.loop(now + timedelta(minutes=11))

    failed = deletion(result, "n1")
    assert failed.error_type is ErrorType.API_CALL
    # The node is tainted and cordoned by one call of the actions (one write where it can).
    assert "tainting and cordoning failed: HTTP 503" in failed.error
    assert TO_BE_DELETED_TAINT not in taint_keys(fake_kube, "n1")
    assert not (fake_kube.get("nodes", "n1") or {}).get("spec", {}).get("unschedulable")
    assert fake_kube.get("nodes", "n2") is None
    [line] = lines_about(logs, node="n1")
    assert (line["action"], line["status"]) == ("taint", 503)
    assert_no_leak(logs)


def running_pod(name: str, node: str, cpu: str, owner: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": owner},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": owner,
                    "uid": f"rs-{owner}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "app", "image": owner, "resources": {"requests": {"cpu": cpu}}}
            ],
        },
        "status": {"phase": "Running"},
    }


def test_a_500_on_one_eviction_fails_that_drain_only(
    fake_kube: FakeKubeServer, stack_for: Callable[..., Stack]
) -> None:
    for name in ("n1", "n2", "n3"):
        fake_kube.create(node_obj(name, "blue"))
    for owner in ("web", "db"):
        fake_kube.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": owner, "namespace": "default", "uid": f"rs-{owner}"},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": owner}}},
            }
        )
    # n1's pod fits on n3, which is busy; n2 is empty.
    fake_kube.create(running_pod("web-1", "n1", "500m", "web"))
    fake_kube.create(running_pod("db-0", "n3", "3", "db"))
    # Every eviction error is retried until --max-pod-eviction-time: none here, so the
    # first refusal ends the drain.
    stack = stack_for(max_bulk_soft_taint_count=0, max_pod_eviction_time=timedelta(0))
    now = datetime.now(UTC)
    assert {u.node for u in stack.loop(now).scale_down.unneeded} == {"n1", "n2"}
    eviction = fake_kube.add_fault(
        method="POST", path="/namespaces/default/pods/web-1/eviction$", status=500
    )
    with capture_logs() as logs:
        result = stack.loop(now + timedelta(minutes=11))

    assert eviction.hits == 1
    assert deletion(result, "n2").ok and fake_kube.get("nodes", "n2") is None
    failed = deletion(result, "n1")
    assert failed.error_type is ErrorType.API_CALL
    assert "failed to evict 1 pods within --max-pod-eviction-time: pod default/web-1: HTTP 500" in (
        failed.error
    )
    n1 = fake_kube.get("nodes", "n1")
    assert n1 is not None and not n1["spec"].get("unschedulable")
    assert TO_BE_DELETED_TAINT not in taint_keys(fake_kube, "n1")
    assert fake_kube.get("pods", "web-1", "default") is not None
    assert stack.errors_total(ErrorType.API_CALL) == 1.0
    [line] = lines_about(logs, node="n1")
    assert (line["action"], line["pod"], line["status"]) == ("evict", "default/web-1", 500)
    assert_no_leak(logs)


def test_event_and_status_write_failures_do_not_fail_the_loop_and_are_counted(
    fake_kube: FakeKubeServer, stack_for: Callable[..., Stack]
) -> None:
    fake_kube.create(node_obj("n1", "blue"))
    stack = stack_for(max_bulk_soft_taint_count=0)
    now = datetime.now(UTC)
    stack.loop(now)
    events = fake_kube.add_fault(method="POST", path="/events$", status=500)
    status = fake_kube.add_fault(
        method="PUT", path="/configmaps/cluster-autoscaler-status$", status=503
    )
    with capture_logs() as logs:
        result = stack.loop(now + timedelta(minutes=11))
        stack.flush_events()

    # The loop acted: n1 was deleted.
    assert deletion(result, "n1").ok
    assert fake_kube.get("nodes", "n1") is None
    sink = stack.runtime.recorder.sink
    assert isinstance(sink, BackgroundEventSink)
    written = sink.sink
    assert events.hits >= 2  # ScaleDownEmpty on the ConfigMap, ScaleDown on the node
    assert getattr(written, "failures", None) == events.hits
    assert status.hits == 1
    assert stack.runtime.status_writer is not None
    assert stack.runtime.status_writer.failures == 1
    assert stack.errors_total(ErrorType.API_CALL) == events.hits + status.hits
    event_lines = [e for e in logs if e["event"] == "event_write_failed"]
    assert len(event_lines) == events.hits
    assert {(e["status"], e["error_type"]) for e in event_lines} == {(500, "apiCallError")}
    [status_line] = [e for e in logs if e["event"] == "status_configmap_write_failed"]
    assert (status_line["status"], status_line["configmap"]) == (
        503,
        "kube-system/cluster-autoscaler-status",
    )
    assert_no_leak(logs)

    # Once the API server answers again, the next loop's status is written.
    fake_kube.clear_faults()
    stack.loop(now + timedelta(minutes=12))
    cm = fake_kube.get("configmaps", "cluster-autoscaler-status", "kube-system")
    assert cm is not None
    assert stack.runtime.status_writer.failures == 1


def test_a_cloud_error_deleting_one_groups_node_does_not_stop_another_groups(
    fake_kube: FakeKubeServer, stack_for: Callable[..., Stack]
) -> None:
    fake_kube.create(node_obj("a1", "blue"))
    fake_kube.create(node_obj("b1", "green"))
    stack = stack_for(max_bulk_soft_taint_count=0)
    now = datetime.now(UTC)
    stack.loop(now)
    # The sim provider deletes instances by deleting their Node: a 500 there is the
    # provider's failure to delete a1's instance.
    fake_kube.add_fault(method="DELETE", path="^/api/v1/nodes/a1$", status=500)
    with capture_logs() as logs:
        result = stack.loop(now + timedelta(minutes=11))

    assert deletion(result, "b1").ok
    assert fake_kube.get("nodes", "b1") is None
    failed = deletion(result, "a1")
    assert failed.error_type is ErrorType.CLOUD_PROVIDER
    assert "node group blue" in failed.error
    # Rolled back: neither tainted nor cordoned.
    a1 = fake_kube.get("nodes", "a1")
    assert a1 is not None
    assert TO_BE_DELETED_TAINT not in taint_keys(fake_kube, "a1")
    assert not a1["spec"].get("unschedulable")
    assert stack.errors_total(ErrorType.CLOUD_PROVIDER) == 1.0
    assert stack.errors_total(ErrorType.API_CALL) == 0.0
    [line] = lines_about(logs, node="a1")
    assert (line["event"], line["action"], line["error_type"]) == (
        "scale_down_failed",
        "delete",
        "cloudProviderError",
    )
    assert_no_leak(logs)


def test_run_loop_goes_on_through_a_failing_node(
    fake_kube: FakeKubeServer, stack_for: Callable[..., Stack]
) -> None:
    """The real `run_loop`: every write to n1 fails; the loops keep coming, n2 is deleted,
    no loop fails, and n1's failures are counted by type."""
    fake_kube.create(node_obj("n1", "blue"))
    fake_kube.create(node_obj("n2", "blue"))
    stack = stack_for(scale_down_unneeded_time=timedelta(0))
    for method in ("PUT", "PATCH"):
        fake_kube.add_fault(method=method, path="^/api/v1/nodes/n1$", status=500)
    loops: list[str] = []
    exit_code: list[int] = []

    with capture_logs() as logs:
        thread = threading.Thread(
            target=lambda: exit_code.append(
                run_loop(stack.autoscaler, stack.runtime, stack.options)
            )
        )
        thread.start()
        try:

            def loops_done() -> bool:
                loops[:] = [e["event"] for e in logs if e["event"] in ("loop_done", "loop_failed")]
                return len(loops) >= 3

            eventually(loops_done, timeout=30.0)
        finally:
            stack.runtime.shutdown.set()
            thread.join(10)

    assert exit_code == [0]
    assert "loop_failed" not in loops
    assert fake_kube.get("nodes", "n2") is None
    assert fake_kube.get("nodes", "n1") is not None
    assert TO_BE_DELETED_TAINT not in taint_keys(fake_kube, "n1")
    # The soft taint and the deletion's taint of n1 failed, each once per attempt.
    n1_lines = lines_about(logs, node="n1")
    assert n1_lines and {e["error_type"] for e in n1_lines} == {"apiCallError"}
    assert stack.errors_total(ErrorType.API_CALL) >= 2
    assert stack.errors_total(ErrorType.INTERNAL) == 0.0
    assert_no_leak(logs)
