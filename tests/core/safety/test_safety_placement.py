"""Scale-down never removes a node whose pods have nowhere else to go.

CA simulates the removal of each candidate: its movable pods must pass every scheduler
predicate (resources, node selector and affinity, pod (anti-)affinity, taints, topology
spread, host ports, volume zones, cordoned nodes) on some other node that is not itself
being removed. A node that fails is `NoPlaceToMovePods` and survives any number of loops.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.loop.decisions import UnremovableReason
from clusterscaler.model import (
    LEGACY_ZONE_LABEL,
    ZONE_LABEL,
    PersistentVolume,
    PersistentVolumeClaim,
    Taint,
    Toleration,
    Volume,
)
from clusterscaler.simulator.builders import affinity_term, node_term, spread
from safetykit import (
    PAST_UNNEEDED,
    World,
    mirror_pod,
    pod,
    reason_of,
    unneeded_names,
)

# g-1 is busy (62.5% cpu, above the 0.5 threshold) and is the only other node g-2's pod
# could go to; g-2 carries the pod under test.
Setup = Callable[[World], None]


def anchored(setup: Setup, **options: Any) -> World:
    w = World(**options)
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="2500m"))
    setup(w)
    return w


def _resources(w: World) -> None:
    w.pods(pod("mover", "g-2", cpu="1600m"))


def _node_selector(w: World) -> None:
    w.set_node("g-2", labels={**w.cluster.nodes["g-2"].labels, "disk": "ssd"})
    w.pods(pod("mover", "g-2", node_selector={"disk": "ssd"}))


def _node_affinity(w: World) -> None:
    w.set_node("g-2", labels={**w.cluster.nodes["g-2"].labels, "pool": "blue"})
    w.pods(pod("mover", "g-2", required_node_terms=[node_term("pool", "In", "blue")]))


def _anti_affinity(w: World) -> None:
    w.pods(pod("other-cache", "g-1", labels={"app": "cache"}))
    w.pods(
        pod(
            "mover",
            "g-2",
            labels={"app": "cache"},
            anti_affinity=[affinity_term("kubernetes.io/hostname", {"app": "cache"})],
        )
    )


def _pod_affinity(w: World) -> None:
    # The pod must share a host with the node's static pod, which never moves.
    w.pods(mirror_pod("local-proxy", "g-2"))
    w.cluster.add_pod(w.cluster.pods["kube-system/local-proxy"].with_(labels={"app": "proxy"}))
    w.pods(
        pod(
            "mover",
            "g-2",
            affinity=[
                affinity_term(
                    "kubernetes.io/hostname", {"app": "proxy"}, namespaces=("kube-system",)
                )
            ],
        )
    )


def _taint(w: World) -> None:
    w.set_node("g-1", taints=(Taint("dedicated", "batch", "NoSchedule"),))
    w.pods(pod("mover", "g-2"))


def _host_port(w: World) -> None:
    w.pods(pod("ingress-a", "g-1", host_ports=[443]))
    w.pods(pod("mover", "g-2", host_ports=[443]))


def _cordoned(w: World) -> None:
    w.set_node("g-1", unschedulable=True)
    w.pods(pod("mover", "g-2"))


def _unready_destination(w: World) -> None:
    w.set_node("g-1", ready=False)
    w.pods(pod("mover", "g-2"))


def _being_deleted_destination(w: World) -> None:
    # Deleted through the API by someone else (stale ToBeDeleted taints are cleared at start).
    w.set_node("g-1", deletion_time=w.clock.now() - timedelta(minutes=1))
    w.pods(pod("mover", "g-2"))


def _volume_zone(w: World) -> None:
    for name, zone in (("g-1", "zone-a"), ("g-2", "zone-b")):
        w.set_node(name, labels={**w.cluster.nodes[name].labels, ZONE_LABEL: zone})
    w.cluster.pvs.append(PersistentVolume("pv-data", labels={ZONE_LABEL: "zone-b"}))
    w.cluster.pvcs.append(
        PersistentVolumeClaim("default", "data", volume_name="pv-data", phase="Bound")
    )
    w.pods(pod("mover", "g-2", volumes=(Volume("data", "persistentVolumeClaim", "data"),)))


def _zoned_spread(w: World, when_unsatisfiable: str) -> None:
    # Zone b keeps a node (g-3, not removable), so moving the pod to zone a skews 2:0.
    for name, zone in (("g-1", "zone-a"), ("g-2", "zone-b")):
        w.set_node(name, labels={**w.cluster.nodes[name].labels, LEGACY_ZONE_LABEL: zone})
    (extra,) = w.cloud.groups["g"].add_running(1, w.clock.now() - timedelta(days=1))
    w.set_node(
        extra.name,
        labels={**extra.labels, LEGACY_ZONE_LABEL: "zone-b"},
        annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"},
        taints=(Taint("dedicated", "gpu", "NoSchedule"),),
    )
    c = spread(LEGACY_ZONE_LABEL, {"app": "spread"}, when_unsatisfiable=when_unsatisfiable)
    w.pods(pod("spread-a", "g-1", labels={"app": "spread"}, topology_spread=[c]))
    w.pods(pod("mover", "g-2", labels={"app": "spread"}, topology_spread=[c]))


def _topology_spread(w: World) -> None:
    _zoned_spread(w, "DoNotSchedule")


def _local_pv(w: World) -> None:
    w.cluster.pvs.append(
        PersistentVolume(
            "local-g2", node_affinity=(node_term("kubernetes.io/hostname", "In", "g-2"),)
        )
    )
    w.cluster.pvcs.append(
        PersistentVolumeClaim("default", "cache", volume_name="local-g2", phase="Bound")
    )
    w.pods(pod("mover", "g-2", volumes=(Volume("cache", "persistentVolumeClaim", "cache"),)))


def _symmetric_anti_affinity(w: World) -> None:
    # The pod already on g-1 refuses company labelled app=noisy on its host.
    w.pods(
        pod(
            "quiet",
            "g-1",
            anti_affinity=[affinity_term("kubernetes.io/hostname", {"app": "noisy"})],
        )
    )
    w.pods(pod("mover", "g-2", labels={"app": "noisy"}))


def _safe_to_evict_still_needs_room(w: World) -> None:
    annotations = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    w.pods(pod("mover", "g-2", cpu="1600m", annotations=annotations))


CASES: list[tuple[str, Setup]] = [
    ("resources", _resources),
    ("safe-to-evict-pod-still-needs-room", _safe_to_evict_still_needs_room),
    ("node-selector", _node_selector),
    ("required-node-affinity", _node_affinity),
    ("pod-anti-affinity", _anti_affinity),
    ("pod-affinity-to-static-pod", _pod_affinity),
    ("untolerated-taint", _taint),
    ("host-port", _host_port),
    ("cordoned-destination", _cordoned),
    ("unready-destination", _unready_destination),
    ("being-deleted-destination", _being_deleted_destination),
    ("pv-zone", _volume_zone),
    ("local-pv-node-affinity", _local_pv),
    ("existing-pod-anti-affinity", _symmetric_anti_affinity),
    ("topology-spread", _topology_spread),
]


@pytest.mark.parametrize("setup", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_node_whose_pod_fits_nowhere_else_is_never_removed(setup: Setup) -> None:
    """CA: a candidate whose pods cannot all be re-placed is NoPlaceToMovePods and stays,
    loop after loop."""
    w = anchored(setup)
    results = w.settle(loops=4)
    assert "g-2" in w.alive()
    assert "g-2" not in w.deleted()
    assert all("g-2" not in unneeded_names(r) for r in results)
    assert reason_of(results[0], "g-2") is UnremovableReason.NO_PLACE_TO_MOVE_PODS


def test_control_same_pod_without_the_constraint_is_moved_and_node_removed() -> None:
    """The scenarios above are tight: without the constraint the node goes (CA removes an
    underutilized node whose pods fit elsewhere after --scale-down-unneeded-time)."""
    w = anchored(lambda w: w.pods(pod("mover", "g-2")))
    w.settle(loops=2)
    assert w.deleted() == ["g-2"]
    assert [p.name for p in w.cluster.pods.values() if p.node_name == "g-1"] == ["anchor"]
    assert w.cluster.evicted == ["default/mover"]


def test_tolerated_taint_is_a_valid_destination() -> None:
    """A taint the pod tolerates does not stop the move (the scheduler allows it)."""

    def tolerating(w: World) -> None:
        w.set_node("g-1", taints=(Taint("dedicated", "batch", "NoSchedule"),))
        tolerate = Toleration("dedicated", "Equal", "batch", "NoSchedule")
        w.pods(pod("mover", "g-2", tolerations=(tolerate,)))

    w = anchored(tolerating)
    w.settle(loops=2)
    assert w.deleted() == ["g-2"]


def test_soft_spread_constraint_does_not_block() -> None:
    """whenUnsatisfiable=ScheduleAnyway is a preference: the scheduler (and CA) still
    place the pod, so the node goes."""

    w = anchored(lambda w: _zoned_spread(w, "ScheduleAnyway"))
    w.settle(loops=2)
    assert w.deleted() == ["g-2"]


def test_two_candidates_that_only_fit_on_each_other_are_not_both_removed() -> None:
    """CA: nodes chosen for removal in a loop are not destinations for the others, so of two
    half-empty nodes whose pods fit only on each other, exactly one goes."""
    w = World(recreate_evicted=True, max_drain_parallelism=5, max_scale_down_parallelism=5)
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("a", "g-1", cpu="1500m"), pod("b", "g-2", cpu="1500m"))
    w.settle(loops=3)
    assert len(w.deleted()) == 1
    assert len(w.alive()) == 1


def test_three_candidates_capacity_for_one_removal_only() -> None:
    """Three nodes at 37.5% cpu: after one removal the two survivors hold 3 + 1.5 cores;
    a second removal would need 4.5 cores on one 4-core node. CA removes one."""
    w = World(recreate_evicted=True, max_drain_parallelism=5, max_scale_down_parallelism=5)
    w.group("g", 0, 10, nodes=3)
    w.pods(*(pod(f"p{i}", f"g-{i}", cpu="1500m") for i in (1, 2, 3)))
    w.run()
    for _ in range(4):
        w.run(PAST_UNNEEDED)
        assert w.bind_pending() == []
    assert len(w.deleted()) == 1


def test_evicted_pods_have_a_home_no_scale_up_follows_a_scale_down() -> None:
    """Whatever scale-down removes, the evicted pods fit the remaining nodes: the loop after
    the deletion has no pending pod to scale up for (CA's removal simulation guarantee)."""
    w = World(recreate_evicted=True, max_drain_parallelism=5, max_scale_down_parallelism=5)
    w.group("g", 0, 10, nodes=4)
    w.pods(
        pod("a", "g-1", cpu="1"),
        pod("b", "g-2", cpu="1200m"),
        pod("c", "g-3", cpu="700m"),
        pod("d", "g-4", cpu="1900m"),
    )
    w.settle(loops=2)
    assert w.deleted()
    after = w.run(timedelta(seconds=10))
    assert after.scale_up.decisions == ()
    assert after.pending_pods == ()


def test_empty_node_is_not_a_destination_when_removed_in_the_same_loop() -> None:
    """An empty node and a node whose pod fits only on that empty node: CA removes the empty
    node and keeps the other (removed nodes are not destinations)."""
    w = World(max_drain_parallelism=5, max_scale_down_parallelism=5)
    w.group("g", 0, 10, nodes=3)
    w.pods(pod("anchor", "g-1", cpu="2500m"), pod("mover", "g-2", cpu="1600m"))
    w.settle(loops=3)
    assert w.deleted() == ["g-3"]
    assert "g-2" in w.alive()


def test_node_nominated_for_a_preempting_pod_is_kept() -> None:
    """CA: a pending pod nominated to a node (the scheduler is evicting lower-priority pods
    there for it) counts on that node, which is therefore not underutilized."""
    from safetykit import pending

    w = World()
    w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="2"), pod("low", "g-2", cpu="1", priority=0))
    w.pods(pending("vip", cpu="3", priority=1000, nominated_node_name="g-2"))
    first = w.run()
    assert "g-2" not in unneeded_names(first)
    w.run(PAST_UNNEEDED)
    assert w.deleted() == []
    assert w.cluster.evicted == []
