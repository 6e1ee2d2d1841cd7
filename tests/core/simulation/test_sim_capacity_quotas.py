"""Snapshots with CapacityQuotas: `simulate --once --json` and `explain --json` say which
quota holds a group back, and `--apply` adds a quota (the one of docs/capacity-quotas.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.commands.cli import main

ROOT = Path(__file__).resolve().parents[3]
GENERAL = str(ROOT / "examples" / "cloud-configs" / "general.yaml")
HELD = 'exceeded quota: "CapacityQuota/general-pool", resources: nodes'


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"clusterscaler.io/node-group": "general", **(labels or {})},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"providerID": f"sim://general/{name}"},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
        },
    }


def pending(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            ],
        },
    }


def busy(node_name: str) -> dict[str, Any]:
    """A running pod taking 2 of the node's 4 CPUs: no 3-CPU pod fits beside it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"busy-{node_name}", "namespace": "default",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "web", "uid": "u", "controller": True}]},
        "spec": {"nodeName": node_name,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
        "status": {"phase": "Running"},
    }


QUOTA = {
    "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
    "kind": "CapacityQuota",
    "metadata": {"name": "general-pool"},
    "spec": {
        "selector": {"matchLabels": {"clusterscaler.io/node-group": "general"}},
        "limits": {"resources": {"nodes": 3}},
    },
}


def write(tmp_path: Path, items: list[dict[str, Any]], name: str = "snapshot.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    # One busy node; five pods of 3 CPUs need five new 4-CPU nodes.
    return write(
        tmp_path,
        [node("general-1"), busy("general-1"), QUOTA, *(pending(f"p{i}") for i in range(5))],
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main([*args, "--cloud-config", GENERAL, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_simulate_once_json_names_the_quota_that_held_the_group_back(
    capsys: pytest.CaptureFixture[str], snapshot: Path
) -> None:
    doc = run(capsys, "simulate", "--snapshot", str(snapshot), "--once",
              "--capacity-quotas-enabled")
    # The quota of 3 nodes has 1: the group grows by 2, for 2 of the 5 pods.
    assert [(s["nodeGroup"], s["from"], s["to"]) for s in doc["scaleUp"]] == [("general", 1, 3)]
    assert len(doc["scaleUp"][0]["pods"]) == 2
    assert len(doc["unschedulable"]) == 3
    assert all(u["reasons"] == {"general": HELD} for u in doc["unschedulable"])
    assert doc["capacityQuotas"] == [
        {"name": "general-pool", "used": {"nodes": "1"}, "valid": True,
         "message": "CapacityQuota is valid"}
    ]


def test_explain_json_names_it_too(capsys: pytest.CaptureFixture[str], snapshot: Path) -> None:
    doc = run(capsys, "explain", "--snapshot", str(snapshot), "--capacity-quotas-enabled")
    reasons = {u["pod"]: u["reasons"] for u in doc["unschedulable"]}
    assert len(reasons) == 3
    assert all(r == {"general": HELD} for r in reasons.values())


def test_without_the_flag_quotas_are_read_and_ignored(
    capsys: pytest.CaptureFixture[str], snapshot: Path
) -> None:
    doc = run(capsys, "simulate", "--snapshot", str(snapshot), "--once")
    assert [(s["from"], s["to"]) for s in doc["scaleUp"]] == [(1, 6)]
    assert "capacityQuotas" not in doc


def test_the_documented_quota_applies_on_top_of_a_snapshot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """docs/capacity-quotas.md: its quota parses as the API server would hold it, and
    `--apply` puts it on a snapshot, where it caps the scale-up at its 10 nodes."""
    text = (ROOT / "docs" / "capacity-quotas.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    [quota] = [yaml.safe_load(b) for b in blocks if "kind: CapacityQuota" in b]
    assert quota["metadata"]["name"] == "team-a"
    applied = tmp_path / "team-a-quota.yaml"
    applied.write_text(yaml.safe_dump(quota))
    nodes = [node(f"general-{i}", {"team": "a"}) for i in range(1, 9)]
    running = [busy(f"general-{i}") for i in range(1, 9)]
    snapshot = write(tmp_path, [*nodes, *running, *(pending(f"p{i}") for i in range(6))])
    doc = run(capsys, "simulate", "--snapshot", str(snapshot), "--capacity-quotas-enabled",
              "--apply", str(applied), "--once")
    # 8 nodes of 10: 2 more, and 4 pods held back by the quota.
    assert [(s["from"], s["to"]) for s in doc["scaleUp"]] == [(8, 10)]
    assert {json.dumps(u["reasons"]) for u in doc["unschedulable"]} == {
        json.dumps({"general": 'exceeded quota: "CapacityQuota/team-a", resources: nodes'})
    }


def test_an_invalid_quota_to_apply_is_refused_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = {**QUOTA, "spec": {"limits": {"resources": {"cpu": "500m"}}}}
    applied = tmp_path / "bad.yaml"
    applied.write_text(yaml.safe_dump(bad))
    snapshot = write(tmp_path, [node("general-1")])
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL,
                 "--capacity-quotas-enabled", "--apply", str(applied), "--once"])
    _, err = capsys.readouterr()
    assert code == 2
    assert "CapacityQuota general-pool: spec.limits.resources['cpu']: expected a non-negative" \
        in err
