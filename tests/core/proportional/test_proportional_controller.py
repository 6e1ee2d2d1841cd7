from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from clusterscaler.proportional import controller as controller_module
from clusterscaler.proportional.cli import ControllerConfig, run_controller
from clusterscaler.proportional.controller import Controller, PollError
from clusterscaler.proportional.targets import parse_targets
from clusterscaler.testing.fakekube import (
    FakeKubeServer,
    cluster_api_resources,
    openshift_machine_api_resources,
)

NS = "kube-system"
CM = "dns-autoscaler"


def node(
    name: str,
    cpu: str = "4",
    *,
    ready: bool = True,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def workload(kind: str, name: str, replicas: int = 1) -> dict[str, Any]:
    api_version = "v1" if kind == "ReplicationController" else "apps/v1"
    selector: dict[str, Any] = (
        {"app": name} if kind == "ReplicationController" else {"matchLabels": {"app": name}}
    )
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": selector, "template": {}},
    }


def configmap(mode: str, params: dict[str, Any], name: str = CM) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": {mode: json.dumps(params)},
    }


def replicas(kube: FakeKubeServer, resource: str, name: str) -> int:
    obj = kube.get(resource, name, NS)
    assert obj is not None
    return int(obj["spec"]["replicas"])


def scale_writes(kube: FakeKubeServer) -> list[str]:
    return [
        f"{r.resource}/{r.name}"
        for r in kube.requests
        if r.subresource == "scale" and r.method in ("PUT", "PATCH")
    ]


@pytest.fixture
def kube() -> Iterator[FakeKubeServer]:
    with FakeKubeServer() as server:
        server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield server


def make_controller(
    kube: FakeKubeServer,
    targets: str = "deployment/coredns",
    default_params: dict[str, str] | None = None,
    node_labels: dict[str, str] | None = None,
) -> Controller:
    return Controller(
        kube.api_client(),
        namespace=NS,
        configmap=CM,
        targets=parse_targets(targets),
        default_params=default_params,
        node_labels=node_labels or {},
        request_timeout=5.0,
    )


def three_ready_one_cordoned_one_not_ready(kube: FakeKubeServer) -> None:
    for i in range(3):
        kube.create(node(f"ready-{i}"))
    kube.create(node("cordoned", unschedulable=True))
    kube.create(node("not-ready", ready=False))


def test_counts_schedulable_nodes_and_scales_only_on_change(kube):
    three_ready_one_cordoned_one_not_ready(kube)
    kube.create(workload("Deployment", "coredns", replicas=1))
    kube.create(configmap("linear", {"nodesPerReplica": 1}))
    ctl = make_controller(kube)

    result = ctl.poll()
    assert (result.size.nodes, result.size.schedulable_nodes) == (5, 3)
    assert (result.size.cores, result.size.schedulable_cores) == (20, 12)
    assert result.decision.replicas == 3
    assert replicas(kube, "deployments", "coredns") == 3
    assert scale_writes(kube) == ["deployments/coredns"]

    # Nothing changed: the scale is read again but not written.
    result = ctl.poll()
    assert [u.changed for u in result.updates] == [False]
    assert scale_writes(kube) == ["deployments/coredns"]

    # A node joins: one more write.
    kube.create(node("ready-3"))
    ctl.poll()
    assert replicas(kube, "deployments", "coredns") == 4
    assert scale_writes(kube) == ["deployments/coredns", "deployments/coredns"]


def test_include_unschedulable_nodes_counts_every_node(kube):
    three_ready_one_cordoned_one_not_ready(kube)
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 1, "includeUnschedulableNodes": True}))
    make_controller(kube).poll()
    assert replicas(kube, "deployments", "coredns") == 5


def test_cores_are_summed_allocatable_rounded_up(kube):
    for i in range(3):
        kube.create(node(f"n{i}", cpu="3920m"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"coresPerReplica": 1}))
    result = make_controller(kube).poll()
    assert result.size.cores == 12  # 11.76 cores
    assert replicas(kube, "deployments", "coredns") == 12


