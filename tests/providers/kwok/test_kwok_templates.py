"""The templates ConfigMap and the node groups made of its nodes: accepted shapes, group
names and bounds, one bad template a problem of its group only, and the prepared template."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from clusterscaler.api import ConfigurationError
from clusterscaler_kwok.templates import build_groups, parse_templates, prepare_template
from kwokkit import DESIRED, GROUP_LABEL, KWOK, MAX, MIN, NG_NAME, TEST_TEMPLATES, make_config
from kwokkit import template as tpl

WHERE = "ConfigMap kube-system/kwok-provider-templates, key templates"
TAINT = {"key": "kwok-provider", "value": "true", "effect": "NoSchedule"}


def docs(*objs: dict[str, Any]) -> str:
    return "---\n".join(yaml.safe_dump(o) for o in objs)


def names(nodes: list[dict[str, Any]]) -> list[str]:
    return [n["metadata"]["name"] for n in nodes]


# --------------------------------------------------------------------------- parse_templates


def test_upstream_test_templates_list_parses() -> None:
    (node,) = parse_templates(TEST_TEMPLATES, WHERE)
    assert node["metadata"]["name"] == "kind-worker"
    assert node["metadata"]["labels"][GROUP_LABEL] == "kind-worker"
    assert node["status"]["allocatable"]["cpu"] == "12"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (docs(tpl("a", "x"), tpl("b", "y")), ["a", "b"]),
        (docs(tpl("a", "x"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
              tpl("b", "y")), ["a", "b"]),
        (yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
            tpl("a", "x"), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]}),
         ["a"]),
        ("", []),
    ],
    ids=["several-node-documents", "other-kinds-dropped", "list-other-kinds-dropped", "empty"],
)
def test_accepted_template_shapes(text: str, expected: list[str]) -> None:
    assert names(parse_templates(text, WHERE)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (docs(tpl("a", "x")), "expected a `kind: List` of Nodes"),
        (yaml.safe_dump({"apiVersion": "v1", "kind": "NodeList", "items": [tpl("a", "x")]}),
         "expected a `kind: List` of Nodes"),
        ("apiVersion: v1\nkind: List\nitems: {a: 1}", "items: expected a list of Nodes"),
        ("apiVersion: v1\nkind: List\nitems:\n- {kind: Node\n", "not valid YAML or JSON"),
    ],
    ids=["single-bare-node", "node-list", "items-not-a-list", "invalid-yaml"],
)
def test_rejected_template_shapes_name_the_configmap(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_templates(text, WHERE)
    assert f"kwok provider: {WHERE}: " in str(info.value)
    assert message in str(info.value)


# --------------------------------------------------------------------------- build_groups


def test_upstream_test_templates_make_one_group() -> None:
    groups, problems = build_groups(parse_templates(TEST_TEMPLATES, WHERE), make_config())
    assert [(g.name, g.min_size, g.max_size) for g in groups] == [("kind-worker", 0, 200)]
    assert problems == []


@pytest.mark.parametrize(
    ("nodes", "config", "expected"),
    [
        ([tpl("n1", "pool-a"), tpl("n2", "pool-b")], make_config(), {"pool-a": "n1", "pool-b": "n2"}),
        ([tpl("n1", annotations={"eks/ng": "pool-a"})],
         make_config(group_by="annotation", group_key="eks/ng"), {"pool-a": "n1"}),
        ([tpl("n1", "pool-a", annotations={NG_NAME: "renamed"})], make_config(),
         {"renamed": "n1"}),
        ([tpl("n1", annotations={NG_NAME: "named"}), tpl("n2")], make_config(), {"named": "n1"}),
        ([tpl("n1", "pool-a"), tpl("n2"), tpl("n3", labels={"other": "x"})], make_config(),
         {"pool-a": "n1"}),
        ([tpl("first", "pool-a"), tpl("second", "pool-a", annotations={MAX: "5"})],
         make_config(), {"pool-a": "first"}),
    ],
    ids=["by-label", "by-annotation-key", "name-annotation-wins", "name-annotation-alone",
         "nodes-without-the-key-skipped", "first-template-wins"],
)
def test_group_names(nodes: list[dict[str, Any]], config: Any, expected: dict[str, str]) -> None:
    groups, problems = build_groups(nodes, config)
    assert {g.name: g.node["metadata"]["name"] for g in groups} == {
        group: f"kwok-fake-{node}" for group, node in expected.items()
    }
    assert problems == []


@pytest.mark.parametrize(
    ("annotations", "bounds"),
    [
        ({}, (0, 200)),
        ({MIN: "1", MAX: "5"}, (1, 5)),
        ({MIN: "2", MAX: "2", DESIRED: "2"}, (2, 2)),
        ({MAX: "3", DESIRED: "0"}, (0, 3)),
        ({MIN: "3"}, (3, 200)),
    ],
    ids=["defaults", "min-max", "desired-in-range", "desired-zero", "min-without-desired"],
)
def test_size_annotations(annotations: dict[str, str], bounds: tuple[int, int]) -> None:
    (group,), _ = build_groups([tpl("n", "pool", annotations=annotations)], make_config())
    assert (group.min_size, group.max_size) == bounds


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({MIN: "one"}, f"{MIN}: expected a non-negative integer, got 'one'"),
        ({MAX: "2.5"}, f"{MAX}: expected a non-negative integer, got '2.5'"),
        ({MIN: "-1"}, f"{MIN}: expected a non-negative integer, got '-1'"),
        ({MIN: "4", MAX: "2"}, f"{MAX}: expected at least the min-count 4, got 2"),
        ({MIN: "1", MAX: "3", DESIRED: "4"}, f"{DESIRED}: expected between min-count 1 and max-count 3, got 4"),
        ({MIN: "2", MAX: "3", DESIRED: "1"}, f"{DESIRED}: expected between min-count 2 and max-count 3, got 1"),
        ({DESIRED: "many"}, f"{DESIRED}: expected a non-negative integer, got 'many'"),
    ],
    ids=["min-not-integer", "max-fraction", "min-negative", "max-below-min", "desired-above-max",
         "desired-below-min", "desired-not-integer"],
)
def test_a_bad_template_is_a_problem_of_its_group_only(annotations: dict[str, str],
                                                       message: str) -> None:
    nodes = [tpl("bad", "broken", annotations=annotations), tpl("good", "fine")]
    groups, problems = build_groups(nodes, make_config())
    assert [g.name for g in groups] == ["fine"]
    (problem,) = problems
    assert (problem.node_group, problem.reason) == ("broken", "InvalidTemplate")
    assert "template node bad" in problem.message and message in problem.message


def test_template_annotation_values_stay_strings() -> None:
    text = docs(tpl("a", "pool", annotations={MAX: 5, "node.alpha.kubernetes.io/ttl": 0}),
                tpl("b", "other"))
    groups, problems = build_groups(parse_templates(text, WHERE), make_config())
    pool = [g for g in groups if g.name == "pool"]
    # Either a problem of that group, or a template whose annotations are all strings.
    assert [p.node_group for p in problems] == ["pool"] or all(
        isinstance(v, str) for v in pool[0].node["metadata"]["annotations"].values())


# --------------------------------------------------------------------------- prepare_template


def original() -> dict[str, Any]:
    node = tpl("kind-worker", "pool", annotations={"node.alpha.kubernetes.io/ttl": "0"},
               labels={"kubernetes.io/hostname": "kind-worker"}, resourceVersion="42",
               uid="0b7c", creationTimestamp="2024-01-01T00:00:00Z")
    node["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    return node


def test_prepare_template() -> None:
    node = original()
    prepared = prepare_template(node, "pool", make_config())
    meta = prepared["metadata"]
    assert meta["name"] == "kwok-fake-kind-worker"
    assert meta["annotations"] == {"node.alpha.kubernetes.io/ttl": "0", KWOK: "fake",
                                   NG_NAME: "pool"}
    assert meta["labels"] == {GROUP_LABEL: "pool", "kubernetes.io/hostname": "kind-worker"}
    assert not {"resourceVersion", "uid", "creationTimestamp"} & set(meta)
    assert prepared["spec"]["providerID"] == "kwok:kwok-fake-kind-worker"
    assert prepared["spec"]["taints"] == [node["spec"]["taints"][0], TAINT]
    assert prepared["status"]["allocatable"] == node["status"]["allocatable"]
    assert node == original(), "the input is not modified"


@pytest.mark.parametrize(
    ("taints", "skip_taint", "expected"),
    [
        ([], False, [TAINT]),
        ([TAINT], False, [TAINT]),
        ([{**TAINT, "value": "yes"}], False, [{**TAINT, "value": "yes"}]),
        ([], True, []),
        ([TAINT], True, [TAINT]),
    ],
    ids=["added", "not-duplicated", "same-key-and-effect-kept", "skip-taint", "skip-keeps-existing"],
)
def test_provider_taint(taints: list[dict[str, str]], skip_taint: bool,
                        expected: list[dict[str, str]]) -> None:
    node = tpl("n", "pool")
    node["spec"]["taints"] = taints
    prepared = prepare_template(node, "pool", make_config(skip_taint=skip_taint))
    assert prepared["spec"]["taints"] == expected


def test_template_without_annotations_map_works() -> None:
    # Upstream panics on a nil annotations map.
    node = tpl("bare", "pool")
    assert "annotations" not in node["metadata"]
    (group,), _ = build_groups([node], make_config())
    assert group.node["metadata"]["annotations"] == {KWOK: "fake", NG_NAME: "pool"}
