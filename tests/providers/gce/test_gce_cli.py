"""`clusterscaler --cloud-provider=gce` as a process, against the fake Kubernetes API and the
fake Compute API: a MIG at zero grows for pending pods (its template node built from the
instance template) and shrinks back to zero, with events and status; `explain` says why.

The test plays kubelet and the node lifecycle controller: a Node registers for every running
instance of the MIG, and goes away when its instance does.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from clusterscaler.testing.cliprocess import ClusterscalerProcess, clusterscaler_command
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import pod_json
from clusterscaler_gce.testing.fakecompute import FakeComputeServer
from gcekit import PROJECT, ZONE, gke_node

KUBE_ENV = (
    "AUTOSCALER_ENV_VARS: node_labels=cloud.google.com/gke-nodepool=pool-1;"
    "kube_reserved=cpu=80m,memory=1Gi;os=linux;os_distribution=cos\n"
)
MIG_ID = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{ZONE}/instanceGroups/pool"


def sync_nodes(kube: FakeKubeServer, gce: FakeComputeServer) -> None:
    """kubelet registers running instances; the lifecycle controller removes Nodes whose
    instance is gone."""
    running = set(gce.provider_ids(PROJECT, ZONE, "pool"))
    nodes = {n["spec"].get("providerID"): n["metadata"]["name"] for n in kube.list("nodes")}
    for provider_id in running - set(nodes):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        kube.create(gke_node(provider_id, pool="pool-1", created=now))
    for provider_id, name in nodes.items():
        if provider_id not in running:
            kube.delete("nodes", name)


@pytest.fixture
def clusters(gce: FakeComputeServer, cloud_config: Path, tmp_path: Path) -> Iterator[tuple[FakeKubeServer, FakeComputeServer, Path]]:
    gce.add_template(PROJECT, "pool-template", machine_type="n1-standard-4", kube_env=KUBE_ENV)
    gce.add_mig(PROJECT, ZONE, "pool", template="pool-template")
    with FakeKubeServer() as kube:
        for namespace in ("default", "kube-system"):
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube.create(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "web", "namespace": "default", "uid": "rs-web"},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
            }
        )
        kube.kubeconfig(tmp_path / "kubeconfig")
        yield kube, gce, tmp_path


def common_flags(tmp: Path, cloud_config: Path) -> list[str]:
    return [
        "--cloud-provider=gce",
        f"--kubeconfig={tmp / 'kubeconfig'}",
        f"--cloud-config={cloud_config}",
        f"--nodes=0:3:{PROJECT}/{ZONE}/pool",
        "--kube-client-qps=200",
        "--kube-client-burst=200",
    ]


def test_run_scales_a_mig_from_zero_and_back(clusters: tuple[FakeKubeServer, FakeComputeServer, Path], cloud_config: Path) -> None:
    kube, gce, tmp = clusters
    kube.create(pod_json("web-1", cpu="3"))
    kube.create(pod_json("web-2", cpu="3"))
    args = [
        "run",
        *common_flags(tmp, cloud_config),
        "--leader-elect=false",
        "--scan-interval=1s",
        "--address=127.0.0.1:0",
        "--scale-down-delay-after-add=0s",
        "--scale-down-unneeded-time=1s",
        "--node-delete-delay-after-taint=0s",
        "--gce-mig-instances-min-refresh-wait-time=0s",
        "--gce-concurrent-refreshes=2",
        "--v=4",
    ]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    with ClusterscalerProcess(args, log=tmp / "clusterscaler.log", env=env, stop_timeout=20) as run:
        # One 3-cpu pod per n1-standard-4 (3920m allocatable): two instances.
        run.wait_for("the scale-up from zero", lambda: gce.target_size(PROJECT, ZONE, "pool") == 2, 30)
        sync_nodes(kube, gce)
        assert len(kube.list("nodes")) == 2
        # The pods ran and are gone: the nodes are empty and the MIG goes back to zero.
        for name in ("web-1", "web-2"):
            kube.delete("pods", name, "default")
        run.wait_for(
            "the scale-down to zero",
            lambda: gce.target_size(PROJECT, ZONE, "pool") == 0 and not kube.list("nodes"),
            60, tick=lambda: sync_nodes(kube, gce),
        )
        run.wait_for(
            "the events", lambda: {"TriggeredScaleUp", "ScaledUpGroup", "ScaleDownEmpty"} <= {e.get("reason") for e in kube.list("events")},
            20,
        )
    output = run.output()
    assert run.returncode == 0, output[-3000:]
    assert "gce_provider_ready" in output
    assert "gce_anonymous_credentials" in output
    resizes = [r.query["size"][0] for r in gce.requests if r.path.endswith("/pool/resize")]
    assert resizes[0] == "2", resizes
    assert gce.count("POST", "/pool/deleteInstances$") >= 1
    status = kube.get("configmaps", "cluster-autoscaler-status", "kube-system")
    assert status is not None
    document = yaml.safe_load(status["data"]["status"])
    assert [g["name"] for g in document["nodeGroups"]] == [MIG_ID]
    events = kube.list("events")
    scaled_up = [e for e in events if e.get("reason") == "ScaledUpGroup"]
    assert scaled_up and MIG_ID in (scaled_up[0].get("note") or scaled_up[0].get("message") or "")


def test_explain_says_why_against_the_fakes(clusters: tuple[FakeKubeServer, FakeComputeServer, Path], cloud_config: Path) -> None:
    kube, gce, tmp = clusters
    gce.add_template(PROJECT, "big-template", machine_type="n1-standard-8", kube_env=KUBE_ENV)
    gce.add_mig(PROJECT, ZONE, "big", template="big-template")
    kube.create(pod_json("web-1", cpu="6"))
    kube.create(pod_json("huge", cpu="12"))
    proc = subprocess.run(
        [*clusterscaler_command(), "explain", *common_flags(tmp, cloud_config), f"--nodes=0:2:{PROJECT}/{ZONE}/big", "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    big = MIG_ID.replace("/pool", "/big")
    # The 6-cpu pod makes the 8-vCPU MIG grow from its instance template.
    assert report["scaleUp"] == [{"nodeGroup": big, "from": 0, "to": 1, "pods": ["default/web-1"]}]
    # The 12-cpu pod fits no MIG, and explain says so per MIG.
    (huge,) = report["unschedulable"]
    text = json.dumps(huge)
    assert "default/huge" in text and MIG_ID in text and big in text
    assert "Insufficient cpu" in text
    # explain decides but does not act.
    assert gce.count("POST", "/resize$") == 0
