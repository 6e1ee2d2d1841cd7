"""Loading cluster snapshots: what `kubectl get nodes,pods,pdb,ds,rs,sts,jobs,cm -A -o json`
prints, in JSON or YAML (a `List`, a typed `*List`, a plain array or a stream of YAML
documents), from a file, gzipped or not, a directory of such files, or standard input.
Each file (or standard input) is read to at most `MAX_SNAPSHOT_BYTES` (4 GiB), once
gunzipped: a larger one, an endless one (`/dev/zero`) or a gzip bomb is an `InputError`
naming it, not a read without end.

A snapshot is one moment of one cluster, so it is checked as an API server would hold it:
an object given twice (two Nodes of one name, two Pods of one namespace and name) is an
error, as is an item of a kind that is neither read nor known to be safely skipped (see
`clusterscaler.model.is_unread_kind`); the kinds skipped are named in a warning.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import re
import sys
import zlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
import yaml
from clusterscaler.model import (
    ClusterObjects,
    Controller,
    ModelError,
    ModelObject,
    Node,
    Pod,
    decode_json,
    gc_paused,
)
from clusterscaler.model.common import clip_text
from clusterscaler.model.yamltext import (
    MAX_SNAPSHOT_BYTES,
    YamlFileError,
    load_yaml_documents,
    read_at_most,
    read_file_bytes,
)
from clusterscaler.simulator.predicates import volumes_constrain_scheduling

log = structlog.get_logger()


class InputError(ValueError):
    """Bad user input (snapshot, scenario, cloud-config, flag). The message names the file,
    the object, the field and the expected form; commands exit with status 2."""


# Replicas, pods and initial nodes of a scenario or an applied manifest are built one object
# each: a count no cluster holds (Kubernetes' limits are 150,000 pods and 5,000 nodes) would
# only exhaust memory.
MAX_COUNT = 200_000


def parse_snapshot_text(text: str, source: str, *, list_tried: bool = False) -> ClusterObjects:
    """Parse snapshot text from `source` (a file name, for messages); with `list_tried`,
    the text is known not to be a valid JSON `List`.

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
            objects = None if list_tried else ClusterObjects.from_json_list(text)
        except ModelError as exc:
            raise InputError(f"{source}: {exc}") from None
        if objects is not None:
            return checked(objects, source)
        try:
            doc = decode_json(text)
        except json.JSONDecodeError as exc:
            # `{` also starts YAML flow mappings; only give up if YAML fails too.
            doc = _yaml(text, source, json_error=exc)
        return parse_snapshot_doc(doc, source)


def _yaml(text: str, source: str, json_error: json.JSONDecodeError | None = None) -> Any:
    try:
        docs = [d for d in load_yaml_documents(text) if d is not None]
    # PyYAML raises ValueError for an integer beyond 4,300 digits and RecursionError
    # for deep nesting: both are malformed input like any YAML error.
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        detail = f"line {json_error.lineno}: {json_error.msg}" if json_error else str(exc)
        raise InputError(
            f"{source}: expected a Kubernetes List in JSON or YAML: {detail}"
        ) from None
    if len(docs) == 1:
        return docs[0]
    # A stream of documents (`---` separated objects or lists).
    items: list[Any] = []
    for d in docs:
        listed = d.get("items") if isinstance(d, dict) else None
        if isinstance(listed, list):
            items.extend(listed)
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
        objects = ClusterObjects.from_list(doc)
    except ModelError as exc:
        raise InputError(f"{source}: {exc}") from None
    return checked(objects, source)


def checked(objects: ClusterObjects, source: str) -> ClusterObjects:
    """`objects`, once they are known to hold each object once; the kinds skipped while
    parsing them are logged as a warning."""
    check_unique(objects, source)
    if objects.skipped:
        log.warning(
            "snapshot_kinds_skipped",
            source=source,
            kinds=dict(sorted(objects.skipped.items())),
            reason="the autoscaler does not read these kinds",
        )
    return objects


def _identity(item: ModelObject) -> tuple[str, str, str]:
    """Kind, namespace and name: what makes an object one object to the API server."""
    if isinstance(item, Controller):
        return item.kind, item.namespace, item.name
    namespace = getattr(item, "namespace", "")
    return type(item).__name__, namespace if isinstance(namespace, str) else "", item.name


def _describe(identity: tuple[str, str, str]) -> str:
    kind, namespace, name = identity
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def check_unique(objects: ClusterObjects, source: str) -> None:
    """Refuse an object given twice: the in-memory cluster would keep one of them at
    random, and a real cluster cannot hold both."""
    # One key tuple per pod: with the collector on, its passes over the parsed snapshot
    # would cost as much as parsing it.
    with gc_paused():
        _check_unique(objects, source)


