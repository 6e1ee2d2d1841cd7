"""Snapshot files no careful tool writes: each is refused with an error naming the file,
and the object and field where one is to blame, never a traceback."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.offline.loader import InputError, load_snapshot

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "snapshots" / "eks-cluster.json"


def _example() -> dict[str, Any]:
    return dict(json.loads(EXAMPLE.read_text()))


def _first(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(i for i in doc["items"] if i["kind"] == kind)


def _status_list(doc: dict[str, Any]) -> str:
    _first(doc, "Node")["status"] = ["Ready"]
    return json.dumps(doc)


def _spec_string(doc: dict[str, Any]) -> str:
    _first(doc, "Pod")["spec"] = "containers"
    return json.dumps(doc)


def _metadata_list(doc: dict[str, Any]) -> str:
    _first(doc, "Pod")["metadata"] = ["name"]
    return json.dumps(doc)


def _deep(doc: dict[str, Any]) -> str:
    return '{"apiVersion": "v1", "kind": "List", "items": [' + "[" * 100_000 + "]" * 100_000 + "]}"


def _long_int(doc: dict[str, Any]) -> str:
    _first(doc, "Pod")["spec"]["priority"] = 1
    return json.dumps(doc).replace('"priority": 1', '"priority": ' + "9" * 6000, 1)


CASES = [
    pytest.param(_status_list, r"Node ip-10-0-1-11\.ec2\.internal: status: expected an object", id="status-list"),
    pytest.param(_spec_string, r"Pod kube-system/\S+: spec: expected an object", id="spec-string"),
    pytest.param(_metadata_list, r"metadata", id="metadata-list"),
    pytest.param(_deep, r"nested", id="deep-nesting"),
    pytest.param(_long_int, r"snapshot\.json: ", id="6000-digit-int"),
]


@pytest.mark.parametrize(("mutate", "message"), CASES)
def test_hostile_snapshot_is_an_input_error(tmp_path: Path, mutate: Any, message: str) -> None:
    path = tmp_path / "snapshot.json"
    path.write_text(mutate(copy.deepcopy(_example())))
    with pytest.raises(InputError, match=message) as exc:
        load_snapshot(path)
    assert str(path) in str(exc.value)


def test_a_node_with_a_quantity_beyond_int64_is_read(tmp_path: Path) -> None:
    doc = _example()
    node = _first(doc, "Node")
    node["status"]["capacity"]["ephemeral-storage"] = "1e400"
    node["status"]["allocatable"]["ephemeral-storage"] = "1e400"
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(doc))
    objects = load_snapshot(path)
    [read] = [n for n in objects.nodes if n.name == node["metadata"]["name"]]
    assert read.allocatable.ephemeral_storage == (1 << 63) - 1
