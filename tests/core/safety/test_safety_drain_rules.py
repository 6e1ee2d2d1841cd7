"""Which pods block a node's removal, as CA's drainability rules decide.

Every scenario puts one pod (plus the node's usual DaemonSet and static pods where noted)
on g-2, an underutilized node whose pods would otherwise fit on g-1, and runs the loop past
--scale-down-unneeded-time. Blocking pods keep the node with CA's BlockingPodReason; the
others let it go.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.interfaces.podfilter import (
    SAFE_TO_EVICT_ANNOTATION,
    SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION,
    BlockingPodReason,
)
from clusterscaler.loop.decisions import UnremovableReason
from clusterscaler.model import Controller, OwnerRef, Pod, Volume
from safetykit import (
    T0,
    World,
    ds_pod,
    mirror_pod,
    pod,
    rs,
    unremovable,
)

FRESH = T0 - timedelta(minutes=5)


def world(*pods: Pod, **options: Any) -> World:
    w = World(**options)
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="2500m"), *pods)
    w.cluster.controllers.append(Controller("ReplicaSet", "default", "solo", "uid-rs-solo", 1))
    return w


def evict(value: str) -> dict[str, str]:
    return {SAFE_TO_EVICT_ANNOTATION: value}


HOST = Volume("logs", "hostPath")
DISK = Volume("scratch", "emptyDir")
RAM = Volume("cache", "emptyDir", medium="Memory")
SYSTEM: dict[str, Any] = {"namespace": "kube-system", "owner": rs("dns")}

BLOCKED: list[tuple[str, Callable[[], list[Pod]], dict[str, Any], BlockingPodReason]] = [
    (
        "no-controller",
        lambda: [pod("bare", "g-2", owner=None)],
        {},
        BlockingPodReason.NOT_REPLICATED,
    ),
    (
        "custom-controller-kind",
        lambda: [pod("x", "g-2", owner=OwnerRef("Foo", "x", "uid-foo", True, "ex.io/v1"))],
        {},
        BlockingPodReason.NOT_REPLICATED,
    ),
    (
        "controller-missing",
        lambda: [pod("orphan", "g-2", owner=rs("deleted-rs"))],
        {},
        BlockingPodReason.CONTROLLER_NOT_FOUND,
    ),
    (
        "min-replica-count",
        lambda: [pod("solo", "g-2", owner=rs("solo"))],
        {"min_replica_count": 2},
        BlockingPodReason.MIN_REPLICAS_REACHED,
    ),
    (
        "kube-system-without-pdb",
        lambda: [pod("dns", "g-2", creation_time=FRESH, **SYSTEM)],
        {},
        BlockingPodReason.UNMOVABLE_KUBE_SYSTEM_POD,
    ),
    (
        "safe-to-evict-false",
        lambda: [pod("pinned", "g-2", annotations=evict("false"))],
        {},
        BlockingPodReason.NOT_SAFE_TO_EVICT_ANNOTATION,
    ),
    (
        "hostpath",
        lambda: [pod("logger", "g-2", volumes=(HOST,))],
        {},
        BlockingPodReason.LOCAL_STORAGE_REQUESTED,
    ),
    (
        "disk-emptydir",
        lambda: [pod("scratchy", "g-2", volumes=(DISK,))],
        {},
        BlockingPodReason.LOCAL_STORAGE_REQUESTED,
    ),
    (
        "only-one-of-two-local-volumes-listed",
        lambda: [
            pod(
                "two-vols",
                "g-2",
                volumes=(DISK, HOST),
                annotations={SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION: "scratch"},
            )
        ],
        {},
        BlockingPodReason.LOCAL_STORAGE_REQUESTED,
    ),
    (
        "blocking-pod-beside-daemonset-and-static-pods",
        lambda: [
            ds_pod("agent-g2", "g-2"),
            mirror_pod("proxy-g2", "g-2"),
            pod("bare", "g-2", owner=None),
        ],
        {},
        BlockingPodReason.NOT_REPLICATED,
    ),
]


@pytest.mark.parametrize(
    ("make", "options", "reason"),
    [c[1:] for c in BLOCKED],
    ids=[c[0] for c in BLOCKED],
)
def test_blocking_pod_keeps_its_node(
    make: Callable[[], list[Pod]], options: dict[str, Any], reason: BlockingPodReason
) -> None:
    """CA: the first decisive drainability rule blocks; the node is BlockedByPod with the
    rule's BlockingPodReason and is never drained."""
    w = world(*make(), **options)
    results = w.settle(loops=3)
    assert "g-2" in w.alive()
    assert w.cluster.evicted == []
    u = unremovable(results[0], "g-2")
    assert u is not None and u.reason is UnremovableReason.BLOCKED_BY_POD
    assert u.blocking_pod is not None and u.blocking_pod.reason is reason