def test_nodelabels_restrict_the_count(kube):
    kube.create(node("dns-0", labels={"pool": "dns"}))
    kube.create(node("dns-1", labels={"pool": "dns", "zone": "a"}))
    kube.create(node("web-0", labels={"pool": "web"}))
    kube.create(node("bare"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 1}))
    result = make_controller(kube, node_labels={"pool": "dns"}).poll()
    assert result.size.nodes == 2
    assert replicas(kube, "deployments", "coredns") == 2
    node_lists = [r for r in kube.requests if r.resource == "nodes" and r.verb == "list"]
    assert node_lists and all(r.query.get("labelSelector") == "pool=dns" for r in node_lists)


def test_node_list_is_paginated(kube, monkeypatch):
    monkeypatch.setattr(controller_module, "NODE_PAGE_SIZE", 2)
    for i in range(5):
        kube.create(node(f"n{i}"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 1}))
    assert make_controller(kube).poll().size.nodes == 5
    assert len([r for r in kube.requests if r.resource == "nodes" and r.verb == "list"]) == 3


def test_configmap_created_from_default_params(kube):
    kube.create(node("n0"))
    kube.create(node("n1"))
    kube.create(workload("Deployment", "coredns"))
    defaults = {"ladder": json.dumps({"nodesToReplicas": [[1, 1], [2, 2]]})}
    ctl = make_controller(kube, default_params=defaults)

    result = ctl.poll()
    assert result.configmap_created
    stored = kube.get("configmaps", CM, NS)
    assert stored is not None and stored["data"] == defaults
    assert replicas(kube, "deployments", "coredns") == 2
    assert not ctl.poll().configmap_created


def test_deleted_configmap_is_recreated_from_default_params(kube):
    kube.create(node("n0"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 1, "min": 3}))
    defaults = {"linear": json.dumps({"nodesPerReplica": 1, "min": 2})}
    ctl = make_controller(kube, default_params=defaults)
    assert ctl.poll().decision.replicas == 3
    kube.delete("configmaps", CM, NS)
    result = ctl.poll()
    assert result.configmap_created
    assert result.decision.replicas == 2
    assert replicas(kube, "deployments", "coredns") == 2


def test_existing_configmap_is_never_overwritten_by_defaults(kube):
    kube.create(node("n0"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 1, "min": 3}))
    defaults = {"ladder": json.dumps({"nodesToReplicas": [[0, 7]]})}
    result = make_controller(kube, default_params=defaults).poll()
    assert not result.configmap_created
    stored = kube.get("configmaps", CM, NS)
    assert stored is not None and list(stored["data"]) == ["linear"]
    assert replicas(kube, "deployments", "coredns") == 3
    assert not [r for r in kube.requests if r.resource == "configmaps" and r.verb != "get"]


def test_missing_configmap_without_defaults_fails_and_leaves_target(kube):
    kube.create(node("n0"))
    kube.create(workload("Deployment", "coredns", replicas=4))
    with pytest.raises(PollError, match=f"ConfigMap {NS}/{CM} not found and --default-params"):
        make_controller(kube).poll()
    assert replicas(kube, "deployments", "coredns") == 4
    assert scale_writes(kube) == []


def test_mode_changes_on_the_fly(kube):
    for i in range(4):
        kube.create(node(f"n{i}"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 2}))
    ctl = make_controller(kube)
    assert ctl.poll().decision.replicas == 2

    stored = kube.get("configmaps", CM, NS)
    assert stored is not None
    stored["data"] = {"ladder": json.dumps({"nodesToReplicas": [[0, 0], [4, 5]]})}
    kube.update(stored)
    result = ctl.poll()
    assert (result.decision.mode, result.decision.replicas) == ("ladder", 5)
    assert replicas(kube, "deployments", "coredns") == 5

    # Ladder mode may scale to zero, e.g. to switch an optional component off.
    stored = kube.get("configmaps", CM, NS)
    assert stored is not None
    stored["data"] = {"ladder": json.dumps({"nodesToReplicas": [[0, 0], [10, 1]]})}
    kube.update(stored)
    ctl.poll()
    assert replicas(kube, "deployments", "coredns") == 0


