"""Fuzz targets for the model: every kind's parser, through both routes (the parsed-JSON
route of the caches and `kubectl` output, and the JSON-text route of list pages and large
snapshots), fed objects with hostile fields. Each object is read, or refused with a
`ModelError` naming the object (by kind and name where its metadata still says it) and the
field; nothing else escapes, and one bad item of a List never hides who it is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from clusterscaler.model import (
    SUPPORTED_KINDS,
    ClusterObjects,
    ModelError,
    parse_controller,
    parse_object,
    parse_pod_json,
)
from fuzzkit import FUZZ, bounded, mutated, readable_name, seeds_by_kind, size_of
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz

SEEDS = seeds_by_kind(SUPPORTED_KINDS)
CONTROLLERS = ("ReplicaSet", "ReplicationController", "StatefulSet", "Job")


def _dumps(raw: Any) -> str | None:
    """The JSON text of `raw`, or None where Python's encoder cannot write it (nesting
    deeper than its recursion limit): such text reaches the decoder's own checks instead."""
    try:
        return json.dumps(raw)
    except (RecursionError, ValueError):
        return None


def assert_names_object(error: ModelError, raw: Any, kind: str) -> None:
    """The error says what was wrong where, and about which object when it can be told."""
    assert error.field and error.expected, error
    assert len(str(error)) < 4_000, f"an error of {len(str(error))} characters"
    who = readable_name(raw)
    if who is not None:
        namespace, name = who
        assert str(error).startswith(kind), error
        assert name in error.obj, error
        if namespace and kind != "Node":
            assert namespace in error.obj, error


@pytest.mark.parametrize("kind", [k for k in SUPPORTED_KINDS if SEEDS[k]])
@FUZZ
@given(data=st.data())
def test_every_kind_is_read_or_refused_by_name(kind: str, data: st.DataObject) -> None:
    raw = data.draw(mutated(SEEDS[kind]), label="object")
    raw["kind"] = kind
    with bounded(size_of(raw)):
        try:
            parse_controller(raw, kind) if kind in CONTROLLERS else parse_object(raw)
        except ModelError as error:
            assert_names_object(error, raw, kind)


@FUZZ
@given(raw=mutated(SEEDS["Pod"]))
def test_a_pod_reads_the_same_from_its_text(raw: dict[str, Any]) -> None:
    """The text route (list pages, snapshots) reads a pod as the parsed route does, or hands
    it to the parsed route (None) for the error."""
    raw["kind"] = "Pod"
    text = _dumps(raw)
    if text is None:
        return
    try:
        expected: Any = parse_object(raw)
    except ModelError as error:
        assert_names_object(error, raw, "Pod")
        expected = error
    try:
        with bounded(len(text)):
            fast = parse_pod_json(text.encode())
    except ModelError as error:
        assert isinstance(expected, ModelError), f"text route refused a readable pod: {error}"
        return
    if fast is not None:
        assert not isinstance(expected, ModelError), f"text route read an unreadable pod: {expected}"
        assert fast[0] == expected


@FUZZ
@given(
    good=st.lists(st.sampled_from(SEEDS["Pod"] + SEEDS["Node"]), min_size=1, max_size=4),
    bad=mutated(SEEDS["Pod"] + SEEDS["Node"] + SEEDS["PodDisruptionBudget"]),
    at=st.integers(min_value=0, max_value=4),
)
def test_a_list_is_read_whole_or_refused_naming_the_bad_item(
    good: list[dict[str, Any]], bad: dict[str, Any], at: int
) -> None:
    """A `kubectl get -o json` List with one hostile item among healthy ones, through both
    List routes: the same objects, or the same error naming the hostile item."""
    items = [*good[:at], bad, *good[at:]]
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    try:
        expected: Any = ClusterObjects.from_list(doc)
    except ModelError as error:
        expected = error
        who = readable_name(bad)
        if who is not None and isinstance(bad.get("kind"), str):
            assert who[1] in error.obj or f"items[{min(at, len(good))}]" in str(error), error
    text = _dumps(doc)
    if text is None:
        return
    try:
        with bounded(len(text)):
            fast: Any = ClusterObjects.from_json_list(text.encode())
    except ModelError as error:
        fast = error
    if fast is None:
        return
    if isinstance(expected, ModelError):
        assert isinstance(fast, ModelError) and str(fast) == str(expected), (fast, expected)
    else:
        assert not isinstance(fast, ModelError), fast
        assert sorted(map(repr, fast)) == sorted(map(repr, expected))
