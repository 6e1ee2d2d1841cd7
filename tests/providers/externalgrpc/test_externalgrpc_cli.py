"""`clusterscaler run --cloud-provider=externalgrpc` as a process, against the fake Kubernetes
API and a provider service of ours over mutual TLS: a group at zero grows for pending pods
(its template node from `NodeGroupTemplateNodeInfo`) and shrinks back through
`NodeGroupDeleteNodes`; the service's `Cleanup` is called when the process stops. A bad
cloud-config stops the start with a message naming the key.

The test plays kubelet: a Node registers for every instance of the service's groups, and
goes away when its instance does.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from clusterscaler.simulator.builders import make_node
from clusterscaler.testing.cliprocess import ClusterscalerProcess, clusterscaler_command
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import node_json, pod_json
from clusterscaler_externalgrpc import protocol
from externalgrpc_fakes import FakeService, Served, make_pki, serve
from externalgrpckit import write_config

TEMPLATE = make_node("pool-template", "4", "16Gi", labels={"node.kubernetes.io/instance-type": "c4"})


def sync_nodes(kube: FakeKubeServer, service: FakeService) -> None:
    with service.lock:
        instances = {i.id for g in service.groups.values() for i in g.instances}
        for group in service.groups.values():
            for inst in group.instances:
                inst.state = protocol.STATE_RUNNING
    nodes = {n["spec"].get("providerID"): n["metadata"]["name"] for n in kube.list("nodes")}
    for provider_id in sorted(instances - set(nodes)):
        name = provider_id.replace("fake://", "").replace("/", "-")
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        kube.create(node_json(name, provider_id=provider_id, labels=dict(TEMPLATE.labels),
                              allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
                              created=now))
    for provider_id, name in nodes.items():
        if provider_id not in instances:
            kube.delete("nodes", name)


@pytest.fixture
def tls_served(tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    pki = make_pki(tmp_path)
    running = serve(FakeService(), pki.server_credentials())
    config = write_config(tmp_path, {
        "address": f"localhost:{running.address.rsplit(':', 1)[1]}",
        "cert": str(pki.client_cert), "key": str(pki.client_key), "cacert": str(pki.ca),
        "grpc_timeout": "3s",
    })
    yield running, Path(config)
    running.server.stop(grace=None)


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[FakeKubeServer]:
    with FakeKubeServer() as server:
        for namespace in ("default", "kube-system"):
            server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        server.create({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "rs-web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
        })
        server.kubeconfig(tmp_path / "kubeconfig")
        yield server


def test_run_scales_a_group_from_zero_and_back_over_tls(
    kube: FakeKubeServer, tls_served: tuple[Served, Path], tmp_path: Path
) -> None:
    served, cloud_config = tls_served
    service = served.service
    service.add_group("pool", 0, 3, template=TEMPLATE)
    kube.create(pod_json("web-1", cpu="3"))
    kube.create(pod_json("web-2", cpu="3"))
    args = [
        "run", "--cloud-provider=externalgrpc", f"--kubeconfig={tmp_path / 'kubeconfig'}",
        f"--cloud-config={cloud_config}", "--leader-elect=false", "--scan-interval=1s",
        "--address=127.0.0.1:0", "--scale-down-delay-after-add=0s",
        "--scale-down-unneeded-time=1s", "--node-delete-delay-after-taint=0s", "--v=4",
    ]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with ClusterscalerProcess(args, log=tmp_path / "clusterscaler.log", env=env, stop_timeout=20) as run:
        run.wait_for("the scale-up from zero", lambda: service.groups["pool"].target == 2, 30)
        sync_nodes(kube, service)
        assert len(kube.list("nodes")) == 2
        for name in ("web-1", "web-2"):
            kube.delete("pods", name, "default")
        run.wait_for(
            "the scale-down to zero",
            lambda: service.groups["pool"].target == 0 and not kube.list("nodes"),
            60, tick=lambda: sync_nodes(kube, service),
        )
    output = run.output()
    assert run.returncode == 0, output[-3000:]
    assert "externalgrpc_provider_ready" in output
    (increase, *_) = service.requests_of("NodeGroupIncreaseSize")
    assert (increase.id, increase.delta) == ("pool", 2)
    assert service.count("NodeGroupDeleteNodes") >= 1
    assert service.count("Cleanup") == 1
    status = kube.get("configmaps", "cluster-autoscaler-status", "kube-system")
    assert status is not None
    groups = {g["name"]: g for g in yaml.safe_load(status["data"]["status"])["nodeGroups"]}
    assert "pool" in groups


def test_a_bad_cloud_config_stops_the_start_naming_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"address": "provider", "grpc_timeout": "5s"})

    result = subprocess.run(
        [*clusterscaler_command(), "--cloud-provider=externalgrpc", f"--cloud-config={config}",
         f"--kubeconfig={tmp_path / 'missing-kubeconfig'}"],
        capture_output=True, text=True, timeout=120, check=False,
    )

    assert result.returncode != 0
    assert "externalgrpc provider" in result.stderr + result.stdout
    assert "address: expected host:port or [host]:port" in result.stderr + result.stdout