INVALID_CONFIGMAPS = [
    ("bad-json", {"linear": "{"}, "linear: expected a JSON object"),
    ("two-modes", {"linear": "{}", "ladder": "{}"}, "data: expected exactly one key"),
    ("unknown-mode", {"cubic": "{}"}, "cubic: unknown control mode"),
    ("negative", {"linear": '{"nodesPerReplica": -1}'}, "linear.nodesPerReplica"),
    ("max-below-min", {"linear": '{"nodesPerReplica": 1, "min": 4, "max": 2}'}, "linear.max"),
    ("no-per-replica", {"linear": '{"min": 2}'}, "coresPerReplica or nodesPerReplica"),
    ("bad-step", {"ladder": '{"coresToReplicas": [[1, 2, 3]]}'}, "ladder.coresToReplicas[0]"),
]


@pytest.mark.parametrize(
    ("data", "message"),
    [c[1:] for c in INVALID_CONFIGMAPS],
    ids=[c[0] for c in INVALID_CONFIGMAPS],
)
def test_invalid_params_fail_the_poll_and_leave_the_target(kube, data, message):
    kube.create(node("n0"))
    kube.create(node("n1"))
    kube.create(workload("Deployment", "coredns", replicas=7))
    cm = configmap("linear", {})
    cm["data"] = data
    kube.create(cm)
    ctl = make_controller(kube)
    for _ in range(2):  # cached per resourceVersion, failing every poll alike
        with pytest.raises(PollError) as info:
            ctl.poll()
        assert f"ConfigMap {NS}/{CM}: invalid parameters" in str(info.value)
        assert message in str(info.value)
    assert replicas(kube, "deployments", "coredns") == 7
    assert scale_writes(kube) == []

    # Fixing the ConfigMap heals the next poll.
    stored = kube.get("configmaps", CM, NS)
    assert stored is not None
    stored["data"] = {"linear": '{"nodesPerReplica": 1}'}
    kube.update(stored)
    ctl.poll()
    assert replicas(kube, "deployments", "coredns") == 2


def test_every_target_kind_is_scaled(kube):
    for i in range(3):
        kube.create(node(f"n{i}"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(workload("ReplicaSet", "rs"))
    kube.create(workload("StatefulSet", "sts"))
    kube.create(workload("ReplicationController", "rc"))
    kube.create(configmap("linear", {"nodesPerReplica": 1}))
    ctl = make_controller(
        kube, "deployment/coredns,replicaset/rs,StatefulSet/sts,replicationcontroller/rc"
    )
    ctl.poll()
    assert [
        replicas(kube, resource, name)
        for resource, name in [
            ("deployments", "coredns"),
            ("replicasets", "rs"),
            ("statefulsets", "sts"),
            ("replicationcontrollers", "rc"),
        ]
    ] == [3, 3, 3, 3]
    # Only the scale subresource is written, never the workloads themselves.
    writes = [r for r in kube.requests if r.method in ("PUT", "PATCH", "POST")]
    assert writes and all(r.subresource == "scale" for r in writes)


def test_missing_target_fails_poll_but_others_are_scaled(kube):
    kube.create(node("n0"))
    kube.create(node("n1"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 1}))
    ctl = make_controller(kube, "deployment/missing,deployment/coredns")
    with pytest.raises(PollError, match="deployment/missing in kube-system: reading scale: 404"):
        ctl.poll()
    assert replicas(kube, "deployments", "coredns") == 2


def test_scale_write_conflict_fails_the_poll_and_the_next_one_retries(kube):
    kube.create(node("n0"))
    kube.create(node("n1"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 1}))
    kube.add_fault(method="PUT", path="/scale$", status=409, times=1, message="conflict")
    ctl = make_controller(kube)
    with pytest.raises(PollError, match="updating scale: 409"):
        ctl.poll()
    assert replicas(kube, "deployments", "coredns") == 1
    ctl.poll()
    assert replicas(kube, "deployments", "coredns") == 2


