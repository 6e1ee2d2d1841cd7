"""`explain` readable at a glance on a real cluster: answers grouped by reason with counts
first, then the details narrowed by `--pod`, `--node` and `--node-group`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main

ROOT = Path(__file__).resolve().parents[3]
EKS = str(ROOT / "examples" / "snapshots" / "eks.json")
GKE = str(ROOT / "examples" / "snapshots" / "gke.json")
RESIZER = "shop/image-resizer-7b9d6c5f8-22cb6"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_the_summary_counts_answers_by_reason(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--snapshot", EKS)
    pods = doc["summary"]["pendingPods"]
    # Two pending image-resizer pods: both helped by ng-spot, neither by ng-general.
    assert pods[0] == {"count": 2, "nodeGroup": "ng-spot", "helps": True, "why": "scale-up 1 -> 2"}
    assert {(e["nodeGroup"], e["helps"], e["count"]) for e in pods} == {
        ("ng-spot", True, 2),
        ("ng-general", False, 2),
    }
    nodes = doc["summary"]["nodes"]
    assert sum(e["count"] for e in nodes) == 5
    assert {"count": 2, "removable": False, "reason": "NotAutoscaled"} in nodes
    assert [e["count"] for e in nodes] == sorted((e["count"] for e in nodes), reverse=True)


def test_the_summary_comes_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--snapshot", EKS)
    assert code == 0, err
    assert out.index("Summary\n") < out.index("Pending pods\n") < out.index("\nNodes\n")
    summary = out[out.index("Summary\n") : out.index("Pending pods\n")]
    assert "2     ng-spot     yes             scale-up 1 -> 2" in summary
    assert "NotAutoscaled" in summary


def test_pod_filter_with_wildcards(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--snapshot", EKS, "--pod", "shop/*-22cb6")
    assert code == 0, err
    details = out[out.index("Pending pods\n") : out.index("\nNodes\n")]
    assert RESIZER in details
    assert "4ca73" not in details
    doc = run_json(capsys, "--snapshot", EKS, "--pod", RESIZER)
    assert [e["count"] for e in doc["summary"]["pendingPods"]] == [1, 1]
    [up] = doc["scaleUp"]
    assert up["pods"] == [RESIZER]


def test_json_gives_every_group_answer_for_a_pod_a_scale_up_helps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = run_json(capsys, "--snapshot", EKS)
    # The keys shared with `simulate --once --json` keep their names and shapes.
    assert list(doc)[:4] == ["scaleUp", "scaleDown", "unschedulable", "unremovable"]
    assert [(u["nodeGroup"], u["from"], u["to"]) for u in doc["scaleUp"]] == [("ng-spot", 1, 2)]
    assert doc["unschedulable"] == []
    # The table's answers, the group that cannot help included.
    assert doc["pendingPods"][0] == {
        "pod": RESIZER,
        "nodeGroups": {
            "ng-spot": {"helps": True, "why": "scale-up 1 -> 2"},
            "ng-general": {
                "helps": False,
                "why": "pod does not fit the node group's template: "
                "node(s) didn't match Pod's node affinity/selector",
            },
        },
    }
    assert [e["pod"] for e in doc["pendingPods"]] == sorted(
        p for u in doc["scaleUp"] for p in u["pods"]
    )
    # The filters narrow it as they narrow the table.
    narrowed = run_json(capsys, "--snapshot", EKS, "--node-group", "ng-general", "--pod", RESIZER)
    assert narrowed["pendingPods"] == [
        {
            "pod": RESIZER,
            "nodeGroups": {"ng-general": doc["pendingPods"][0]["nodeGroups"]["ng-general"]},
        }
    ]


def test_node_group_filter_narrows_pods_and_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--snapshot", EKS, "--node-group", "ng-general")
    assert {e["nodeGroup"] for e in doc["summary"]["pendingPods"]} == {"ng-general"}
    assert doc["scaleUp"] == []
    assert sum(e["count"] for e in doc["summary"]["nodes"]) == 2
    code, out, err = run(capsys, "--snapshot", EKS, "--node-group", "ng-general")
    assert code == 0, err
    nodes = out[out.index("\nNodes\n") :]
    assert "ip-192-168-12-40.ec2.internal" in nodes
    assert "ip-192-168-20-93.ec2.internal" not in nodes


def test_node_filter(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, "--snapshot", GKE, "--node", "*-9xw4", "--scale-down-unneeded-time=0s")
    assert [e["count"] for e in doc["summary"]["nodes"]] == [1]
    assert [e["node"] for e in doc["scaleDown"] + doc["unremovable"]] == [
        "gke-prod-default-pool-3f8a1c2e-9xw4"
    ]
    # Pods are not narrowed by a node filter.
    assert doc["summary"]["pendingPods"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--pod", "shop/nope"],
            "--pod 'shop/nope': expected a pod of the cluster as namespace/name",
        ),
        (["--node", "gke-*"], "--node 'gke-*': expected a node of the cluster"),
        (["--node-group", "ng-gpu"], "--node-group 'ng-gpu': expected one of ng-general, ng-spot"),
    ],
)
def test_a_filter_matching_nothing_is_named(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, "--snapshot", EKS, *argv)
    assert code == 2
    assert message in err
