"""Fuzz targets for the files a user hands to `simulate` and `explain`: snapshots (JSON,
YAML, gzip; an object with hostile fields, the text cut short or corrupted), scenarios, and
the sim provider's cloud-configs. Each is read, or refused with the error the command turns
into exit 2 (`InputError`, `ConfigurationError`) naming the file; nothing else escapes."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterscaler.api import ConfigurationError
from clusterscaler.offline.loader import MAX_COUNT, InputError, parse_snapshot_data
from clusterscaler.offline.scenario import parse_scenario
from clusterscaler.plugins.sim.config import parse_cloud_config
from fuzzkit import (
    EXAMPLES,
    FUZZ,
    HOSTILE_VALUES,
    bounded,
    mutated,
    mutations,
    size_of,
    yaml_text,
)
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz

def _small_snapshot() -> dict[str, Any]:
    """Two objects of each kind of a real snapshot (a small file, quick to parse as YAML)."""
    doc = json.loads((EXAMPLES / "snapshots" / "small-cluster.json").read_text())
    seen: dict[str, int] = {}
    items = []
    for item in doc["items"]:
        seen[item["kind"]] = seen.get(item["kind"], 0) + 1
        if seen[item["kind"]] <= 2:
            items.append(item)
    return {**doc, "items": items}


SNAPSHOT = _small_snapshot()
SOURCE = "cluster.json"


def _encode(doc: Any, form: str) -> bytes | None:
    try:
        if form == "json":
            return json.dumps(doc).encode()
        if form == "yaml":
            return yaml_text(doc).encode()
        return gzip.compress(json.dumps(doc).encode(), mtime=0)
    except (RecursionError, ValueError, yaml.YAMLError):
        return None


@st.composite
def hostile_snapshots_changed(draw: st.DrawFn) -> tuple[bytes, dict[str, Any] | None, list[Any]]:
    """`hostile_snapshots`, with what was broken where the defect is known: the mutated
    item as it was written and the paths changed in it (None and none when the text was
    cut, overwritten or could not be written)."""
    doc = copy.deepcopy(SNAPSHOT)
    i = draw(st.integers(min_value=0, max_value=len(doc["items"]) - 1))
    doc["items"][i], changes = draw(mutations([doc["items"][i]]))
    data = _encode(doc, draw(st.sampled_from(["json", "json", "yaml", "gzip"])))
    known = data is not None
    if data is None:
        data = b'{"kind": "List", "items": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
    damage = draw(st.sampled_from(["none", "none", "cut", "bytes"]))
    if damage == "cut":
        data = data[: draw(st.integers(min_value=0, max_value=len(data)))]
    elif damage == "bytes":
        at = draw(st.integers(min_value=0, max_value=len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at + 8 :]
    if known and damage == "none":
        return data, doc["items"][i], changes
    return data, None, []


def hostile_snapshots() -> st.SearchStrategy[bytes]:
    """A small real snapshot with one item replaced by a mutated copy of itself, written
    as JSON, YAML or gzipped JSON, and sometimes cut short or with bytes overwritten."""
    return hostile_snapshots_changed().map(lambda drawn: drawn[0])


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "d"},
            "spec": {"containers": [{"name": "c"}], **spec}, "status": {"phase": "Pending"}}


def _laughs(width: int) -> str:
    """Aliases of aliases: `width` pods of `width` node selector terms of `width`
    expressions each, written in a few times `width` characters."""
    many = ",".join
    return "\n".join([
        "e: &e {key: k, operator: In, values: [a]}",
        f"ex: &ex [{many(['*e'] * width)}]",
        "t: &t {matchExpressions: *ex}",
        f"ts: &ts [{many(['*t'] * width)}]",
        "p: &p {kind: Pod, metadata: {name: a, namespace: d}, spec: {containers: [{name: c}], "
        "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
        "{nodeSelectorTerms: *ts}}}}}",
        "kind: List",
        f"items: [{many(['*p'] * width)}]",
    ])


@st.composite
def large_snapshots(draw: st.DrawFn) -> bytes:
    """Inputs whose size or shape, not a field's value, is hostile: nesting hundreds to
    100,000 levels deep (flow and block YAML, JSON), aliases of aliases, numbers of
    thousands of digits, long lists and strings, many items."""
    n = draw(st.sampled_from([150, 199, 201, 300, 5_000, 100_000]))
    shape = draw(st.sampled_from(
        ["flow", "block", "json-deep", "laughs", "digits", "list", "string", "items"]))
    if shape == "flow":
        return f"kind: List\nitems:\n- {'[' * n}{']' * n}\n".encode()
    if shape == "block":
        return f"kind: List\nitems:\n{'- ' * n}x\n".encode()
    if shape == "json-deep":
        return b'{"kind": "List", "items": [' + b"[" * n + b"]" * n + b"]}"
    if shape == "laughs":
        return _laughs(min(n, 1_000) // 3).encode()
    if shape == "digits":
        number = "9" * min(n, 20_000)
        text = json.dumps({"kind": "List", "items": [_pod("a", priority=0)]})
        return text.replace('"priority": 0', f'"priority": {number}').encode()
    form = draw(st.sampled_from(["json", "yaml"]))
    n = min(n, 20_000 if form == "json" else 2_000)
    if shape == "list":
        pods = [_pod("a", tolerations=[{"key": f"k{i}", "operator": "Exists"} for i in range(n)])]
    elif shape == "string":
        pods = [_pod("a" * (n * 20))]
    else:
        pods = [_pod(f"p{i}") for i in range(n)]
    doc = {"kind": "List", "items": pods}
    return (json.dumps(doc) if form == "json" else yaml_text(doc)).encode()


# One example in ten is hostile by size or shape: those cost up to a few seconds each.
@FUZZ
@given(data=st.one_of(*[hostile_snapshots()] * 9, large_snapshots()))
def test_a_snapshot_is_read_or_refused_naming_the_file(data: bytes) -> None:
    with bounded(len(data)):
        try:
            parse_snapshot_data(data, SOURCE)
        except InputError as error:
            assert repr(SOURCE) in str(error) or str(error).startswith(SOURCE), error
            assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"


SCENARIOS = {
    path.name: yaml.safe_load(path.read_text())
    for path in sorted((EXAMPLES / "scenarios").glob("*.yaml"))
}


def pods_asked(doc: Any) -> int:
    """The pods a scenario asks its reader to build: its workloads' replicas and its
    addPods events' counts, where they are counts it accepts."""

    def count(value: Any) -> int:
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT
        return value if ok else 0

    def entries(key: str) -> list[Any]:
        value = doc.get(key) if isinstance(doc, dict) else None
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []

    pods = sum(count(w.get("replicas")) for w in entries("workloads"))
    for event in entries("events"):
        added = event.get("addPods")
        if isinstance(added, dict):
            pods += count(added.get("count", 1))
    return pods


