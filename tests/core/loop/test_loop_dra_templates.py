"""DRA and node group templates in the loop: a provider's template for scale from zero
carries its ResourceSlices into the simulation (a claiming pod grows the empty GPU group),
and each ready node's devices are compared with the template its group was planned from,
for dra_node_template_resources_mismatch{driver,mismatch_type}."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.model import ClusterObjects, NodeInfo, parse_pod
from clusterscaler.model.dra import (
    ResourceSlice,
    parse_device_class,
    parse_resource_claim_template,
    parse_resource_slice,
)
from clusterscaler.report.metrics import Metrics

from tests.core.loop.loopkit import GROUP_LABEL, Harness

DRIVER = "gpu.example.com"


def gpu_slice(node: str, devices: int) -> ResourceSlice:
    return parse_resource_slice({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {"driver": DRIVER, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "a"}}}
                             for i in range(devices)]},
    })


class DraCluster(InMemoryCluster):
    """An in-memory cluster that also serves DRA objects."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slices: dict[str, ResourceSlice] = {}
        self.dra_extra: list[Any] = [
            parse_device_class({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                "metadata": {"name": "gpu"}, "spec": {}}),
            parse_resource_claim_template({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}),
        ]

    def snapshot(self) -> ClusterObjects:
        objects = super().snapshot()
        objects.resource_slices.extend(self.slices.values())
        objects.device_classes.extend(self.dra_extra[:1])
        objects.resource_claim_templates.extend(self.dra_extra[1:])
        return objects


def claiming_pod(name: str) -> Any:
    return parse_pod({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "creationTimestamp": "2023-12-31T23:00:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "web", "uid": "uid-rs-web",
                                          "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "i",
                                 "resources": {"requests": {"cpu": "100m"}}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    })


def provider_template_with(h: Harness, gid: str, devices: int) -> None:
    group = h.provider.groups[gid]
    plain = group.template_node_info

    def with_devices() -> NodeInfo:
        info = plain()
        return NodeInfo(info.node, info.pods, (gpu_slice("template", devices),))

    group.template_node_info = with_devices  # type: ignore[method-assign]


def mismatch(metrics: Metrics) -> dict[tuple[str, str], float]:
    out = {}
    for family in metrics.registry.collect():
        if family.name.endswith("dra_node_template_resources_mismatch"):
            for s in family.samples:
                out[(s.labels["driver"], s.labels["mismatch_type"])] = s.value
    return out


def test_a_claiming_pod_grows_a_gpu_group_scaled_from_zero() -> None:
    h = Harness(DraCluster)
    h.provider.add_group("cpu", 0, 10, nodes=1)
    h.provider.add_group("gpu", 0, 10)
    provider_template_with(h, "gpu", 2)
    h.add_pods([claiming_pod(f"p{i}") for i in range(3)])
    result = h.run()
    # Two devices per new node: three claiming pods need two nodes.
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("gpu", 2)]


def test_without_declared_devices_an_empty_gpu_group_is_not_grown() -> None:
    h = Harness(DraCluster)
    h.provider.add_group("cpu", 0, 10, nodes=1)
    h.provider.add_group("gpu", 0, 10)
    h.add_pods([claiming_pod("p0")])
    assert h.run().scale_up.decisions == ()


def test_the_devices_of_a_new_node_are_compared_with_the_providers_prediction() -> None:
    h = Harness(DraCluster)
    h.provider.add_group("gpu", 0, 10)
    provider_template_with(h, "gpu", 2)
    metrics = Metrics()
    first = h.run()
    assert first.dra_template_mismatch == {}
    metrics.record_loop(first)
    # A node of the group registers: its driver publishes one device, not two.
    group = h.provider.groups["gpu"]
    group.add_running(1, h.clock.now())
    [node] = [n for n in h.cluster.nodes.values() if n.labels.get(GROUP_LABEL) == "gpu"]
    h.cluster.slices[node.name] = gpu_slice(node.name, 1)
    second = h.run()
    assert second.dra_template_mismatch == {
        DRIVER: {"missing": 0, "extra": 0, "mismatch": 1, "unknown": 0}}
    metrics.record_loop(second)
    assert mismatch(metrics)[(DRIVER, "mismatch")] == 1
    # The group is now planned from its live node: the next comparison agrees, and the
    # driver's series go back to zero, as CA resets the drivers it reported last.
    third = h.run()
    assert third.dra_template_mismatch == {}
    metrics.record_loop(third)
    assert mismatch(metrics)[(DRIVER, "mismatch")] == 0


