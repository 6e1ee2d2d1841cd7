"""KubeRuntime wires the flags to the Kubernetes edge."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from clusterscaler.commands.runtime import KubeRuntime
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.loop.decisions import (
    ClusterHealth,
    LoopResult,
    NodeCounts,
    NodeGroupStatus,
    ScaleUpDecision,
    ScaleUpResult,
    ScaleUpStatus,
)
from clusterscaler.model import Taint, parse_pod
from clusterscaler.report import events as ev
from clusterscaler.report.events import ObjectRef
from kubernetes.client import CoreV1Api


def options(tmp_path, fake_kube, **changes):
    base = dataclasses.replace(
        AutoscalingOptions(),
        kubeconfig=str(fake_kube.kubeconfig(tmp_path / "kubeconfig")),
        namespace="kube-system",
        kube_client_qps=200.0,
        kube_client_burst=100,
        leader_elect_lease_duration=timedelta(seconds=3),
        leader_elect_renew_deadline=timedelta(seconds=2),
        leader_elect_retry_period=timedelta(seconds=0.2),
    )
    return dataclasses.replace(base, **changes)


@pytest.fixture
def started():
    """Builds runtimes as `KubeRuntime.from_options` does and stops them after the test: a
    runtime left running keeps its event writer retrying against the stopped server."""
    runtimes = []

    def build(*args, **kwargs):
        runtime = KubeRuntime.from_options(*args, **kwargs)
        runtimes.append(runtime)
        return runtime

    yield build
    for runtime in runtimes:
        runtime.stop()


def loop_result() -> LoopResult:
    return LoopResult(
        time=datetime.now(UTC),
        health=ClusterHealth(True, NodeCounts(total=1, ready=1)),
        node_groups=(
            NodeGroupStatus(
                "ng", 0, 3, 2, NodeCounts(total=1, ready=1), 1, True, scale_up_in_progress=True
            ),
        ),
        scale_up=ScaleUpResult(
            status=ScaleUpStatus.SUCCESSFUL,
            decisions=(ScaleUpDecision("ng", 1, 1, pods=("default/web",)),),
        ),
    )


def test_runtime_elects_syncs_and_reports(fake_kube, tmp_path):
    runtime = KubeRuntime.from_options(options(tmp_path, fake_kube), identity="me", serve=False)
    runtime.start()
    try:
        assert runtime.wait_until_ready(10)
        assert runtime.may_act()
        assert (
            fake_kube.get("leases", "cluster-autoscaler", "kube-system")["spec"]["holderIdentity"]
            == "me"
        )
        initializing = fake_kube.get("configmaps", "cluster-autoscaler-status", "kube-system")
        assert yaml.safe_load(initializing["data"]["status"])["autoscalerStatus"] == "Initializing"
        runtime.source.snapshot()
        runtime.report(loop_result())
        status = yaml.safe_load(
            fake_kube.get("configmaps", "cluster-autoscaler-status", "kube-system")["data"][
                "status"
            ]
        )
        assert status["autoscalerStatus"] == "Running"
        assert status["nodeGroups"][0]["scaleUp"]["status"] == "InProgress"
        assert runtime.recorder.sink.flush(10)  # events are written in the background
        reasons = {(e["involvedObject"]["kind"], e["reason"]) for e in fake_kube.list("events")}
        assert reasons >= {("ConfigMap", "ScaledUpGroup"), ("Pod", "TriggeredScaleUp")}
        cm_event = next(e for e in fake_kube.list("events") if e["reason"] == "ScaledUpGroup")
        assert cm_event["metadata"]["namespace"] == "kube-system"
        assert (
            b'cluster_autoscaler_scaled_up_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name=""} 1.0'
            in runtime.metrics.render()
        )
        assert runtime.health.check()[0]
    finally:
        runtime.stop()
    assert (
        fake_kube.get("leases", "cluster-autoscaler", "kube-system")["spec"]["holderIdentity"] == ""
    )
    assert not runtime.may_act()


def test_standby_does_not_act_until_leader_releases(fake_kube, tmp_path):
    first = KubeRuntime.from_options(options(tmp_path, fake_kube), identity="first", serve=False)
    second = KubeRuntime.from_options(options(tmp_path, fake_kube), identity="second", serve=False)
    first.start()
    try:
        assert first.wait_until_ready(10)
        second.start()
        assert not second.wait_until_ready(0.8)
        assert not second.may_act()
        first.stop()
        assert second.wait_until_ready(10)
        assert second.may_act()
    finally:
        first.stop()
        second.stop()


def test_dry_run_runtime_never_changes_the_cluster(fake_kube, tmp_path, started):
    fake_kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}})
    fake_kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        }
    )
    runtime = started(
        options(tmp_path, fake_kube, dry_run=True, leader_elect=False), serve=False
    )
    runtime.actions.add_taint("n1", Taint("ToBeDeletedByClusterAutoscaler", "1"))
    runtime.actions.evict(parse_pod(fake_kube.get("pods", "p", "default")), None)
    runtime.report(loop_result())
    assert fake_kube.get("nodes", "n1")["spec"] == {}
    assert fake_kube.get("pods", "p", "default") is not None
    assert runtime.recorder.sink.flush(10)  # events are written in the background
    messages = [e["message"] for e in fake_kube.list("events")]
    assert messages and all(m.startswith("[dry-run] ") for m in messages)
    assert fake_kube.get("configmaps", "cluster-autoscaler-status", "kube-system") is not None


def test_without_status_configmap_flag_nothing_is_written(fake_kube, tmp_path, started):
    runtime = started(
        options(tmp_path, fake_kube, write_status_configmap=False, leader_elect=False), serve=False
    )
    runtime.report(loop_result())
    assert fake_kube.get("configmaps", "cluster-autoscaler-status", "kube-system") is None


def test_initializing_status_is_written_once_while_polling_for_readiness(fake_kube, tmp_path):
    runtime = KubeRuntime.from_options(
        options(tmp_path, fake_kube, leader_elect=False), serve=False
    )
    fault = fake_kube.add_fault(path="/api/v1/nodes", status=503, times=1)
    runtime.start()
    try:
        while not runtime.wait_until_ready(0.05):
            pass
        assert fault.hits == 1
    finally:
        runtime.stop()
    writes = [
        r
        for r in fake_kube.requests
        if r.resource == "configmaps" and r.verb in ("create", "update")
    ]
    assert len(writes) == 1


def test_the_lease_is_not_held_up_by_the_throttled_caches(fake_kube, tmp_path):
    """As CA, leader election has a client of its own: with --kube-client-qps so low that
    the caches' lists queue for seconds, the Lease is still taken (and renewed) at once."""
    runtime = KubeRuntime.from_options(
        options(tmp_path, fake_kube, kube_client_qps=5.0, kube_client_burst=1),
        identity="me",
        serve=False,
    )
    runtime.start()
    try:
        assert runtime.elector is not None
        # The 20-odd caches need 4 s of tokens to list once.
        assert runtime.elector.wait_for_leadership(0.8)
        assert not runtime.source.has_synced
    finally:
        runtime.stop()


