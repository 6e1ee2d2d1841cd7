"""Scale-up never overshoots and never repeats itself.

CA caps every scale-up by the group's max size, --max-nodes-total, --cores-total,
--memory-total and --gpu-total (counting upcoming nodes), counts upcoming nodes as
capacity so the same pending pods do not trigger a second scale-up, backs a group off after
a failed scale-up, ignores expendable, too-young and preempting pods, and tells each pod
that no group can help why.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.framework.options import GpuLimit, MinMax
from clusterscaler.loop.decisions import NoScaleUpReason, ScaleUpStatus
from clusterscaler.model import Pod
from clusterscaler.simulator.utilization import GPU_RESOURCE
from safetykit import GPU_LABEL, T0, World, pending, pod, rejections, scaled

MIN = timedelta(minutes=1)


def crowd(n: int, cpu: str = "3", **kw: Any) -> list[Pod]:
    """`n` pending pods that each need a 4-core node of their own."""
    return [pending(f"p{i}", cpu=cpu, **kw) for i in range(n)]


def loops(w: World, count: int, step: timedelta = MIN, *, register: bool = True) -> None:
    for _ in range(count):
        w.run(step)
        if register:
            for g in w.cloud.node_groups():
                g.register()
            w.bind_pending()


@pytest.mark.parametrize(
    ("options", "nodes_after"),
    [
        ({}, 5),
        ({"max_nodes_total": 4}, 4),
        ({"cores_total": MinMax(0, 13)}, 3),
        ({"memory_total": MinMax(0, 40)}, 2),
    ],
    ids=["group-max-size", "max-nodes-total", "cores-total", "memory-total-GiB"],
)
def test_cluster_never_grows_beyond_a_limit(options: dict[str, Any], nodes_after: int) -> None:
    """CA: ten pods needing a node each, a group of max 5 (one node already), 4-core 16GiB
    nodes: the group stops at the tightest of max size and the cluster-wide limits, loop
    after loop, whether or not the new nodes have registered."""
    w = World(**options)
    w.group("g", 0, 5, nodes=1)
    w.pods(pod("anchor", "g-1", cpu="3"))
    w.pods(*crowd(10))
    w.run()
    loops(w, 3, register=False)
    assert w.cloud.groups["g"].target == nodes_after
    loops(w, 5)
    assert w.cloud.groups["g"].target == nodes_after
    assert len(w.alive()) == nodes_after


def test_gpu_total_caps_gpu_groups() -> None:
    """CA: --gpu-total=<type>:<min>:<max> caps the GPUs of that type in the cluster."""
    w = World(gpu_total=[GpuLimit("a100", 0, 4)])
    w.group("gpu", 0, 10, gpus=2, labels={GPU_LABEL: "a100"})
    w.pods(*(pending(f"t{i}", cpu="1", extended={GPU_RESOURCE: 2}) for i in range(5)))
    w.run()
    loops(w, 3)
    assert w.cloud.groups["gpu"].target == 2


def test_upcoming_nodes_absorb_the_pods_that_asked_for_them() -> None:
    """CA: requested nodes that have not registered yet count as template nodes, so the
    next loops do not ask again for the same pods."""
    w = World()
    g = w.group("g", 0, 10)
    w.pods(*crowd(3))
    first = w.run()
    assert scaled(first) == {"g": 3}
    for _ in range(4):
        again = w.run(MIN)
        assert again.scale_up.decisions == ()
    assert g.increases == [3]
    g.register()
    w.bind_pending()
    assert w.run(MIN).scale_up.decisions == ()
    assert g.target == 3


def test_half_registered_scale_up_is_not_repeated() -> None:
    """CA: registered nodes plus still-upcoming ones cover the pods; no second request."""
    w = World()
    g = w.group("g", 0, 10)
    w.pods(*crowd(4))
    w.run()
    assert len(g.register(2)) == 2
    w.bind_pending()
    assert w.run(MIN).scale_up.decisions == ()
    assert g.increases == [4]


def test_failed_scale_up_backs_the_group_off() -> None:
    """CA: a group whose increase failed is skipped for --initial-node-group-backoff-duration
    (5m): another group is used meanwhile, and the failed one is tried again after."""
    w = World(expander=["least-waste"])
    bad = w.group("a-cheap", 0, 10)
    other = w.group("b-big", 0, 10, cpu="8", memory="32Gi")
    bad.fail_increase = "ZONE_RESOURCE_POOL_EXHAUSTED"
    w.pods(pending("p0", cpu="3"))
    first = w.run()
    assert bad.increases == [1]
    assert first.scale_up.status is ScaleUpStatus.ERROR
    second = w.run(MIN)
    assert bad.increases == [1]
    assert scaled(second) == {"b-big": 1}
    assert other.increases == [1]


def test_backed_off_group_is_retried_after_the_backoff() -> None:
    """CA: once the backoff passes, the group is eligible again."""
    w = World()
    g = w.group("g", 0, 10)
    g.fail_increase = "quota"
    w.pods(pending("p0", cpu="3"))
    w.run()
    blocked = w.run(2 * MIN)
    assert g.increases == [1]
    assert NoScaleUpReason.BACKED_OFF in rejections(blocked, "default/p0")
    g.fail_increase = ""
    w.run(4 * MIN)
    assert g.increases == [1, 1]


def test_nodes_that_never_register_back_the_group_off_and_are_given_up() -> None:
    """CA: nodes not registered within --max-node-provision-time (15m) stop counting, the
    group is backed off and the requested capacity is removed."""
    w = World(expander=["least-waste"])
    slow = w.group("a-slow", 0, 10)
    w.group("b-alt", 0, 10, cpu="8", memory="32Gi")
    w.pods(pending("p0", cpu="3"))
    w.run()
    assert slow.increases == [1]
    for _ in range(3):
        assert w.run(5 * MIN).scale_up.decisions == ()
    late = w.run(MIN)
    assert slow.target == 0
    assert [c.node for c in late.cleanups] == ["safety://a-slow-1"]
    assert scaled(late) == {"b-alt": 1}
    (status,) = [s for s in late.node_groups if s.name == "a-slow"]
    assert status.backoff is not None and status.backoff.error_code == "timeout"


@pytest.mark.parametrize(
    ("make", "options"),
    [
        (lambda: pending("cheap", cpu="3", priority=-100), {}),
        (
            lambda: pending("young", cpu="3", creation_time=T0 - timedelta(seconds=5)),
            {"new_pod_scale_up_delay": MIN},
        ),
        (
            lambda: pending(
                "patient",
                cpu="3",
                annotations={"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "10m"},
            ),
            {},
        ),
        (lambda: pending("preempting", cpu="3", nominated_node_name="g-1"), {}),
    ],
    ids=[
        "expendable",
        "younger-than-new-pod-scale-up-delay",
        "pod-scale-up-delay-annotation",
        "nominated",
    ],
)
def test_pods_that_must_not_trigger_a_scale_up(
    make: Callable[[], Pod], options: dict[str, Any]
) -> None:
    """CA: expendable pods, pods younger than their scale-up delay and pods waiting for
    preemption never cause a scale-up."""
    w = World(**options)
    g = w.group("g", 0, 10, nodes=1)
    w.pods(pod("anchor", "g-1", cpu="3"))
    w.pods(make())
    result = w.run()
    assert result.scale_up.decisions == ()
    assert g.increases == []


def test_young_pod_triggers_once_old_enough() -> None:
    """CA: --new-pod-scale-up-delay only postpones the scale-up."""
    w = World(new_pod_scale_up_delay=timedelta(minutes=2))
    g = w.group("g", 0, 10)
    w.pods(pending("young", cpu="3", creation_time=T0 - timedelta(seconds=30)))
    w.run()
    assert g.increases == []
    w.run(2 * MIN)
    assert g.increases == [1]


def test_pods_no_group_can_hold_say_why() -> None:
    """CA: NotTriggerScaleUp names each group's reason: the pod does not fit the template,
    or the group is at max size."""
    w = World()
    w.group("small", 0, 10, cpu="2", memory="4Gi")
    w.group("full", 0, 1, nodes=1)
    w.pods(pod("anchor", "full-1", cpu="3"))
    w.pods(pending("huge", cpu="3"))
    result = w.run()
    assert result.scale_up.decisions == ()
    reasons = {r.node_group: r.reason for r in result.scale_up.pods_remaining["default/huge"]}
    assert reasons == {
        "small": NoScaleUpReason.NOT_SCHEDULABLE,
        "full": NoScaleUpReason.MAX_SIZE_REACHED,
    }


def test_scale_up_fills_existing_room_first() -> None:
    """CA: pods that fit on existing nodes never cause a scale-up."""
    w = World()
    g = w.group("g", 0, 10, nodes=2)
    w.pods(pod("anchor", "g-1", cpu="3"))
    w.pods(*(pending(f"f{i}", cpu="1") for i in range(4)))
    result = w.run()
    assert result.scale_up.decisions == ()
    assert g.increases == []


def test_node_that_registered_but_is_not_ready_yet_is_not_requested_again() -> None:
    """CA: nodes register NotReady and turn Ready a little later; in between they are
    upcoming capacity, and the pods that asked for them do not ask again."""
    w = World()
    g = w.group("g", 0, 10)
    w.pods(pending("p0", cpu="3"))
    w.run()
    (node,) = g.register()
    w.set_node(node.name, ready=False)
    again = w.run(MIN)
    assert again.scale_up.decisions == ()
    assert g.increases == [1]


def test_balanced_scale_up_respects_every_group_max() -> None:
    """CA: --balance-similar-node-groups spreads new nodes but never past a group's max."""
    w = World(balance_similar_node_groups=True)
    a = w.group("a", 0, 2, labels={"topology.kubernetes.io/zone": "a"})
    b = w.group("b", 0, 3, labels={"topology.kubernetes.io/zone": "b"})
    w.pods(*crowd(10))
    w.run()
    loops(w, 3)
    assert (a.target, b.target) == (2, 3)


