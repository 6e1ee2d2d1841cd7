from __future__ import annotations

import json

import pytest
from clusterscaler.proportional.params import (
    LadderParams,
    LadderStep,
    LinearParams,
    ParamsError,
    configmap_data_from_document,
    parse_configmap_data,
    parse_ladder,
    parse_linear,
    parse_params_document,
)
from hypothesis import given
from hypothesis import strategies as st

LINEAR_OK = [
    ("cores-only", {"coresPerReplica": 2}, LinearParams(cores_per_replica=2.0)),
    ("nodes-only", {"nodesPerReplica": 1}, LinearParams(nodes_per_replica=1.0)),
    ("float-per-replica", {"coresPerReplica": 2.5}, LinearParams(cores_per_replica=2.5)),
    ("min-0-becomes-1", {"nodesPerReplica": 1, "min": 0}, LinearParams(nodes_per_replica=1.0)),
    ("max-0-no-limit", {"nodesPerReplica": 1, "max": 0}, LinearParams(nodes_per_replica=1.0)),
    (
        "max-equal-min",
        {"nodesPerReplica": 1, "min": 3, "max": 3},
        LinearParams(nodes_per_replica=1.0, min_replicas=3, max_replicas=3),
    ),
    (
        "null-means-default",
        {"nodesPerReplica": 1, "min": None, "preventSinglePointFailure": None},
        LinearParams(nodes_per_replica=1.0),
    ),
    (
        "all-keys",
        {
            "coresPerReplica": 256,
            "nodesPerReplica": 16,
            "min": 2,
            "max": 50,
            "preventSinglePointFailure": True,
            "includeUnschedulableNodes": True,
        },
        LinearParams(256.0, 16.0, 2, 50, True, True),
    ),
    (
        "unknown-keys-reported",
        {"nodesPerReplica": 1, "mni": 3},
        LinearParams(nodes_per_replica=1.0, ignored_keys=("mni",)),
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected"), [c[1:] for c in LINEAR_OK], ids=[c[0] for c in LINEAR_OK]
)
def test_parse_linear_valid(obj, expected):
    assert parse_linear(json.dumps(obj)) == expected
    assert parse_linear(obj) == expected


LINEAR_BAD = [
    ("not-json", "{nodesPerReplica: 1}", "linear", "could not parse"),
    ("not-object", "[1, 2]", "linear", "expected a JSON object"),
    ("nan", '{"nodesPerReplica": NaN}', "linear", "could not parse"),
    ("negative-min", '{"nodesPerReplica": 1, "min": -1}', "linear.min", ">= 0"),
    ("float-min", '{"nodesPerReplica": 1, "min": 1.5}', "linear.min", "integer"),
    ("string-min", '{"nodesPerReplica": 1, "min": "2"}', "linear.min", "integer"),
    ("max-below-min", '{"nodesPerReplica": 1, "min": 5, "max": 3}', "linear.max", ">= min (5)"),
    ("negative-max", '{"nodesPerReplica": 1, "max": -1}', "linear.max", ">= min (1)"),
    ("neither-per-replica", '{"min": 1}', "linear", "coresPerReplica or nodesPerReplica"),
    ("both-zero", '{"coresPerReplica": 0, "nodesPerReplica": 0}', "linear", "> 0"),
    (
        "negative-cores",
        '{"coresPerReplica": -2, "nodesPerReplica": 1}',
        "linear.coresPerReplica",
        ">= 0",
    ),
    ("negative-nodes", '{"nodesPerReplica": -1}', "linear.nodesPerReplica", ">= 0"),
    ("string-nodes", '{"nodesPerReplica": "1"}', "linear.nodesPerReplica", "a number"),
    ("bool-nodes", '{"nodesPerReplica": true}', "linear.nodesPerReplica", "a number"),
    (
        "string-bool",
        '{"nodesPerReplica": 1, "preventSinglePointFailure": "true"}',
        "linear.preventSinglePointFailure",
        "true or false",
    ),
    (
        "int-bool",
        '{"nodesPerReplica": 1, "includeUnschedulableNodes": 1}',
        "linear.includeUnschedulableNodes",
        "true or false",
    ),
]


@pytest.mark.parametrize(
    ("text", "key", "fragment"), [c[1:] for c in LINEAR_BAD], ids=[c[0] for c in LINEAR_BAD]
)
def test_parse_linear_invalid_names_the_key(text, key, fragment):
    with pytest.raises(ParamsError) as info:
        parse_linear(text)
    assert info.value.key == key
    assert fragment in str(info.value)
    assert str(info.value).startswith(f"{key}: ")


LADDER_OK = [
    (
        "sorted-on-parse",
        {"coresToReplicas": [[64, 3], [1, 1], [512, 5]]},
        LadderParams(cores_to_replicas=(LadderStep(1, 1), LadderStep(64, 3), LadderStep(512, 5))),
    ),
    (
        "zero-replicas-and-threshold",
        {"nodesToReplicas": [[0, 0], [6, 1]]},
        LadderParams(nodes_to_replicas=(LadderStep(0, 0), LadderStep(6, 1))),
    ),
    (
        "one-table-empty",
        {"coresToReplicas": [], "nodesToReplicas": [[1, 1]], "includeUnschedulableNodes": True},
        LadderParams(nodes_to_replicas=(LadderStep(1, 1),), include_unschedulable_nodes=True),
    ),
    (
        "unknown-key",
        {"nodesToReplicas": [[1, 1]], "coreToReplicas": [[1, 2]]},
        LadderParams(nodes_to_replicas=(LadderStep(1, 1),), ignored_keys=("coreToReplicas",)),
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected"), [c[1:] for c in LADDER_OK], ids=[c[0] for c in LADDER_OK]
)
def test_parse_ladder_valid(obj, expected):
    assert parse_ladder(json.dumps(obj)) == expected


LADDER_BAD = [
    ("not-json", "{", "ladder", "could not parse"),
    ("no-steps", "{}", "ladder", "at least one step"),
    ("both-empty", '{"coresToReplicas": [], "nodesToReplicas": []}', "ladder", "at least one step"),
    ("table-not-list", '{"coresToReplicas": {"1": 1}}', "ladder.coresToReplicas", "pairs"),
    ("step-not-pair", '{"coresToReplicas": [[1, 1], [2]]}', "ladder.coresToReplicas[1]", "pair"),
    ("step-triple", '{"nodesToReplicas": [[1, 1, 1]]}', "ladder.nodesToReplicas[0]", "pair"),
    (
        "negative-threshold",
        '{"nodesToReplicas": [[-1, 1]]}',
        "ladder.nodesToReplicas[0]",
        "non-negative",
    ),
    (
        "negative-replicas",
        '{"coresToReplicas": [[1, -1]]}',
        "ladder.coresToReplicas[0]",
        "non-negative",
    ),
    ("float-step", '{"coresToReplicas": [[1.5, 1]]}', "ladder.coresToReplicas[0]", "integers"),
    ("bool-step", '{"coresToReplicas": [[true, 1]]}', "ladder.coresToReplicas[0]", "integers"),
    (
        "duplicate-threshold",
        '{"nodesToReplicas": [[1, 1], [1, 2]]}',
        "ladder.nodesToReplicas[1]",
        "more than once",
    ),
    (
        "bad-bool",
        '{"nodesToReplicas": [[1, 1]], "includeUnschedulableNodes": "yes"}',
        "ladder.includeUnschedulableNodes",
        "true or false",
    ),
]


@pytest.mark.parametrize(
    ("text", "key", "fragment"), [c[1:] for c in LADDER_BAD], ids=[c[0] for c in LADDER_BAD]
)
def test_parse_ladder_invalid_names_the_key(text, key, fragment):
    with pytest.raises(ParamsError) as info:
        parse_ladder(text)
    assert info.value.key == key
    assert fragment in str(info.value)


CONFIGMAP_BAD = [
    ("empty", {}, "data", "got no keys"),
    ("none", None, "data", "got no keys"),
    ("two-modes", {"linear": '{"nodesPerReplica": 1}', "ladder": "{}"}, "data", "ladder, linear"),
    ("unknown-mode", {"exponential": "{}"}, "exponential", "unknown control mode"),
    ("bad-params", {"linear": '{"min": 1}'}, "linear", "coresPerReplica or nodesPerReplica"),
]


@pytest.mark.parametrize(
    ("data", "key", "fragment"), [c[1:] for c in CONFIGMAP_BAD], ids=[c[0] for c in CONFIGMAP_BAD]
)
def test_configmap_data_invalid(data, key, fragment):
    with pytest.raises(ParamsError) as info:
        parse_configmap_data(data)
    assert info.value.key == key
    assert fragment in str(info.value)


def test_configmap_data_selects_mode():
    assert isinstance(parse_configmap_data({"linear": '{"coresPerReplica": 2}'}), LinearParams)
    assert isinstance(
        parse_configmap_data({"ladder": '{"nodesToReplicas": [[1, 1]]}'}), LadderParams
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"ladder": {"nodesToReplicas": [[1, 1], [2, 2]]}}',
        '{"ladder": "{\\"nodesToReplicas\\": [[1, 1], [2, 2]]}"}',
    ],
    ids=["object-value", "configmap-string-value"],
)
def test_params_document_accepts_both_forms(text):
    params = parse_params_document(text)
    assert params == LadderParams(nodes_to_replicas=(LadderStep(1, 1), LadderStep(2, 2)))


