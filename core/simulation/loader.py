"""Loading cluster snapshots: what `kubectl get nodes,pods,pdb,ds,rs,sts,jobs,cm -A -o json`
prints, in JSON or YAML (a `List`, a typed `*List`, a plain array or a stream of YAML
documents)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from clusterscaler.model import ClusterObjects, ModelError, decode_json, gc_paused


class InputError(ValueError):
    """Bad user input (snapshot, scenario, cloud-config, flag). The message names the file,
    the object, the field and the expected form; commands exit with status 2."""


def parse_snapshot_text(text: str, source: str) -> ClusterObjects:
    """Parse snapshot text from `source` (a file name, for messages).

    A JSON `List` (what `kubectl get -o json` prints) is parsed straight from its text by
    `ClusterObjects.from_json_list`, other JSON by `decode_json`, both with the garbage
    collector held off: about a third of the time of decoding to dicts first on large
    clusters, with the same objects and error messages.
    """
    doc: Any
    stripped = text.lstrip()
    if not stripped:
        raise InputError(f"{source}: expected a Kubernetes List in JSON or YAML, got an empty file")
    if stripped[0] not in "[{":
        return parse_snapshot_doc(_yaml(text, source), source)
    with gc_paused():
        try:
            objects = ClusterObjects.from_json_list(text)
        except ModelError as exc:
            raise InputError(f"{source}: {exc}") from None
        if objects is not None:
            return objects
        try:
            doc = decode_json(text)
        except json.JSONDecodeError as exc:
            # `{` also starts YAML flow mappings; only give up if YAML fails too.
            doc = _yaml(text, source, json_error=exc)
        return parse_snapshot_doc(doc, source)


def _yaml(text: str, source: str, json_error: json.JSONDecodeError | None = None) -> Any:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        detail = f"line {json_error.lineno}: {json_error.msg}" if json_error else str(exc)
        raise InputError(
            f"{source}: expected a Kubernetes List in JSON or YAML: {detail}"
        ) from None
    if len(docs) == 1:
        return docs[0]
    # A stream of documents (`---` separated objects or lists).
    items: list[Any] = []
    for d in docs:
        if isinstance(d, dict) and isinstance(d.get("items"), list):
            items.extend(d["items"])
        else:
            items.append(d)
    return {"kind": "List", "items": items}


def parse_snapshot_doc(doc: Any, source: str) -> ClusterObjects:
    if isinstance(doc, dict) and "items" not in doc and "kind" in doc:
        # A single object, e.g. `kubectl get node x -o json`.
        doc = {"kind": "List", "items": [doc]}
    if not isinstance(doc, dict | list):
        raise InputError(
            f"{source}: expected a Kubernetes List (an object with items) or a JSON array, "
            f"got {type(doc).__name__}"
        )
    try:
        return ClusterObjects.from_list(doc)
    except ModelError as exc:
        raise InputError(f"{source}: {exc}") from None


def load_snapshot(path: str | Path) -> ClusterObjects:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--snapshot {str(p)!r}: cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"--snapshot {str(p)!r}: expected UTF-8 text (JSON or YAML), "
            f"got byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
        ) from None
    return parse_snapshot_text(text, str(p))


def snapshot_time(objects: ClusterObjects) -> datetime | None:
    """When a snapshot was taken, as far as it tells: its newest creation timestamp."""
    stamps = [n.creation_time for n in objects.nodes if n.creation_time is not None]
    stamps += [p.creation_time for p in objects.pods if p.creation_time is not None]
    return max(stamps) if stamps else None


def merge(base: ClusterObjects, extra: ClusterObjects) -> ClusterObjects:
    """`base` with `extra`'s objects added (scenario objects on top of a snapshot)."""
    out = ClusterObjects()
    for item in base:
        out.add(item)
    for item in extra:
        out.add(item)
    for kind, count in (*base.skipped.items(), *extra.skipped.items()):
        out.skipped[kind] = out.skipped.get(kind, 0) + count
    return out
