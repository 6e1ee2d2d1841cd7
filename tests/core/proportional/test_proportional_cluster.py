from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.model.quantity import QuantityError
from clusterscaler.proportional.calculator import ClusterSize
from clusterscaler.proportional.clustersize import (
    count_cluster,
    is_schedulable,
    label_selector,
    parse_node_labels,
)
from clusterscaler.proportional.targets import Target, parse_targets


def node(
    cpu: Any = "4",
    *,
    ready: str | None = "True",
    unschedulable: bool | None = None,
    labels: dict[str, str] | None = None,
    name: str = "n",
) -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    spec = {} if unschedulable is None else {"unschedulable": unschedulable}
    status: dict[str, Any] = {"conditions": conditions}
    if cpu is not None:
        status["allocatable"] = {"cpu": cpu}
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": status}


SCHEDULABLE = [
    ("ready", node(), True),
    ("cordoned", node(unschedulable=True), False),
    ("explicitly-schedulable", node(unschedulable=False), True),
    ("not-ready", node(ready="False"), False),
    ("ready-unknown", node(ready="Unknown"), False),
    ("no-ready-condition", node(ready=None), False),
]


@pytest.mark.parametrize(
    ("obj", "expected"), [c[1:] for c in SCHEDULABLE], ids=[c[0] for c in SCHEDULABLE]
)
def test_is_schedulable(obj, expected):
    assert is_schedulable(obj) is expected


COUNTS = [
    ("empty", [], ClusterSize(0, 0, 0, 0)),
    ("whole-cores", [node("4"), node("8")], ClusterSize(2, 12, 2, 12)),
    ("millicores-summed-then-rounded-up", [node("3920m")] * 3, ClusterSize(3, 12, 3, 12)),
    ("fraction-under-one", [node("500m")], ClusterSize(1, 1, 1, 1)),
    ("integer-json", [node(2)], ClusterSize(1, 2, 1, 2)),
    ("no-allocatable-yet", [node(None), node("2")], ClusterSize(2, 2, 2, 2)),
    (
        "unschedulable-excluded-from-schedulable-only",
        [node("4"), node("4", unschedulable=True), node("4", ready="False")],
        ClusterSize(3, 12, 1, 4),
    ),
]


@pytest.mark.parametrize(("nodes", "expected"), [c[1:] for c in COUNTS], ids=[c[0] for c in COUNTS])
def test_count_cluster(nodes, expected):
    assert count_cluster(nodes) == expected


def test_count_cluster_filters_by_labels():
    nodes = [
        node("4", labels={"pool": "dns"}),
        node("4", labels={"pool": "dns", "zone": "a"}),
        node("4", labels={"pool": "web", "zone": "a"}),
        node("4"),
    ]
    assert count_cluster(nodes, {"pool": "dns"}) == ClusterSize(2, 8, 2, 8)
    assert count_cluster(nodes, {"pool": "dns", "zone": "a"}) == ClusterSize(1, 4, 1, 4)
    assert count_cluster(nodes, {}) == ClusterSize(4, 16, 4, 16)


def test_bad_cpu_names_node_and_field():
    with pytest.raises(QuantityError, match=r"node broken: status.allocatable.cpu: expected"):
        count_cluster([node("four", name="broken")])


NODE_LABELS = [
    ("empty", "", {}),
    ("one", "pool=dns", {"pool": "dns"}),
    ("two-with-spaces", "pool=dns, zone = a", {"pool": "dns", "zone": "a"}),
    ("empty-value", "dedicated=", {"dedicated": ""}),
    ("prefixed-key", "node.kubernetes.io/pool=x", {"node.kubernetes.io/pool": "x"}),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in NODE_LABELS], ids=[c[0] for c in NODE_LABELS]
)
def test_parse_node_labels(text, expected):
    assert parse_node_labels(text) == expected


@pytest.mark.parametrize(
    "text",
    ["pool", "=dns", "pool=dns,", "a=b=c", "pool!=dns", "pool=a,pool=b"],
    ids=["no-value", "no-key", "trailing-comma", "two-equals", "not-equal", "conflicting"],
)
def test_parse_node_labels_rejects(text):
    with pytest.raises(ValueError, match="expected a comma separated list of key=value pairs"):
        parse_node_labels(text)


def test_label_selector_is_stable():
    assert label_selector({"zone": "a", "pool": "dns"}) == "pool=dns,zone=a"
    assert label_selector({}) == ""


TARGETS = [
    ("deployment", "deployment/coredns", (Target("deployments", "coredns"),)),
    ("plural-mixed-case", "Deployments/coredns", (Target("deployments", "coredns"),)),
    (
        "several-deduplicated",
        "replicaset/a, statefulset/b,replicationcontroller/c,replicaset/a",
        (
            Target("replicasets", "a"),
            Target("statefulsets", "b"),
            Target("replicationcontrollers", "c"),
        ),
    ),
    (
        "custom-resource-group",
        "MachineDeployments.cluster.x-k8s.io/workers",
        (Target("machinedeployments", "workers", group="cluster.x-k8s.io"),),
    ),
    (
        "custom-resource-version-group",
        "machinesets.v1beta1.machine.openshift.io/infra",
        (Target("machinesets", "infra", group="machine.openshift.io", version="v1beta1"),),
    ),
    (
        "builtin-through-group",
        "deployments.apps/coredns",
        (Target("deployments", "coredns", group="apps"),),
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in TARGETS], ids=[c[0] for c in TARGETS]
)
def test_parse_targets(text, expected):
    assert parse_targets(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "coredns",
        "pod/coredns",
        "deployment/",
        "deployment/a/b",
        "deployment/a,,deployment/b",
        "",
        "machinesets..example.com/x",
        "machine_sets.example.com/x",
    ],
    ids=[
        "no-kind",
        "bad-kind",
        "no-name",
        "extra-slash",
        "empty-item",
        "empty",
        "empty-group-label",
        "bad-resource-chars",
    ],
)
def test_parse_targets_rejects(text):
    with pytest.raises(ValueError, match="expected <kind>/<name>"):
        parse_targets(text)


def test_target_renders_as_kind_slash_name():
    assert str(parse_targets("StatefulSets/web")[0]) == "statefulset/web"
    text = "machinesets.v1beta1.machine.openshift.io/infra"
    assert str(parse_targets(text)[0]) == text
