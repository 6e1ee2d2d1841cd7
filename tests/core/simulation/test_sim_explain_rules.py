"""`explain` end to end, one rule per case: a small cluster, one dry-run loop through the
real autoscaler, and the answer users read."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clusterscaler.commands.cli import load_plugins
from clusterscaler.commands.explain import evaluate, explain
from clusterscaler.framework.options import AutoscalingOptions, MinMax
from clusterscaler.model import (
    ClusterObjects,
    Controller,
    LabelSelector,
    OwnerRef,
    PodDisruptionBudget,
    Volume,
)
from clusterscaler.offline.setup import EMBEDDED_CONFIG_KEY
from clusterscaler.report.events import ObjectRef, events_for_result
from clusterscaler.simulator.builders import affinity_term, make_node, make_pod

_, REGISTRY = load_plugins([])
NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)
GROUP = "clusterscaler.io/node-group"
ZONE = "topology.kubernetes.io/zone"
CLOUD = {
    "nodeGroups": [
        {"name": "general", "minSize": 1, "maxSize": 3,
         "template": {"status": {"capacity": {"cpu": "4", "memory": "16Gi"}}}},
        {"name": "gpu", "minSize": 0, "maxSize": 2,
         "template": {"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
                      "status": {"capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}}}},
    ]
}
RS = OwnerRef(kind="ReplicaSet", name="app", uid="rs-app", controller=True)
APP = Controller(kind="ReplicaSet", namespace="default", name="app", uid="rs-app", replicas=10)
SYSTEM_RS = OwnerRef(kind="ReplicaSet", name="dns", uid="rs-dns", controller=True)
SYSTEM = Controller(kind="ReplicaSet", namespace="kube-system", name="dns", uid="rs-dns", replicas=1)


def general(name: str, **kwargs: Any):
    return make_node(name, labels={GROUP: "general"}, provider_id=f"sim://general/{name}", **kwargs)


def pending(name: str, cpu: str = "1", **kwargs: Any):
    return make_pod(name, cpu, "1Gi", unschedulable=True, creation_time=NOW - timedelta(minutes=5), **kwargs)


def running(name: str, node: str, cpu: str = "100m", owner: OwnerRef | None = RS, **kwargs: Any):
    return make_pod(name, cpu, "128Mi", node_name=node, phase="Running", owner=owner,
                    creation_time=NOW - timedelta(minutes=30), **kwargs)


def answer(objects: ClusterObjects, options: AutoscalingOptions | None = None):
    opts = replace(options or AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: CLOUD})
    result, _ = evaluate(REGISTRY, opts, objects, NOW)
    return explain(result, objects, opts, NOW)


def pod_answer(objects: ClusterObjects, pod: str, options: AutoscalingOptions | None = None) -> dict[str, tuple[bool, str]]:
    report = answer(objects, options)
    (entry,) = [p for p in report.pods if p.pod == pod]
    return {v.node_group: (v.helps, v.why) for v in entry.verdicts}


BUSY = [general("n1", cpu="4"), general("n2", cpu="4")]
BUSY_PODS = [running("busy-1", "n1", cpu="3500m"), running("busy-2", "n2", cpu="3500m")]


POD_CASES = [
    ("scale-up", {}, pending("p", "2"), None, {"general": (True, "scale-up 2 -> 3")}),
    (
        "max-size",
        {"nodes": [*BUSY, general("n3", cpu="4")], "pods": [*BUSY_PODS, running("busy-3", "n3", cpu="3500m")]},
        pending("p", "2"),
        None,
        {"general": (False, "max node group size reached: target 3 >= max 3")},
    ),
    (
        "predicate",
        {},
        pending("p", "6"),
        None,
        {"general": (False, "pod does not fit the node group's template: Insufficient cpu")},
    ),
    (
        "taint",
        {},
        pending("p", "6"),
        None,
        {"gpu": (False, "pod does not fit the node group's template: node(s) had untolerated taint {nvidia.com/gpu: }")},
    ),
    (
        "max-nodes-total",
        {},
        pending("p", "2"),
        AutoscalingOptions(max_nodes_total=2),
        {"general": (False, "max node total count already reached: limit on nodes")},
    ),
    (
        "cores-total",
        {},
        pending("p", "2"),
        AutoscalingOptions(cores_total=MinMax(0, 8)),
        {"general": (False, "max cluster cpu limit reached: limit on cpu")},
    ),
    (
        "memory-total",
        {},
        pending("p", "2"),
        AutoscalingOptions(memory_total=MinMax(0, 32)),
        {"general": (False, "max cluster memory limit reached: limit on memory")},
    ),
    (
        "expendable",
        {},
        pending("p", "2", priority=-50),
        None,
        {g: (False, "expendable: priority -50 is below --expendable-pods-priority-cutoff=-10") for g in ("general", "gpu")},
    ),
    (
        "too-young",
        {},
        pending("p", "2"),
        AutoscalingOptions(new_pod_scale_up_delay=timedelta(minutes=10)),
        {g: (False, "too young: pending for 5m0s, scale-up waits 10m0s (--new-pod-scale-up-delay or the pod-scale-up-delay annotation)") for g in ("general", "gpu")},
    ),
]


@pytest.mark.parametrize(("case", "cluster", "pod", "options", "expected"), POD_CASES, ids=[c[0] for c in POD_CASES])
def test_pending_pod_answers(case, cluster, pod, options, expected) -> None:
    objects = ClusterObjects(
        nodes=list(cluster.get("nodes", BUSY)),
        pods=[*cluster.get("pods", BUSY_PODS), pod],
        controllers=[APP],
    )
    got = pod_answer(objects, pod.key, options)
    for group, verdict in expected.items():
        assert got[group] == verdict


def node_case(pods, *, annotations=None, pdbs=(), extra_nodes=()):
    nodes = [general("n1", annotations=annotations), general("n2"), *extra_nodes]
    return ClusterObjects(nodes=nodes, pods=list(pods), pdbs=list(pdbs), controllers=[APP, SYSTEM])


PDB = PodDisruptionBudget(namespace="default", name="app", selector=LabelSelector((("app", "x"),)), disruptions_allowed=0)
NODE_CASES = [
    ("empty", node_case([running("a", "n2", cpu="3")]), True, "unneeded (empty): removable after 10m0s more unneeded", None),
    ("drain", node_case([running("a", "n1"), running("b", "n2", cpu="3")]), True, "unneeded (drain 1 pod): removable after 10m0s more unneeded", None),
    ("not-replicated", node_case([running("a", "n1", owner=None), running("b", "n2", cpu="3")]), False, "BlockedByPod", ("default/a", "NotReplicated")),
    ("safe-to-evict-false", node_case([running("a", "n1", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}), running("b", "n2", cpu="3")]), False, "BlockedByPod", ("default/a", "NotSafeToEvictAnnotation")),
    ("local-storage", node_case([running("a", "n1", volumes=(Volume("scratch", "emptyDir"),)), running("b", "n2", cpu="3")]), False, "BlockedByPod", ("default/a", "LocalStorageRequested")),
    ("pdb", node_case([running("a", "n1", labels={"app": "x"}), running("b", "n2", cpu="3")], pdbs=[PDB]), False, "BlockedByPod", ("default/a", "NotEnoughPdb")),
    ("kube-system", node_case([running("dns", "n1", owner=SYSTEM_RS, namespace="kube-system"), running("b", "n2", cpu="3")]), False, "BlockedByPod", ("kube-system/dns", "UnmovableKubeSystemPod")),
    ("disabled", node_case([running("b", "n2", cpu="3")], annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}), False, "ScaleDownDisabledAnnotation", None),
    ("busy", node_case([running("a", "n1", cpu="3"), running("b", "n2", cpu="3")]), False, "NotUnderutilized", None),
    ("no-place", node_case([running("a", "n1", cpu="1500m"), running("b", "n2", cpu="3")]), False, "NoPlaceToMovePods", None),
    ("not-autoscaled", node_case([running("b", "n2", cpu="3")], extra_nodes=[make_node("static")]), False, "NotAutoscaled", None),
]


@pytest.mark.parametrize(("case", "objects", "removable", "reason", "blocking"), NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_node_answers(case, objects, removable, reason, blocking) -> None:
    node = "static" if case == "not-autoscaled" else "n1"
    report = answer(objects)
    (entry,) = [n for n in report.nodes if n.node == node]
    assert (entry.removable, entry.reason) == (removable, reason)
    got = None if entry.blocking_pod is None else (entry.blocking_pod.pod, entry.blocking_pod.reason.value)
    assert got == blocking


@pytest.mark.parametrize(("case", "objects"), [(c[0], c[1]) for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_every_node_row_shows_its_utilization(case, objects) -> None:
    report = answer(objects)
    assert all(n.utilization is not None and n.utilization_of for n in report.nodes)
    from clusterscaler.commands.explain import render

    rows = render(report).split("\nNodes\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert rows[0].split()[:6] == ["NODE", "NODE", "GROUP", "REMOVABLE", "UTILIZATION", "REASON"]
    assert all(row.split()[3].endswith("%") for row in rows[1:])


def test_a_busy_node_says_how_busy() -> None:
    # 3 of 4 cores requested: above the 0.5 threshold, and the row says by how much.
    report = answer(node_case([running("a", "n1", cpu="3"), running("b", "n2", cpu="3")]))
    (n1,) = [n for n in report.nodes if n.node == "n1"]
    assert (n1.reason, n1.utilization, n1.utilization_of) == ("NotUnderutilized", 0.75, "cpu")
    from clusterscaler.commands.explain import render

    assert "n1    general     no         75% cpu      NotUnderutilized" in render(report)


def test_a_pod_the_planned_scale_up_leaves_out_is_told_so() -> None:
    # general has room for one more node (2 of max 3): the bigger pod takes it, the other
    # fits such a node too, but none is left for it.
    objects = ClusterObjects(
        nodes=list(BUSY),
        pods=[*BUSY_PODS, pending("first", "3500m"), pending("p", "3")],
        controllers=[APP],
    )
    report = answer(objects)
    (first,) = [p for p in report.pods if p.pod == "default/first"]
    assert ("general", True, "scale-up 2 -> 3") in [
        (v.node_group, v.helps, v.why) for v in first.verdicts
    ]
    (p,) = [p for p in report.pods if p.pod == "default/p"]
    assert {v.node_group: (v.helps, v.why) for v in p.verdicts}["general"] == (
        False,
        "fits a new node of general, but the scale-up planned for general "
        "(1 new node, capped at its max size 3) is taken by other pending pods",
    )
    # The event keeps CA's reason, which it gives once the group is at its max size, and
    # the other group's filter reason, as CA's scheduling error gives it.
    (event,) = [
        e for e in events_for_result(report.result, ObjectRef.config_map("kube-system", "status"))
        if e.involved.name == "p"
    ]
    assert event.message == (
        "pod didn't trigger scale-up: 1 max node group size reached, "
        "1 node(s) had untolerated taint {nvidia.com/gpu: }"
    )


def test_a_pod_that_fits_no_planned_node_beside_the_others_is_told_so() -> None:
    # Every node of general is in zone z1; p keeps away from app=a by zone, and first
    # (app=a) takes the group's planned node, so no new node of general can take p.
    objects = ClusterObjects(
        nodes=[make_node("n1", cpu="4", labels={GROUP: "general", ZONE: "z1"},
                         provider_id="sim://general/n1")],
        pods=[
            running("busy-1", "n1", cpu="3500m"),
            pending("first", "2", labels={"app": "a"}),
            pending("p", "1", anti_affinity=[affinity_term(ZONE, {"app": "a"})]),
        ],
        controllers=[APP],
    )
    got = pod_answer(objects, "default/p")
    assert got["general"] == (
        False,
        "fits an empty node of general, but not beside the other pending pods its scale-up "
        "is planned for (1 new node)",
    )


def test_min_size_keeps_the_last_node() -> None:
    # Unneeded, but once it has been for long enough the group's minimum keeps it.
    objects = ClusterObjects(nodes=[general("n1")], controllers=[APP])
    (entry,) = answer(objects, AutoscalingOptions(scale_down_unneeded_time=timedelta(0))).nodes
    assert (entry.removable, entry.reason) == (False, "NodeGroupMinSizeReached")


def test_gpu_pod_tolerating_the_taint_gets_a_gpu_node() -> None:
    from clusterscaler.model import Toleration

    pod = pending("train", "6", tolerations=(Toleration(key="nvidia.com/gpu", operator="Exists"),),
                  extended={"nvidia.com/gpu": 1})
    objects = ClusterObjects(nodes=BUSY, pods=[*BUSY_PODS, pod], controllers=[APP])
    got = pod_answer(objects, pod.key)
    assert got["gpu"] == (True, "scale-up 0 -> 1")
    # The general group has no GPU: it cannot help, and says why.
    assert got["general"] == (False, "pod does not fit the node group's template: Insufficient cpu, Insufficient nvidia.com/gpu")


def test_a_pod_that_triggers_a_scale_up_gets_every_groups_reason() -> None:
    # The general group grows for the pod; the gpu group's taint is why it cannot help.
    pod = pending("p", "2")
    objects = ClusterObjects(nodes=BUSY, pods=[*BUSY_PODS, pod], controllers=[APP])
    assert pod_answer(objects, pod.key) == {
        "general": (True, "scale-up 2 -> 3"),
        "gpu": (False, "pod does not fit the node group's template: node(s) had untolerated taint {nvidia.com/gpu: }"),
    }
