"""`load_snapshot` parses JSON Lists straight from their text: it must read what decoding
the document to dicts first reads, and fail with the same messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from clusterscaler.model import ClusterObjects
from clusterscaler.offline.loader import InputError, load_snapshot, parse_snapshot_doc


def decoded_first(path: Path) -> ClusterObjects:
    """The plain route: the whole document decoded by `json` (or YAML), then modelled."""
    text = path.read_text()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        doc = docs[0] if len(docs) == 1 else {"kind": "List", "items": docs}
    return parse_snapshot_doc(doc, str(path))

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
def test_same_objects_as_decoding_first(tmp_path: Path, text: str) -> None:
    path = tmp_path / "snap.json"
    path.write_text(text)
    objects = load_snapshot(path)
    assert objects == decoded_first(path)
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
def test_errors_name_the_file_object_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "snap.json"
    path.write_text(text)
    with pytest.raises(InputError) as fast:
        load_snapshot(path)
    assert str(fast.value).startswith(f"{path}: ")
    assert message in str(fast.value)
    if text.lstrip().startswith(("{", "[")) and "not json" not in text:
        with pytest.raises(InputError) as plain:
            decoded_first(path)
        assert str(fast.value) == str(plain.value)


def test_missing_and_undecodable_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"--snapshot .*cannot read the file"):
        load_snapshot(tmp_path / "nope.json")
    latin = tmp_path / "latin1.json"
    latin.write_bytes(b'{"kind": "List", "items": [], "x": "\xe9"}')
    with pytest.raises(InputError, match=r"expected UTF-8 text .*byte 0xe9 at offset 36"):
        load_snapshot(latin)
