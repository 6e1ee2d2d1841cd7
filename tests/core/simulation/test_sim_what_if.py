"""What-if changes on top of a real cluster's snapshot (`--scale`, `--drain-node`,
`--remove-node-group`), through `simulate --once` and `explain`: the changes apply in order,
the drained pods' replacements are followed to where they land, and the output compares
the loop before and after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.offline.loader import InputError
from clusterscaler.offline.whatif import parse_scale

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOTS = ROOT / "examples" / "snapshots"
EKS = str(SNAPSHOTS / "eks.json")
GKE = str(SNAPSHOTS / "gke.json")
SPOT_NODE = "ip-192-168-20-93.ec2.internal"
GKE_SPARE = "gke-prod-default-pool-3f8a1c2e-9xw4"
GKE_BUSY = "gke-prod-default-pool-3f8a1c2e-7kq2"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_scaling_a_deployment_needs_a_scale_up(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "simulate", "--snapshot", EKS, "--once", "--scale", "deployment/shop/image-resizer=9")
    [change] = doc["whatIf"]["changes"]
    assert change == {
        "change": "--scale=deployment/shop/image-resizer=9",
        "detail": "9 replicas (ReplicaSet image-resizer-7b9d6c5f8): +4 pods",
    }
    assert doc["whatIf"]["before"] == {"pendingPods": 2, "nodesAdded": {"ng-spot": 1}, "nodesRemoved": []}
    # Six pods of 2 cpu pending; three fit on a new c6i.2xlarge.
    assert doc["whatIf"]["after"] == {"pendingPods": 6, "nodesAdded": {"ng-spot": 2}, "nodesRemoved": []}
    [up] = doc["scaleUp"]
    assert (up["nodeGroup"], up["from"], up["to"], len(up["pods"])) == ("ng-spot", 1, 3, 6)


def test_scaling_down_removes_pending_pods_first(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "simulate", "--snapshot", EKS, "--once", "--scale", "rs/shop/image-resizer-7b9d6c5f8=3")
    assert doc["whatIf"]["changes"][0]["detail"] == "3 replicas: -2 pods"
    assert doc["whatIf"]["after"] == {"pendingPods": 0, "nodesAdded": {}, "nodesRemoved": []}
    assert doc["scaleUp"] == []


def test_drain_node_shows_where_the_pods_go(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "explain", "--snapshot", GKE, "--drain-node", GKE_SPARE)
    [change] = doc["whatIf"]["changes"]
    assert change["change"] == f"--drain-node {GKE_SPARE}"
    assert change["detail"] == "cordoned, 1 pod evicted"
    [moved] = change["pods"]
    assert moved["pod"].startswith("default/frontend-6b8d9f7c5-")
    assert moved["replacement"].startswith("default/frontend-6b8d9f7c5-")
    assert moved["replacement"] != moved["pod"]
    # The frontend pod fits on the other default-pool node: nothing new is needed for it.
    assert moved["to"] == GKE_BUSY
    assert doc["whatIf"]["after"]["pendingPods"] == doc["whatIf"]["before"]["pendingPods"] == 1
    # The drained node is empty now, and removable.
    assert GKE_SPARE in doc["whatIf"]["after"]["nodesRemoved"]
    assert {"node": GKE_SPARE, "nodeGroup": "default-pool", "empty": True} in doc["scaleDown"]


def test_drain_node_whose_pods_fit_nowhere_needs_a_scale_up(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "simulate", "--snapshot", EKS, "--once", "--drain-node", SPOT_NODE)
    [change] = doc["whatIf"]["changes"]
    assert change["detail"] == "cordoned, 3 pods evicted"
    assert [p["to"] for p in change["pods"]] == ["pending"] * 3
    # The cordoned node still counts in its group; five pods of 2 cpu need two nodes.
    assert doc["whatIf"]["after"] == {"pendingPods": 5, "nodesAdded": {"ng-spot": 2}, "nodesRemoved": []}


def test_drain_honours_pod_disruption_budgets(capsys: pytest.CaptureFixture[str]) -> None:
    # storefront's PDB (minAvailable 3 of 4) allows one eviction: the second pod stays.
    doc = run_json(
        capsys, "explain", "--snapshot", EKS, "--drain-node", "ip-192-168-12-40.ec2.internal"
    )
    [change] = doc["whatIf"]["changes"]
    stays = [p for p in change["pods"] if p["to"].startswith("stays: ")]
    assert len(stays) == 1
    assert stays[0]["pod"].startswith("shop/storefront-5d4c8b7f6-")
    assert stays[0]["replacement"] is None
    assert "disruption budget shop/storefront" in stays[0]["to"]
    assert change["detail"].endswith(", 1 kept by a PodDisruptionBudget")


def test_remove_node_group_and_changes_apply_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(
        capsys, "explain", "--snapshot", GKE, "--drain-node", GKE_SPARE, "--remove-node-group", "highmem-pool"
    )
    assert code == 0, err
    changes = out[out.index("Changes\n") :]
    assert changes.index("--drain-node") < changes.index("--remove-node-group highmem-pool: 1 node deleted, 1 pod recreated")
    assert "-> pending" in changes
    rows = {line.split("  ")[0]: line.split() for line in changes.splitlines() if line.startswith(("pending pods", "nodes added"))}
    assert rows["pending pods"][-2:] == ["1", "2"]
    assert rows["nodes added"][-2:] == ["highmem-pool+1", "-"]
    # The group is gone: the pods that need it fit no group left.
    pending = out[out.index("Pending pods\n") :]
    assert "highmem-pool" not in pending
    assert "batch/report-builder-7d9f8c6b5-398ee  default-pool  no" in pending


def test_remove_node_group_declared_in_a_cloud_config(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(
        capsys,
        "simulate",
        "--snapshot",
        str(SNAPSHOTS / "eks-cluster.json"),
        "--cloud-config",
        str(ROOT / "examples" / "cloud-configs" / "eks-nodegroups.yaml"),
        "--once",
        "--remove-node-group",
        "memory",
    )
    assert doc["whatIf"]["before"]["nodesAdded"] == {"memory": 1}
    assert doc["whatIf"]["after"]["nodesAdded"] == {}
    assert doc["whatIf"]["changes"][0]["detail"] == "1 node deleted, 1 pod recreated"
    assert {e["pod"] for e in doc["unschedulable"]} >= {"default/analytics-5b7f6d9c4-p8d6n"}


def test_timeline_applies_the_changes_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(
        capsys, "simulate", "--snapshot", EKS, "--json", "--duration", "3m", "--drain-node", SPOT_NODE
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["type"] for line in lines[:2]] == ["nodeGroups", "changes"]
    assert lines[1]["changes"][0]["change"] == f"--drain-node {SPOT_NODE}"
    assert lines[-1]["stillPending"] == 0
    assert lines[-1]["finalNodes"]["ng-spot"] == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--snapshot", EKS, "--once", "--scale", "pod/shop/x=1"], "--scale='pod/shop/x=1': expected <kind>/<namespace>/<name>=<replicas>"),
        (["simulate", "--snapshot", EKS, "--once", "--scale", "deployment/shop/x=-1"], "--scale='deployment/shop/x=-1': expected <kind>/<namespace>/<name>=<replicas>"),
        (["simulate", "--snapshot", EKS, "--once", "--scale", "deployment/shop/cart=2"], "--scale='deployment/shop/cart=2': Deployment shop/cart: expected a ReplicaSet of it in the snapshot"),
        (["simulate", "--snapshot", EKS, "--once", "--scale", "sts/shop/db=2"], "--scale='sts/shop/db=2': workload 'StatefulSet/shop/db': no such controller; expected one of the workloads: ReplicaSet/"),
        (["explain", "--snapshot", EKS, "--drain-node", "nope"], "--drain-node nope: node 'nope': expected an existing node; have fargate-ip-"),
        (["explain", "--snapshot", EKS, "--remove-node-group", "ng-gpu"], "--remove-node-group ng-gpu: node group 'ng-gpu': expected one of ng-general, ng-spot"),
        (
            ["explain", "--snapshot", EKS, "--remove-node-group", "ng-spot", "--remove-node-group", "ng-spot"],
            "--remove-node-group ng-spot: node group 'ng-spot': expected one of ng-general",
        ),
        (["explain", "--drain-node", "x"], "--apply, --scale, --drain-node, --remove-node-group: expected with --snapshot or --from-cluster"),
    ],
    ids=["bad-kind", "bad-replicas", "unknown-deployment", "unknown-statefulset", "unknown-node", "unknown-group", "group-removed-twice", "live"],
)
def test_a_change_that_cannot_apply_is_named(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, _, err = cli(capsys, *argv)
    assert code == 2
    assert message in err


def test_scale_forms() -> None:
    assert parse_scale("sts/data/kafka=5") == parse_scale("StatefulSet/data/kafka=5")
    target = parse_scale("deploy/shop/web=0")
    assert (target.kind, target.namespace, target.name, target.replicas) == ("Deployment", "shop", "web", 0)
    with pytest.raises(InputError):
        parse_scale("deployment/web=3")
