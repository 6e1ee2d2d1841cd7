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
from clusterscaler.offline.loader import InputError, parse_snapshot_data
from clusterscaler.offline.scenario import parse_scenario
from clusterscaler.plugins.sim.config import parse_cloud_config
from fuzzkit import EXAMPLES, FUZZ, HOSTILE_VALUES, mutated
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
            return yaml.safe_dump(doc).encode()
        return gzip.compress(json.dumps(doc).encode(), mtime=0)
    except (RecursionError, ValueError, yaml.YAMLError):
        return None


@st.composite
def hostile_snapshots(draw: st.DrawFn) -> bytes:
    """A small real snapshot with one item replaced by a mutated copy of itself, written
    as JSON, YAML or gzipped JSON, and sometimes cut short or with bytes overwritten."""
    doc = copy.deepcopy(SNAPSHOT)
    i = draw(st.integers(min_value=0, max_value=len(doc["items"]) - 1))
    doc["items"][i] = draw(mutated([doc["items"][i]]))
    data = _encode(doc, draw(st.sampled_from(["json", "json", "yaml", "gzip"])))
    if data is None:
        data = b'{"kind": "List", "items": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
    damage = draw(st.sampled_from(["none", "none", "cut", "bytes"]))
    if damage == "cut":
        data = data[: draw(st.integers(min_value=0, max_value=len(data)))]
    elif damage == "bytes":
        at = draw(st.integers(min_value=0, max_value=len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at + 8 :]
    return data


@FUZZ
@given(data=hostile_snapshots())
def test_a_snapshot_is_read_or_refused_naming_the_file(data: bytes) -> None:
    try:
        parse_snapshot_data(data, SOURCE)
    except InputError as error:
        assert repr(SOURCE) in str(error) or str(error).startswith(SOURCE), error
        assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"


SCENARIOS = {
    path.name: yaml.safe_load(path.read_text())
    for path in sorted((EXAMPLES / "scenarios").glob("*.yaml"))
}


@FUZZ
@given(doc=mutated(list(SCENARIOS.values())))
def test_a_scenario_is_read_or_refused_naming_the_file(doc: dict[str, Any]) -> None:
    source = str(EXAMPLES / "scenarios" / "fuzzed.yaml")
    try:
        parse_scenario(doc, source, base_dir=EXAMPLES / "scenarios")
    except InputError as error:
        assert source in str(error), error


CLOUD_CONFIGS = [
    yaml.safe_load(path.read_text()) for path in sorted((EXAMPLES / "cloud-configs").glob("*.yaml"))
]


@FUZZ
@given(doc=st.one_of(mutated(CLOUD_CONFIGS), HOSTILE_VALUES))
def test_a_sim_cloud_config_is_read_or_refused_naming_the_file(doc: Any) -> None:
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
