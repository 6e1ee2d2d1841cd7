"""The in-memory cluster: scheduler, provisioning, controllers, workload events."""

from __future__ import annotations

from datetime import timedelta

import pytest
from clusterscaler.framework.clusteractions import EvictionError
from clusterscaler.model import (
    ClusterObjects,
    Controller,
    DaemonSet,
    LabelSelector,
    OwnerRef,
    PodDisruptionBudget,
    Taint,
)
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.offline.simulatedcluster import SimulatedCluster, SimulationError
from clusterscaler.simulator.builders import make_node, make_pod

RS = OwnerRef(kind="ReplicaSet", name="web", uid="rs-web", controller=True)
WEB = Controller(kind="ReplicaSet", namespace="default", name="web", uid="rs-web", replicas=2)


def cluster_with(*, nodes=(), pods=(), **kwargs) -> tuple[SimulatedCluster, VirtualClock]:
    clock = VirtualClock()
    objects = ClusterObjects(nodes=list(nodes), pods=list(pods), **kwargs)
    return SimulatedCluster(objects, clock), clock


def test_scheduler_binds_fitting_pods_and_marks_the_rest_unschedulable() -> None:
    cluster, _ = cluster_with(
        nodes=[make_node("n1", cpu="2", memory="4Gi")],
        pods=[make_pod("a", cpu="1500m"), make_pod("b", cpu="1500m"), make_pod("c", cpu="100m")],
    )
    assert cluster.schedule() == 2
    pods = cluster.pods
    assert pods["default/a"].node_name == "n1"
    assert pods["default/c"].node_name == "n1"
    assert pods["default/b"].node_name == ""
    assert pods["default/b"].unschedulable
    assert cluster.pending_pod_count() == 1


def test_scheduler_ignores_unready_cordoned_and_tainted_nodes() -> None:
    cluster, _ = cluster_with(
        nodes=[
            make_node("unready", ready=False),
            make_node("cordoned", unschedulable=True),
            make_node("tainted", taints=[Taint("dedicated", "gpu")]),
        ],
        pods=[make_pod("p", cpu="1")],
    )
    assert cluster.schedule() == 0
    assert cluster.pods["default/p"].unschedulable


def test_higher_priority_pods_are_placed_first() -> None:
    cluster, _ = cluster_with(
        nodes=[make_node("n1", cpu="1")],
        pods=[make_pod("low", cpu="800m", priority=0), make_pod("high", cpu="800m", priority=100)],
    )
    cluster.schedule()
    assert cluster.pods["default/high"].node_name == "n1"
    assert cluster.pods["default/low"].unschedulable


def test_pending_time_is_measured_on_the_virtual_clock() -> None:
    cluster, clock = cluster_with(pods=[make_pod("p", cpu="1")])
    cluster.schedule()
    clock.advance(timedelta(minutes=3))
    cluster.add_node(make_node("n1"))
    cluster.schedule()
    assert cluster.times.waits == [timedelta(minutes=3)]


def test_new_nodes_get_daemonset_pods_that_tolerate_them() -> None:
    template = make_pod("tmpl", cpu="100m", node_selector={"kubernetes.io/os": "linux"})
    ds = DaemonSet(namespace="kube-system", name="agent", uid="ds", template=template)
    cluster, clock = cluster_with(daemonsets=[ds])
    linux = make_node("linux", labels={"kubernetes.io/os": "linux"})
    other = make_node("windows", labels={"kubernetes.io/os": "windows"})
    cluster.create_node(linux, timedelta(seconds=30))
    cluster.create_node(other, timedelta(seconds=30))
    assert cluster.next_registration() == clock.start + timedelta(seconds=30)
    clock.advance(timedelta(seconds=30))
    cluster.step()
    agents = [p for p in cluster.pods.values() if p.is_daemonset]
    assert [(p.name, p.node_name) for p in agents] == [("agent-linux", "linux")]
    assert [e.action for e in cluster.events] == ["node-ready", "node-ready"]


def test_evicted_and_orphaned_pods_are_recreated_by_their_controller() -> None:
    pods = [
        make_pod("web-1", cpu="1", owner=RS, node_name="n1", phase="Running"),
        make_pod("bare", cpu="1", node_name="n1", phase="Running"),
        make_pod("db-0", cpu="1", node_name="n1", phase="Running",
                 owner=OwnerRef(kind="StatefulSet", name="db", uid="sts", controller=True)),
    ]
    cluster, _ = cluster_with(nodes=[make_node("n1"), make_node("n2")], pods=pods, controllers=[WEB])
    cluster.evict(cluster.pods["default/web-1"], None)
    assert "default/web-1" not in cluster.pods
    replacement = [p for p in cluster.pods.values() if p.owner == RS]
    assert len(replacement) == 1 and replacement[0].node_name == ""
    cluster.delete_node("n1")
    names = sorted(cluster.pods)
    # The bare pod is gone for good; the StatefulSet pod comes back under its name.
    assert "default/bare" not in names
    assert "default/db-0" in names and cluster.pods["default/db-0"].node_name == ""
    cluster.schedule()
    assert all(p.node_name == "n2" for p in cluster.pods.values())