def _busy(w: World) -> None:
    w.pods(pod("busy", "g-1", cpu="3500m"))


def _cordoned(w: World) -> None:
    w.set_node("g-1", unschedulable=True)


def _being_deleted(w: World) -> None:
    from clusterscaler.model import Taint

    w.set_node("g-1", taints=(Taint("ToBeDeletedByClusterAutoscaler", "1700000000"),))


def _unreachable(w: World) -> None:
    from clusterscaler.model import Taint

    w.set_node("g-1", taints=(Taint("node.kubernetes.io/unreachable", "", "NoSchedule"),))


@pytest.mark.parametrize(
    "spoil",
    [_busy, _cordoned, _being_deleted, _unreachable],
    ids=["node-full-of-pods", "cordoned-node", "node-being-deleted", "unreachable-taint"],
)
def test_template_node_is_a_clean_copy(spoil: Callable[[World], None]) -> None:
    """CA: the template built from a live node keeps none of its workload pods, its
    cordon or its autoscaler/condition taints, so a new node is offered for the pods."""
    w = World()
    g = w.group("g", 0, 10, nodes=1)
    w.run()
    spoil(w)
    w.pods(pending("a", cpu="3"))
    result = w.run(MIN)
    assert scaled(result) == {"g": 1}
    assert g.increases == [1]


