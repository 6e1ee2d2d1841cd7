"""`python -m bench.loop`: its clusters are built on the fake cloud and its loops decide."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from clusterscaler.model import OwnerRef
from clusterscaler.simulator.builders import make_pod
from clusterscaler.testing.fakecloud import GROUP_LABEL

from bench import loop


def test_cluster_spreads_nodes_round_robin_over_the_groups() -> None:
    cluster, cloud = loop.build_cluster(8, 3, "100m", groups=4)

    assert [g.id for g in cloud.node_groups()] == [f"group-{i}" for i in range(4)]
    assert [g.target_size() for g in cloud.node_groups()] == [2, 2, 2, 2]
    assert [g.max_size for g in cloud.node_groups()] == [16] * 4
    assert [n.labels[GROUP_LABEL] for n in cluster.nodes.values()][:4] == [
        "group-0", "group-1", "group-2", "group-3"
    ]
    assert all(cloud.has_instance(n) for n in cluster.nodes.values())
    assert len(cluster.pods) == 24
    assert {p.node_name for p in cluster.pods.values()} == set(cluster.nodes)


def test_loop_finds_unneeded_nodes_of_an_idle_cluster() -> None:
    cluster, cloud = loop.build_cluster(8, 1, "100m", groups=2)
    _, result = loop.timed_loop(loop.autoscaler(cluster, cloud))
    down: Any = result.scale_down  # type: ignore[attr-defined]
    assert down.unneeded


def test_loop_scales_up_a_full_cluster_for_pending_pods() -> None:
    cluster, cloud = loop.build_cluster(4, 30, "500m", groups=2)
    owner = OwnerRef("ReplicaSet", "pending", "uid-pending", True)
    for i in range(10):
        cluster.add_pod(
            make_pod(
                f"pending-{i}", "4", "1Gi", owner=owner, unschedulable=True,
                creation_time=loop.NOW - timedelta(minutes=1),
            )
        )
    _, result = loop.timed_loop(loop.autoscaler(cluster, cloud))
    up: Any = result.scale_up  # type: ignore[attr-defined]
    # Four 4-core pods fit a 16-core node: ten need three new nodes.
    assert sum(d.delta for d in up.decisions) == 3
