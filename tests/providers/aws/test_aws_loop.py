"""The autoscaling loop with the aws provider against moto, over an in-memory cluster.

Nodes register for the instances moto launches (as kubelet would), pending pods are bound to
them, and once the pods are gone the loop scales the ASG back down. A stockout in the
preferred ASG makes the loop back it off and use the other one.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from aws_fakes import AwsFixtures, ProviderFactory, ProxyState
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.interfaces.cloudprovider import InstanceState
from clusterscaler.interfaces.registry import Registry
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.model import OwnerRef, Pod
from clusterscaler.plugins import estimators, expanders, pod_filters
from clusterscaler.simulator.builders import make_pod
from clusterscaler_aws.provider import AwsCloudProvider

ENABLED = "k8s.io/cluster-autoscaler/enabled"
T0 = datetime.now(UTC).replace(microsecond=0)
OWNER = OwnerRef("ReplicaSet", "web", "uid-rs-web", True, "apps/v1")


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


def _sync(cluster: InMemoryCluster, provider: AwsCloudProvider, now: datetime) -> None:
    """What the cloud, kubelet and the scheduler do between two loops."""
    provider.cache.refresh(force=True)
    known = {n.provider_id for n in cluster.nodes.values()}
    for group in provider.node_groups():
        template = group.template_node_info().node
        for inst in group.nodes():
            if inst.state is not InstanceState.RUNNING or inst.id in known or "placeholder" in inst.id:
                continue
            name = "ip-" + inst.id.rsplit("/", 1)[-1]
            labels = {**template.labels, "kubernetes.io/hostname": name}
            cluster.add_node(
                template.with_(name=name, provider_id=inst.id, labels=labels, creation_time=now)
            )
    for node in list(cluster.nodes.values()):
        if not provider.has_instance(node):
            cluster.remove_node(node.name)
    # A scheduler: first node with room, in name order.
    for pod in sorted(cluster.pods.values(), key=lambda p: p.key):
        if pod.node_name:
            continue
        for node in sorted(cluster.nodes.values(), key=lambda n: n.name):
            used = sum(p.requests.cpu for p in cluster.pods.values() if p.node_name == node.name)
            if used + pod.requests.cpu <= node.allocatable.cpu:
                cluster.bind(pod.key, node.name)
                break


def _autoscaler(provider: AwsCloudProvider, cluster: InMemoryCluster, **overrides: Any) -> Autoscaler:
    options = dataclasses.replace(
        AutoscalingOptions(),
        expander=["least-waste"],
        scale_down_delay_after_add=timedelta(0),
        scale_down_unneeded_time=timedelta(minutes=1),
        **overrides,
    )
    return Autoscaler.from_registry(
        _registry(), options=options, provider=provider, source=cluster, actions=cluster
    )


def test_loop_scales_an_asg_from_zero_and_back(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    aws.asg("workers", max_size=3, instance_type="m5.xlarge", tags={ENABLED: "1"})
    provider = make_provider(discovery=[f"asg:tag={ENABLED}"])
    cluster = InMemoryCluster(pods=[_pending("web-1", "3"), _pending("web-2", "3")])
    autoscaler = _autoscaler(provider, cluster)

    result = autoscaler.run_once(T0)

    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("workers", 2)]
    assert aws.desired("workers") == 2
    _sync(cluster, provider, T0 + timedelta(seconds=30))
    assert len(cluster.nodes) == 2
    assert all(p.node_name for p in cluster.pods.values())

    # The work is done: the nodes become unneeded and are removed through the ASG.
    for key in list(cluster.pods):
        del cluster.pods[key]
    now = T0 + timedelta(minutes=1)
    for _ in range(4):
        now += timedelta(minutes=1)
        autoscaler.run_once(now)
        _sync(cluster, provider, now)

    assert proxy.count("TerminateInstanceInAutoScalingGroup") == 2
    assert aws.desired("workers") == 0
    assert cluster.nodes == {}


def test_loop_backs_off_a_stocked_out_asg_and_uses_another(aws: AwsFixtures, make_provider: ProviderFactory, proxy: ProxyState) -> None:
    # least-waste prefers the 4-cpu ASG for 3-cpu pods; it has no capacity.
    aws.asg("small", max_size=3, instance_type="m5.xlarge", tags={ENABLED: "1"})
    aws.asg("large", max_size=3, instance_type="m5.2xlarge", tags={ENABLED: "1"})
    aws.stockout("small", "Could not launch On-Demand Instances. InsufficientInstanceCapacity - "
                 "We currently do not have sufficient m5.xlarge capacity.")
    provider = make_provider(discovery=[f"asg:tag={ENABLED}"])
    cluster = InMemoryCluster(pods=[_pending("web-1", "3")])
    autoscaler = _autoscaler(provider, cluster)

    first = autoscaler.run_once(T0)
    assert [(d.node_group, d.delta) for d in first.scale_up.decisions] == [("small", 1)]
    _sync(cluster, provider, T0 + timedelta(seconds=10))
    assert cluster.nodes == {}

    second = autoscaler.run_once(T0 + timedelta(seconds=20))

    # The failed instance was given up at once and the other ASG asked instead.
    assert aws.desired("small") == 0
    assert [(d.node_group, d.delta) for d in second.scale_up.decisions] == [("large", 1)]
    assert aws.desired("large") == 1
    _sync(cluster, provider, T0 + timedelta(seconds=40))
    (pod,) = cluster.pods.values()
    assert cluster.nodes[pod.node_name].labels["node.kubernetes.io/instance-type"] == "m5.2xlarge"
    assert second.cleanups and all(c.node_group == "small" for c in second.cleanups)