def test_the_cloud_provider_is_not_held_up_by_the_throttled_caches(fake_kube, tmp_path):
    """As CA's providers, the cloud provider gets a client of its own: with
    --kube-client-qps so low that the caches' lists queue for seconds, a provider's call
    (kwok deletes a node) goes at once, and its calls take no tokens of the loop's."""
    fake_kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    runtime = KubeRuntime.from_options(
        options(tmp_path, fake_kube, kube_client_qps=5.0, kube_client_burst=1),
        identity="me",
        serve=False,
    )
    assert runtime.provider_api is not runtime.api_client
    runtime.start()
    try:
        # The 20-odd caches need 4 s of tokens to list once.
        started = time.monotonic()
        CoreV1Api(runtime.provider_api).delete_node("n1", _preload_content=False)
        assert time.monotonic() - started < 0.8
        assert not runtime.source.has_synced
        assert fake_kube.get("nodes", "n1") is None
    finally:
        runtime.stop()


def pod_messages(fake_kube) -> list[str]:
    return sorted(e["message"] for e in fake_kube.list("events", "default"))


def test_runtime_writes_one_event_per_reason_and_object_every_five_minutes(fake_kube, tmp_path, started):
    runtime = started(
        options(tmp_path, fake_kube, leader_elect=False), serve=False
    )
    # Events go through a client of their own, on the loop's spare tokens.
    assert runtime.recorder.sink.sink.core.api_client is not runtime.api_client
    pod = ObjectRef.pod("default", "web")
    runtime.recorder.normal(pod, ev.NOT_TRIGGER_SCALE_UP, "first")
    runtime.recorder.normal(pod, ev.NOT_TRIGGER_SCALE_UP, "second")
    runtime.recorder.normal(pod, ev.TRIGGERED_SCALE_UP, "third")
    assert runtime.recorder.sink.flush(10)
    assert pod_messages(fake_kube) == ["first", "third"]


