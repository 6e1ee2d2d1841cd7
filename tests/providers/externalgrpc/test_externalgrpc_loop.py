"""The autoscaling loop with the externalgrpc provider against a provider service of ours,
over an in-memory cluster; and `simulate --from-cluster --cloud-provider=externalgrpc`,
which reads the service and never writes to it.

Between loops, the service's created instances register as nodes of their group's
template (as kubelet would) and pending pods are bound to them; once the pods are gone,
the loop deletes the nodes through the service.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from clusterscaler.commands.cli import main
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.interfaces.registry import Registry
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.model import OwnerRef, Pod
from clusterscaler.plugins import estimators, expanders, pod_filters
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.kubeobjects import node_json, pod_json
from clusterscaler_externalgrpc import protocol
from clusterscaler_externalgrpc.provider import ExternalGrpcCloudProvider
from externalgrpc_fakes import FakeService, Fault, Served
from externalgrpckit import ProviderFactory, write_config

T0 = datetime.now(UTC).replace(microsecond=0)
OWNER = OwnerRef("ReplicaSet", "web", "uid-rs-web", True, "apps/v1")
WRITES = {"NodeGroupIncreaseSize", "NodeGroupDeleteNodes", "NodeGroupDecreaseTargetSize"}


def _template(name: str, cpu: str) -> Any:
    return make_node(name, cpu, "16Gi", labels={"node.kubernetes.io/instance-type": f"c{cpu}"})


def _registry() -> Registry:
    host = build_plugin_manager(
        autoload=False,
        extra_plugins={"pod-filters": pod_filters, "estimators": estimators, "expanders": expanders},
    )
    return collect_registry(host)


def _pending(name: str, cpu: str) -> Pod:
    return make_pod(
        name, cpu, "1Gi", owner=OWNER, unschedulable=True, creation_time=T0 - timedelta(minutes=5)
    )


def _sync(cluster: InMemoryCluster, service: FakeService, now: datetime) -> None:
    """What the cloud, kubelet and the scheduler do between two loops."""
    with service.lock:
        known = {n.provider_id for n in cluster.nodes.values()}
        live = set()
        for group in service.groups.values():
            assert group.template is not None
            for inst in group.instances:
                live.add(inst.id)
                inst.state = protocol.STATE_RUNNING
                if inst.id in known:
                    continue
                name = inst.id.replace("fake://", "").replace("/", "-")
                cluster.add_node(
                    group.template.with_(
                        name=name,
                        provider_id=inst.id,
                        labels={**group.template.labels, "kubernetes.io/hostname": name},
                        creation_time=now,
                    )
                )
    for node in list(cluster.nodes.values()):
        if node.provider_id not in live:
            cluster.remove_node(node.name)
    for pod in sorted(cluster.pods.values(), key=lambda p: p.key):
        if pod.node_name:
            continue
        for node in sorted(cluster.nodes.values(), key=lambda n: n.name):
            used = sum(p.requests.cpu for p in cluster.pods.values() if p.node_name == node.name)
            if used + pod.requests.cpu <= node.allocatable.cpu:
                cluster.bind(pod.key, node.name)
                break


def _autoscaler(provider: ExternalGrpcCloudProvider, cluster: InMemoryCluster) -> Autoscaler:
    options = dataclasses.replace(
        AutoscalingOptions(),
        expander=["least-waste"],
        scale_down_delay_after_add=timedelta(0),
        scale_down_unneeded_time=timedelta(minutes=1),
    )
    return Autoscaler.from_registry(
        _registry(), options=options, provider=provider, source=cluster, actions=cluster
    )


def test_loop_scales_a_group_from_zero_through_the_service_and_back(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    service.add_group("small", 0, 5, template=_template("small-template", "2"))
    service.add_group("large", 0, 3, template=_template("large-template", "4"))
    provider = make_provider()
    cluster = InMemoryCluster(pods=[_pending("web-1", "3"), _pending("web-2", "3")])
    autoscaler = _autoscaler(provider, cluster)

    result = autoscaler.run_once(T0)

    # 3-cpu pods fit only the 4-cpu template, one per node.
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("large", 2)]
    (increase,) = service.requests_of("NodeGroupIncreaseSize")
    assert (increase.id, increase.delta) == ("large", 2)
    assert service.count("Refresh") == 1
    # One NodeGroups call for the whole loop, however often the loop asked.
    assert service.count("NodeGroups") == 1
    _sync(cluster, service, T0 + timedelta(seconds=30))
    assert len(cluster.nodes) == 2
    assert all(p.node_name for p in cluster.pods.values())

    # The work is done: the nodes become unneeded and are deleted through the service.
    for key in list(cluster.pods):
        del cluster.pods[key]
    now = T0 + timedelta(minutes=1)
    for _ in range(4):
        now += timedelta(minutes=1)
        autoscaler.run_once(now)
        _sync(cluster, service, now)

    deleted = [n.providerID for r in service.requests_of("NodeGroupDeleteNodes") for n in r.nodes]
    assert sorted(deleted) == ["fake://large/1", "fake://large/2"]
    assert service.groups["large"].target == 0
    assert cluster.nodes == {}
    assert service.count("Refresh") == 5


def test_one_failing_node_group_does_not_stop_the_others(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    # least-waste would pick the 4-cpu group for a 3-cpu pod: its target cannot be read.
    service.add_group("broken", 0, 5, template=_template("broken-template", "4"))
    service.add_group("good", 0, 5, template=_template("good-template", "8"))
    service.extra_groups = [protocol.message("NodeGroup", id="inverted", minSize=3, maxSize=1)]
    provider = make_provider()
    cluster = InMemoryCluster(pods=[_pending("web-1", "3")])
    autoscaler = _autoscaler(provider, cluster)
    service.group_faults[("NodeGroupTargetSize", "broken")] = Fault(
        grpc.StatusCode.INTERNAL, "broken group"
    )

    result = autoscaler.run_once(T0)

    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("good", 1)]
    assert [p.node_group for p in result.problems if p.reason == "InvalidNodeGroup"] == ["inverted"]


def test_simulate_from_cluster_reads_the_service_and_writes_nothing(
    grpc_service: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = grpc_service.service
    pool = service.add_group("pool", 1, 3, template=_template("pool-template", "4"), target=1)
    service.add_group("big", 0, 2, template=_template("big-template", "8"))
    cloud_config = write_config(tmp_path, {"address": grpc_service.address})
    with FakeKubeServer() as kube:
        node = kube.create(
            node_json("pool-1", provider_id=pool.instances[0].id,
                      allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"})
        )
        kube.create(pod_json("web-1", cpu="3", node_name=node["metadata"]["name"]))
        kube.create(pod_json("web-2", cpu="6"))
        kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig")
        code = main(
            ["simulate", "--from-cluster", f"--kubeconfig={kubeconfig}",
             "--cloud-provider=externalgrpc", f"--cloud-config={cloud_config}", "--once", "--json"]
        )  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 0, err
    doc = json.loads(out.strip().splitlines()[-1])
    groups = {g["name"]: g for g in doc["providerNodeGroups"]}
    assert (groups["pool"]["nodes"], groups["pool"]["minSize"], groups["pool"]["maxSize"]) == (1, 1, 3)
    assert groups["pool"]["templateFrom"] == "live node"
    assert groups["big"]["templateFrom"] == "externalgrpc provider (scale from zero)"
    [up] = doc["scaleUp"]
    assert (up["nodeGroup"], up["from"], up["to"]) == ("big", 0, 1)
    # Read only: the service was asked, never told.
    assert service.count("NodeGroupTemplateNodeInfo") >= 1
    assert WRITES.isdisjoint(service.calls)
    assert (service.groups["big"].target, service.groups["pool"].target) == (0, 1)
