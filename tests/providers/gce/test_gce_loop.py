"""The autoscaling loop with the gce provider against the fake Compute API, over an in-memory
cluster: scale from zero and back, and a stocked-out MIG backed off for another one, its
failed instances deleted."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.api import InstanceState, Pod, Registry
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.model import OwnerRef
from clusterscaler.plugins import estimators, expanders, pod_filters
from clusterscaler.simulator.builders import make_pod
from clusterscaler_gce.provider import GceCloudProvider
from clusterscaler_gce.testing.fakecompute import FakeComputeServer
from gcekit import PROJECT, ZONE, ProviderFactory

T0 = datetime.now(UTC).replace(microsecond=0)
OWNER = OwnerRef("ReplicaSet", "web", "uid-rs-web", True, "apps/v1")
KUBE_ENV = "AUTOSCALER_ENV_VARS: kube_reserved=cpu=80m,memory=1Gi\n"


def _registry() -> Registry:
    host = build_plugin_manager(
        autoload=False,
        extra_plugins={"pod-filters": pod_filters, "estimators": estimators, "expanders": expanders},
    )
    return collect_registry(host)


def _pending(name: str, cpu: str) -> Pod:
    return make_pod(name, cpu, "1Gi", owner=OWNER, unschedulable=True, creation_time=T0 - timedelta(minutes=5))


def _sync(cluster: InMemoryCluster, provider: GceCloudProvider, now: datetime) -> None:
    """What GCE, kubelet and the scheduler do between two loops."""
    provider.refresh()
    known = {n.provider_id for n in cluster.nodes.values()}
    live: set[str] = set()
    for group in provider.node_groups():
        template = group.template_node_info().node
        for inst in group.nodes():
            live.add(inst.id)
            if inst.state is not InstanceState.RUNNING or inst.id in known:
                continue
            name = inst.id.rsplit("/", 1)[-1]
            labels = {**template.labels, "kubernetes.io/hostname": name}
            cluster.add_node(template.with_(name=name, provider_id=inst.id, labels=labels, creation_time=now))
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


def _autoscaler(provider: GceCloudProvider, cluster: InMemoryCluster, **overrides: Any) -> Autoscaler:
    options = dataclasses.replace(
        AutoscalingOptions(),
        expander=["least-waste"],
        scale_down_delay_after_add=timedelta(0),
        scale_down_unneeded_time=timedelta(minutes=1),
        **overrides,
    )
    return Autoscaler.from_registry(_registry(), options=options, provider=provider, source=cluster, actions=cluster)


def test_loop_scales_a_mig_from_zero_and_back(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    gce.add_template(PROJECT, "tpl", machine_type="n1-standard-4", kube_env=KUBE_ENV)
    gce.add_mig(PROJECT, ZONE, "workers", template="tpl")
    provider = make_provider(discovery=["mig:namePrefix=work,min=0,max=3"])
    cluster = InMemoryCluster(pods=[_pending("web-1", "3"), _pending("web-2", "3")])
    autoscaler = _autoscaler(provider, cluster)

    result = autoscaler.run_once(T0)

    (group,) = provider.node_groups()
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [(group.id, 2)]
    assert gce.target_size(PROJECT, ZONE, "workers") == 2
    _sync(cluster, provider, T0 + timedelta(seconds=30))
    assert len(cluster.nodes) == 2
    assert all(p.node_name for p in cluster.pods.values())

    for key in list(cluster.pods):
        del cluster.pods[key]
    now = T0 + timedelta(minutes=1)
    for _ in range(4):
        now += timedelta(minutes=1)
        autoscaler.run_once(now)
        _sync(cluster, provider, now)

    assert gce.target_size(PROJECT, ZONE, "workers") == 0
    assert gce.count("POST", "/workers/deleteInstances$") >= 1
    assert cluster.nodes == {}


def test_loop_backs_off_a_stocked_out_mig_and_uses_another(gce: FakeComputeServer, make_provider: ProviderFactory) -> None:
    # least-waste prefers the 4-vCPU MIG for a 3-cpu pod; its zone has no capacity.
    gce.add_template(PROJECT, "small", machine_type="n1-standard-4", kube_env=KUBE_ENV)
    gce.add_template(PROJECT, "large", machine_type="n1-standard-8", kube_env=KUBE_ENV)
    gce.add_mig(PROJECT, ZONE, "pool-small", template="small")
    gce.add_mig(PROJECT, ZONE, "pool-large", template="large")
    gce.stockout(PROJECT, ZONE, "pool-small")
    provider = make_provider(discovery=["mig:namePrefix=pool-,min=0,max=3"])
    small = next(g for g in provider.node_groups() if g.id.endswith("/pool-small"))
    large = next(g for g in provider.node_groups() if g.id.endswith("/pool-large"))
    cluster = InMemoryCluster(pods=[_pending("web-1", "3")])
    autoscaler = _autoscaler(provider, cluster)

    first = autoscaler.run_once(T0)
    assert [(d.node_group, d.delta) for d in first.scale_up.decisions] == [(small.id, 1)]
    _sync(cluster, provider, T0 + timedelta(seconds=10))
    assert cluster.nodes == {}

    second = autoscaler.run_once(T0 + timedelta(seconds=20))

    # The failed instance was deleted at once and the other MIG asked instead.
    assert gce.count("POST", "/pool-small/deleteInstances$") == 1
    assert gce.target_size(PROJECT, ZONE, "pool-small") == 0
    assert [(d.node_group, d.delta) for d in second.scale_up.decisions] == [(large.id, 1)]
    assert gce.target_size(PROJECT, ZONE, "pool-large") == 1
    _sync(cluster, provider, T0 + timedelta(seconds=40))
    (pod,) = cluster.pods.values()
    assert cluster.nodes[pod.node_name].labels["node.kubernetes.io/instance-type"] == "n1-standard-8"