def _check_unique(objects: ClusterObjects, source: str) -> None:
    # Nodes and pods are most of a snapshot: their keys are built without a dispatch.
    seen_nodes: set[str] = set()
    for node in objects.nodes:
        if node.name in seen_nodes:
            raise _duplicate(source, ("Node", "", node.name))
        seen_nodes.add(node.name)
    seen_pods: set[tuple[str, str]] = set()
    for pod in objects.pods:
        key = (pod.namespace, pod.name)
        if key in seen_pods:
            raise _duplicate(source, ("Pod", *key))
        seen_pods.add(key)
    seen: set[tuple[str, str, str]] = set()
    for item in objects:
        if isinstance(item, Node | Pod):
            continue
        identity = _identity(item)
        if identity in seen:
            raise _duplicate(source, identity)
        seen.add(identity)


def _duplicate(source: str, identity: tuple[str, str, str]) -> InputError:
    return InputError(
        f"{source}: {_describe(identity)}: given more than once; expected each object once "
        "(one kind, namespace and name per object, as in a cluster)"
    )


STDIN = "-"
# The files of a snapshot directory that are read (others, such as a README, are not).
SNAPSHOT_SUFFIXES = (".json", ".yaml", ".yml", ".json.gz", ".yaml.gz", ".yml.gz")
_GZIP_MAGIC = b"\x1f\x8b"