def test_api_outage_is_a_failed_poll(kube):
    kube.create(workload("Deployment", "coredns"))
    kube.add_fault(path="^/api/v1/nodes", status=503, times=1, message="etcd down")
    with pytest.raises(PollError, match="listing nodes: 503 etcd down"):
        make_controller(kube).poll()


def config_for(**overrides: Any) -> ControllerConfig:
    values: dict[str, Any] = {
        "targets": parse_targets("deployment/coredns"),
        "namespace": NS,
        "configmap": CM,
        "default_params": None,
        "poll_period_seconds": 1,
        "node_labels": {},
        "max_sync_failures": 0,
        "kubeconfig": None,
        "kubernetes": None,
        "address": "127.0.0.1:0",
        "verbosity": 0,
    }
    values.update(overrides)
    return ControllerConfig(**values)


def test_max_sync_failures_exits_after_consecutive_failures(kube):
    kube.create(node("n0"))
    kube.create(workload("Deployment", "coredns"))
    started = time.monotonic()
    code = run_controller(config_for(max_sync_failures=2), api_client=kube.api_client())
    assert code == 1
    # Two polls, one period apart.
    assert 0.9 <= time.monotonic() - started < 10
    assert len([r for r in kube.requests if r.resource == "configmaps"]) == 2


def test_zero_max_sync_failures_keeps_polling_until_stopped(kube):
    kube.create(node("n0"))
    kube.create(node("n1"))
    kube.create(workload("Deployment", "coredns"))
    stop = threading.Event()
    outcome: list[int] = []
    thread = threading.Thread(
        target=lambda: outcome.append(
            run_controller(config_for(), api_client=kube.api_client(), stop=stop)
        )
    )
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while len([r for r in kube.requests if r.resource == "configmaps"]) < 2:
            assert time.monotonic() < deadline, "controller stopped polling"
            time.sleep(0.05)
        # The ConfigMap appears: the loop recovers and scales.
        kube.create(configmap("linear", {"nodesPerReplica": 1}))
        while replicas(kube, "deployments", "coredns") != 2:
            assert time.monotonic() < deadline, "controller never scaled"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert outcome == [0]


def machine_set(kind: str, api_version: str, name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"set": name}}},
    }


def test_custom_resources_are_scaled_through_discovery():
    resources = [*cluster_api_resources(), *openshift_machine_api_resources()]
    with FakeKubeServer(resources=resources) as kube:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for i in range(3):
            kube.create(node(f"n{i}"))
        kube.create(configmap("linear", {"nodesPerReplica": 1}))
        kube.create(machine_set("MachineDeployment", "cluster.x-k8s.io/v1beta1", "workers"))
        kube.create(machine_set("MachineSet", "cluster.x-k8s.io/v1beta1", "by-singular"))
        kube.create(machine_set("MachineSet", "machine.openshift.io/v1beta1", "openshift"))
        kube.create(workload("Deployment", "coredns"))
        ctl = make_controller(
            kube,
            "machinedeployments.cluster.x-k8s.io/workers,"
            "machineset.cluster.x-k8s.io/by-singular,"
            "machinesets.v1beta1.machine.openshift.io/openshift,"
            "deployments.apps/coredns",
        )
        ctl.poll()
        assert replicas(kube, "machinedeployments.cluster.x-k8s.io", "workers") == 3
        assert replicas(kube, "machinesets.cluster.x-k8s.io", "by-singular") == 3
        assert replicas(kube, "machinesets.machine.openshift.io", "openshift") == 3
        assert replicas(kube, "deployments", "coredns") == 3
        # Discovery is asked once per target, not every poll.
        discovery = len([r for r in kube.requests if r.resource == ""])
        assert discovery >= 3
        kube.create(node("n3"))
        ctl.poll()
        assert replicas(kube, "machinedeployments.cluster.x-k8s.io", "workers") == 4
        assert len([r for r in kube.requests if r.resource == ""]) == discovery


