"""Template node copies: `TemplateCopier` and `field_replacer` against `dataclasses.replace`."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from clusterscaler.model import (
    HOSTNAME_LABEL,
    Node,
    NodeCondition,
    NodeInfo,
    OwnerRef,
    Pod,
    Resources,
    Taint,
    field_replacer,
)
from clusterscaler.simulator.templatecopier import TemplateCopier, sanitize_template
from hypothesis import given
from hypothesis import strategies as st

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _reference(
    template: NodeInfo, name: str, ignored: frozenset[str], prefixes: tuple[str, ...]
) -> tuple[Node, list[Pod]]:
    """The copy spelled with `dataclasses.replace`, field by field."""
    node = template.node
    labels = dict(node.labels)
    labels[HOSTNAME_LABEL] = name
    taints = tuple(
        t
        for t in node.taints
        if t.key not in {"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler"}
        and t.key not in ignored
        and not any(t.key.startswith(p) for p in prefixes)
    )
    new = dataclasses.replace(
        node,
        name=name,
        labels=labels,
        taints=taints,
        uid=f"{name}-uid",
        provider_id="",
        # Kept: `sanitize` decides it once per template (--scale-from-unschedulable).
        unschedulable=node.unschedulable,
        deletion_time=None,
    )
    pods = [
        dataclasses.replace(p, name=f"{p.name}-{name}", uid=f"{p.uid}-{name}", node_name=name)
        for p in template.pods
    ]
    return new, pods


def _template(taint_keys: list[str], hostname_first: bool) -> NodeInfo:
    labels = {HOSTNAME_LABEL: "live-1", "zone": "a"} if hostname_first else {"zone": "a"}
    node = Node(
        "live-1",
        labels=labels,
        annotations={"note": "x"},
        taints=tuple(Taint(k, "v", "NoSchedule") for k in taint_keys),
        capacity=Resources(cpu=4000, memory=8 << 30, pods=110),
        allocatable=Resources(cpu=3900, memory=7 << 30, pods=110),
        unschedulable=True,
        ready=False,
        provider_id="fake://live-1",
        creation_time=T0,
        deletion_time=T0,
        uid="uid-live-1",
        conditions=(NodeCondition("Ready", "False"),),
    )
    ds = Pod(
        "kube-system",
        "agent-live-1",
        uid="uid-agent",
        node_name="live-1",
        phase="Running",
        owner=OwnerRef("DaemonSet", "agent", "ds-uid", True, "apps/v1"),
        requests=Resources(cpu=100, memory=1 << 20, pods=1),
    )
    return NodeInfo(node, (ds,))


taint_keys = st.lists(
    st.sampled_from(
        [
            "ToBeDeletedByClusterAutoscaler",
            "DeletionCandidateOfClusterAutoscaler",
            "startup.example.com/init",
            "status.example.com/dirty",
            "ignore-me",
            "dedicated",
        ]
    ),
    max_size=6,
)


@given(
    keys=taint_keys,
    hostname_first=st.booleans(),
    ignored=st.frozensets(st.sampled_from(["ignore-me", "dedicated"])),
    prefixes=st.lists(st.sampled_from(["startup.", "status."]), max_size=2, unique=True),
    names=st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True), min_size=1, max_size=4),
)
def test_copies_equal_the_replace_spelling(
    keys: list[str],
    hostname_first: bool,
    ignored: frozenset[str],
    prefixes: list[str],
    names: list[str],
) -> None:
    template = _template(keys, hostname_first)
    copier = TemplateCopier(template, ignored, tuple(prefixes))
    for name in names:
        node, pods = copier.copy(name)
        want_node, want_pods = _reference(template, name, ignored, tuple(prefixes))
        assert node == want_node
        assert list(node.labels.items()) == list(want_node.labels.items())
        assert pods == want_pods
        assert [hash(p) for p in pods] == [hash(p) for p in want_pods]
        assert sanitize_template(template, name, ignored, tuple(prefixes)) == (node, pods)
    # Copies never share the labels they change: one copy's hostname is its own.
    a, _ = copier.copy("a")
    b, _ = copier.copy("b")
    assert a.labels[HOSTNAME_LABEL] == "a"
    assert b.labels[HOSTNAME_LABEL] == "b"
    assert template.node.labels.get(HOSTNAME_LABEL, "live-1") == "live-1"


def test_field_replacer_sets_only_the_named_fields() -> None:
    pod = Pod("ns", "web-1", uid="u1", node_name="n1", labels={"app": "web"}, priority=5)
    rename = field_replacer(Pod, ("name", "node_name"))
    copy = rename(pod, "web-2", "n2")
    assert copy == dataclasses.replace(pod, name="web-2", node_name="n2")
    assert copy.labels is pod.labels
    assert (pod.name, pod.node_name) == ("web-1", "n1")


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        (("name", "nope"), "expected distinct field names"),
        (("name", "name"), "expected distinct field names"),
    ],
    ids=["unknown-field", "repeated-field"],
)
def test_field_replacer_rejects_bad_field_names(changed: tuple[str, ...], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        field_replacer(Pod, changed)