def test_runtime_recording_duplicates_uses_client_go_defaults(fake_kube, tmp_path, started):
    runtime = started(
        options(tmp_path, fake_kube, leader_elect=False, record_duplicated_events=True),
        serve=False,
    )
    pod = ObjectRef.pod("default", "web")
    runtime.recorder.normal(pod, ev.NOT_TRIGGER_SCALE_UP, "first")
    runtime.recorder.normal(pod, ev.NOT_TRIGGER_SCALE_UP, "second")
    runtime.recorder.normal(pod, ev.NOT_TRIGGER_SCALE_UP, "second")
    assert runtime.recorder.sink.flush(10)
    events = fake_kube.list("events", "default")
    assert sorted((e["message"], e["count"]) for e in events) == [("first", 1), ("second", 2)]


def test_the_main_duration_counts_the_status_configmap_write_as_ca_does(fake_kube, tmp_path, started):
    """CA observes function_duration_seconds{function="main"} around RunOnce, whose
    deferred write of the status ConfigMap is part of it."""
    runtime = started(
        options(tmp_path, fake_kube, leader_elect=False), serve=False
    )
    fake_kube.add_fault(method="PUT", path="/api/v1/namespaces/kube-system/configmaps",
                        delay=0.3)
    fake_kube.add_fault(method="POST", path="/api/v1/namespaces/kube-system/configmaps",
                        delay=0.3)
    result = dataclasses.replace(loop_result(), duration=timedelta(seconds=0.1))
    runtime.report(result)
    assert fake_kube.get("configmaps", "cluster-autoscaler-status", "kube-system") is not None
    main = runtime.metrics.function_duration_seconds.labels(function="main")
    observed = main._sum.get()  # the one observation
    assert 0.1 + 0.3 <= observed < 0.1 + 0.3 + 2.0, observed


def test_the_clients_of_one_start_share_one_reading_of_the_kubeconfig(
    fake_kube, tmp_path, monkeypatch, started
):
    """The loop's, the Lease's and the cloud provider's clients are configured from one
    reading of the kubeconfig: a file rewritten while the autoscaler starts (a rotated
    credential, a moved server) cannot leave them talking to different servers."""
    import clusterscaler.kube.client as kube_client

    opts = options(tmp_path, fake_kube, kube_client_qps=5.0, kube_client_burst=1)
    load = kube_client.k8s_config.load_kube_config

    def load_then_rewrite(*args, **kwargs):
        load(*args, **kwargs)
        path = Path(opts.kubeconfig)
        moved = yaml.safe_load(path.read_text())
        moved["clusters"][0]["cluster"]["server"] = "https://192.0.2.1:6443"
        path.write_text(yaml.safe_dump(moved))

    monkeypatch.setattr(kube_client.k8s_config, "load_kube_config", load_then_rewrite)
    runtime = started(opts, identity="me", serve=False)
    assert runtime.elector is not None
    clients = [runtime.api_client, runtime.elector.api.api_client, runtime.provider_api]
    assert len({id(c) for c in clients}) == 3
    assert {c.configuration.host for c in clients} == {fake_kube.url}
