"""`simulate --from-cluster --cloud-provider=azure`: the scale sets, their bounds (tags) and a
scale-from-zero template come from the fake ARM server, the cluster from the fake API
server, and no write reaches ARM: the scale-up happens in the simulated cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import node_json, pod_json
from clusterscaler_azure.testing.fakearm import FakeArm

POOL = "aks-pool1-12345678-vmss"
BIG = "aks-big-12345678-vmss"


def _node(name: str, provider_id: str) -> dict[str, Any]:
    return node_json(
        name,
        provider_id=provider_id,
        labels={"kubernetes.azure.com/agentpool": "pool1",
                "node.kubernetes.io/instance-type": "Standard_D4s_v3"},
    )  # fmt: skip


def test_simulate_from_cluster_takes_the_scale_sets_and_writes_nothing(
    arm: FakeArm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arm.add_vmss(POOL, capacity=1, tags={"cluster-autoscaler-enabled": "true", "min": "1", "max": "4"})
    arm.add_vmss(
        BIG, sku="Standard_D8s_v3", tags={"cluster-autoscaler-enabled": "true", "min": "0", "max": "2"}
    )
    config = tmp_path / "azure.json"
    config.write_text(
        json.dumps(
            {"cloud": "AzurePublicCloud", "tenantId": "t", "subscriptionId": arm.subscription,
             "resourceGroup": arm.resource_group, "location": arm.location,
             "useManagedIdentityExtension": True, "resourceManagerEndpoint": arm.url}
        )
    )  # fmt: skip
    with FakeKubeServer() as kube:
        [provider_id] = arm.provider_ids(POOL)
        kube.create(_node("aks-pool1-vmss000000", provider_id))
        kube.create(pod_json("web-1", cpu="3", node_name="aks-pool1-vmss000000", labels={"app": "web"}))
        kube.create(pod_json("web-2", cpu="6", labels={"app": "web"}))
        kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig")
        with arm.lock:
            arm.calls.clear()
        code = main(
            ["simulate", "--from-cluster", f"--kubeconfig={kubeconfig}", "--cloud-provider=azure",
             f"--cloud-config={config}", "--node-group-auto-discovery=label:cluster-autoscaler-enabled=true",
             "--once", "--json"]
        )  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 0, err
        assert {r.method for r in kube.requests} == {"GET"}
    doc = json.loads(out.strip().splitlines()[-1])
    groups = {g["name"]: g for g in doc["providerNodeGroups"]}
    assert (groups[POOL]["nodes"], groups[POOL]["minSize"], groups[POOL]["maxSize"]) == (1, 1, 4)
    assert groups[POOL]["templateFrom"] == "live node"
    assert (groups[BIG]["nodes"], groups[BIG]["minSize"], groups[BIG]["maxSize"]) == (0, 0, 2)
    assert groups[BIG]["templateFrom"] == "azure provider (scale from zero)"
    [up] = doc["scaleUp"]
    assert (up["nodeGroup"], up["from"], up["to"]) == (BIG, 0, 1)
    with arm.lock:
        methods = {method for method, _, _ in arm.calls}
    assert methods == {"GET"}, sorted(f"{m} {p}" for m, p, _ in arm.calls if m != "GET")
    assert (arm.capacity(BIG), arm.capacity(POOL)) == (0, 1)
