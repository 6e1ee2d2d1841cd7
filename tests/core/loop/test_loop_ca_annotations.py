"""Cluster Autoscaler's annotations on pods and nodes, end to end through the loop:
`safe-to-evict: "on-completion"`, `enable-ds-eviction`, and the markers CA puts on the
nodes it simulates (`upcoming-node`, `template-node`)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from clusterscaler.loop.decisions import DeletionKind, UnremovableReason
from clusterscaler.loop.grouptemplates import (
    TEMPLATE_NODE_LABEL,
    UPCOMING_NODE_ANNOTATION,
    upcoming_node,
)
from clusterscaler.model import OwnerRef
from loopkit import Harness, running_pod

ELEVEN_MINUTES = timedelta(minutes=11)
SAFE = "cluster-autoscaler.kubernetes.io/safe-to-evict"
ENABLE_DS_EVICTION = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"


def ds_owner() -> OwnerRef:
    return OwnerRef("DaemonSet", "agent", "uid-ds-agent", True, "apps/v1")


def on_completion_cluster(nodes: int = 2, **options: object) -> Harness:
    """g-1 is busy; g-2 runs only a pod that must finish before its node goes."""
    h = Harness(**options)
    h.provider.add_group("g", 0, 10, nodes=nodes)
    h.add_pods([running_pod("big", "g-1", cpu="2500m")])
    h.add_pods(
        [running_pod("batch", "g-2", cpu="200m", owner=None, annotations={SAFE: "on-completion"})]
    )
    return h


def test_on_completion_pod_holds_its_node_until_it_finishes() -> None:
    h = on_completion_cluster()
    first = h.run()
    # Unneeded (nothing to move, the pod is not evicted) so its timer runs ...
    assert [(u.node, u.empty) for u in first.scale_down.unneeded] == [("g-2", True)]
    second = h.run(ELEVEN_MINUTES)
    # ... but not deleted while the pod runs, and the pod is never evicted.
    assert second.scale_down.deletions == ()
    held = next(u for u in second.scale_down.unremovable if u.node == "g-2")
    assert held.reason is UnremovableReason.BLOCKED_BY_ON_COMPLETION_POD
    assert "default/batch" in held.detail
    assert "g-2" in h.cluster.nodes and h.cluster.evicted == []
    assert [u.node for u in second.scale_down.unneeded] == ["g-2"]
    # Once the pod has finished, the node goes at once: it has been unneeded long enough.
    pod = h.cluster.pods["default/batch"]
    h.cluster.pods["default/batch"] = dataclasses.replace(pod, phase="Succeeded")
    third = h.run(timedelta(seconds=10))
    (deletion,) = third.scale_down.deletions
    assert (deletion.node, deletion.kind, deletion.ok) == ("g-2", DeletionKind.EMPTY, True)
    assert h.cluster.evicted == []


def test_on_completion_pod_does_not_hold_nodes_that_can_go() -> None:
    h = on_completion_cluster(nodes=3)
    h.add_pods([running_pod("agent-3", "g-3", owner=ds_owner())])
    h.run()
    second = h.run(ELEVEN_MINUTES)
    # g-3 came up empty: it goes, g-2 waits for its pod.
    assert [d.node for d in second.scale_down.deletions if d.ok] == ["g-3"]
    held = next(u for u in second.scale_down.unremovable if u.node == "g-2")
    assert held.reason is UnremovableReason.BLOCKED_BY_ON_COMPLETION_POD


@pytest.mark.parametrize(
    ("node_pods", "options", "annotation", "evicted"),
    [
        ("empty", {}, "true", ["default/agent-2"]),
        ("empty", {"daemonset_eviction_for_empty_nodes": True}, "false", []),
        ("busy", {}, "false", ["default/small"]),
        ("busy", {"daemonset_eviction_for_occupied_nodes": False}, "true",
         ["default/small", "default/agent-2"]),
        ("busy", {}, "yes", ["default/small"]),
    ],
    ids=["empty-annotation-evicts", "empty-annotation-keeps", "drain-annotation-keeps",
         "drain-annotation-evicts", "drain-not-true-keeps"],
)
def test_enable_ds_eviction_annotation_overrides_the_flags(
    node_pods, options, annotation, evicted
) -> None:
    h = Harness(**options)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="2500m")])
    h.add_pods(
        [
            running_pod(
                "agent-2", "g-2", owner=ds_owner(), annotations={ENABLE_DS_EVICTION: annotation}
            )
        ]
    )
    if node_pods == "busy":
        h.add_pods([running_pod("small", "g-2", cpu="200m")])
    h.run()
    (deletion,) = h.run(ELEVEN_MINUTES).scale_down.deletions
    assert deletion.ok
    assert list(deletion.evicted_pods) == evicted


def test_template_nodes_carry_ca_template_label_from_nodes_and_from_the_provider() -> None:
    h = Harness()
    h.provider.add_group("live", 0, 10, nodes=1)
    h.provider.add_group("zero", 0, 10, nodes=0)
    h.run()
    templates = h.autoscaler.templates.last
    assert templates["live"].source == "node" and templates["zero"].source == "provider"
    for gid in ("live", "zero"):
        info = templates[gid].node_info
        assert info is not None
        assert info.node.labels[TEMPLATE_NODE_LABEL] == "true"
    # The live node it was copied from is not marked.
    assert TEMPLATE_NODE_LABEL not in h.cluster.nodes["live-1"].labels


def test_upcoming_nodes_are_annotated_and_keep_the_template_label() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=1)
    h.run()
    template = h.autoscaler.templates.last["g"].node_info
    assert template is not None
    info = upcoming_node(template, "g-upcoming-0")
    assert info.node.name == "g-upcoming-0"
    assert info.node.annotations[UPCOMING_NODE_ANNOTATION] == "true"
    assert info.node.labels[TEMPLATE_NODE_LABEL] == "true"
    assert UPCOMING_NODE_ANNOTATION not in template.node.annotations
