"""Snapshots with CapacityBuffers and PodTemplates: `simulate --once --json` and `explain`
show the buffers' placeholder pods in the scale-up and the buffers as the loop leaves them;
`--apply` adds a buffer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main

ROOT = Path(__file__).resolve().parents[3]
GENERAL = str(ROOT / "examples" / "cloud-configs" / "general.yaml")
FLAGS = ["--capacity-buffer-controller-enabled", "--capacity-buffer-pod-injection-enabled"]


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
        "metadata": {"name": name, "namespace": "web"},
        "template": {"spec": {"containers": [
            {"name": "w", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}},
    }


def buffer(name: str, template_name: str, replicas: int, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": "web", "uid": f"uid-{name}",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"provisioningStrategy": "buffer.x-k8s.io/active-capacity",
                 "podTemplateRef": {"name": template_name}, "replicas": replicas},
        **extra,
    }


def write(tmp_path: Path, *items: dict[str, Any]) -> Path:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    return path


def test_simulate_once_json_shows_the_placeholder_pods_and_the_buffer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Six spare pods of 1.5 CPUs: two fit the 4-CPU node, four need two new nodes.
    snapshot = write(tmp_path, node("general-1"), template("spare", "1500m"),
                     buffer("spare", "spare", 6))
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL,
                 "--once", "--json", *FLAGS])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    [scale_up] = doc["scaleUp"]
    assert (scale_up["nodeGroup"], scale_up["from"], scale_up["to"]) == ("general", 1, 3)
    assert scale_up["pods"] == [f"web/capacity-buffer-spare-{i}" for i in range(3, 7)]
    assert doc["capacityBuffers"] == [{
        "namespace": "web", "name": "spare",
        "podTemplate": "capacitybuffer-spare-pod-template", "replicas": 6,
        "conditions": {"ReadyForProvisioning": "True", "LimitedByQuotas": "False",
                       "Provisioning": "True"},
        "injectedPods": 6,
    }]


def test_a_buffer_with_a_status_is_injected_with_the_injection_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A snapshot of a cluster whose controller already wrote the status."""
    managed = template("capacitybuffer-spare-pod-template", "3")
    managed["metadata"]["generation"] = 2
    status = {"status": {
        "podTemplateRef": {"name": "capacitybuffer-spare-pod-template"},
        "replicas": 2, "podTemplateGeneration": 2,
        "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
        "conditions": [{"type": "ReadyForProvisioning", "status": "True",
                        "reason": "AttributesSetSuccessfully", "message": "ready",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }}
    snapshot = write(tmp_path, node("general-1"), managed,
                     buffer("spare", "spare", 9, **status))
    code = main(["explain", "--snapshot", str(snapshot), "--cloud-config", GENERAL,
                 "--capacity-buffer-pod-injection-enabled"])
    out, err = capsys.readouterr()
    assert code == 0, err
    # Two chunks of 3 CPUs (the status's replicas, not the spec's): one fits the node, the
    # other gets a new one.
    assert "web/capacity-buffer-spare-2" in out
    assert "web/capacity-buffer-spare-3" not in out
    assert "scale-up 1 -> 2" in out


def test_what_if_applies_a_buffer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    snapshot = write(tmp_path, node("general-1"))
    manifest = tmp_path / "buffer.yaml"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        template("spare", "2"), buffer("spare", "spare", 4)]}))
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL, "--once",
                 "--json", "--apply", str(manifest), *FLAGS])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    [applied] = doc["whatIf"]["changes"]
    assert applied["objects"] == ["PodTemplate web/spare: added",
                                  "CapacityBuffer web/spare: added"]
    assert [(s["nodeGroup"], s["to"]) for s in doc["scaleUp"]] == [("general", 2)]
    # A bad one is named with the file, the object and the field.
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps(buffer("spare", "spare", -1)))
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL, "--once",
                 "--apply", str(bad), *FLAGS])
    _, err = capsys.readouterr()
    assert code == 2
    assert "CapacityBuffer web/spare: spec.replicas: expected an integer from 0 to" in err


def test_without_the_flags_buffers_are_read_and_left_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    snapshot = write(tmp_path, node("general-1"), template("spare", "1500m"),
                     buffer("spare", "spare", 6))
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL,
                 "--once", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert "capacityBuffers" not in doc and doc["scaleUp"] == []
    assert "snapshot_kinds_skipped" not in err


def test_the_documented_example_applies_and_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """docs/capacity-buffers.md: its objects parse as the API server would hold them, and
    the loop gives them the status the page says."""
    import re

    import yaml

    text = (ROOT / "docs" / "capacity-buffers.md").read_text()
    example = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S)
                   if "kind: CapacityBuffer" in b)
    objects = [d for d in yaml.safe_load_all(example) if d]
    assert [o["kind"] for o in objects] == ["PodTemplate", "CapacityBuffer", "CapacityBuffer"]
    manifest = tmp_path / "buffer.yaml"
    manifest.write_text(example)
    snapshot = write(tmp_path, node("general-1"))
    code = main(["simulate", "--snapshot", str(snapshot), "--cloud-config", GENERAL, "--once",
                 "--json", "--apply", str(manifest), *FLAGS])
    out, err = capsys.readouterr()
    assert code == 0, err
    buffers = {b["name"]: b for b in json.loads(out)["capacityBuffers"]}
    assert buffers["web-spare"]["replicas"] == 3
    assert buffers["web-spare"]["conditions"]["ReadyForProvisioning"] == "True"
    assert buffers["web-spare"]["injectedPods"] == 3
    # The Deployment is not in this snapshot: not ready, with the reason in its status.
    assert buffers["api-headroom"]["conditions"]["ReadyForProvisioning"] == "False"
