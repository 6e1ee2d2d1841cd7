"""What the API server refuses, the model refuses too: taints and tolerations with an
effect or operator Kubernetes does not know, and List items of a kind that is neither read
nor known to be safely skipped. Each error names the object, the field and the allowed
values; the JSON text route refuses exactly what the dict route refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from clusterscaler.model import (
    SUPPORTED_KINDS,
    UNREAD_KINDS,
    ClusterObjects,
    ModelError,
    Taint,
    Toleration,
    is_unread_kind,
    parse_node,
    parse_pod,
    parse_pod_json,
)


def pod(tolerations: list[Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "shop"},
        "spec": {"containers": [{"name": "c"}], "tolerations": tolerations},
    }


def node(taints: list[Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "spec": {"taints": taints},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    }


EFFECTS = "NoSchedule, PreferNoSchedule, NoExecute"

BAD_TOLERATIONS = [
    pytest.param(
        [{"key": "gpu", "operator": "Exists", "effect": "Sometimes"}],
        "Pod shop/web-1: spec.tolerations[0].effect: expected one of "
        f"{EFFECTS} or empty (every effect), got 'Sometimes'",
        id="effect-unknown",
    ),
    pytest.param(
        [{"operator": "Exists"}, {"key": "a", "value": "b", "effect": "noschedule"}],
        "Pod shop/web-1: spec.tolerations[1].effect: expected one of "
        f"{EFFECTS} or empty (every effect), got 'noschedule'",
        id="effect-wrong-case-second-entry",
    ),
    pytest.param(
        [{"key": "gpu", "operator": "Sometimes", "effect": "NoSchedule"}],
        "Pod shop/web-1: spec.tolerations[0].operator: expected Equal or Exists, got 'Sometimes'",
        id="operator-unknown",
    ),
    pytest.param(
        [{"key": "dedicated", "value": True, "effect": "NoSchedule"}],
        "Pod shop/web-1: spec.tolerations[0].value: expected a string, got True",
        id="value-not-a-string",
    ),
    pytest.param(
        [{"key": 7, "operator": "Exists"}],
        "Pod shop/web-1: spec.tolerations[0].key: expected a string, got 7",
        id="key-not-a-string",
    ),
]


@pytest.mark.parametrize(("tolerations", "message"), BAD_TOLERATIONS)
def test_bad_toleration_is_refused_naming_pod_field_and_allowed_values(
    tolerations: list[Any], message: str
) -> None:
    with pytest.raises(ModelError) as err:
        parse_pod(pod(tolerations))
    assert str(err.value) == message
    # The JSON text route gives no pod, so that the dict route reports the same error.
    assert parse_pod_json(json.dumps(pod(tolerations)).encode()) is None
    with pytest.raises(ModelError) as listed:
        ClusterObjects.from_json_list(json.dumps({"kind": "List", "items": [pod(tolerations)]}))
    assert str(listed.value) == message


@pytest.mark.parametrize("effect", ["NoSchedule", "PreferNoSchedule", "NoExecute", "", None])
def test_every_kubernetes_toleration_effect_is_accepted(effect: str | None) -> None:
    raw = {"key": "gpu", "operator": "Exists"}
    if effect is not None:
        raw["effect"] = effect
    (toleration,) = parse_pod(pod([raw])).tolerations
    assert toleration == Toleration(key="gpu", operator="Exists", effect=effect or "")
    # An empty effect tolerates the key's taints of every effect.
    assert toleration.tolerates(Taint("gpu", "", "NoExecute")) == (effect in ("", None, "NoExecute"))


BAD_TAINTS = [
    pytest.param(
        [{"key": "gpu", "effect": "Sometimes"}],
        f"Node n1: spec.taints[0].effect: expected one of {EFFECTS}, got 'Sometimes'",
        id="effect-unknown",
    ),
    pytest.param(
        [{"key": "gpu"}],
        f"Node n1: spec.taints[0].effect: expected one of {EFFECTS}, got None",
        id="effect-missing",
    ),
    pytest.param(
        [{"key": "gpu", "effect": "NoSchedule"}, {"key": "zone", "value": 1, "effect": "NoSchedule"}],
        "Node n1: spec.taints[1].value: expected a string, got 1",
        id="value-not-a-string",
    ),
]


@pytest.mark.parametrize(("taints", "message"), BAD_TAINTS)
def test_bad_taint_is_refused_naming_node_field_and_allowed_values(
    taints: list[Any], message: str
) -> None:
    with pytest.raises(ModelError) as err:
        parse_node(node(taints))
    assert str(err.value) == message


READ_LIST_HEAD = "a kind the autoscaler reads (" + ", ".join(SUPPORTED_KINDS) + ")"

UNKNOWN_KINDS = [
    pytest.param(
        {"apiVersion": "v1", "kind": "Frobnicator", "metadata": {"name": "f", "namespace": "ns"}},
        "items[1] (Frobnicator ns/f): kind: expected ",
        ", got 'Frobnicator'",
        id="unknown-core-kind",
    ),
    pytest.param(
        {"apiVersion": "apps/v1", "kind": "Deploymnet", "metadata": {"name": "web", "namespace": "shop"}},
        "items[1] (Deploymnet shop/web): kind: expected ",
        ", got 'Deploymnet'; did you mean Deployment?",
        id="typo-of-a-skipped-kind",
    ),
    pytest.param(
        {"apiVersion": "v1", "kind": "pod", "metadata": {"name": "p", "namespace": "shop"}},
        "items[1] (pod shop/p): kind: expected ",
        ", got 'pod'; did you mean Pod?",
        id="typo-of-a-read-kind",
    ),
    pytest.param(
        {"kind": "Frobnicator", "metadata": {"name": "cluster-wide"}},
        "items[1] (Frobnicator cluster-wide): kind: expected ",
        ", got 'Frobnicator'",
        id="no-api-version",
    ),
    pytest.param(
        {"apiVersion": "v1", "metadata": {"name": "nameless-kind"}},
        "items[1] (nameless-kind): kind: expected ",
        ", got None",
        id="kind-missing",
    ),
]


@pytest.mark.parametrize(("item", "head", "tail"), UNKNOWN_KINDS)
@pytest.mark.parametrize("route", ["dicts", "json-text"])
def test_unknown_kind_is_refused_naming_item_kind_name_and_the_kinds_read(
    item: dict[str, Any], head: str, tail: str, route: str
) -> None:
    doc = {"kind": "List", "items": [node([]), item]}
    with pytest.raises(ModelError) as err:
        if route == "dicts":
            ClusterObjects.from_list(doc)
        else:
            ClusterObjects.from_json_list(json.dumps(doc))
    message = str(err.value)
    assert message.startswith(head + READ_LIST_HEAD), message
    assert message.endswith(tail), message
    assert "skips with a warning" in message


SKIPPED = [
    pytest.param("v1", "Service", id="service"),
    pytest.param("v1", "Endpoints", id="endpoints"),
    pytest.param("v1", "Event", id="event"),
    pytest.param("events.k8s.io/v1", "Event", id="events-api-event"),
    pytest.param("apps/v1", "Deployment", id="deployment"),
    pytest.param("batch/v1", "CronJob", id="cronjob"),
    pytest.param("discovery.k8s.io/v1", "EndpointSlice", id="endpointslice"),
    pytest.param("autoscaling/v2", "HorizontalPodAutoscaler", id="hpa"),
    pytest.param("argoproj.io/v1alpha1", "Rollout", id="custom-resource"),
    pytest.param("cluster.x-k8s.io/v1beta1", "MachineSet", id="cluster-api-resource"),
]


@pytest.mark.parametrize(("api_version", "kind"), SKIPPED)
@pytest.mark.parametrize("route", ["dicts", "json-text"])
def test_kinds_of_a_real_snapshot_that_are_not_read_are_counted_as_skipped(
    api_version: str, kind: str, route: str
) -> None:
    items = [
        node([]),
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "a"}},
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": "y", "namespace": "a"}},
    ]
    doc = {"kind": "List", "items": items}
    objects = (
        ClusterObjects.from_list(doc)
        if route == "dicts"
        else ClusterObjects.from_json_list(json.dumps(doc))
    )
    assert objects is not None
    assert objects.skipped == {kind: 2}
    assert [n.name for n in objects.nodes] == ["n1"]


def test_strict_refuses_even_the_kinds_it_would_skip() -> None:
    doc = {"kind": "List", "items": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}]}
    with pytest.raises(ModelError, match=r"items\[0\] \(Service s\): kind: expected one of Node, "):
        ClusterObjects.from_list(doc, strict=True)


def test_typed_list_items_take_the_list_kind() -> None:
    items = [{"metadata": {"name": "web", "namespace": "a"}}]
    objects = ClusterObjects.from_list({"kind": "ServiceList", "apiVersion": "v1", "items": items})
    assert objects.skipped == {"Service": 1}
    with pytest.raises(ModelError, match=r"items\[0\] \(Frobnicator a/web\): kind: "):
        ClusterObjects.from_list({"kind": "FrobnicatorList", "apiVersion": "v1", "items": items})


def test_read_and_skipped_kinds_do_not_overlap() -> None:
    assert not set(SUPPORTED_KINDS) & UNREAD_KINDS


@pytest.mark.parametrize(
    ("kind", "api_version", "skipped"),
    [
        ("Service", None, True),
        ("Frobnicator", None, False),
        ("Frobnicator", "", False),
        ("Frobnicator", "v1", False),
        ("Frobnicator", "apps/v1", False),
        ("Frobnicator", "storage.k8s.io/v1", False),
        ("Frobnicator", "example.com/v1", True),
        ("VerticalPodAutoscaler", "autoscaling.k8s.io/v1", True),
        ("Frobnicator", 3, False),
    ],
    ids=[
        "skipped-kind",
        "no-api-version",
        "empty-api-version",
        "core-group",
        "apps-group",
        "k8s-io-builtin-group",
        "custom-group",
        "custom-group-under-k8s-io",
        "api-version-not-a-string",
    ],
)
def test_is_unread_kind(kind: str, api_version: object, skipped: bool) -> None:
    assert is_unread_kind(kind, api_version) is skipped
