from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.interfaces.podfilter import BlockingPodReason, DrainContext, DrainOutcome
from clusterscaler.model import (
    Controller,
    DaemonSet,
    LabelSelector,
    OwnerRef,
    PodDisruptionBudget,
    Volume,
)
from clusterscaler.plugins import pod_filters
from clusterscaler.simulator.builders import make_pod
from clusterscaler.simulator.drain import PdbTracker, build_pod_filters, decide

NOW = datetime(2024, 1, 1, 12, tzinfo=UTC)
RS = OwnerRef("ReplicaSet", "web", "uid-web", True, "apps/v1")
RC = OwnerRef("ReplicationController", "old", "uid-old", True, "v1")
DS = OwnerRef("DaemonSet", "agent", "uid-agent", True, "apps/v1")
CUSTOM = OwnerRef("Rollout", "canary", "uid-canary", True, "argoproj.io/v1alpha1")
GONE = OwnerRef("ReplicaSet", "gone", "uid-gone", True, "apps/v1")
SAFE = "cluster-autoscaler.kubernetes.io/safe-to-evict"
LOCAL_OK = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"


def context(pdbs: list[PodDisruptionBudget] | None = None) -> DrainContext:
    return DrainContext.build(
        NOW,
        pdbs=PdbTracker(pdbs or []),
        controllers=[
            Controller("ReplicaSet", "default", "web", "uid-web", replicas=3),
            Controller("ReplicationController", "default", "old", "uid-old", replicas=1),
            Controller("ReplicaSet", "kube-system", "web", "uid-web", replicas=3),
        ],
        daemonsets=[DaemonSet("default", "agent", "uid-agent")],
    )


def filters(**overrides: Any) -> list[Any]:
    host = build_plugin_manager(autoload=False, extra_plugins={"pod-filters": pod_filters})
    options = dataclasses.replace(AutoscalingOptions(), **overrides)
    return build_pod_filters(collect_registry(host), options)


def pod(**kw: Any) -> Any:
    kw.setdefault("owner", RS)
    kw.setdefault("node_name", "n1")
    kw.setdefault("phase", "Running")
    kw.setdefault("creation_time", NOW - timedelta(minutes=5))
    return make_pod(kw.pop("name", "p"), "100m", "100Mi", **kw)


WEB_PDB = PodDisruptionBudget(
    "default", "web", selector=LabelSelector((("app", "web"),)), disruptions_allowed=0
)
SYSTEM_PDB = PodDisruptionBudget(
    "kube-system", "dns", selector=LabelSelector((("app", "dns"),)), disruptions_allowed=1
)

