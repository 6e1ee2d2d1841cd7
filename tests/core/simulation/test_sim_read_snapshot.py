"""`read_snapshot`, the fast route for JSON snapshots, reads what `load_snapshot` reads and
fails with the same messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from clusterscaler.simulation.loader import InputError, load_snapshot
from clusterscaler.simulation.scenario import read_snapshot

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"clusterscaler.io/node-group": "general"}},
    "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "default",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}],
        "creationTimestamp": "2024-05-01T10:00:00Z",
    },
    "spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "nodeName": "n1",
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
    "status": {"phase": "Running"},
}
LIST = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [NODE, POD, {"kind": "Service", "metadata": {"name": "s"}}],
}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(LIST),
        "\n  " + json.dumps(LIST, indent=2),
        json.dumps([NODE, POD]),
        json.dumps({"kind": "PodList", "items": [{k: v for k, v in POD.items() if k != "kind"}]}),
        yaml.safe_dump(LIST),
        # `{` opens a YAML flow mapping too: not JSON, still a snapshot.
        "{kind: List, items: [{kind: Node, metadata: {name: n1}}]}",
    ],
    ids=["json", "json-indented", "json-array", "typed-list", "yaml", "yaml-flow"],
)
def test_same_objects_as_load_snapshot(tmp_path: Path, text: str) -> None:
    path = tmp_path / "snap.json"
    path.write_text(text)
    objects = read_snapshot(path)
    assert objects == load_snapshot(path)
    assert objects.nodes or objects.pods


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a Kubernetes List in JSON or YAML, got an empty file"),
        ("{not json: [", "expected a Kubernetes List in JSON or YAML"),
        ("42", "expected a Kubernetes List (an object with items) or a JSON array, got int"),
        (json.dumps({"kind": "List", "items": 3}), "List: items: expected a list"),
        (
            json.dumps({"kind": "List", "items": [{**NODE, "status": {"capacity": {"cpu": "x"}}}]}),
            "Node n1: status.capacity.cpu: expected",
        ),
        (
            json.dumps({"kind": "List", "items": [{**POD, "spec": {"containers": 3}}]}),
            "Pod default/p: spec.containers: expected a list of containers",
        ),
    ],
    ids=["empty", "garbage", "scalar", "items-not-list", "bad-quantity", "bad-containers"],
)
def test_same_errors_as_load_snapshot(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "snap.json"
    path.write_text(text)
    with pytest.raises(InputError) as fast:
        read_snapshot(path)
    with pytest.raises(InputError) as slow:
        load_snapshot(path)
    assert str(fast.value) == str(slow.value)
    assert str(fast.value).startswith(f"{path}: ")
    assert message in str(fast.value)


def test_missing_and_undecodable_files_as_load_snapshot(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"--snapshot .*cannot read the file"):
        read_snapshot(tmp_path / "nope.json")
    latin = tmp_path / "latin1.json"
    latin.write_bytes(b'{"kind": "List", "items": [], "x": "\xe9"}')
    with pytest.raises(UnicodeDecodeError):
        load_snapshot(latin)
    with pytest.raises(UnicodeDecodeError):
        read_snapshot(latin)