REMOVABLE: list[tuple[str, Callable[[], list[Pod]], dict[str, Any], list[str]]] = [
    (
        "safe-to-evict-true-overrides-no-controller",
        lambda: [pod("bare", "g-2", owner=None, annotations=evict("true"))],
        {},
        ["default/bare"],
    ),
    (
        "safe-to-evict-true-overrides-local-storage",
        lambda: [pod("logger", "g-2", volumes=(HOST,), annotations=evict("true"))],
        {},
        ["default/logger"],
    ),
    (
        "memory-emptydir-is-not-local-storage",
        lambda: [pod("cachey", "g-2", volumes=(RAM,))],
        {},
        ["default/cachey"],
    ),
    (
        "local-volume-listed-in-safe-to-evict-local-volumes",
        lambda: [
            pod(
                "two-vols",
                "g-2",
                volumes=(DISK, HOST),
                annotations={SAFE_TO_EVICT_LOCAL_VOLUMES_ANNOTATION: "scratch,logs"},
            )
        ],
        {},
        ["default/two-vols"],
    ),
    (
        "local-storage-allowed-by-flag",
        lambda: [pod("logger", "g-2", volumes=(HOST,))],
        {"skip_nodes_with_local_storage": False},
        ["default/logger"],
    ),
    (
        "kube-system-allowed-by-flag",
        lambda: [pod("dns", "g-2", creation_time=FRESH, **SYSTEM)],
        {"skip_nodes_with_system_pods": False},
        ["kube-system/dns"],
    ),
    (
        "kube-system-older-than-blocking-timeout",
        lambda: [pod("dns", "g-2", creation_time=T0 - timedelta(hours=2), **SYSTEM)],
        {},
        ["kube-system/dns"],
    ),
    (
        "terminal-pod-is-ignored-even-if-not-safe-to-evict",
        lambda: [pod("done", "g-2", owner=None, phase="Succeeded", annotations=evict("false"))],
        {},
        [],
    ),
    (
        "expendable-pod-is-not-moved",
        lambda: [pod("low", "g-2", owner=None, priority=-100)],
        {},
        [],
    ),
    (
        "long-terminating-pod-is-ignored",
        lambda: [
            pod(
                "stuck",
                "g-2",
                owner=None,
                deletion_time=T0 - timedelta(minutes=10),
                termination_grace_seconds=30,
            )
        ],
        {},
        [],
    ),
    (
        "daemonset-and-static-pods-only",
        lambda: [ds_pod("agent-g2", "g-2"), mirror_pod("proxy-g2", "g-2")],
        {},
        [],
    ),
]


@pytest.mark.parametrize(
    ("make", "options", "evicted"),
    [c[1:] for c in REMOVABLE],
    ids=[c[0] for c in REMOVABLE],
)
def test_non_blocking_pods_let_the_node_go(
    make: Callable[[], list[Pod]], options: dict[str, Any], evicted: list[str]
) -> None:
    """CA: mirror, long-terminating, expendable and terminal pods need no new home;
    safe-to-evict=true moves a pod whatever the blocking rules say; flags switch rules
    off. Only pods that must move are evicted (DaemonSet pods per their own flags)."""
    w = world(*make(), **options)
    w.settle(loops=2)
    assert w.deleted() == ["g-2"]
    assert [k for k in w.cluster.evicted if not k.startswith("default/agent")] == evicted


def test_blocked_node_is_rechecked_when_the_blocking_pod_goes() -> None:
    """CA rechecks unremovable nodes; once the blocking pod is gone the node becomes
    unneeded and its timer starts then, not when it was first seen."""
    w = world(pod("bare", "g-2", owner=None))
    w.run()
    w.run(timedelta(minutes=3))
    del w.cluster.pods["default/bare"]
    w.run(timedelta(minutes=3))
    assert "g-2" in w.alive()
    w.run(timedelta(minutes=9))
    assert "g-2" in w.alive(), "deleted before --scale-down-unneeded-time since unblocked"
    w.run(timedelta(minutes=2))
    assert w.deleted() == ["g-2"]