CASES = [
    ("replicated", {}, {}, DrainOutcome.MOVE, None),
    (
        "mirror",
        {"annotations": {"kubernetes.io/config.mirror": "x"}, "owner": None},
        {},
        DrainOutcome.SKIP,
        None,
    ),
    ("daemonset", {"owner": DS}, {}, DrainOutcome.DAEMONSET, None),
    (
        "daemonset-annotation",
        {"owner": None, "annotations": {"cluster-autoscaler.kubernetes.io/daemonset-pod": "true"}},
        {},
        DrainOutcome.DAEMONSET,
        None,
    ),
    (
        "daemonset-missing",
        {"owner": OwnerRef("DaemonSet", "nope", "u", True)},
        {},
        DrainOutcome.BLOCK,
        BlockingPodReason.CONTROLLER_NOT_FOUND,
    ),
    ("no-controller", {"owner": None}, {}, DrainOutcome.BLOCK, BlockingPodReason.NOT_REPLICATED),
    (
        "no-controller-safe-to-evict",
        {"owner": None, "annotations": {SAFE: "true"}},
        {},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "custom-controller",
        {"owner": CUSTOM},
        {},
        DrainOutcome.BLOCK,
        BlockingPodReason.NOT_REPLICATED,
    ),
    (
        "custom-controller-allowed",
        {"owner": CUSTOM},
        {"skip_nodes_with_custom_controller_pods": False},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "controller-not-found",
        {"owner": GONE},
        {},
        DrainOutcome.BLOCK,
        BlockingPodReason.CONTROLLER_NOT_FOUND,
    ),
    (
        "controller-not-found-unchecked",
        {"owner": GONE},
        {"skip_nodes_with_custom_controller_pods": False},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "min-replicas",
        {"owner": RC},
        {"min_replica_count": 2},
        DrainOutcome.BLOCK,
        BlockingPodReason.MIN_REPLICAS_REACHED,
    ),
    ("min-replicas-met", {"owner": RS}, {"min_replica_count": 3}, DrainOutcome.MOVE, None),
    (
        "not-safe-to-evict",
        {"annotations": {SAFE: "false"}},
        {},
        DrainOutcome.BLOCK,
        BlockingPodReason.NOT_SAFE_TO_EVICT_ANNOTATION,
    ),
    ("terminal", {"owner": None, "phase": "Succeeded"}, {}, DrainOutcome.SKIP, None),
    (
        "on-completion-waits",
        {"owner": None, "annotations": {SAFE: "on-completion"}},
        {},
        DrainOutcome.WAIT,
        None,
    ),
    (
        "on-completion-beats-local-storage",
        {"annotations": {SAFE: "on-completion"}, "volumes": (Volume("data", "hostPath"),)},
        {},
        DrainOutcome.WAIT,
        None,
    ),
    (
        "on-completion-finished",
        {"annotations": {SAFE: "on-completion"}, "phase": "Succeeded"},
        {},
        DrainOutcome.SKIP,
        None,
    ),
    (
        "on-completion-daemonset",
        {"owner": DS, "annotations": {SAFE: "on-completion"}},
        {},
        DrainOutcome.DAEMONSET,
        None,
    ),
    ("expendable", {"owner": None, "priority": -100}, {}, DrainOutcome.SKIP, None),
    (
        "long-terminating",
        {
            "owner": None,
            "deletion_time": NOW - timedelta(minutes=5),
            "termination_grace_seconds": 30,
        },
        {},
        DrainOutcome.SKIP,
        None,
    ),
    (
        "terminating-recently",
        {"owner": None, "deletion_time": NOW - timedelta(seconds=10)},
        {},
        DrainOutcome.BLOCK,
        BlockingPodReason.NOT_REPLICATED,
    ),
    (
        "host-path",
        {"volumes": (Volume("data", "hostPath"),)},
        {},
        DrainOutcome.BLOCK,
        BlockingPodReason.LOCAL_STORAGE_REQUESTED,
    ),
    (
        "empty-dir",
        {"volumes": (Volume("scratch", "emptyDir"),)},
        {},
        DrainOutcome.BLOCK,
        BlockingPodReason.LOCAL_STORAGE_REQUESTED,
    ),
    (
        "empty-dir-memory",
        {"volumes": (Volume("scratch", "emptyDir", medium="Memory"),)},
        {},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "empty-dir-listed",
        {"volumes": (Volume("scratch", "emptyDir"),), "annotations": {LOCAL_OK: "other,scratch"}},
        {},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "local-storage-allowed",
        {"volumes": (Volume("data", "hostPath"),)},
        {"skip_nodes_with_local_storage": False},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "pvc",
        {"volumes": (Volume("data", "persistentVolumeClaim", claim_name="c"),)},
        {},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "kube-system",
        {"namespace": "kube-system"},
        {},
        DrainOutcome.BLOCK,
        BlockingPodReason.UNMOVABLE_KUBE_SYSTEM_POD,
    ),
    (
        "kube-system-with-pdb",
        {"namespace": "kube-system", "labels": {"app": "dns"}},
        {},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "kube-system-allowed",
        {"namespace": "kube-system"},
        {"skip_nodes_with_system_pods": False},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "kube-system-old",
        {"namespace": "kube-system", "creation_time": NOW - timedelta(hours=2)},
        {},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "pdb-exhausted",
        {"labels": {"app": "web"}},
        {},
        DrainOutcome.BLOCK,
        BlockingPodReason.NOT_ENOUGH_PDB,
    ),
    (
        "pdb-exhausted-safe-to-evict",
        {"labels": {"app": "web"}, "annotations": {SAFE: "true"}},
        {},
        DrainOutcome.MOVE,
        None,
    ),
    (
        "expendable-with-pdb",
        {"labels": {"app": "web"}, "priority": -11},
        {},
        DrainOutcome.SKIP,
        None,
    ),
]


@pytest.mark.parametrize(
    ("pod_kw", "option_kw", "outcome", "reason"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_drain_rules(pod_kw, option_kw, outcome, reason) -> None:
    decision = decide(pod(**pod_kw), filters(**option_kw), context([WEB_PDB, SYSTEM_PDB]))
    assert decision.outcome is outcome
    if reason is not None:
        assert decision.reason is reason


def test_every_rule_is_its_own_registered_filter_in_ca_order() -> None:
    names = [f.name for f in filters()]
    assert names == [
        "mirror",
        "long-terminating",
        "expendable",
        "replica-count",
        "daemonset",
        "safe-to-evict",
        "terminal",
        "on-completion",
        "not-replicated",
        "system",
        "not-safe-to-evict",
        "local-storage",
        "pdb",
    ]


def test_pdb_tracker_counts_pods_of_one_node_together() -> None:
    budget = dataclasses.replace(WEB_PDB, disruptions_allowed=1)
    tracker = PdbTracker([budget])
    pods = [pod(name=f"w{i}", labels={"app": "web"}) for i in range(2)]
    exhausted = tracker.first_exhausted(pods)
    assert exhausted is not None and exhausted[0].name == "w1"
    assert tracker.first_exhausted(pods[:1]) is None
    tracker.consume(pods[:1])
    assert tracker.first_exhausted(pods[:1]) is not None


def test_filters_come_through_the_installed_entry_point() -> None:
    registry = collect_registry(build_plugin_manager(autoload=True))
    assert {
        "mirror",
        "daemonset",
        "local-storage",
        "system",
        "pdb",
        "not-replicated",
        "replica-count",
    } <= set(registry.pod_filters)
    assert registry.pod_filters["pdb"].source.entry_point == "pod-filters"
