"""Snapshots with ProvisioningRequests and PodTemplates: `simulate --once --json` and
`explain --json` carry the requests with the conditions the loop would write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main

ROOT = Path(__file__).resolve().parents[3]
GENERAL = str(ROOT / "examples" / "cloud-configs" / "general.yaml")


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"clusterscaler.io/node-group": "general"},
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"providerID": f"sim://general/{name}"},
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        },
    }


def template(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "batch"},
        "template": {"spec": {"containers": [
            {"name": "w", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}},
    }


def request(name: str, class_name: str, template_name: str, count: int,
            created: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "batch", "creationTimestamp": created},
        "spec": {"provisioningClassName": class_name,
                 "podSets": [{"podTemplateRef": {"name": template_name}, "count": count}]},
    }


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    items = [
        node("general-1"),
        template("small", "1"),
        template("large", "3"),
        # Three pods of 1 CPU fit the node.
        request("check", "check-capacity.autoscaling.x-k8s.io", "small", 3,
                "2026-01-01T00:01:00Z"),
        # Four pods of 3 CPUs need four new nodes.
        request("gang", "best-effort-atomic-scale-up.autoscaling.x-k8s.io", "large", 4,
                "2026-01-01T00:02:00Z"),
    ]
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


FLAGS = ["--enable-provisioning-requests", "--check-capacity-batch-processing"]


def test_simulate_once_json_lists_the_requests_as_the_loop_leaves_them(
    capsys: pytest.CaptureFixture[str], snapshot: Path
) -> None:
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL,
                 "--once", "--json", *FLAGS])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["provisioningRequests"] == [
        {"namespace": "batch", "name": "check", "class": "check-capacity.autoscaling.x-k8s.io",
         "conditions": {"Accepted": "True", "Provisioned": "True"}},
        {"namespace": "batch", "name": "gang",
         "class": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
         "conditions": {"Accepted": "True", "Provisioned": "True"}},
    ]
    # The atomic request's scale-up, at once for its pods that do not fit the node: none
    # does, the check-capacity request booked 3 of its 4 CPUs first. No pod is named.
    assert [(s["nodeGroup"], s["from"], s["to"], s["pods"]) for s in doc["scaleUp"]] == [
        ("general", 1, 5, [])
    ]
    assert doc["unschedulable"] == []


def test_explain_json_lists_them_too(capsys: pytest.CaptureFixture[str], snapshot: Path) -> None:
    code = main(["explain", "--snapshot", str(snapshot), "--cloud-config", GENERAL, "--json",
                 *FLAGS])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert [(r["name"], r["conditions"]) for r in doc["provisioningRequests"]] == [
        ("check", {"Accepted": "True", "Provisioned": "True"}),
        ("gang", {"Accepted": "True", "Provisioned": "True"}),
    ]


def test_without_the_flag_requests_are_read_and_left_alone(
    capsys: pytest.CaptureFixture[str], snapshot: Path
) -> None:
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL,
                 "--once", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert "provisioningRequests" not in doc and doc["scaleUp"] == []
    assert "snapshot_kinds_skipped" not in err


def test_a_bad_request_in_a_snapshot_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = request("gang", "best-effort-atomic-scale-up.autoscaling.x-k8s.io", "large", 0,
                  "2026-01-01T00:02:00Z")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                "items": [node("general-1"), bad]}))
    code = main(["simulate", "--snapshot", str(path), "--cloud-config", GENERAL, "--once",
                 *FLAGS])
    _, err = capsys.readouterr()
    assert code == 2
    assert ("ProvisioningRequest batch/gang: spec.podSets[0].count: expected an integer of "
            "at least 1, got 0") in err


def test_the_documented_example_applies_and_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """docs/provisioning-requests.md: its objects parse as the API server's would hold them,
    and the loop answers them as the page says."""
    import re

    import yaml

    text = (ROOT / "docs" / "provisioning-requests.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    example = next(b for b in blocks if "kind: PodTemplate" in b)
    objects = [d for d in yaml.safe_load_all(example) if d]
    assert [o["kind"] for o in objects] == ["PodTemplate", "ProvisioningRequest",
                                            "ProvisioningRequest"]
    job = next(yaml.safe_load(b) for b in blocks if "kind: Job" in b)
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"autoscaling.x-k8s.io/consume-provisioning-request": "training-run"}
    for o in objects:
        o["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                "items": [node("general-1"), *objects]}))
    code = main(["simulate", "--snapshot", str(path), "--cloud-config", GENERAL, "--once",
                 "--json", *FLAGS])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    conditions = {r["name"]: r["conditions"] for r in doc["provisioningRequests"]}
    # room-check (older by name at the same time) books the 4-CPU node for its two workers;
    # training-run's four workers need two new nodes like it, two workers each.
    assert conditions == {"room-check": {"Accepted": "True", "Provisioned": "True"},
                          "training-run": {"Accepted": "True", "Provisioned": "True"}}
    assert [(s["nodeGroup"], s["to"]) for s in doc["scaleUp"]] == [("general", 3)]


def test_what_if_applies_a_request(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`--apply` adds PodTemplates and requests: the loop answers them as if just created."""
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                    "items": [node("general-1")]}))
    manifest = tmp_path / "request.yaml"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        template("large", "3"),
        request("gang", "best-effort-atomic-scale-up.autoscaling.x-k8s.io", "large", 3,
                "2026-01-01T00:02:00Z"),
    ]}))
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL, "--once",
                 "--json", "--apply", str(manifest), *FLAGS])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    [applied] = doc["whatIf"]["changes"]
    assert applied["objects"] == ["PodTemplate batch/large: added",
                                  "ProvisioningRequest batch/gang: added"]
    assert doc["provisioningRequests"][0]["conditions"] == {
        "Accepted": "True", "Provisioned": "True"}
    # One of the three 3-CPU workers fits the node; two new nodes for the others.
    assert [(s["nodeGroup"], s["to"]) for s in doc["scaleUp"]] == [("general", 3)]
    # A bad one is named with the file and field.
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps(request("gang", "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                                      "large", -1, "2026-01-01T00:02:00Z")))
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL, "--once",
                 "--apply", str(bad), *FLAGS])
    _, err = capsys.readouterr()
    assert code == 2
    assert "spec.podSets[0].count" in err and "expected an integer of at least 1" in err