@pytest.mark.parametrize(
    ("options", "most"),
    [({"max_nodes_total": 3}, 3), ({"cores_total": MinMax(0, 8)}, 2)],
    ids=["max-nodes-total", "cores-total"],
)
def test_min_size_enforcement_respects_cluster_limits(options: dict[str, Any], most: int) -> None:
    """CA: --enforce-node-group-min-size never takes the cluster past --max-nodes-total or
    the --cores-total / --memory-total maxima (4-core nodes, one already running)."""
    w = World(enforce_node_group_min_size=True, **options)
    g = w.group("g", 5, 10, nodes=1)
    w.run()
    loops(w, 2)
    assert g.target == most


def test_gpu_node_without_its_gpus_yet_is_upcoming_not_a_template() -> None:
    """CA: right after registration a GPU node reports no allocatable GPU for a while;
    it still stands for the GPUs it will have, and more GPU pods get more nodes."""
    from clusterscaler.simulator.builders import resources
    from safetykit import GPU_LABEL

    w = World()
    g = w.group("gpu", 0, 10, gpus=2, labels={GPU_LABEL: "a100"})
    w.pods(pending("train-0", cpu="1", extended={GPU_RESOURCE: 1}))
    w.run()
    (node,) = g.register()
    no_gpu = resources("4", "16Gi", 110)
    w.set_node(node.name, allocatable=no_gpu, capacity=no_gpu)
    w.pods(*(pending(f"train-{i}", cpu="1", extended={GPU_RESOURCE: 1}) for i in (1, 2)))
    result = w.run(MIN)
    assert scaled(result) == {"gpu": 1}
    assert g.increases == [1, 1]


def test_backoff_doubles_after_repeated_failures() -> None:
    """CA: a group failing again right after its backoff is backed off twice as long
    (--initial-node-group-backoff-duration 5m, then 10m, up to 30m)."""
    w = World()
    g = w.group("g", 0, 10)
    g.fail_increase = "stockout"
    w.pods(pending("p0", cpu="3"))
    w.run()
    w.run(5 * MIN)
    assert g.increases == [1, 1]
    w.run(9 * MIN)
    assert g.increases == [1, 1], "retried before the doubled backoff ended"
    w.run(2 * MIN)
    assert g.increases == [1, 1, 1]


def test_capacity_requested_before_a_restart_still_counts() -> None:
    """CA derives upcoming nodes from the target size, not from its own memory: after a
    restart, nodes requested earlier still absorb the pending pods."""
    w = World()
    g = w.group("g", 0, 10, nodes=1)
    w.pods(pod("anchor", "g-1", cpu="3"))
    g.increase_size(2)  # asked for by the previous autoscaler process
    g.increases.clear()
    w.pods(*crowd(2))
    result = w.run()
    assert result.scale_up.decisions == ()
    assert g.increases == []
