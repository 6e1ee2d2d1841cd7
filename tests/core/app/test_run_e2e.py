"""The real `clusterscaler` process against a fake API server, with the `sim` provider.

A deployment's pending pods make it add nodes (Node objects appear); once the pods are gone
the nodes are deleted; the status ConfigMap, events and /metrics say so. With leader
election, only the leader acts, and killing it hands over within the lease duration.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import pod_json

CLOUD_CONFIG = {
    "nodeGroups": [
        {
            "name": "general",
            "minSize": 0,
            "maxSize": 5,
            "provisionDelay": "0s",
            "template": {
                "metadata": {"labels": {"node.kubernetes.io/instance-type": "sim.xlarge"}},
                "status": {
                    "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                },
            },
        }
    ]
}
EXECUTABLE = str(Path(sys.executable).with_name("clusterscaler"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def web_pod(index: int) -> dict[str, Any]:
    return pod_json(f"web-{index}", cpu="1500m", labels={"app": "web"})


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeKubeServer, Path]]:
    (tmp_path / "cloud.yaml").write_text(yaml.safe_dump(CLOUD_CONFIG))
    with FakeKubeServer() as kube:
        kube.kubeconfig(tmp_path / "kubeconfig")
        yield kube, tmp_path


def start(tmp_path: Path, *flags: str, log_name: str = "autoscaler.log") -> subprocess.Popen[bytes]:
    log = open(tmp_path / log_name, "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [
            EXECUTABLE,
            f"--kubeconfig={tmp_path / 'kubeconfig'}",
            "--cloud-provider=sim",
            f"--cloud-config={tmp_path / 'cloud.yaml'}",
            "--scan-interval=1s",
            "--v=4",
            *flags,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    if process.poll() is None:
        process.send_signal(sig)
    return process.wait(timeout=30)


def node_names(kube: FakeKubeServer) -> list[str]:
    return [n["metadata"]["name"] for n in kube.list("nodes")]


def test_scale_up_then_down_with_status_events_and_metrics(
    cluster: tuple[FakeKubeServer, Path],
) -> None:
    kube, tmp = cluster
    kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "rs-web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    for i in range(3):
        kube.create(web_pod(i))
    port = free_port()
    process = start(
        tmp,
        "--leader-elect=false",
        f"--address=127.0.0.1:{port}",
        "--scale-down-delay-after-add=0s",
        "--scale-down-unneeded-time=0s",
        "--node-delete-delay-after-taint=0s",
    )
    try:
        # 3 pods of 1.5 cpu on 4-cpu nodes: 2 per node, so 2 nodes.
        nodes = wait_for(lambda: len(node_names(kube)) == 2 and node_names(kube), 30, "2 nodes")
        # The scheduler binds the pods: 2 on the first node, 1 on the second.
        for i, node in enumerate([nodes[0], nodes[0], nodes[1]]):
            kube.patch(
                "pods",
                f"web-{i}",
                {
                    "spec": {"nodeName": node},
                    "status": {
                        "phase": "Running",
                        "conditions": [{"type": "PodScheduled", "status": "True"}],
                    },
                },
                "default",
            )
        # The second node is underutilized (1.5 of 4 cpu) but its pod fits nowhere else:
        # several loops later both nodes are still there, untainted for deletion.
        log = tmp / "autoscaler.log"
        loops = log.read_text().count("loop_done")
        wait_for(lambda: log.read_text().count("loop_done") >= loops + 3, 30, "three more loops")
        assert sorted(node_names(kube)) == sorted(nodes)
        for name in nodes:
            taints = (kube.get("nodes", name) or {}).get("spec", {}).get("taints") or []
            assert "ToBeDeletedByClusterAutoscaler" not in {t["key"] for t in taints}
        # The workload goes away.
        for i in range(3):
            kube.delete("pods", f"web-{i}", "default")
        wait_for(lambda: not node_names(kube), 60, f"nodes {nodes} to be removed")

        status = kube.get("configmaps", "cluster-autoscaler-status", "kube-system")
        assert status is not None
        assert "cluster-autoscaler.kubernetes.io/last-updated" in status["metadata"]["annotations"]
        document = yaml.safe_load(status["data"]["status"])
        assert document["autoscalerStatus"] == "Running"
        assert [g["name"] for g in document["nodeGroups"]] == ["general"]

        reasons = wait_for(
            lambda: {e["reason"] for e in kube.list("events")} >= {"ScaledUpGroup", "ScaleDownEmpty"}
            and {e["reason"] for e in kube.list("events")},
            20,
            "scale-up and scale-down events",
        )
        assert "TriggeredScaleUp" in reasons

        def metrics() -> str:
            url = f"http://127.0.0.1:{port}/metrics"
            return str(urllib.request.urlopen(url, timeout=5).read().decode())

        # Deletions finish in the background; the loop after a deletion finished counts it.
        text = wait_for(
            lambda: 'cluster_autoscaler_scaled_down_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="empty"} 2.0' in metrics()
            and metrics(),
            20,
            "the removed nodes to be counted",
        )
        assert 'cluster_autoscaler_scaled_up_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name=""} 2.0' in text
        health = urllib.request.urlopen(f"http://127.0.0.1:{port}/health-check", timeout=5)
        assert health.status == 200
    finally:
        code = stop(process)
    assert code == 0, (tmp / "autoscaler.log").read_text()


def lease_holder(kube: FakeKubeServer) -> str:
    lease = kube.get("leases", "cluster-autoscaler", "kube-system")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def test_leader_election_only_the_leader_acts_and_hands_over(
    cluster: tuple[FakeKubeServer, Path],
) -> None:
    kube, tmp = cluster
    flags = (
        "--leader-elect=true",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=500ms",
    )
    first = start(tmp, *flags, f"--address=127.0.0.1:{free_port()}", log_name="first.log")
    try:
        wait_for(lambda: lease_holder(kube), 20, "a leader")
        second = start(tmp, *flags, f"--address=127.0.0.1:{free_port()}", log_name="second.log")
        try:
            wait_for(lambda: "loop_done" in (tmp / "first.log").read_text(), 20, "the leader's loop")
            time.sleep(2)
            assert "loop_done" not in (tmp / "second.log").read_text(), "the follower acted"
            holder = lease_holder(kube)

            killed_at = time.monotonic()
            stop(first, signal.SIGKILL)  # no chance to release the Lease
            wait_for(
                lambda: lease_holder(kube) not in ("", holder) and lease_holder(kube),
                30,
                "the follower to take over",
            )
            # The lease expires 4s after the last renewal and the follower retries every
            # 500ms; the margin covers process scheduling on a loaded machine.
            assert time.monotonic() - killed_at < 4 + 8
            wait_for(lambda: "loop_done" in (tmp / "second.log").read_text(), 20, "the new leader's loop")
        finally:
            assert stop(second) == 0, (tmp / "second.log").read_text()
        # A leader stopped by SIGTERM releases the Lease for a quick successor.
        assert lease_holder(kube) == ""
    finally:
        stop(first, signal.SIGKILL)


def test_scheduler_config_file_changes_what_scales_up(cluster: tuple[FakeKubeServer, Path]) -> None:
    kube, tmp = cluster
    # The pods ask for an extended resource no node group has: only a scheduler that
    # ignores it (NodeResourcesFit ignoredResources) places them, so only then a node helps.
    (tmp / "scheduler.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "default-scheduler",
                        "pluginConfig": [
                            {"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/dongle"]}}
                        ],
                    }
                ],
            }
        )
    )
    kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "rs-web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    for i in range(2):
        pod = web_pod(i)
        pod["spec"]["containers"][0]["resources"]["requests"]["example.com/dongle"] = "1"
        kube.create(pod)
    process = start(
        tmp,
        "--leader-elect=false",
        f"--address=127.0.0.1:{free_port()}",
        f"--scheduler-config-file={tmp / 'scheduler.yaml'}",
    )
    try:
        # 2 pods of 1.5 cpu share one 4-cpu node once the dongle is not checked.
        wait_for(lambda: len(node_names(kube)) == 1, 30, "1 node")
    finally:
        code = stop(process)
    assert code == 0, (tmp / "autoscaler.log").read_text()
    assert "flag_has_no_effect" not in (tmp / "autoscaler.log").read_text()


def test_bad_scheduler_config_file_stops_the_start(cluster: tuple[FakeKubeServer, Path]) -> None:
    _, tmp = cluster
    (tmp / "scheduler.yaml").write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: [{plugins: {filter: {disabled: [{nme: NodePorts}]}}}]\n")
    process = start(tmp, "--leader-elect=false", f"--scheduler-config-file={tmp / 'scheduler.yaml'}")
    assert process.wait(timeout=30) == 2
    log = (tmp / "autoscaler.log").read_text()
    assert f"--scheduler-config-file {tmp / 'scheduler.yaml'}: profiles[0].plugins.filter.disabled[0].nme: expected one of the known fields name, weight" in log
