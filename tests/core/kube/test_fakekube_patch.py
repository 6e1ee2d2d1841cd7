"""Patch and selector semantics of the fake API server, as the real one applies them."""

from __future__ import annotations

import pytest
from clusterscaler.testing.fakekube_patch import (
    PatchError,
    PatchTestFailed,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from clusterscaler.testing.fakekube_selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    label_selector_matches,
)
from hypothesis import given
from hypothesis import strategies as st

TAINTED = {
    "spec": {
        "taints": [
            {"key": "a", "value": "1", "effect": "NoSchedule"},
            {"key": "b", "effect": "PreferNoSchedule"},
        ],
        "unschedulable": True,
    },
    "metadata": {"finalizers": ["x"]},
}


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        (
            {"spec": {"taints": [{"key": "a", "value": "2"}]}},
            [
                {"key": "a", "value": "2", "effect": "NoSchedule"},
                {"key": "b", "effect": "PreferNoSchedule"},
            ],
        ),
        (
            {"spec": {"taints": [{"key": "c", "effect": "NoExecute"}]}},
            [*TAINTED["spec"]["taints"], {"key": "c", "effect": "NoExecute"}],
        ),
        ({"spec": {"taints": [{"key": "b", "$patch": "delete"}]}}, [TAINTED["spec"]["taints"][0]]),
        (
            {"spec": {"taints": [{"$patch": "replace"}, {"key": "z", "effect": "NoSchedule"}]}},
            [{"key": "z", "effect": "NoSchedule"}],
        ),
        ({"spec": {"taints": None}}, None),
        (
            {"spec": {"$setElementOrder/taints": [{"key": "b"}, {"key": "a"}]}},
            [TAINTED["spec"]["taints"][1], TAINTED["spec"]["taints"][0]],
        ),
    ],
    ids=[
        "update-by-key",
        "append",
        "delete-directive",
        "replace-directive",
        "null-removes",
        "set-order",
    ],
)
def test_strategic_merge_patch_taints(patch, expected):
    result = strategic_merge_patch(TAINTED, patch)
    assert result["spec"].get("taints") == expected
    assert result["spec"]["unschedulable"] is True
    assert TAINTED["spec"]["taints"][0]["value"] == "1"  # input untouched


def test_strategic_merge_patch_primitive_merge_list_and_delete_from_it():
    added = strategic_merge_patch(TAINTED, {"metadata": {"finalizers": ["y"]}})
    assert added["metadata"]["finalizers"] == ["x", "y"]
    removed = strategic_merge_patch(
        added, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}
    )
    assert removed["metadata"]["finalizers"] == ["y"]


def test_strategic_merge_patch_requires_merge_key():
    with pytest.raises(PatchError, match="merge key 'key'"):
        strategic_merge_patch(TAINTED, {"spec": {"taints": [{"effect": "NoSchedule"}]}})


def test_merge_patch_replaces_lists_and_null_deletes():
    result = merge_patch(TAINTED, {"spec": {"taints": [], "unschedulable": None}})
    assert result["spec"] == {"taints": []}


@pytest.mark.parametrize(
    ("ops", "check"),
    [
        (
            [{"op": "add", "path": "/spec/taints/-", "value": {"key": "c"}}],
            lambda d: d["spec"]["taints"][-1] == {"key": "c"},
        ),
        (
            [{"op": "add", "path": "/spec/taints/0", "value": {"key": "c"}}],
            lambda d: d["spec"]["taints"][0] == {"key": "c"},
        ),
        (
            [{"op": "remove", "path": "/spec/taints/0"}],
            lambda d: [t["key"] for t in d["spec"]["taints"]] == ["b"],
        ),
        (
            [{"op": "replace", "path": "/spec/unschedulable", "value": False}],
            lambda d: d["spec"]["unschedulable"] is False,
        ),
        (
            [{"op": "copy", "from": "/spec/taints/0", "path": "/spec/taints/-"}],
            lambda d: d["spec"]["taints"][2]["key"] == "a",
        ),
        (
            [{"op": "move", "from": "/metadata/finalizers", "path": "/spec/f"}],
            lambda d: d["spec"]["f"] == ["x"] and "finalizers" not in d["metadata"],
        ),
        (
            [
                {"op": "add", "path": "/metadata/labels", "value": {"a/b": "1"}},
                {"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"},
            ],
            lambda d: d["metadata"]["labels"] == {"a/b": "2"},
        ),
    ],
    ids=["append", "insert", "remove", "replace", "copy", "move", "escaped-pointer"],
)
def test_json_patch_operations(ops, check):
    assert check(json_patch(TAINTED, ops))