def parse_snapshot_data(data: bytes, source: str) -> ClusterObjects:
    """`parse_snapshot_text` of a file's bytes, gunzipped first when they are gzip (told
    by the magic bytes, whatever the file is called). A JSON `List` in ASCII (as `kubectl`
    prints it) is parsed from the bytes themselves, without a decoded copy of the text.

    Any input gives the objects or an `InputError` naming the file (and the object and
    field where one is to blame): never a traceback."""
    try:
        return _parse_snapshot_data(data, source)
    except RecursionError:
        raise InputError(
            f"{source}: expected JSON or YAML nested at most a few hundred levels deep, got "
            "deeper nesting"
        ) from None
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:
        if isinstance(exc, InputError):
            raise
        if "integer string conversion" in str(exc):
            # JSON's decoder past the interpreter's limit on the digits of an integer.
            raise InputError(
                f"{source}: expected numbers of at most 4,300 digits, got a longer one"
            ) from None
        raise InputError(
            f"{source}: expected a Kubernetes List in JSON or YAML, got input that cannot be "
            f"read: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None


def _parse_snapshot_data(data: bytes, source: str) -> ClusterObjects:
    data = _gunzipped(data, source)
    if not data.isascii():
        # Decoded in full, so that any byte that is not UTF-8 is an error, wherever it is.
        return parse_snapshot_text(_text(data, source), source)
    space = _LEADING_SPACE.match(data)
    first = space.end() if space else 0
    if data[first : first + 1] in (b"{", b"["):
        with gc_paused():
            try:
                objects = ClusterObjects.from_json_list(data)
            except ModelError as exc:
                raise InputError(f"{source}: {exc}") from None
            if objects is not None:
                return checked(objects, source)
    return parse_snapshot_text(_text(data, source), source, list_tried=True)


_LEADING_SPACE = re.compile(rb"\s*")


def _gunzipped(data: bytes, source: str) -> bytes:
    """`data` gunzipped when it is gzip, to at most `MAX_SNAPSHOT_BYTES` bytes: a gzip bomb
    (a few MB that gunzip to terabytes) is refused as a file that large is."""
    if data[:2] == _GZIP_MAGIC:
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
                return read_at_most(
                    stream, MAX_SNAPSHOT_BYTES, f"--snapshot {source!r}",
                    "a gzip stream that gunzips to",
                    _check_text_start(f"--snapshot {source!r}", gzip_too=False),
                )
        except YamlFileError as exc:
            raise InputError(str(exc)) from None
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(
                f"--snapshot {source!r}: expected a complete gzip stream: {exc}"
            ) from None
    return data


def _check_text_start(where: str, gzip_too: bool = True) -> Callable[[bytes], None]:
    """A check of a snapshot's first bytes: a file of text (UTF-8, with no NUL byte, which
    neither JSON nor YAML allows) or, when `gzip_too`, a gzip stream. So `/dev/zero` or
    `/dev/urandom` named by mistake is refused at once, not after 4 GiB."""

    def check(start: bytes) -> None:
        if gzip_too and start[:2] == _GZIP_MAGIC:
            return
        nul = start.find(b"\0")
        text = start if nul < 0 else start[:nul]
        try:
            codecs.getincrementaldecoder("utf-8")().decode(text, final=False)
        except UnicodeDecodeError as exc:
            offset, byte = exc.start, text[exc.start]
        else:
            if nul < 0:
                return
            offset, byte = nul, 0
        raise YamlFileError(_not_text(where, byte, offset))

    return check


def _not_text(where: str, byte: int, offset: int) -> str:
    """The error of a snapshot that is not text, naming the first byte that is not."""
    return f"{where}: expected UTF-8 text (JSON or YAML), got byte 0x{byte:02x} at offset {offset}"


def _text(data: bytes, source: str) -> str:
    """`data` (not gzip) as text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            _not_text(f"--snapshot {source!r}", exc.object[exc.start], exc.start)
        ) from None


def path_label(path: str | Path) -> str:
    """A file's path as an error names it: quoted, and cut to a line past 300 characters
    (a name of 5,000 digits is no file, but the error naming it stays a line)."""
    return clip_text(repr(str(path)))


def _read(p: Path, where: str | None = None) -> bytes:
    """The bytes of a snapshot file, at most `MAX_SNAPSHOT_BYTES` of them; errors begin
    with `where` (default: `--snapshot '<path>'`)."""
    try:
        where = where or f"--snapshot {path_label(p)}"
        return read_file_bytes(p, where, MAX_SNAPSHOT_BYTES, _check_text_start(where))
    except YamlFileError as exc:
        raise InputError(str(exc)) from None


def _read_stdin() -> bytes:
    try:
        where = "--snapshot '<stdin>'"
        return read_at_most(
            sys.stdin.buffer, MAX_SNAPSHOT_BYTES, where, check_start=_check_text_start(where)
        )
    except YamlFileError as exc:
        raise InputError(str(exc)) from None


def load_snapshot(path: str | Path, where: str | None = None) -> ClusterObjects:
    """A snapshot from a file (JSON or YAML, gzipped or not), a directory of such files
    (read in name order, as one cluster: an object in two files is an error) or standard
    input (`-`). An error reading the file begins with `where` (default: the
    `--snapshot` flag and the path)."""
    if str(path) == STDIN:
        return parse_snapshot_data(_read_stdin(), "<stdin>")
    p = Path(path)
    # os.path.isdir, not Path.is_dir: a name too long for the system is no directory
    # (Path.is_dir raises it), and `_read` names the file that cannot be read.
    if os.path.isdir(p):
        return _load_directory(p, where)
    return parse_snapshot_data(_read(p, where), str(p))


def _load_directory(directory: Path, where: str | None = None) -> ClusterObjects:
    files = sorted(
        f for f in directory.rglob("*") if f.is_file() and f.name.endswith(SNAPSHOT_SUFFIXES)
    )
    if not files:
        raise InputError(
            f"{where or f'--snapshot {path_label(directory)}'}: expected a directory "
            "holding snapshot files "
            f"({', '.join(SNAPSHOT_SUFFIXES)}), found none"
        )
    out = ClusterObjects()
    for f in files:
        part = parse_snapshot_data(_read(f, where and f"{where} file {path_label(f)}"), str(f))
        for item in part:
            out.add(item)
        for kind, count in part.skipped.items():
            out.skipped[kind] = out.skipped.get(kind, 0) + count
        out.storage_listed = out.storage_listed or part.storage_listed
    try:
        check_unique(out, str(directory))
    except InputError as exc:
        raise InputError(f"{exc} (across the directory's files)") from None
    return out


def snapshot_time(objects: ClusterObjects) -> datetime | None:
    """When a snapshot was taken, as far as it tells: its newest creation timestamp."""
    stamps = [n.creation_time for n in objects.nodes if n.creation_time is not None]
    stamps += [p.creation_time for p in objects.pods if p.creation_time is not None]
    return max(stamps) if stamps else None


def merge(base: ClusterObjects, extra: ClusterObjects, source: str) -> ClusterObjects:
    """`base` with `extra`'s objects added (scenario objects on top of a snapshot). An
    object of `extra` that `base` holds too is an error naming it and `source`."""
    out = ClusterObjects()
    for item in base:
        out.add(item)
    for item in extra:
        out.add(item)
    for kind, count in (*base.skipped.items(), *extra.skipped.items()):
        out.skipped[kind] = out.skipped.get(kind, 0) + count
    out.storage_listed = base.storage_listed or extra.storage_listed
    check_unique(out, source)
    return out


def input_notes(objects: ClusterObjects) -> list[str]:
    """What the input leaves unchecked, to say once beside the answers: the claims of the
    pods, when the input holds no PersistentVolumeClaim, PersistentVolume or StorageClass
    (a snapshot taken without them), are taken to exist and be usable."""
    if objects.storage_known:
        return []
    count = sum(
        1
        for pod in objects.pods
        if not pod.is_terminal and pod.volumes and volumes_constrain_scheduling(pod)
    )
    if not count:
        return []
    pods = f"{count} pod" if count == 1 else f"{count} pods"
    return [
        "claims not checked: the input has no PersistentVolumeClaims, PersistentVolumes or "
        f"StorageClasses, so the claims of {pods} are taken to exist and be usable (add "
        "`pvc,pv,storageclass` to the kubectl get that made the snapshot)"
    ]
