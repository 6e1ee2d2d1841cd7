"""Snapshot input as users have it: a file gzipped or not, a directory of files (one per
kind, as `kubectl get <kind> -A -o json > dir/<kind>.json` writes them) or standard input."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.offline.loader import InputError, load_snapshot

ROOT = Path(__file__).resolve().parents[3]
EKS = ROOT / "examples" / "snapshots" / "eks.json"


def once(capsys: pytest.CaptureFixture[str], snapshot: str) -> dict[str, Any]:
    code = main(["simulate", "--snapshot", snapshot, "--once", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def split_by_kind(directory: Path) -> None:
    """The EKS snapshot as one file per kind, pods gzipped, plus a file that is not read."""
    items = json.loads(EKS.read_text(encoding="utf-8"))["items"]
    kinds = sorted({i["kind"] for i in items})
    for kind in kinds:
        doc = {"apiVersion": "v1", "kind": "List", "items": [i for i in items if i["kind"] == kind]}
        text = json.dumps(doc)
        if kind == "Pod":
            (directory / "pods.json.gz").write_bytes(gzip.compress(text.encode()))
        else:
            sub = directory / "workloads" if kind in ("ReplicaSet", "DaemonSet") else directory
            sub.mkdir(exist_ok=True)
            (sub / f"{kind.lower()}.json").write_text(text, encoding="utf-8")
    (directory / "README.md").write_text("taken with kubectl\n", encoding="utf-8")


def test_every_form_gives_the_same_decisions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = once(capsys, str(EKS))
    assert expected["scaleUp"], "the snapshot needs a scale-up"

    gz = tmp_path / "eks.snapshot"  # gzip is told by its content, not by its name
    gz.write_bytes(gzip.compress(EKS.read_bytes()))
    assert once(capsys, str(gz)) == expected

    directory = tmp_path / "snap"
    directory.mkdir()
    split_by_kind(directory)
    assert once(capsys, str(directory)) == expected

    stdin = io.TextIOWrapper(io.BytesIO(EKS.read_bytes()), encoding="utf-8")
    monkeypatch.setattr("sys.stdin", stdin)
    assert once(capsys, "-") == expected


def test_explain_reads_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(gzip.compress(EKS.read_bytes())), encoding="utf-8")
    monkeypatch.setattr("sys.stdin", stdin)
    code = main(["explain", "--snapshot", "-"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "shop/image-resizer-7b9d6c5f8-22cb6  ng-spot     yes" in out


def test_an_object_in_two_files_of_a_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(EKS.read_bytes())
    (tmp_path / "b.yaml").write_bytes(EKS.read_bytes())
    with pytest.raises(
        InputError, match=r"Node .*: given more than once.*\(across the directory's files\)"
    ):
        load_snapshot(tmp_path)


def test_bad_sources_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"expected a directory holding snapshot files \(\.json"):
        load_snapshot(tmp_path)
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(EKS.read_bytes())[:200])
    with pytest.raises(
        InputError, match=rf"--snapshot '{broken}': expected a complete gzip stream"
    ):
        load_snapshot(broken)
    binary = tmp_path / "x.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(InputError, match="expected UTF-8 text"):
        load_snapshot(binary)
    with pytest.raises(InputError, match="cannot read the file"):
        load_snapshot(tmp_path / "missing.json")