@pytest.mark.parametrize(
    ("ops", "error"),
    [
        ([{"op": "test", "path": "/spec/unschedulable", "value": False}], PatchTestFailed),
        ([{"op": "remove", "path": "/spec/missing"}], PatchError),
        ([{"op": "replace", "path": "/spec/taints/5", "value": 1}], PatchError),
        ([{"op": "frobnicate", "path": "/spec"}], PatchError),
        ({"op": "add"}, PatchError),
        ([{"op": "add", "path": "spec", "value": 1}], PatchError),
    ],
    ids=[
        "test-fails",
        "remove-missing",
        "index-out-of-range",
        "unknown-op",
        "not-a-list",
        "bad-pointer",
    ],
)
def test_json_patch_errors(ops, error):
    with pytest.raises(error):
        json_patch(TAINTED, ops)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=10,
)
json_objects = st.dictionaries(st.text(max_size=4), json_values, max_size=4)


@given(json_objects, json_objects)
def test_merge_patch_is_idempotent(target, patch):
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once


@given(json_objects, st.text(max_size=4), json_values.filter(lambda v: v is not None))
def test_json_patch_add_then_remove_restores_absent_key(target, key, value):
    target.pop(key, None)
    pointer = "/" + key.replace("~", "~0").replace("/", "~1")
    added = json_patch(target, [{"op": "add", "path": pointer, "value": value}])
    assert added[key] == value
    assert json_patch(added, [{"op": "remove", "path": pointer}]) == target


@pytest.mark.parametrize(
    "text",
    ["a in (b", "a=b=c", "=b", "a b"],
    ids=["unclosed-set", "double-equals-value", "missing-key", "missing-comma"],
)
def test_label_selector_parse_errors_name_the_selector(text):
    with pytest.raises(SelectorError, match="labelSelector"):
        LabelSelector.parse(text)


def test_field_selector_parse_error_names_the_selector():
    with pytest.raises(SelectorError, match="fieldSelector"):
        FieldSelector.parse("spec.nodeName")


def test_field_selector_compares_booleans_as_kubernetes_strings():
    assert FieldSelector.parse("spec.unschedulable=true").matches({"spec": {"unschedulable": True}})
    assert FieldSelector.parse("spec.unschedulable!=true").matches({"spec": {}})


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {"a": "b"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "c"}, False),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]},
            {"a": "c"},
            True,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
    ],
    ids=[
        "empty-matches-all",
        "match-labels",
        "match-labels-miss",
        "in",
        "notin-absent",
        "exists-absent",
        "does-not-exist",
    ],
)
def test_structured_label_selector(selector, labels, expected):
    assert label_selector_matches(selector, labels) is expected


def test_structured_selector_with_unknown_operator_is_an_error():
    with pytest.raises(SelectorError, match="operator 'Gt'"):
        label_selector_matches({"matchExpressions": [{"key": "a", "operator": "Gt"}]}, {})


label_keys = st.sampled_from(["app", "tier", "zone"])
label_values = st.sampled_from(["a", "b", "c"])
expressions = st.one_of(
    st.builds(
        lambda k, op, vs: {"key": k, "operator": op, "values": sorted(set(vs))},
        label_keys,
        st.sampled_from(["In", "NotIn"]),
        st.lists(label_values, min_size=1, max_size=3),
    ),
    st.builds(
        lambda k, op: {"key": k, "operator": op},
        label_keys,
        st.sampled_from(["Exists", "DoesNotExist"]),
    ),
)
structured_selectors = st.builds(
    lambda ml, me: {"matchLabels": ml, "matchExpressions": me},
    st.dictionaries(label_keys, label_values, max_size=2),
    st.lists(expressions, max_size=3),
)


@given(structured_selectors, st.dictionaries(label_keys, label_values, max_size=3))
def test_query_string_form_of_a_selector_matches_like_the_selector(selector, labels):
    """The fake renders Scale.status.selector as a query string; it must mean the same."""
    from clusterscaler.testing.fakekube import _label_selector_string

    parsed = LabelSelector.parse(_label_selector_string(selector))
    assert parsed.matches(labels) == label_selector_matches(selector, labels)
