"""`simulate --from-cluster --cloud-provider=gce`: the MIGs, their bounds, prices and a
scale-from-zero template come from the fake Compute API, the cluster from the fake API
server, and neither is written to: no resize or deletion reaches the Compute API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import pod_json
from clusterscaler_gce.testing.fakecompute import FakeComputeServer
from gcekit import gke_node

KUBE_ENV = "AUTOSCALER_ENV_VARS: node_labels=cloud.google.com/gke-nodepool=pool;os=linux\n"


def test_simulate_from_cluster_takes_the_migs_and_writes_to_neither(
    gce: FakeComputeServer, cloud_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The project and zone of the fake's metadata server, which the cloud-config names too.
    project, zone = gce.metadata_project, gce.metadata_zone
    base = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/instanceGroups"
    gce.add_template(project, "pool-template", machine_type="n1-standard-4", kube_env=KUBE_ENV)
    gce.add_template(project, "big-template", machine_type="n1-standard-8", kube_env=KUBE_ENV)
    gce.add_mig(project, zone, "pool", template="pool-template", size=1)
    gce.add_mig(project, zone, "big", template="big-template")
    with FakeKubeServer() as kube:
        [provider_id] = gce.provider_ids(project, zone, "pool")
        node = kube.create(gke_node(provider_id, zone=zone))
        kube.create(pod_json("web-1", cpu="3", node_name=node["metadata"]["name"]))
        kube.create(pod_json("web-2", cpu="6"))
        kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig")
        gce.requests.clear()
        code = main(
            ["simulate", "--from-cluster", f"--kubeconfig={kubeconfig}", "--cloud-provider=gce",
             f"--cloud-config={cloud_config}", f"--nodes=1:3:{project}/{zone}/pool",
             f"--nodes=0:2:{project}/{zone}/big", "--once", "--json"]
        )  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 0, err
        assert {r.method for r in kube.requests} == {"GET"}
    doc = json.loads(out.strip().splitlines()[-1])
    groups = {g["name"]: g for g in doc["providerNodeGroups"]}
    assert groups["pool"]["providerId"] == f"{base}/pool"
    assert (groups["pool"]["nodes"], groups["pool"]["minSize"], groups["pool"]["maxSize"]) == (1, 1, 3)
    assert groups["pool"]["templateFrom"] == "live node"
    assert groups["big"]["templateFrom"] == "gce provider (scale from zero)"
    assert groups["big"]["boundsFrom"] == "--nodes"
    # GCE prices its machine types: an n1-standard-8 node-hour costs more than an -4.
    assert groups["big"]["price"] > groups["pool"]["price"] > 0
    [up] = doc["scaleUp"]
    assert (up["nodeGroup"], up["from"], up["to"]) == ("big", 0, 1)
    # Read only: the Compute API saw reads alone (listManagedInstances is a read the API takes
    # as a POST), no resize or deleteInstances; the MIGs are as they were.
    writes = [
        f"{r.method} {r.path}"
        for r in gce.requests
        if r.method != "GET" and not r.path.endswith("/listManagedInstances")
    ]
    assert writes == []
    assert any(r.path.endswith("/big/listManagedInstances") for r in gce.requests)
    assert (gce.target_size(project, zone, "big"), gce.target_size(project, zone, "pool")) == (0, 1)