@FUZZ
@given(doc=mutated(list(SCENARIOS.values())))
def test_a_scenario_is_read_or_refused_naming_the_file(doc: dict[str, Any]) -> None:
    source = str(EXAMPLES / "scenarios" / "fuzzed.yaml")
    with bounded(size_of(doc), objects=pods_asked(doc)):
        try:
            parse_scenario(doc, source, base_dir=EXAMPLES / "scenarios")
        except InputError as error:
            assert source in str(error), error
            assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"


CLOUD_CONFIGS = [
    yaml.safe_load(path.read_text()) for path in sorted((EXAMPLES / "cloud-configs").glob("*.yaml"))
]


@FUZZ
@given(doc=st.one_of(mutated(CLOUD_CONFIGS), HOSTILE_VALUES))
def test_a_sim_cloud_config_is_read_or_refused_naming_the_file(doc: Any) -> None:
    with bounded(size_of(doc)):
        try:
            parse_cloud_config(doc, "groups.yaml")
        except ConfigurationError as error:
            assert str(error).startswith("groups.yaml: "), error
            assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"


def test_the_seeds_are_read() -> None:
    """Every seed is itself valid, so what a target finds is the mutation's doing."""
    parse_snapshot_data(json.dumps(SNAPSHOT).encode(), SOURCE)
    for name, doc in SCENARIOS.items():
        parse_scenario(doc, name, base_dir=EXAMPLES / "scenarios")
    for doc in CLOUD_CONFIGS:
        parse_cloud_config(doc)
    assert Path(EXAMPLES / "scenarios").is_dir()
