"""`simulate --from-cluster --cloud-provider=machineapi`: the MachineSets' bounds, their
machines' nodes and a scale-from-zero template are read from the fake API server, with GET
requests only; the scale-up happens in the simulated cluster, not to the MachineSet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import pod_json
from machineapi_builders import (
    OPENSHIFT,
    OPENSHIFT_NS,
    POD_OWNER,
    limits,
    machine,
    node,
    pending_pod,
    resource_name,
    scalable,
)

MS_OS = resource_name(OPENSHIFT, "MachineSet")


def test_simulate_from_cluster_takes_the_machinesets_and_writes_nothing(
    kube: FakeKubeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("CAPI_GROUP", "CAPI_VERSION", "KUBECONFIG"):
        monkeypatch.delenv(var, raising=False)
    workers = kube.create(scalable("workers", replicas=1, annotations=limits(OPENSHIFT, 1, 4)))
    kube.create(machine(workers, "workers-k2x9q"))
    kube.create(node("workers-k2x9q"))
    kube.create(
        scalable(
            "big",
            replicas=0,
            annotations={
                **limits(OPENSHIFT, 0, 2),
                f"{OPENSHIFT}/vCPU": "8",
                f"{OPENSHIFT}/memoryMb": "32768",
            },
        )
    )
    kube.create(pod_json("web-a1b2c", cpu="3", node_name="workers-k2x9q", owner=POD_OWNER, created=None))
    kube.create(pending_pod("web-d3e4f", "6"))
    kube.requests.clear()
    kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig")
    code = main(
        ["simulate", "--from-cluster", f"--kubeconfig={kubeconfig}",
         "--cloud-provider=machineapi", "--once", "--json"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out.strip().splitlines()[-1])
    groups = {g["name"]: g for g in doc["providerNodeGroups"]}
    assert groups["workers"]["providerId"] == f"MachineSet/{OPENSHIFT_NS}/workers"
    assert (groups["workers"]["nodes"], groups["workers"]["minSize"], groups["workers"]["maxSize"]) == (1, 1, 4)
    assert groups["workers"]["templateFrom"] == "live node"
    assert (groups["big"]["nodes"], groups["big"]["minSize"], groups["big"]["maxSize"]) == (0, 0, 2)
    assert groups["big"]["templateFrom"] == "machineapi provider (scale from zero)"
    [up] = doc["scaleUp"]
    assert (up["nodeGroup"], up["from"], up["to"]) == ("big", 0, 1)
    # Read only: GET requests only, the MachineSet still at zero.
    assert {r.method for r in kube.requests} == {"GET"}, sorted(
        f"{r.method} {r.path}" for r in kube.requests if r.method != "GET"
    )
    big = kube.get(MS_OS, "big", OPENSHIFT_NS)
    assert big is not None and big["spec"]["replicas"] == 0