def test_default_params_render_as_configmap_data_that_parses_back():
    data = configmap_data_from_document(
        '{"linear": {"coresPerReplica": 256, "nodesPerReplica": 16, "min": 2}}'
    )
    assert list(data) == ["linear"]
    assert json.loads(data["linear"]) == {"coresPerReplica": 256, "nodesPerReplica": 16, "min": 2}
    assert parse_configmap_data(data) == LinearParams(256.0, 16.0, 2)


def test_default_params_invalid_is_rejected():
    with pytest.raises(ParamsError, match=r"linear\.max"):
        configmap_data_from_document('{"linear": {"nodesPerReplica": 1, "min": 3, "max": 2}}')


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5000)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "coresPerReplica",
                    "nodesPerReplica",
                    "min",
                    "max",
                    "preventSinglePointFailure",
                    "includeUnschedulableNodes",
                    "coresToReplicas",
                    "nodesToReplicas",
                    "other",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=12,
)


@given(mode=st.sampled_from(["linear", "ladder", "cubic"]), value=json_values)
def test_any_json_is_either_params_or_a_params_error(mode, value):
    # Whatever a user puts in the ConfigMap, the controller gets a result or an error that
    # names a key, never a crash.
    for text in (json.dumps({mode: value}), json.dumps({mode: json.dumps(value)})):
        try:
            params = parse_params_document(text)
        except ParamsError as exc:
            assert exc.key.split(".")[0].split("[")[0] in ("params", mode)
        else:
            assert params.mode == mode
