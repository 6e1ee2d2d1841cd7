"""DRA objects for the providers' scale-from-zero tests: an in-memory cluster that serves a
DeviceClass and a ResourceClaimTemplate asking for one device of a driver, pending pods
that claim one device each through that template, and the scale-up one loop decides for
them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.api import CloudProvider
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.loop.decisions import LoopResult
from clusterscaler.model import ClusterObjects, Pod, parse_pod
from clusterscaler.model.dra import parse_device_class, parse_resource_claim_template
from clusterscaler.plugins import estimators, expanders, pod_filters

NVIDIA = "gpu.nvidia.com"


class DraCluster(InMemoryCluster):
    """An in-memory cluster whose snapshot also holds the DeviceClass `gpu` (devices of
    `driver`) and the ResourceClaimTemplate `default/one-gpu` (one such device)."""

    def __init__(self, *args: Any, driver: str = NVIDIA, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.device_class = parse_device_class({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        })
        self.claim_template = parse_resource_claim_template({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}},
        })

    def snapshot(self) -> ClusterObjects:
        objects = super().snapshot()
        objects.device_classes.append(self.device_class)
        objects.resource_claim_templates.append(self.claim_template)
        return objects


def claiming_pod(name: str, created: datetime, cpu: str = "100m") -> Pod:
    """A pending, unschedulable pod of a ReplicaSet that claims one device of class `gpu`."""
    return parse_pod({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "trainer", "uid": "uid-rs-trainer",
                                          "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "i",
                                 "resources": {"requests": {"cpu": cpu}}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    })


def run_once(provider: CloudProvider, cluster: InMemoryCluster, now: datetime) -> LoopResult:
    """One loop of the autoscaler (the standard plugins, the least-waste expander) over
    `cluster` and `provider`."""
    host = build_plugin_manager(
        autoload=False,
        extra_plugins={"pod-filters": pod_filters, "estimators": estimators,
                       "expanders": expanders},
    )
    options = dataclasses.replace(AutoscalingOptions(), expander=["least-waste"])
    autoscaler = Autoscaler.from_registry(
        collect_registry(host), options=options, provider=provider, source=cluster,
        actions=cluster,
    )
    return autoscaler.run_once(now)


def claims_scale_up(provider: CloudProvider, claims: int) -> list[tuple[str, int]]:
    """The scale-up one loop over `provider` decides for `claims` pending pods that each
    claim one GPU device (five minutes old, past the new-pod delay): (node group, delta)
    per decision."""
    now = datetime.now(UTC).replace(microsecond=0)
    created = now - timedelta(minutes=5)
    cluster = DraCluster(pods=[claiming_pod(f"train-{i}", created) for i in range(claims)])
    result = run_once(provider, cluster, now)
    return [(d.node_group, d.delta) for d in result.scale_up.decisions]
