"""A snapshot is one moment of one cluster: what an API server would refuse (a toleration
effect `Sometimes`, an object given twice, an item of a kind nobody knows) is bad input
naming the file, the object, the field and the expected form; the built-in kinds the
autoscaler does not read, and custom resources, are skipped with a warning naming them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.commands.cli import main
from clusterscaler.offline.loader import InputError, load_snapshot, parse_snapshot_doc
from clusterscaler.offline.scenario import parse_scenario
from structlog.testing import capture_logs

ROOT = Path(__file__).resolve().parents[3]
GENERAL = str(ROOT / "examples" / "cloud-configs" / "general.yaml")
SNAPSHOT = ROOT / "examples" / "snapshots" / "small-cluster.json"


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"clusterscaler.io/node-group": "general"}},
        "spec": {"providerID": f"sim://general/{name}"},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def pod(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}], **spec},
        "status": {"phase": "Pending"},
    }


def replicaset(name: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}},
    }


def other(api_version: str, kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}}


def write(tmp_path: Path, items: list[dict[str, Any]], fmt: str) -> Path:
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    if fmt == "json":
        path = tmp_path / "snapshot.json"
        path.write_text(json.dumps(doc, indent=1))
    else:
        path = tmp_path / "snapshot.yaml"
        path.write_text(yaml.safe_dump(doc))
    return path


FORMATS = pytest.mark.parametrize("fmt", ["json", "yaml"])

BAD_SNAPSHOTS = [
    pytest.param(
        [node("n1"), pod("web-1", tolerations=[{"key": "gpu", "operator": "Exists", "effect": "Sometimes"}])],
        "Pod default/web-1: spec.tolerations[0].effect: expected one of NoSchedule, "
        "PreferNoSchedule, NoExecute or empty (every effect), got 'Sometimes'",
        id="toleration-effect",
    ),
    pytest.param(
        [node("n1"), pod("web-1", tolerations=[{"key": "gpu", "operator": "Among", "value": "a"}])],
        "Pod default/web-1: spec.tolerations[0].operator: expected Equal or Exists, got 'Among'",
        id="toleration-operator",
    ),
    pytest.param(
        [{**node("n1"), "spec": {"taints": [{"key": "gpu", "effect": "Sometimes"}]}}],
        "Node n1: spec.taints[0].effect: expected one of NoSchedule, PreferNoSchedule, "
        "NoExecute, got 'Sometimes'",
        id="taint-effect",
    ),
    pytest.param(
        [node("n1"), other("v1", "Frobnicator", "f")],
        "items[1] (Frobnicator default/f): kind: expected a kind the autoscaler reads (Node, Pod, ",
        id="unknown-kind",
    ),
    pytest.param(
        [node("n1"), other("apps/v1", "Deploymnet", "web")],
        "items[1] (Deploymnet default/web): kind: expected a kind the autoscaler reads",
        id="misspelt-kind",
    ),
    pytest.param(
        [node("n1"), pod("web-1"), node("n2"), node("n1")],
        "Node n1: given more than once; expected each object once",
        id="duplicate-node",
    ),
    pytest.param(
        [node("n1"), pod("web-1", "shop"), pod("web-1", "shop")],
        "Pod shop/web-1: given more than once; expected each object once",
        id="duplicate-pod",
    ),
    pytest.param(
        [replicaset("web"), replicaset("web")],
        "ReplicaSet default/web: given more than once",
        id="duplicate-replicaset",
    ),
    pytest.param(
        [other("v1", "ConfigMap", "cfg", "kube-system"), other("v1", "ConfigMap", "cfg", "kube-system")],
        "ConfigMap kube-system/cfg: given more than once",
        id="duplicate-configmap",
    ),
    pytest.param(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}] * 2,
        "Namespace shop: given more than once",
        id="duplicate-namespace",
    ),
]


@pytest.mark.parametrize(("items", "message"), BAD_SNAPSHOTS)
@FORMATS
def test_bad_snapshot_is_refused_naming_file_object_and_field(
    tmp_path: Path, items: list[dict[str, Any]], message: str, fmt: str
) -> None:
    path = write(tmp_path, items, fmt)
    with pytest.raises(InputError) as err:
        load_snapshot(path)
    assert str(err.value).startswith(f"{path}: {message}"), str(err.value)


@FORMATS
def test_same_names_of_different_kinds_or_namespaces_are_distinct_objects(tmp_path: Path, fmt: str) -> None:
    items = [
        node("web"),
        pod("web", "default"),
        pod("web", "shop"),
        replicaset("web", "default"),
        replicaset("web", "shop"),
        {**replicaset("web", "default"), "kind": "StatefulSet"},
        other("v1", "ConfigMap", "web"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}},
    ]
    objects = load_snapshot(write(tmp_path, items, fmt))
    assert len(objects.pods) == 2
    assert sorted((c.kind, c.namespace) for c in objects.controllers) == [
        ("ReplicaSet", "default"),
        ("ReplicaSet", "shop"),
        ("StatefulSet", "default"),
    ]


@FORMATS
def test_kinds_not_read_are_skipped_with_a_warning_naming_them(tmp_path: Path, fmt: str) -> None:
    items = [
        node("n1"),
        pod("web-1"),
        other("v1", "Service", "web"),
        other("v1", "Service", "api"),
        other("v1", "Endpoints", "web"),
        other("v1", "Event", "web.17c2a"),
        other("apps/v1", "Deployment", "web"),
        other("argoproj.io/v1alpha1", "Rollout", "canary"),
    ]
    path = write(tmp_path, items, fmt)
    with capture_logs() as logs:
        objects = load_snapshot(path)
    assert [n.name for n in objects.nodes] == ["n1"]
    assert [p.name for p in objects.pods] == ["web-1"]
    warnings = [e for e in logs if e["event"] == "snapshot_kinds_skipped"]
    assert warnings == [
        {
            "event": "snapshot_kinds_skipped",
            "log_level": "warning",
            "source": str(path),
            "kinds": {"Deployment": 1, "Endpoints": 1, "Event": 1, "Rollout": 1, "Service": 2},
            "reason": "the autoscaler does not read these kinds",
        }
    ]


def test_a_snapshot_of_read_kinds_only_warns_of_nothing() -> None:
    with capture_logs() as logs:
        load_snapshot(SNAPSHOT)
    assert [e for e in logs if e["log_level"] == "warning"] == []


def test_scenario_objects_that_repeat_a_snapshot_object_are_refused(tmp_path: Path) -> None:
    snapshot = write(tmp_path, [node("n1"), pod("web-1")], "json")
    doc = {"name": "s", "snapshot": snapshot.name, "objects": [pod("web-1")]}
    with pytest.raises(InputError) as err:
        parse_scenario(doc, "scenario.yaml", tmp_path)
    assert str(err.value).startswith(
        "scenario.yaml: objects: Pod default/web-1: given more than once"
    )


def test_scenario_workload_that_repeats_an_object_is_refused(tmp_path: Path) -> None:
    doc = {
        "name": "s",
        "objects": [replicaset("web")],
        "workloads": [{"name": "web", "replicas": 1, "cpu": "100m"}],
    }
    with pytest.raises(InputError) as err:
        parse_scenario(doc, "scenario.yaml", tmp_path)
    assert str(err.value).startswith(
        "scenario.yaml: workloads: ReplicaSet default/web: given more than once"
    )


def test_inline_objects_are_checked_as_a_snapshot_is() -> None:
    with pytest.raises(InputError, match=r"^here: items\[0\] \(Frobnicator default/f\): kind: "):
        parse_snapshot_doc({"kind": "List", "items": [other("v1", "Frobnicator", "f")]}, "here")


@pytest.mark.parametrize("command", ["simulate", "explain"])
@pytest.mark.parametrize(
    ("items", "message"),
    [
        pytest.param(
            [node("n1"), pod("web-1", tolerations=[{"key": "gpu", "effect": "Sometimes", "value": "x"}])],
            "Pod default/web-1: spec.tolerations[0].effect: expected one of NoSchedule, "
            "PreferNoSchedule, NoExecute or empty (every effect), got 'Sometimes'",
            id="toleration-effect",
        ),
        pytest.param(
            [node("n1"), other("apps/v1", "Deploymnet", "web")],
            "items[1] (Deploymnet default/web): kind: expected",
            id="misspelt-kind",
        ),
        pytest.param(
            [node("n1"), node("n1")],
            "Node n1: given more than once; expected each object once",
            id="duplicate-node",
        ),
    ],
)
def test_commands_exit_2_with_the_message(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: str,
    items: list[dict[str, Any]],
    message: str,
) -> None:
    path = write(tmp_path, items, "json")
    argv = [command, "--snapshot", str(path), "--cloud-config", GENERAL]
    if command == "simulate":
        argv.append("--once")
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert f"clusterscaler {command}: error: {path}: {message}" in err


def test_simulate_runs_a_snapshot_with_skipped_kinds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = json.loads(SNAPSHOT.read_text())
    doc["items"].append(other("v1", "Service", "web"))
    path = tmp_path / "with-service.json"
    path.write_text(json.dumps(doc))
    code = main(["simulate", "--snapshot", str(path), "--cloud-config", GENERAL, "--once", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert set(json.loads(out)) == {"scaleUp", "scaleDown", "unschedulable", "unremovable"}
    assert "snapshot_kinds_skipped" in err
    assert "Service" in err
