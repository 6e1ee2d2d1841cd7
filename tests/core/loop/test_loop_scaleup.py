from __future__ import annotations

from datetime import timedelta

import pytest
from clusterscaler.loop.decisions import NoScaleUpReason, ScaleUpStatus
from loopkit import Harness, pending_pod, running_pod


def test_pending_pods_scale_up_the_group_that_fits() -> None:
    h = Harness()
    g = h.provider.add_group("small", 0, 10, nodes=1, cpu="2", memory="4Gi")
    h.add_pods([running_pod("busy", "small-1", cpu="1900m")])
    h.add_pods([pending_pod(f"p{i}", cpu="1", memory="1Gi") for i in range(3)])
    result = h.run()
    assert result.scale_up.status is ScaleUpStatus.SUCCESSFUL
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("small", 2)]
    assert g.target == 3
    assert sorted(result.scale_up.triggered_pods) == ["default/p0", "default/p1", "default/p2"]


def test_pods_fitting_existing_capacity_do_not_scale_up() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10, nodes=1)
    h.add_pods([pending_pod("p", cpu="1")])
    result = h.run()
    assert result.scale_up.status is ScaleUpStatus.NOT_NEEDED
    assert g.calls == []


def test_upcoming_nodes_absorb_pending_pods() -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10, nodes=1, cpu="2")
    h.add_pods([running_pod("busy", "g-1", cpu="1900m")])
    h.add_pods([pending_pod("p1", cpu="1")])
    assert h.run().scale_up.decisions[0].delta == 1
    # The node is still coming: the same pod must not trigger a second scale-up.
    result = h.run(timedelta(seconds=10))
    assert result.scale_up.decisions == ()
    assert g.target == 2


@pytest.mark.parametrize(
    ("priority", "annotation", "nominated", "age", "expected"),
    [
        (None, None, "", timedelta(minutes=5), 1),
        (-11, None, "", timedelta(minutes=5), 0),
        (-10, None, "", timedelta(minutes=5), 1),
        (None, "10m", "", timedelta(minutes=5), 0),
        (None, "1m", "", timedelta(minutes=5), 1),
        # CA: a pod nominated to a node that does not exist waits for no preemption.
        (None, None, "g-1", timedelta(minutes=5), 1),
    ],
    ids=[
        "plain",
        "expendable",
        "at-cutoff",
        "annotation-delay",
        "annotation-passed",
        "nominated-to-missing-node",
    ],
)
def test_pending_pod_filters(priority, annotation, nominated, age, expected) -> None:
    h = Harness()
    g = h.provider.add_group("g", 0, 10, nodes=0)
    annotations = {"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": annotation} if annotation else {}
    h.add_pods(
        [
            pending_pod(
                "p",
                priority=priority,
                annotations=annotations,
                nominated_node_name=nominated,
                creation_time=h.clock.now() - age,
            )
        ]
    )
    h.run()
    assert g.target == expected


def test_max_size_and_limits_reject_with_reasons() -> None:
    h = Harness(max_nodes_total=2)
    h.provider.add_group("g", 0, 10, nodes=1, cpu="1", memory="2Gi")
    h.add_pods([pending_pod(f"p{i}", cpu="900m", memory="100Mi") for i in range(3)])
    h.add_pods([running_pod("busy", "g-1", cpu="900m")])
    result = h.run()
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 1)]
    reasons = {r.reason for rs in result.scale_up.pods_remaining.values() for r in rs}
    assert NoScaleUpReason.MAX_SIZE_REACHED in reasons


def test_pod_that_fits_no_template_is_explained() -> None:
    h = Harness()
    h.provider.add_group("g", 0, 10, nodes=0, cpu="2")
    h.add_pods([pending_pod("huge", cpu="16")])
    result = h.run()
    assert result.scale_up.status is ScaleUpStatus.NO_OPTIONS_AVAILABLE
    (rejection,) = result.scale_up.pods_remaining["default/huge"]
    assert rejection.node_group == "g"
    assert rejection.reason is NoScaleUpReason.NOT_SCHEDULABLE
    assert "Insufficient cpu" in rejection.detail


def test_max_nodes_per_scaleup() -> None:
    h = Harness(max_nodes_per_scaleup=2)
    g = h.provider.add_group("g", 0, 10)
    h.add_pods([pending_pod(f"p{i}", cpu="3") for i in range(5)])
    h.run()
    assert g.target == 2
