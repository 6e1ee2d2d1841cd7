"""`clusterscaler run|explain --cloud-provider=azure` as processes against the fake
Kubernetes API server and the fake ARM server.

The test plays kubelet: a Node appears for each VM ARM provisioned, and goes away with its VM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.testing.cliprocess import ClusterscalerProcess, clusterscaler_command
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import node_json, pod_json
from clusterscaler_azure.testing.fakearm import FakeArm

VMSS = "aks-pool1-12345678-vmss"
TAGS = {"cluster-autoscaler-enabled": "true", "min": "0", "max": "3", "aks-managed-poolName": "pool1"}


def pending_pod(name: str, cpu: str) -> dict[str, Any]:
    """An unschedulable pod of the ReplicaSet `web` (whose selector is app=web)."""
    return pod_json(name, cpu=cpu, labels={"app": "web"})


class Kubelet:
    """Registers a Node for each provisioned VM and removes the Nodes of VMs that are gone."""

    def __init__(self, kube: FakeKubeServer, arm: FakeArm) -> None:
        self.kube = kube
        self.arm = arm

    def tick(self) -> None:
        vms = set(self.arm.provider_ids(VMSS))
        nodes = {n["spec"].get("providerID", ""): n["metadata"]["name"] for n in self.kube.list("nodes")}
        for provider_id in sorted(vms - set(nodes)):
            name = "aks-pool1-vmss" + provider_id.rsplit("/", 1)[-1].zfill(6)
            self.kube.create(node_json(
                name,
                provider_id=provider_id,
                labels={"agentpool": "pool1", "kubernetes.azure.com/agentpool": "pool1",
                        "node.kubernetes.io/instance-type": "Standard_D4s_v3"},
            ))
        for provider_id, name in nodes.items():
            if provider_id not in vms:
                self.kube.delete("nodes", name)


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[FakeKubeServer, FakeArm, Path]]:
    with FakeKubeServer() as kube, FakeArm(retry_after="1") as arm:
        for namespace in ("default", "kube-system"):
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        kube.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                     "metadata": {"name": "web", "namespace": "default", "uid": "rs-web"},
                     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}})
        arm.add_vmss(VMSS, capacity=0, tags=TAGS)
        (tmp_path / "azure.json").write_text(json.dumps({
            "cloud": "AzurePublicCloud", "tenantId": "t", "subscriptionId": arm.subscription,
            "resourceGroup": arm.resource_group, "location": arm.location,
            "useManagedIdentityExtension": True, "resourceManagerEndpoint": arm.url,
        }))
        kube.kubeconfig(tmp_path / "kubeconfig")
        yield kube, arm, tmp_path


def common_flags(tmp: Path) -> list[str]:
    return [
        "--cloud-provider=azure",
        f"--cloud-config={tmp / 'azure.json'}",
        "--node-group-auto-discovery=label:cluster-autoscaler-enabled=true",
        f"--kubeconfig={tmp / 'kubeconfig'}",
        "--kube-client-qps=200",
        "--kube-client-burst=200",
    ]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("ARM_", "AZURE_")) and k not in ("KUBECONFIG", "LOCATION")}


def test_run_scales_a_scale_set_from_zero_to_n_and_back(clusters: tuple[FakeKubeServer, FakeArm, Path]) -> None:
    kube, arm, tmp = clusters
    kube.create(pending_pod("web-1", "3"))
    kube.create(pending_pod("web-2", "3"))
    kubelet = Kubelet(kube, arm)
    args = [
        *common_flags(tmp),
        "--leader-elect=false", "--scan-interval=1s", "--address=127.0.0.1:0",
        "--scale-down-delay-after-add=0s", "--scale-down-unneeded-time=1s",
        "--node-delete-delay-after-taint=0s",
    ]
    with ClusterscalerProcess(args, log=tmp / "clusterscaler.log", env=env(), stop_timeout=15) as run:
        # Two 3-cpu pods on 4-cpu VMs: two VMs, from zero.
        run.wait_for("the scale-up from zero", lambda: arm.capacity(VMSS) == 2, 20)
        run.wait_for("the VMs to register", lambda: len(kube.list("nodes")) == 2, 20, tick=kubelet.tick)
        for pod in kube.list("pods", "default"):
            kube.delete("pods", pod["metadata"]["name"], "default")
        run.wait_for("the scale-down to zero",
                     lambda: arm.capacity(VMSS) == 0 and not kube.list("nodes"),
                     30, tick=kubelet.tick)
    output = run.output()
    assert run.returncode == 0, output[-3000:]
    assert "azure_provider_ready" in output and "azure_arm_endpoint_without_token" in output
    assert arm.count("PATCH", VMSS.lower() + "$") == 1, output[-3000:]
    assert arm.count("POST", "/delete$") >= 1
    reasons = {e.get("reason") for e in kube.list("events")}
    assert "ScaledUpGroup" in reasons


def test_explain_names_the_scale_set_and_touches_nothing(clusters: tuple[FakeKubeServer, FakeArm, Path]) -> None:
    kube, arm, tmp = clusters
    kube.create(pending_pod("web-1", "3"))
    kube.create(pending_pod("huge", "64"))
    arm.add_vmss("broken", tags={"cluster-autoscaler-enabled": "true", "min": "0", "max": "x"})
    result = subprocess.run(
        [*clusterscaler_command(), "explain", *common_flags(tmp)],
        capture_output=True, text=True, timeout=60, env=env(), check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    web = next(line for line in out.splitlines() if line.startswith("default/web-1"))
    assert VMSS in web and "scale-up 0 -> 1" in web
    huge = next(line for line in out.splitlines() if line.startswith("default/huge"))
    assert VMSS in huge and "Insufficient cpu" in huge
    # The badly tagged scale set is reported (in the log) and does not stop the others.
    assert "azure_vmss_problem" in result.stdout + result.stderr
    assert "tag 'max'='x'" in result.stdout + result.stderr
    assert arm.count("PATCH") == 0 and arm.count("POST") == 0


_PROBE = """
import contextlib, io, json, sys
from clusterscaler.commands.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["plugins", "--json"])
print(json.dumps({"code": code, "stdout": out.getvalue(),
                  "azure": sorted(m for m in sys.modules if m == "azure" or m.startswith("azure."))}))
"""


def test_plugins_lists_azure_without_importing_the_sdk() -> None:
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          timeout=60, check=False, env=env())
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] in (0, None)
    listing = json.loads(report["stdout"])
    assert "azure" in listing["cloudProviders"]
    assert report["azure"] == []


def test_bad_configuration_exits_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "azure.json").write_text(json.dumps({"subscriptionId": "s", "vmType": "standard",
                                                     "resourceGroup": "rg"}))
    result = subprocess.run(
        [*clusterscaler_command(), "--cloud-provider=azure", f"--cloud-config={tmp_path / 'azure.json'}",
         "--nodes=0:3:pool", "--kubeconfig=/nonexistent"],
        capture_output=True, text=True, timeout=60, env=env(), check=False,
    )
    assert result.returncode == 2
    assert "vmType (ARM_VM_TYPE)='standard'" in result.stdout + result.stderr
