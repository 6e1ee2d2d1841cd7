"""`clusterscaler explain` against a live (fake) API server: it reads the cluster, answers,
and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.testing.fakekube import FakeKubeServer

ROOT = Path(__file__).resolve().parents[3]
GENERAL = str(ROOT / "examples" / "cloud-configs" / "general.yaml")


def node(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"clusterscaler.io/node-group": "general"}},
        "spec": {"providerID": f"sim://general/{name}"},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, cpu: str, node_name: str = "") -> dict:
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    status: dict = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    if node_name:
        spec["nodeName"] = node_name
        status = {"phase": "Running"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": status}


def test_explain_live_cluster_with_the_sim_provider(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with FakeKubeServer() as server:
        server.create(node("general-1"))
        server.create(pod("bare", "3500m", "general-1"))
        server.create(pod("waiting", "3"))
        server.create(pod("huge", "16"))
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        code = main(["explain", "--kubeconfig", str(kubeconfig), "--cloud-config", GENERAL, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        # The JSON document is the last line (the fake server logs before it).
        doc = json.loads(out.strip().splitlines()[-1])
        assert doc["scaleUp"] == [{"nodeGroup": "general", "from": 1, "to": 2, "pods": ["default/waiting"]}]
        assert doc["unschedulable"] == [
            {"pod": "default/huge", "reasons": {"general": "pod does not fit the node group's template: Insufficient cpu"}}
        ]
        # Dry run: no node was created, no pod touched.
        assert [n["metadata"]["name"] for n in server.list("nodes")] == ["general-1"]
        assert sorted(p["metadata"]["name"] for p in server.list("pods")) == ["bare", "huge", "waiting"]


def test_explain_live_with_a_bad_api_server_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--kubernetes", "not-a-url", "--cloud-config", GENERAL])
    assert code == 2
    assert "--kubernetes: expected an API server URL" in capsys.readouterr().err