def test_evictions_honour_pdbs() -> None:
    pod = make_pod("web-1", cpu="1", owner=RS, node_name="n1", phase="Running", labels={"app": "web"})
    pdb = PodDisruptionBudget(namespace="default", name="web", selector=LabelSelector((("app", "web"),)), disruptions_allowed=0)
    cluster, _ = cluster_with(nodes=[make_node("n1")], pods=[pod], pdbs=[pdb], controllers=[WEB])
    with pytest.raises(EvictionError):
        cluster.evict(pod, None)
    assert "default/web-1" in cluster.pods


def test_scaling_a_workload_adds_pending_pods_and_removes_pending_first() -> None:
    pods = [make_pod("web-1", cpu="1", owner=RS, node_name="n1", phase="Running")]
    cluster, _ = cluster_with(nodes=[make_node("n1", cpu="2")], pods=pods, controllers=[WEB])
    assert cluster.scale("default/web", 4) == 3
    assert len(cluster.owned_pods(WEB)) == 4
    assert cluster.find_controller("web").replicas == 4
    cluster.schedule()
    assert cluster.pending_pod_count() == 2
    assert cluster.scale("ReplicaSet/default/web", 2) == -2
    remaining = cluster.owned_pods(WEB)
    assert len(remaining) == 2 and all(p.node_name == "n1" for p in remaining)
    assert cluster.pending_pod_count() == 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.scale("default/nope", 1), "workload 'default/nope': no such controller"),
        (lambda c: c.scale("default/web", -1), "replicas: expected >= 0"),
        (lambda c: c.cordon("missing"), "node 'missing': expected an existing node"),
        (lambda c: c.delete_pods(["default/missing"]), "pod default/missing: expected an existing pod"),
        (lambda c: c.add_pods([make_pod("web-1")]), "pod default/web-1: name: expected a new name"),
    ],
    ids=["unknown-workload", "negative-replicas", "unknown-node", "unknown-pod", "duplicate-pod"],
)
def test_bad_events_name_the_object(call, message) -> None:
    pods = [make_pod("web-1", cpu="1", owner=RS, node_name="n1", phase="Running")]
    cluster, _ = cluster_with(nodes=[make_node("n1")], pods=pods, controllers=[WEB])
    with pytest.raises(SimulationError, match=message):
        call(cluster)


def test_snapshot_carries_config_maps_for_the_priority_expander() -> None:
    from clusterscaler.model import ConfigMap

    cm = ConfigMap("kube-system", "cluster-autoscaler-priority-expander", {"priorities": "10: [a]"})
    cluster, _ = cluster_with(config_maps=[cm])
    assert cluster.snapshot().config_maps == [cm]


def test_generated_names_never_replace_existing_pods() -> None:
    pods = [make_pod(f"web-{i:05d}", cpu="100m", owner=RS, node_name="n1", phase="Running") for i in range(4)]
    cluster, _ = cluster_with(nodes=[make_node("n1")], pods=pods, controllers=[WEB])
    cluster.scale("default/web", 10)
    assert len(cluster.owned_pods(WEB)) == 10
    cluster.evict(cluster.pods["default/web-00001"], None)
    assert len(cluster.owned_pods(WEB)) == 10


def test_equivalent_pods_fill_nodes_then_wait_together() -> None:
    pods = [make_pod(f"web-{i}", cpu="1500m", owner=RS) for i in range(5)]
    cluster, _ = cluster_with(nodes=[make_node("n1", cpu="2"), make_node("n2", cpu="2")], pods=pods, controllers=[WEB])
    assert cluster.schedule() == 2
    waiting = sorted(p.name for p in cluster.pods.values() if p.unschedulable)
    assert waiting == ["web-2", "web-3", "web-4"]
    # Nothing changed: nothing to retry. A new node makes room for one more.
    assert cluster.schedule() == 0
    cluster.add_node(make_node("n3", cpu="2"))
    assert cluster.schedule() == 1
    cluster.delete_pods(["default/web-0"])
    assert cluster.schedule() == 1
    assert cluster.pending_pod_count() == 1
