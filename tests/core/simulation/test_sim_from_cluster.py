"""`simulate --from-cluster` and `explain --from-cluster`: the snapshot is read from a live
(fake) API server through the kubeconfig, with list and watch requests only, and the same
simulation runs on it as on a snapshot file: node groups inferred, what-if changes applied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.testing.fakekube import FakeKubeServer

ROOT = Path(__file__).resolve().parents[3]
EKS = ROOT / "examples" / "snapshots" / "eks.json"
SERVED = ("Node", "Pod", "ReplicaSet", "StatefulSet", "Job", "DaemonSet", "PodDisruptionBudget")


def serve_eks(server: FakeKubeServer) -> None:
    """The objects of the EKS example snapshot that the autoscaler reads."""
    for item in json.loads(EKS.read_text(encoding="utf-8"))["items"]:
        if item["kind"] in SERVED:
            item["metadata"].pop("resourceVersion", None)
            server.create(item)


def last_json(out: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return doc


def only_reads(server: FakeKubeServer) -> None:
    methods = {r.method for r in server.requests}
    assert methods == {"GET"}, sorted(
        f"{r.method} {r.path}" for r in server.requests if r.method != "GET"
    )
    # Lists and watches of what the autoscaler reads, nothing else.
    assert any(r.query.get("watch", "").lower() == "true" for r in server.requests)


def test_simulate_from_cluster_matches_the_snapshot_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["simulate", "--snapshot", str(EKS), "--once", "--json"])
    from_file = last_json(capsys.readouterr().out)
    assert code == 0
    with FakeKubeServer() as server:
        serve_eks(server)
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        code = main(
            ["simulate", "--from-cluster", "--kubeconfig", str(kubeconfig), "--once", "--json"]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        live = last_json(out)
        only_reads(server)
    assert [g["name"] for g in live["inferredNodeGroups"]] == ["ng-general", "ng-spot"]
    assert live["scaleUp"] == from_file["scaleUp"]
    assert live["scaleUp"][0]["nodeGroup"] == "ng-spot"


def test_explain_from_cluster_with_changes_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with FakeKubeServer() as server:
        serve_eks(server)
        before = {r: len(server.list(r)) for r in ("nodes", "pods")}
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        code = main(
            [
                "explain", "--from-cluster", "--kubeconfig", str(kubeconfig), "--json",
                "--drain-node", "ip-192-168-20-93.ec2.internal",
            ]
        )  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 0, err
        doc = last_json(out)
        only_reads(server)
        assert {r: len(server.list(r)) for r in ("nodes", "pods")} == before
    [change] = doc["whatIf"]["changes"]
    assert change["detail"] == "cordoned, 3 pods evicted"
    assert doc["whatIf"]["after"]["nodesAdded"] == {"ng-spot": 2}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["simulate", "--from-cluster", "--snapshot", str(EKS), "--once"],
            "--from-cluster: expected without --snapshot",
        ),
        (
            ["explain", "--from-cluster", "--snapshot", str(EKS)],
            "--from-cluster: expected without --snapshot",
        ),
        (
            ["simulate", "--from-cluster", "--kubeconfig", "/nonexistent/kubeconfig", "--once"],
            "/nonexistent/kubeconfig",
        ),
    ],
    ids=["simulate-and-snapshot", "explain-and-snapshot", "no-kubeconfig"],
)
def test_bad_from_cluster_flags_are_named(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
