"""Scenario files and snapshots: what parses, and errors naming file, field and form."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.offline.loader import InputError, load_snapshot, parse_snapshot_text
from clusterscaler.offline.scenario import (
    AddPods,
    Cordon,
    DeletePods,
    FailGroup,
    RecoverGroup,
    ScaleWorkload,
    load_scenario,
    parse_scenario,
)

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"clusterscaler.io/node-group": "general"}},
    "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
}


def test_snapshot_in_json_yaml_and_yaml_streams(tmp_path: Path) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [NODE, POD, {"kind": "Service", "metadata": {"name": "s"}}]}
    as_json = tmp_path / "s.json"
    as_json.write_text(json.dumps(doc))
    objects = load_snapshot(as_json)
    assert [n.name for n in objects.nodes] == ["n1"]
    assert [p.key for p in objects.pods] == ["default/p"]
    assert objects.skipped == {"Service": 1}
    import yaml

    as_yaml = parse_snapshot_text(yaml.safe_dump(doc), "s.yaml")
    assert [n.name for n in as_yaml.nodes] == ["n1"]
    stream = parse_snapshot_text(yaml.safe_dump(NODE) + "---\n" + yaml.safe_dump(POD), "s.yaml")
    assert len(stream.nodes) == 1 and len(stream.pods) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "s.json: expected a Kubernetes List in JSON or YAML, got an empty file"),
        ("{not json: [", "s.json: expected a Kubernetes List in JSON or YAML"),
        ("42", "s.json: expected a Kubernetes List (an object with items) or a JSON array, got int"),
        (json.dumps({"kind": "List", "items": 3}), "s.json: List: items: expected a list"),
        (
            json.dumps({"kind": "List", "items": [{**NODE, "status": {"capacity": {"cpu": "x"}}}]}),
            "s.json: Node n1: status.capacity.cpu: expected",
        ),
    ],
    ids=["empty", "garbage", "scalar", "items-not-list", "bad-quantity"],
)
def test_bad_snapshots_name_file_object_and_field(text: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_snapshot_text(text, "s.json")
    assert message in str(info.value)


def test_missing_snapshot_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"--snapshot .*cannot read the file"):
        load_snapshot(tmp_path / "nope.json")


FULL = {
    "name": "burst",
    "description": "A burst.",
    "duration": "1h",
    "cloudConfig": "cc.yaml",
    "objects": [NODE],
    "initialNodes": {"general": 2},
    "flags": {"scale-down-unneeded-time": "5m", "expander": "least-waste"},
    "workloads": [
        {"name": "web", "replicas": 3, "cpu": "500m", "memory": "1Gi", "pdb": {"minAvailable": 2}},
        {"name": "db", "kind": "StatefulSet", "replicas": 1, "cpu": "1"},
    ],
    "events": [
        {"at": "20m", "addPods": {"name": "batch", "count": 2, "cpu": "1"}},
        {"at": "2m", "scale": {"workload": "default/web", "replicas": 10}},
        {"at": "25m", "deletePods": ["default/batch-0"]},
        {"at": "30m", "cordon": "n1"},
        {"at": "31m", "uncordon": "n1"},
        {"at": "40m", "failGroup": {"nodeGroup": "general", "errorCode": "QuotaExceeded", "outOfResources": False}},
        {"at": "50m", "recoverGroup": "general"},
    ],
}


def test_full_scenario(tmp_path: Path) -> None:
    scenario = parse_scenario(FULL, "s.yaml", tmp_path)
    assert scenario.name == "burst"
    assert scenario.duration == timedelta(hours=1)
    assert scenario.cloud_config_path == str((tmp_path / "cc.yaml").resolve())
    assert scenario.initial_nodes == {"general": 2}
    assert scenario.flags == {"scale-down-unneeded-time": "5m", "expander": "least-waste"}
    objects = scenario.objects
    assert [n.name for n in objects.nodes] == ["n1"]
    assert sorted(c.name for c in objects.controllers) == ["db", "web"]
    web_pods = [p for p in objects.pods if p.owner and p.owner.name == "web"]
    assert len(web_pods) == 3
    assert web_pods[0].requests.cpu == 500 and web_pods[0].labels == {"app": "web"}
    assert [p.name for p in objects.pods if p.owner and p.owner.name == "db"] == ["db-0"]
    assert [b.name for b in objects.pdbs] == ["web"]
    # Sorted by time, keeping the file's order for equal times.
    actions = [type(e.action) for e in scenario.events]
    assert actions == [ScaleWorkload, AddPods, DeletePods, Cordon, Cordon, FailGroup, RecoverGroup]
    assert scenario.events[0].at == timedelta(minutes=2)
    add = scenario.events[1].action
    assert isinstance(add, AddPods) and [p.name for p in add.pods] == ["batch-0", "batch-1"]
    fail = scenario.events[5].action
    assert fail == FailGroup("general", "QuotaExceeded", "", False)


def with_(**changes: Any) -> dict[str, Any]:
    return {**FULL, **changes}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "<document>: expected a scenario object"),
        (with_(durration="1h"), "<scenario>.durration: unknown field"),
        (with_(duration="long"), "duration: expected a Go duration"),
        (with_(cloudConfig=3), "cloudConfig: expected a path to a cloud-config file or an inline"),
        (with_(flags={"expandr": "x"}), "flags.expandr: unknown autoscaler flag 'expandr'"),
        (with_(flags={"cloud-provider": "aws"}), "flags.cloud-provider: set the cloud-config"),
        (with_(workloads=[{"name": "w"}]), "workloads[0] (w).replicas: required field is missing"),
        (with_(workloads=[{"name": "w", "replicas": -1}]), "workloads[0] (w).replicas: expected a non-negative integer"),
        (with_(workloads=[{"name": "w", "replicas": 1, "kind": "Deployment"}]), "workloads[0] (w).kind: expected one of ReplicaSet"),
        (with_(workloads=[{"name": "w", "replicas": 1, "cpu": "lots"}]), "workloads: Pod default/w-00000: spec.containers[0].resources.requests.cpu"),
        (with_(events=[{"scale": {}}]), "events[0].at: required field is missing"),
        (with_(events=[{"at": "1m", "explode": 1}]), "events[0]: expected exactly one action of scale"),
        (with_(events=[{"at": "1m", "scale": {"workload": "w", "replicas": "x"}}]), "events[0].scale.replicas: expected a non-negative integer"),
        (with_(events=[{"at": "1m", "deletePods": ["nonamespace"]}]), "events[0].deletePods: expected a list of namespace/name"),
        (with_(events=[{"at": "1m", "failGroup": {"nodeGroup": "g", "errorCode": ""}}]), "events[0].failGroup.errorCode: expected a non-empty error code"),
        (with_(initialNodes={"g": "two"}), "initialNodes.g: expected a non-negative integer"),
        (with_(objects=[{"kind": "Node"}]), "Node: metadata: expected an object with a name"),
    ],
    ids=[
        "not-a-mapping", "unknown-key", "bad-duration", "bad-cloud-config", "unknown-flag",
        "provider-flag", "workload-no-replicas", "workload-negative", "workload-kind",
        "workload-bad-cpu", "event-no-at", "event-unknown-action", "event-bad-replicas",
        "event-bad-pod-key", "event-empty-code", "initial-nodes", "bad-object",
    ],
)
def test_bad_scenarios_name_file_field_and_form(doc: Any, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_scenario(doc, "s.yaml")
    assert str(info.value).startswith("s.yaml")
    assert message in str(info.value)


def test_scenario_file_paths_are_relative_to_it(tmp_path: Path) -> None:
    (tmp_path / "snap.json").write_text(json.dumps({"kind": "List", "items": [NODE]}))
    (tmp_path / "s.yaml").write_text("snapshot: snap.json\nflags: ['--scale-down-unneeded-time=1m', '--balance-similar-node-groups']\n")
    scenario = load_scenario(tmp_path / "s.yaml")
    assert scenario.name == "s"
    assert [n.name for n in scenario.objects.nodes] == ["n1"]
    assert scenario.flags == {"scale-down-unneeded-time": "1m", "balance-similar-node-groups": "true"}
