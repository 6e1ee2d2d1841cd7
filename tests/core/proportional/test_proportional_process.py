"""`clusterscaler proportional` as a process, as it runs in a pod: flags, kubeconfig,
health endpoints, SIGTERM and --max-sync-failures exit codes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from clusterscaler.testing.fakekube import FakeKubeServer

NS = "dns"
RUN = "import sys; from clusterscaler.commands.cli import main; sys.exit(main(sys.argv[1:]))"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def seed(kube: FakeKubeServer, nodes: int) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for i in range(nodes):
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {
                    "allocatable": {"cpu": "2"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "coredns", "namespace": NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"k8s-app": "dns"}}},
        }
    )


def start(kube: FakeKubeServer, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    argv = [
        sys.executable,
        "-c",
        RUN,
        "proportional",
        f"--kubeconfig={kube.kubeconfig(tmp_path / 'kubeconfig')}",
        f"--namespace={NS}",
        "--configmap=dns-autoscaler",
        "--target=deployment/coredns",
        "--poll-period-seconds=1",
        f"--address=127.0.0.1:{port}",
        "--logtostderr=true",
        "--v=2",
        *extra,
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, f"http://127.0.0.1:{port}"


def wait_for(condition: Any, proc: subprocess.Popen[str], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _, err = proc.communicate(timeout=5)
            raise AssertionError(f"{what}: process exited {proc.returncode}; stderr:\n{err}")
        time.sleep(0.1)


def test_runs_creates_configmap_scales_serves_health_and_stops_on_sigterm(tmp_path):
    with FakeKubeServer() as kube:
        seed(kube, nodes=3)
        proc, base = start(
            kube, tmp_path, '--default-params={"linear": {"nodesPerReplica": 1, "min": 2}}'
        )
        try:

            def scaled() -> bool:
                obj = kube.get("deployments", "coredns", NS)
                return obj is not None and obj["spec"]["replicas"] == 3

            wait_for(scaled, proc, "scaling coredns to 3")
            wait_for(lambda: get(f"{base}/last-poll")[0] == 200, proc, "/last-poll ok")
            assert get(f"{base}/healthz") == (200, "ok\n")
            configmap = kube.get("configmaps", "dns-autoscaler", NS)
            assert configmap is not None
            assert json.loads(configmap["data"]["linear"]) == {"nodesPerReplica": 1, "min": 2}

            # A broken ConfigMap shows on /last-poll and leaves the target alone.
            configmap["data"] = {"linear": '{"nodesPerReplica": -1}'}
            kube.update(configmap)
            wait_for(lambda: get(f"{base}/last-poll")[0] == 500, proc, "/last-poll failing")
            status, body = get(f"{base}/last-poll")
            assert status == 500
            assert "linear.nodesPerReplica" in body
            assert kube.get("deployments", "coredns", NS)["spec"]["replicas"] == 3  # type: ignore[index]
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=15)
        assert proc.returncode == 0, err
        assert '"proportional_scale"' in err
        assert 'target="deployment/coredns"' in err


def test_exits_1_after_max_sync_failures(tmp_path):
    with FakeKubeServer() as kube:
        seed(kube, nodes=1)
        started = time.monotonic()
        proc, _ = start(kube, tmp_path, "--max-sync-failures=2")
        try:
            _, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=5)
        assert proc.returncode == 1
        assert time.monotonic() - started < 20
        assert '"proportional_giving_up"' in err
        assert "not found and --default-params is not set" in err
        assert kube.get("deployments", "coredns", NS)["spec"]["replicas"] == 1  # type: ignore[index]
