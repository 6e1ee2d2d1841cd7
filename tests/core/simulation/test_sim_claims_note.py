"""`explain` and `simulate` over a snapshot file whose pods have claims: with storage objects
in the file a missing claim keeps its pod off every new node, in kube-scheduler's words;
without any, the claims are not checked and the output says so once."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT / "examples" / "snapshots" / "small-cluster.json"
GENERAL = str(ROOT / "examples" / "cloud-configs" / "general.yaml")
NOTE = "claims not checked: the input has no PersistentVolumeClaims"
NOT_FOUND = 'persistentvolumeclaim "data" not found'
CLASS = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": "fast"}, "provisioner": "ebs.csi.aws.com",
}


def snapshot(tmp_path: Path, *extra: dict[str, Any]) -> str:
    """The small cluster with one more pending pod that uses the claim `data` (a copy of a
    pod that needs a new node)."""
    doc = json.loads(SNAPSHOT.read_text())
    pending = next(
        i for i in doc["items"] if i["kind"] == "Pod" and not i["spec"].get("nodeName")
    )
    pod = copy.deepcopy(pending)
    pod["metadata"].update(name="stateful", uid="uid-stateful")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    doc["items"] += [pod, *extra]
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc))
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def verdicts(doc: dict[str, Any]) -> dict[str, Any]:
    (entry,) = [p for p in doc["pendingPods"] if p["pod"] == "default/stateful"]
    return entry["nodeGroups"]


def test_explain_without_storage_objects_says_once_that_claims_were_not_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = snapshot(tmp_path)
    out = cli(capsys, "explain", "--snapshot", path, "--cloud-config", GENERAL)
    assert out.count(NOTE) == 1, out
    assert "claims of 1 pod are taken to exist" in out
    doc = json.loads(cli(capsys, "explain", "--snapshot", path, "--cloud-config", GENERAL,
                         "--json"))
    (note,) = doc["notes"]
    assert note.startswith(NOTE)
    assert verdicts(doc)["general"]["helps"] is True


def test_explain_with_storage_objects_names_the_missing_claim(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = snapshot(tmp_path, CLASS)
    doc = json.loads(cli(capsys, "explain", "--snapshot", path, "--cloud-config", GENERAL,
                         "--json"))
    assert "notes" not in doc
    answer = verdicts(doc)["general"]
    assert answer["helps"] is False
    assert answer["why"] == f"pod does not fit the node group's template: {NOT_FOUND}"


def test_simulate_says_once_that_claims_were_not_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = snapshot(tmp_path)
    once = cli(capsys, "simulate", "--snapshot", path, "--cloud-config", GENERAL, "--once")
    assert once.count(NOTE) == 1, once
    once_json = json.loads(cli(capsys, "simulate", "--snapshot", path, "--cloud-config",
                               GENERAL, "--once", "--json"))
    assert once_json["notes"][0].startswith(NOTE)
    run = cli(capsys, "simulate", "--snapshot", path, "--cloud-config", GENERAL,
              "--duration", "2m")
    assert run.count(NOTE) == 1, run
    lines = [json.loads(x) for x in cli(
        capsys, "simulate", "--snapshot", path, "--cloud-config", GENERAL, "--duration", "2m",
        "--json",
    ).splitlines() if x.strip()]
    assert [x["notes"] for x in lines if x.get("type") == "notes"] == [once_json["notes"]]
    listed = cli(capsys, "simulate", "--snapshot", snapshot(tmp_path, CLASS), "--cloud-config",
                 GENERAL, "--once")
    assert NOTE not in listed


STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
        - name: main
          image: registry.k8s.io/pause:3.9
          resources: {requests: {cpu: 3850m, memory: 4Gi}}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec: {storageClassName: fast, resources: {requests: {storage: 1Gi}}}
"""


def test_the_claims_a_statefulset_makes_are_not_checked_in_a_simulated_cluster(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The StatefulSet controller makes each pod's claim; the simulated cluster does not
    # model it, so the claims it would make are taken to exist, while the snapshot's own
    # pod whose claim is missing still fits no new node.
    manifest = tmp_path / "db.yaml"
    manifest.write_text(STATEFULSET)
    doc = json.loads(cli(capsys, "simulate", "--snapshot", snapshot(tmp_path, CLASS),
                         "--cloud-config", GENERAL, "--apply", str(manifest), "--once",
                         "--json"))
    (up,) = doc["scaleUp"]
    assert {"default/db-0", "default/db-1"} <= set(up["pods"])
    assert "default/stateful" not in up["pods"]
    assert "notes" not in doc