CUSTOM_ERRORS = [
    ("unknown-group", "machinesets.example.com/x", "API group 'example.com' is not served"),
    ("unknown-resource", "widgets.cluster.x-k8s.io/x", "serves no resource 'widgets'"),
    (
        "no-scale",
        "machines.cluster.x-k8s.io/x",
        "machines.cluster.x-k8s.io has no scale subresource",
    ),
    ("missing-object", "machinedeployments.cluster.x-k8s.io/absent", "reading scale: 404"),
]


@pytest.mark.parametrize(
    ("target", "message"), [c[1:] for c in CUSTOM_ERRORS], ids=[c[0] for c in CUSTOM_ERRORS]
)
def test_custom_target_errors_name_the_target(target, message):
    with FakeKubeServer(resources=cluster_api_resources()) as kube:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        kube.create(node("n0"))
        kube.create(configmap("linear", {"nodesPerReplica": 1}))
        with pytest.raises(PollError) as info:
            make_controller(kube, target).poll()
        assert str(info.value).startswith(f"{target} in {NS}: ")
        assert message in str(info.value)


def poll_until(ctl: Controller, expected: int, timeout: float = 10) -> None:
    # The node cache follows the cluster through a watch: give events time to arrive.
    deadline = time.monotonic() + timeout
    while ctl.poll().decision.replicas != expected:
        assert time.monotonic() < deadline, f"never reached {expected} replicas"
        time.sleep(0.05)


def test_watched_nodes_follow_the_cluster_without_relisting(kube):
    for i in range(2):
        kube.create(node(f"n{i}"))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 1}))
    ctl = make_controller(kube, node_labels={})
    ctl.watch_nodes = True
    try:
        assert ctl.poll().decision.replicas == 2
        kube.create(node("n2"))
        poll_until(ctl, 3)
        kube.patch("nodes", "n0", {"spec": {"unschedulable": True}})
        poll_until(ctl, 2)
        kube.delete("nodes", "n1")
        poll_until(ctl, 1)
        assert replicas(kube, "deployments", "coredns") == 1
        node_lists = [r for r in kube.requests if r.resource == "nodes" and r.verb == "list"]
        assert len(node_lists) == 1
    finally:
        ctl.close()


def test_watched_nodes_honour_nodelabels(kube):
    kube.create(node("dns-0", labels={"pool": "dns"}))
    kube.create(node("web-0", labels={"pool": "web"}))
    kube.create(workload("Deployment", "coredns"))
    kube.create(configmap("linear", {"nodesPerReplica": 1}))
    ctl = make_controller(kube, node_labels={"pool": "dns"})
    ctl.watch_nodes = True
    try:
        assert ctl.poll().size.nodes == 1
        kube.create(node("dns-1", labels={"pool": "dns"}))
        kube.create(node("web-1", labels={"pool": "web"}))
        poll_until(ctl, 2)
    finally:
        ctl.close()


def test_unsynced_node_cache_fails_the_poll(kube, monkeypatch):
    monkeypatch.setattr(controller_module, "NODE_SYNC_TIMEOUT_SECONDS", 0.5)
    kube.create(workload("Deployment", "coredns", replicas=4))
    kube.create(configmap("linear", {"nodesPerReplica": 1}))
    kube.add_fault(path="^/api/v1/nodes", status=500, message="etcd down")
    ctl = make_controller(kube)
    ctl.watch_nodes = True
    try:
        with pytest.raises(PollError, match=r"listing nodes: cache not synced after 0.5s"):
            ctl.poll()
        assert replicas(kube, "deployments", "coredns") == 4
    finally:
        ctl.close()
