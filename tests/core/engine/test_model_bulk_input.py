"""Bulk input: `decode_json` returns what `json.loads` returns, `gc_paused` restores the
collector, and a list parsed under it gives the same objects and errors."""

from __future__ import annotations

import gc
import json
import math
from typing import Any

import pytest
from clusterscaler.model import ClusterObjects, ModelError, decode_json, gc_paused
from hypothesis import given, settings
from hypothesis import strategies as st

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_decode_json_matches_json_loads(value: Any) -> None:
    text = json.dumps(value)
    assert decode_json(text) == json.loads(text)
    assert decode_json(text.encode()) == json.loads(text.encode())


@pytest.mark.parametrize(
    "text",
    [
        "123456789012345678901234567890",
        "-18446744073709551617",
        '{"a": 1, "a": 2}',
        '"\\ud800"',
        "[1e400, -1e400]",
    ],
    ids=["huge-int", "huge-negative-int", "duplicate-key", "lone-surrogate", "float-overflow"],
)
def test_decode_json_edge_cases_as_json_loads(text: str) -> None:
    assert decode_json(text) == json.loads(text)


def test_decode_json_nan_as_json_loads() -> None:
    assert math.isnan(decode_json("NaN"))


@pytest.mark.parametrize(
    "text", ['{"a": 1} x', "{not json: [", ""], ids=["trailing", "garbage", "empty"]
)
def test_decode_json_errors_are_json_errors(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        decode_json(text)
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    assert str(info.value) == str(expected.value)


@pytest.mark.parametrize("initially_enabled", [True, False], ids=["enabled", "disabled"])
def test_gc_paused_restores_the_collector(initially_enabled: bool) -> None:
    was = gc.isenabled()
    try:
        if initially_enabled:
            gc.enable()
        else:
            gc.disable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            # The inner use leaves the collector to the outer one.
            assert not gc.isenabled()
        assert gc.isenabled() is initially_enabled
        with pytest.raises(RuntimeError), gc_paused():
            raise RuntimeError("parse failed")
        assert gc.isenabled() is initially_enabled
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()


def test_list_errors_still_name_object_and_field_and_gc_resumes() -> None:
    assert gc.isenabled()
    items = [
        {"kind": "Pod", "metadata": {"name": "ok"}, "spec": {"containers": []}},
        {
            "kind": "Pod",
            "metadata": {"name": "bad", "namespace": "ns"},
            "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]},
        },
    ]
    with pytest.raises(ModelError) as info:
        ClusterObjects.from_items(items)
    assert info.value.obj == "Pod ns/bad"
    assert info.value.field == "spec.containers[0].resources.requests.cpu"
    assert gc.isenabled()
