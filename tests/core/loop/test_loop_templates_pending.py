from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.loop.grouptemplates import sanitize
from clusterscaler.loop.pending import classify_pending, scale_up_delay
from clusterscaler.model import NodeInfo, OwnerRef, Taint
from clusterscaler.simulator.builders import make_node, make_pod
from loopkit import Harness, pending_pod, running_pod

NOW = datetime(2024, 1, 1, tzinfo=UTC)
OPTS = AutoscalingOptions()
DS = OwnerRef("DaemonSet", "agent", "uid-agent", True)


def test_sanitized_template_is_a_fresh_schedulable_node_with_daemon_pods() -> None:
    node = make_node(
        "live-1",
        taints=[
            Taint("ToBeDeletedByClusterAutoscaler", "1"),
            Taint("DeletionCandidateOfClusterAutoscaler", "1", "PreferNoSchedule"),
            Taint("startup-taint.cluster-autoscaler.kubernetes.io/cni", "", "NoSchedule"),
            Taint("my-startup", "", "NoSchedule"),
            Taint("dedicated", "gpu", "NoSchedule"),
        ],
        unschedulable=True,
        provider_id="aws:///zone/i-1",
    )
    pods = (
        make_pod("agent-x", "100m", owner=DS, node_name="live-1"),
        make_pod(
            "static", "100m", node_name="live-1", annotations={"kubernetes.io/config.mirror": "h"}
        ),
        make_pod("web", "1", owner=OwnerRef("ReplicaSet", "web", "u", True), node_name="live-1"),
    )
    options = dataclasses.replace(OPTS, startup_taint=["my-startup"], scale_from_unschedulable=True)
    tpl = sanitize(NodeInfo(node, pods), "pool-a", options)
    assert tpl.node.name != "live-1" and tpl.node.provider_id == ""
    assert tpl.node.labels["kubernetes.io/hostname"] == tpl.node.name
    assert [t.key for t in tpl.node.taints] == ["dedicated"]
    assert not tpl.node.unschedulable and tpl.node.ready
    assert sorted(p.name.split("-template")[0] for p in tpl.pods) == ["agent-x", "static"]
    assert all(p.node_name == tpl.node.name for p in tpl.pods)


def test_template_is_cached_after_the_group_loses_its_nodes() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10, nodes=1, labels={"special": "yes"})
    h.run()
    g.template_error = "cannot describe the group"
    h.cluster.remove_node("g-1")
    g.instances.clear()
    g.target = 0
    templates = h.autoscaler.templates._from_nodes
    assert templates["g"].node.labels["special"] == "yes"
    h.add_pods([pending_pod("p", node_selector={"special": "yes"})])
    result = h.run(timedelta(seconds=10))
    assert [d.node_group for d in result.scale_up.decisions] == ["g"]


@pytest.mark.parametrize(
    ("pod_kw", "option_kw", "bucket"),
    [
        ({}, {}, "unschedulable"),
        ({"unschedulable": False}, {}, None),
        ({"scheduler_name": "custom"}, {}, None),
        ({"scheduler_name": "custom"}, {"allowed_scheduler_names": ["custom"]}, "unschedulable"),
        (
            {"scheduler_name": "batch", "unschedulable": False},
            {"bypassed_scheduler_names": ["batch"]},
            "unschedulable",
        ),
        ({"priority": -20}, {}, "expendable"),
        ({"nominated_node_name": "n1"}, {}, "awaiting_preemption"),
        (
            {"creation_time": NOW - timedelta(seconds=5)},
            {"new_pod_scale_up_delay": timedelta(seconds=30)},
            "too_young",
        ),
        ({"node_name": "n1"}, {}, None),
        ({"phase": "Failed"}, {}, None),
    ],
    ids=[
        "unschedulable",
        "not-marked",
        "other-scheduler",
        "allowed-scheduler",
        "bypassed-scheduler",
        "expendable",
        "nominated",
        "young",
        "bound",
        "terminal",
    ],
)
def test_classify_pending(pod_kw, option_kw, bucket) -> None:
    kw = {"unschedulable": True, "creation_time": NOW - timedelta(minutes=5), **pod_kw}
    pod = make_pod("p", "1", **kw)
    out = classify_pending([pod], dataclasses.replace(OPTS, **option_kw), NOW)
    found = [
        name
        for name in ("unschedulable", "expendable", "too_young", "awaiting_preemption")
        if getattr(out, name)
    ]
    assert found == ([bucket] if bucket else [])


@pytest.mark.parametrize(
    ("annotation", "expected", "error"),
    [
        (None, timedelta(seconds=10), False),
        ("1m", timedelta(minutes=1), False),
        ("1s", timedelta(seconds=10), False),
        ("soon", timedelta(seconds=10), True),
    ],
    ids=["none", "longer", "shorter-keeps-flag", "malformed"],
)
def test_scale_up_delay_annotation(annotation, expected, error) -> None:
    annotations = (
        {"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": annotation} if annotation else {}
    )
    pod = make_pod("p", "1", annotations=annotations)
    delay, message = scale_up_delay(pod, timedelta(seconds=10))
    assert delay == expected
    assert bool(message) is error
    if error:
        assert "Pod default/p" in message and "pod-scale-up-delay" in message


def test_malformed_annotation_is_reported_in_the_loop_errors() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=1)
    h.add_pods([running_pod("busy", "g-1", cpu="3900m")])
    h.add_pods(
        [pending_pod("p", annotations={"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "x"})]
    )
    result = h.run()
    assert any("pod-scale-up-delay" in e for e in result.errors)
    assert result.scale_up.decisions
