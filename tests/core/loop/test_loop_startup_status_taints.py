"""Startup, status and ignore taints, as Cluster Autoscaler treats them.

A Ready node that still carries a startup taint is starting: upcoming capacity for
scale-up, no ready node for scale-down. A node with a status taint is Ready, but pods do not
land on it, so pending pods still get new nodes (whose template drops the taint).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.loop.clusterstate import (
    NOT_READY_CONDITIONS,
    NOT_READY_TAINTS,
    ClusterStateTracker,
)
from clusterscaler.loop.decisions import DeletionKind, UnremovableReason
from clusterscaler.loop.grouptemplates import sanitize
from clusterscaler.loop.taints import NODE_CONDITION_TAINTS, TaintConfig, taint_key
from clusterscaler.model import NodeInfo, Taint
from clusterscaler.simulator.builders import make_node
from loopkit import T0, Harness, pending_pod, running_pod

STARTUP_CASES = [
    ("node.example.com/cni-not-ready", {"startup_taint": ["node.example.com/cni-not-ready"]}),
    ("node.example.com/cni-not-ready", {"ignore_taint": ["node.example.com/cni-not-ready"]}),
    ("readiness.k8s.io/gpu", {"startup_taint_prefix": ["readiness.k8s.io/"]}),
    ("startup-taint.cluster-autoscaler.kubernetes.io/cni", {}),
    ("ignore-taint.cluster-autoscaler.kubernetes.io/cni", {}),
]
STARTUP_IDS = ["startup-flag", "ignore-flag", "prefix-flag", "startup-prefix", "ignore-prefix"]


def _scale_up_then_register(taint: str, options: dict[str, Any]) -> tuple[Harness, Any]:
    """One busy node, a pod that needs a second one: the loop asks for it, it registers
    Ready but still carrying `taint`, and the loop runs again."""
    h = Harness(**options)
    g = h.provider.add_group("g", 0, 10, nodes=1)
    h.add_pods([running_pod("busy", "g-1", cpu="3500m")])
    h.add_pods([pending_pod("p", cpu="3")])
    first = h.run()
    assert [(d.node_group, d.delta) for d in first.scale_up.decisions] == [("g", 1)]
    (node,) = g.register()
    h.cluster.add_node(node.with_(taints=(Taint(taint, "", "NoSchedule"),)))
    return h, h.run(timedelta(seconds=30))


@pytest.mark.parametrize(("taint", "options"), STARTUP_CASES, ids=STARTUP_IDS)
def test_node_with_startup_taint_is_starting_and_triggers_no_second_scale_up(
    taint: str, options: dict[str, Any]
) -> None:
    h, second = _scale_up_then_register(taint, options)
    assert second.scale_up.decisions == ()
    assert (second.health.counts.ready, second.health.counts.not_started) == (1, 1)
    (status,) = second.node_groups
    assert status.upcoming == 1
    # The starting node is not used as the group's template either.
    assert h.autoscaler.templates._from_nodes["g"].node.taints == ()


def test_node_with_an_unknown_taint_is_ready_and_the_pod_gets_another_node() -> None:
    # The control case: a taint the autoscaler is not told about is permanent, the node is
    # ready capacity the pod cannot use, so the loop scales up again.
    _, second = _scale_up_then_register("node.example.com/cni-not-ready", {})
    assert second.health.counts.ready == 2
    assert [(d.node_group, d.delta) for d in second.scale_up.decisions] == [("g", 1)]


def test_node_still_tainted_after_max_node_startup_time_is_unready() -> None:
    h, _ = _scale_up_then_register("startup-taint.cluster-autoscaler.kubernetes.io/cni", {})
    later = h.run(timedelta(minutes=16))
    assert (later.health.counts.ready, later.health.counts.unready) == (1, 1)
    assert later.health.counts.not_started == 0


def _idle_tainted_node(taint: str, **options: Any) -> Harness:
    """g-1 busy, g-2 empty and carrying `taint` since it was created a minute ago."""
    h = Harness(scale_down_unneeded_time=timedelta(0), **options)
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("busy", "g-1", cpu="3")])
    node = h.cluster.nodes["g-2"]
    h.cluster.add_node(
        node.with_(
            taints=(Taint(taint, "", "NoSchedule"),),
            creation_time=T0 - timedelta(minutes=1),
        )
    )
    return h


def test_starting_node_is_no_scale_down_candidate() -> None:
    h = _idle_tainted_node("startup-taint.cluster-autoscaler.kubernetes.io/cni")
    result = h.run()
    assert result.scale_down.deletions == ()
    (u,) = [u for u in result.scale_down.unremovable if u.node == "g-2"]
    assert u.reason is UnremovableReason.NOT_UNNEEDED_OTHER_REASON
    assert "not started" in u.detail
    assert "g-2" in h.cluster.nodes


def test_node_stuck_with_startup_taint_waits_for_the_unready_time_not_the_unneeded_time() -> None:
    h = _idle_tainted_node("startup-taint.cluster-autoscaler.kubernetes.io/cni")
    h.run(timedelta(minutes=15))
    result = h.run(timedelta(minutes=1))
    # Unready now: --scale-down-unready-time (20m) applies, not --scale-down-unneeded-time=0s.
    (u,) = [u for u in result.scale_down.unremovable if u.node == "g-2"]
    assert u.reason is UnremovableReason.NOT_UNREADY_LONG_ENOUGH
    assert "g-2" in h.cluster.nodes
    done = h.run(timedelta(minutes=21))
    assert [(d.node, d.kind) for d in done.scale_down.deletions] == [("g-2", DeletionKind.UNREADY)]


@pytest.mark.parametrize(
    ("taint", "options"),
    [
        ("node.example.com/maintenance", {"status_taint": ["node.example.com/maintenance"]}),
        ("status-taint.cluster-autoscaler.kubernetes.io/maintenance", {}),
    ],
    ids=["status-flag", "status-prefix"],
)
def test_node_with_status_taint_is_ready_but_pods_get_a_new_node_without_it(
    taint: str, options: dict[str, Any]
) -> None:
    h = Harness(**options)
    g = h.provider.add_group("g", 0, 10, nodes=1)
    node = h.cluster.nodes["g-1"]
    h.cluster.add_node(node.with_(taints=(Taint(taint, "", "NoSchedule"),)))
    h.add_pods([pending_pod("p", cpu="1")])
    result = h.run()
    assert (result.health.counts.ready, result.health.counts.not_started) == (1, 0)
    # The pod does not fit the tainted node, but a new node of the group would not carry
    # the status taint: the loop scales up.
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 1)]
    assert h.autoscaler.templates._from_nodes["g"].node.taints == ()
    assert len(g.register()) == 1
    after = h.run(timedelta(seconds=30))
    # The new node is where the pod goes: nothing more to add.
    assert after.scale_up.decisions == ()
    assert after.health.counts.ready == 2


def test_status_taint_is_not_a_startup_taint() -> None:
    config = TaintConfig.from_options(
        dataclasses.replace(AutoscalingOptions(), status_taint=["example.com/busy"])
    )
    assert config.is_status("example.com/busy") and not config.is_startup("example.com/busy")
    assert config.is_status("status-taint.cluster-autoscaler.kubernetes.io/x")
    assert not config.is_startup("status-taint.cluster-autoscaler.kubernetes.io/x")


@pytest.mark.parametrize(
    ("flag", "key"),
    [
        ("example.com/boot", "example.com/boot"),
        ("example.com/boot=true", "example.com/boot"),
        ("example.com/boot=true:NoSchedule", "example.com/boot"),
        ("example.com/boot:NoExecute", "example.com/boot"),
    ],
    ids=["key", "key-value", "key-value-effect", "key-effect"],
)
def test_taint_flags_name_taints_by_key(flag: str, key: str) -> None:
    assert taint_key(flag) == key
    tracker = ClusterStateTracker(dataclasses.replace(AutoscalingOptions(), startup_taint=[flag]))
    assert tracker.taints.is_startup(key)


@pytest.mark.parametrize(
    "key",
    [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.cloudprovider.kubernetes.io/shutdown",
        "cloud.google.com/impending-node-termination",
        "NodeWithImpairedVolumes",
        "startup-taint.cluster-autoscaler.kubernetes.io/cni",
        "ignore-taint.cluster-autoscaler.kubernetes.io/cni",
        "status-taint.cluster-autoscaler.kubernetes.io/busy",
        "readiness.k8s.io/gpu",
        "example.com/status",
        "example.com/startup",
        "example.com/ignored",
    ],
)
def test_template_drops_condition_startup_and_status_taints(key: str) -> None:
    options = dataclasses.replace(
        AutoscalingOptions(),
        startup_taint=["example.com/startup"],
        ignore_taint=["example.com/ignored"],
        status_taint=["example.com/status"],
        startup_taint_prefix=["readiness.k8s.io/"],
    )
    node = make_node(
        "live-1", taints=[Taint(key, "", "NoSchedule"), Taint("dedicated", "gpu", "NoSchedule")]
    )
    tpl = sanitize(NodeInfo(node), "g", options)
    assert [t.key for t in tpl.node.taints] == ["dedicated"]


GUIDE = (Path(__file__).resolve().parents[3] / "docs" / "index.md").read_text()


@pytest.mark.parametrize(
    "term",
    [
        "`--startup-taint=<key>`",
        "`--startup-taint-prefix=<prefix>`",
        "`--ignore-taint=<key>`",
        "`--status-taint=<key>`",
        "`startup-taint.cluster-autoscaler.kubernetes.io/`",
        "`ignore-taint.cluster-autoscaler.kubernetes.io/`",
        "`status-taint.cluster-autoscaler.kubernetes.io/`",
        *(key.rsplit("/", 1)[-1] for key in NODE_CONDITION_TAINTS),
        *(f"`{key}`" for key in sorted(NOT_READY_TAINTS)),
        *(f"`{condition}`" for condition in sorted(NOT_READY_CONDITIONS)),
    ],
)
def test_taint_rules_are_documented_in_the_user_guide(term: str) -> None:
    assert term in GUIDE


def test_taints_are_counted_by_type_as_ca_reports_them() -> None:
    options = dataclasses.replace(
        AutoscalingOptions(), startup_taint=["example.com/boot"], status_taint=["example.com/busy"]
    )
    taints = [
        "example.com/boot",
        "startup-taint.cluster-autoscaler.kubernetes.io/cni",
        "ignore-taint.cluster-autoscaler.kubernetes.io/old",
        "example.com/busy",
        "status-taint.cluster-autoscaler.kubernetes.io/drain",
        "ToBeDeletedByClusterAutoscaler",
        "node.kubernetes.io/not-ready",
        "dedicated",
    ]
    nodes = [
        make_node(f"n{i}", taints=[Taint(key, "", "NoSchedule")]).with_(
            creation_time=T0 - timedelta(days=1)
        )
        for i, key in enumerate(taints)
    ]
    h = Harness()
    state = ClusterStateTracker(options).update(T0, nodes, h.provider)
    assert state.taint_counts == {
        "startup-taint": 2,
        "ignore-taint.cluster-autoscaler.kubernetes.io/": 1,
        "status-taint": 2,
        "ToBeDeletedByClusterAutoscaler": 1,
        "node.kubernetes.io/not-ready": 1,
        "other": 1,
    }