def test_a_new_node_is_held_unready_until_its_driver_published_the_predicted_pools() -> None:
    """As CA's DRA processor: a Ready node whose devices are not published yet is a node
    still starting (its devices are coming), not a node without devices that pending
    claiming pods do not fit, which would buy another node."""
    h = Harness(DraCluster)
    h.provider.add_group("cpu", 0, 10, nodes=1)
    gpu = h.provider.add_group("gpu", 0, 10)
    provider_template_with(h, "gpu", 2)
    h.add_pods([claiming_pod(f"p{i}") for i in range(2)])
    first = h.run()
    assert [(d.node_group, d.delta) for d in first.scale_up.decisions] == [("gpu", 1)]
    [node] = gpu.register()
    # Ready, devices not published yet: still coming up, no second scale-up.
    held = h.run(timedelta(seconds=30))
    assert held.scale_up.decisions == (), held.scale_up.decisions
    assert held.health.counts.ready == 1, held.health.counts
    # Published: ready, and the pending pods fit it.
    h.cluster.slices[node.name] = gpu_slice(node.name, 2)
    ready = h.run(timedelta(seconds=30))
    assert ready.scale_up.decisions == ()
    assert ready.health.counts.ready == 2, ready.health.counts


def test_a_node_whose_driver_never_publishes_stays_unready() -> None:
    h = Harness(DraCluster)
    gpu = h.provider.add_group("gpu", 0, 10)
    provider_template_with(h, "gpu", 2)
    h.run()
    gpu.add_running(1, h.clock.now())
    result = h.run(timedelta(seconds=30))
    assert result.health.counts.ready == 0, result.health.counts


def test_scale_up_metrics_name_the_dra_drivers_of_the_group() -> None:
    h = Harness(DraCluster)
    h.provider.add_group("cpu", 0, 10, nodes=1)
    h.provider.add_group("gpu", 0, 10)
    provider_template_with(h, "gpu", 2)
    h.add_pods([claiming_pod("p0")])
    result = h.run()
    assert {g.name: g.dra_drivers for g in result.node_groups} == {"cpu": "", "gpu": DRIVER}
    metrics = Metrics()
    metrics.record_loop(result)
    samples = [
        s for family in metrics.registry.collect()
        if family.name.endswith("scaled_up_nodes")
        for s in family.samples if s.name.endswith("_total")
    ]
    assert [(s.labels["dra_drivers"], s.value) for s in samples] == [(DRIVER, 1.0)], samples


def test_a_gpu_node_whose_gpus_a_dra_driver_publishes_is_ready_without_nvidia_gpu() -> None:
    """A node with the provider's GPU label and no `nvidia.com/gpu` is still starting (its
    device plugin has not advertised them), unless a DRA driver publishes its devices:
    then its GPUs are those devices, as CA's GPU config exposed via DRA says."""
    from tests.core.loop.loopkit import GPU_LABEL

    h = Harness(DraCluster)
    h.provider.add_group("gpu", 0, 10, nodes=1, labels={GPU_LABEL: "a100"})
    node = h.cluster.nodes["gpu-1"]
    h.cluster.add_node(node.with_(creation_time=h.clock.now() - timedelta(minutes=2)))
    c = h.run().health.counts
    assert (c.ready, c.not_started, c.unready) == (0, 1, 0)
    h.cluster.slices["gpu-1"] = gpu_slice("gpu-1", 2)
    c = h.run().health.counts
    assert (c.ready, c.not_started, c.unready) == (1, 0, 0)
