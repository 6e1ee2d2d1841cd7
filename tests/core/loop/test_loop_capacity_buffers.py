"""CapacityBuffers in the loop: the controller's status (ReadyForProvisioning, replicas
from replicas/percentage/limits, LimitedByQuotas), the injection of placeholder pods
(Provisioning) and what scale-up and scale-down do with them, in CA's words."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.loop.capacitybuffers import BufferResult, is_buffer_pod
from clusterscaler.loop.decisions import LoopResult
from clusterscaler.model import ClusterObjects, Controller, OwnerRef
from clusterscaler.model.capacitybuffer import (
    ACTIVE_PROVISIONING_STRATEGY,
    CapacityBuffer,
    ResourceQuota,
    ScalableRef,
    ScopeRequirement,
)
from clusterscaler.model.common import JsonObject
from clusterscaler.model.provisioning import Condition, PodTemplate, parse_pod_template
from clusterscaler.model.resources import Resources
from clusterscaler.report.events import ObjectRef, events_for_result
from clusterscaler.simulator.builders import make_pod
from loopkit import T0, Harness, running_pod


class BuffersCluster(InMemoryCluster):
    """An in-memory cluster that also holds buffers, templates and quotas, and takes the
    status the loop writes as the API server would (the managed template included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.buffers: dict[str, CapacityBuffer] = {}
        self.templates: dict[str, PodTemplate] = {}
        self.quotas: list[ResourceQuota] = []

    def snapshot(self) -> ClusterObjects:
        objects = super().snapshot()
        objects.capacity_buffers = list(self.buffers.values())
        objects.pod_templates = list(self.templates.values())
        objects.resource_quotas = list(self.quotas)
        return objects

    def apply(self, result: LoopResult) -> None:
        for r in result.capacity_buffers:
            generation = r.status.pod_template_generation
            if r.template is not None:
                key = f"{r.namespace}/{r.template.name}"
                held = self.templates.get(key)
                if held is not None and held.raw_template == r.template.template:
                    generation = held.generation
                else:
                    generation = (held.generation if held is not None else 0) + 1
                    self.templates[key] = parse_pod_template({
                        "metadata": {"name": r.template.name, "namespace": r.namespace,
                                     "generation": generation},
                        "template": r.template.template,
                    })
            s = r.status
            self.buffers[r.key] = dataclasses.replace(
                self.buffers[r.key],
                status_pod_template_ref=s.pod_template_ref,
                status_replicas=s.replicas,
                status_pod_template_generation=generation if s.pod_template_ref else None,
                status_provisioning_strategy=s.provisioning_strategy,
                conditions=s.conditions,
            )


def template(name: str = "spare", cpu: str = "1", generation: int = 1) -> PodTemplate:
    pod = make_pod(name, cpu, "1Gi")
    raw: JsonObject = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
        {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
    ]}}
    return PodTemplate("default", name, pod, generation, raw)


def buffer(name: str = "spare", *, age: int = 10, **spec: Any) -> CapacityBuffer:
    spec.setdefault("provisioning_strategy", ACTIVE_PROVISIONING_STRATEGY)
    return CapacityBuffer(
        "default", name, uid=f"uid-{name}", generation=1,
        creation_time=T0 - timedelta(minutes=age), **spec,
    )


def harness(**options: Any) -> tuple[Harness, BuffersCluster]:
    options.setdefault("capacity_buffer_controller_enabled", True)
    options.setdefault("capacity_buffer_pod_injection_enabled", True)
    h = Harness(BuffersCluster, **options)
    assert isinstance(h.cluster, BuffersCluster)
    h.cluster.templates["default/spare"] = template()
    return h, h.cluster


def run(h: Harness, cluster: BuffersCluster, advance: timedelta = timedelta(0)) -> LoopResult:
    result: LoopResult = h.run(advance)
    cluster.apply(result)
    return result


def cond(cluster: BuffersCluster, name: str, type_: str) -> Condition:
    c = cluster.buffers[f"default/{name}"].condition(type_)
    assert c is not None, f"{name} has no {type_} condition"
    return c


def result_of(result: LoopResult, name: str) -> BufferResult:
    return next(r for r in result.capacity_buffers if r.name == name)


def test_a_pod_template_buffer_gets_its_status_and_scales_the_cluster_up() -> None:
    h, cluster = harness()
    group = h.provider.add_group("g", 0, 10, nodes=1, cpu="2", memory="8Gi")
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=5)
    result = run(h, cluster)
    b = cluster.buffers["default/spare"]
    assert b.status_pod_template_ref == "capacitybuffer-spare-pod-template"
    assert b.status_replicas == 5
    assert b.status_pod_template_generation == 1
    assert b.status_provisioning_strategy == ACTIVE_PROVISIONING_STRATEGY
    ready = cond(cluster, "spare", "ReadyForProvisioning")
    assert (ready.status, ready.reason, ready.message) == (
        "True", "AttributesSetSuccessfully", "ready"
    )
    provisioning = cond(cluster, "spare", "Provisioning")
    assert (provisioning.status, provisioning.reason) == ("True", "FakePodsInjected")
    assert cond(cluster, "spare", "LimitedByQuotas").status == "False"
    # Five pods of 1 CPU: 2 fit the existing node, 3 need 2 more nodes of 2 CPUs.
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 2)]
    assert group.target_size() == 3
    triggered = {p for d in result.scale_up.decisions for p in d.pods}
    assert triggered and all(p.startswith("default/capacity-buffer-spare-") for p in triggered)
    assert result_of(result, "spare").pods == tuple(
        f"default/capacity-buffer-spare-{i}" for i in range(1, 6)
    )
    # The placeholder pods are never created in the cluster.
    assert not [p for p in cluster.pods.values() if is_buffer_pod(p)]
    # Nothing changes on the next loop: no status write.
    again = run(h, cluster, timedelta(seconds=10))
    assert not result_of(again, "spare").changed


def test_a_buffer_without_its_pod_template_is_not_ready_and_injects_nothing() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=1, cpu="2", memory="8Gi")
    cluster.buffers["default/gone"] = buffer("gone", pod_template_ref="missing", replicas=3)
    result = run(h, cluster)
    ready = cond(cluster, "gone", "ReadyForProvisioning")
    assert (ready.status, ready.reason) == ("False", "error")
    assert ready.message == (
        "Buffer not ready for provisioning: capacity buffer client can't get pod template: "
        'podtemplates "missing" not found'
    )
    assert cluster.buffers["default/gone"].status_pod_template_ref is None
    assert result.scale_up.decisions == ()
    assert result_of(result, "gone").pods == ()


@pytest.mark.parametrize(
    ("spec", "replicas"),
    [
        pytest.param({"replicas": 4}, 4, id="replicas"),
        pytest.param({"limits": Resources(cpu=2500)}, 2, id="limits-only"),
        pytest.param({"replicas": 4, "limits": Resources(cpu=3000)}, 3, id="smallest-wins"),
        pytest.param({"replicas": 0}, 0, id="zero"),
    ],
)
def test_the_number_of_chunks_is_the_smallest_of_replicas_and_limits(
    spec: dict[str, Any], replicas: int
) -> None:
    h, cluster = harness(capacity_buffer_pod_injection_enabled=False)
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", **spec)
    run(h, cluster)
    assert cluster.buffers["default/spare"].status_replicas == replicas


def test_limits_naming_nothing_the_pod_requests_leave_the_buffer_not_ready() -> None:
    h, cluster = harness()
    cluster.buffers["default/spare"] = buffer(
        pod_template_ref="spare", limits=Resources(extended={"nvidia.com/gpu": 2})
    )
    run(h, cluster)
    b = cluster.buffers["default/spare"]
    ready = cond(cluster, "spare", "ReadyForProvisioning")
    assert ready.status == "False"
    assert ready.message == (
        "Buffer not ready for provisioning: couldn't get number of replicas for buffer: "
        "resources in configured limits not found in the pod template"
    )
    # As CA: the template is kept, the replicas are not.
    assert b.status_pod_template_ref == "capacitybuffer-spare-pod-template"
    assert b.status_replicas is None


def test_an_empty_buffer_is_not_provisioning() -> None:
    h, cluster = harness()
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=0)
    run(h, cluster)
    provisioning = cond(cluster, "spare", "Provisioning")
    assert (provisioning.status, provisioning.reason, provisioning.message) == (
        "False", "BufferIsEmpty", "CapacityBuffer has zero replicas"
    )


def test_resource_quotas_are_shared_out_oldest_buffer_first() -> None:
    h, cluster = harness(capacity_buffer_pod_injection_enabled=False)
    cluster.buffers["default/old"] = buffer("old", pod_template_ref="spare", replicas=2, age=20)
    cluster.buffers["default/new"] = buffer("new", pod_template_ref="spare", replicas=3, age=5)
    cluster.quotas.append(
        ResourceQuota("default", "compute", "uid-q", hard=(("requests.cpu", 4000),),
                      used=(("requests.cpu", 1000),))
    )
    # A quota of another scope does not count.
    cluster.quotas.append(
        ResourceQuota("default", "best-effort", "uid-be", hard=(("pods", 0),),
                      scopes=())
    )
    run(h, cluster)
    assert cluster.buffers["default/old"].status_replicas == 2
    assert cond(cluster, "old", "LimitedByQuotas").status == "False"
    assert cluster.buffers["default/new"].status_replicas == 1
    limited = cond(cluster, "new", "LimitedByQuotas")
    assert (limited.status, limited.reason, limited.message) == (
        "True", "ResourceQuotasAllocated",
        "Buffer replicas limited from 3 to 1 due to quotas: compute",
    )
    assert limited.observed_generation == 1


def test_a_buffer_of_another_strategy_is_left_alone() -> None:
    h, cluster = harness()
    cluster.buffers["default/spare"] = buffer(
        pod_template_ref="spare", replicas=2, provisioning_strategy="example.com/other"
    )
    result = run(h, cluster)
    assert result.capacity_buffers == ()
    assert cluster.buffers["default/spare"].conditions == ()


def test_a_scalable_ref_buffer_follows_its_deployment() -> None:
    h, cluster = harness(capacity_buffer_pod_injection_enabled=False)
    rs_owner = OwnerRef("Deployment", "api", "uid-dep", True, "apps/v1")
    cluster.controllers.append(
        Controller("ReplicaSet", "default", "api-7f", "uid-rs-api", replicas=4, owner=rs_owner)
    )
    pod_owner = OwnerRef("ReplicaSet", "api-7f", "uid-rs-api", True, "apps/v1")
    h.provider.add_group("g", 0, 10, nodes=1, cpu="8", memory="32Gi")
    node = next(iter(cluster.nodes))
    for i in range(4):
        h.add_pods([running_pod(f"api-{i}", node, cpu="500m", owner=pod_owner)])
    cluster.buffers["default/api"] = buffer(
        "api", scalable_ref=ScalableRef("apps", "Deployment", "api"), percentage=50
    )
    result = run(h, cluster)
    b = cluster.buffers["default/api"]
    assert b.status_replicas == 2
    assert b.status_pod_template_ref == "capacitybuffer-api-pod-template"
    managed = result_of(result, "api").template
    assert managed is not None and "nodeName" not in managed.template["spec"]


def test_a_scalable_ref_of_an_unknown_kind_is_not_ready() -> None:
    h, cluster = harness()
    cluster.buffers["default/x"] = buffer(
        "x", scalable_ref=ScalableRef("example.com", "Widget", "w"), replicas=1
    )
    run(h, cluster)
    assert cond(cluster, "x", "ReadyForProvisioning").message == (
        "Buffer not ready for provisioning: failed to resolve scalable object: kind "
        "example.com/Widget is not supported to use pod template"
    )


def ready_status(**kw: Any) -> dict[str, Any]:
    """The status a controller wrote (for the injection on its own)."""
    out: dict[str, Any] = {
        "status_pod_template_ref": "spare",
        "status_replicas": 2,
        "status_pod_template_generation": 1,
        "status_provisioning_strategy": ACTIVE_PROVISIONING_STRATEGY,
        "conditions": (Condition("ReadyForProvisioning", "True", "AttributesSetSuccessfully",
                                 "ready", T0),),
    }
    out.update(kw)
    return out


def test_the_injection_alone_uses_the_status_its_controller_wrote() -> None:
    h, cluster = harness(capacity_buffer_controller_enabled=False)
    h.provider.add_group("g", 0, 10, nodes=0, cpu="2", memory="8Gi")
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=9,
                                              **ready_status())
    result = run(h, cluster)
    # The status's replicas (2), not the spec's.
    assert result_of(result, "spare").pods == (
        "default/capacity-buffer-spare-1", "default/capacity-buffer-spare-2"
    )
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 1)]


def test_a_template_changed_since_the_status_waits_for_the_controller() -> None:
    h, cluster = harness(capacity_buffer_controller_enabled=False)
    h.provider.add_group("g", 0, 10, nodes=0, cpu="2", memory="8Gi")
    cluster.templates["default/spare"] = template(generation=2)
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=2,
                                              **ready_status())
    result = run(h, cluster)
    assert result.capacity_buffers == () and result.scale_up.decisions == ()


def test_a_missing_status_template_is_reported_as_provisioning_false() -> None:
    h, cluster = harness(capacity_buffer_controller_enabled=False)
    cluster.buffers["default/spare"] = buffer(
        pod_template_ref="spare", replicas=2,
        **ready_status(status_pod_template_ref="gone", status_pod_template_generation=None),
    )
    run(h, cluster)
    provisioning = cond(cluster, "spare", "Provisioning")
    assert (provisioning.status, provisioning.reason) == ("False", "FailedToGetPodTemplate")
    assert provisioning.message == (
        "failed to get pod template with error: capacity buffer client can't get pod "
        'template: podtemplates "gone" not found'
    )


def test_scale_down_keeps_the_room_a_buffer_needs() -> None:
    """Two nodes of 2 CPUs, one running 1 CPU: the other is empty and unneeded, unless a
    buffer chunk of 1.5 CPUs sits there (it cannot move beside the running pod)."""

    def unneeded(with_buffer: bool) -> list[str]:
        h, cluster = harness(capacity_buffer_controller_enabled=False)
        h.provider.add_group("g", 0, 10, nodes=2, cpu="2", memory="8Gi")
        busy = sorted(cluster.nodes)[0]
        h.add_pods([running_pod("app", busy, cpu="1")])
        cluster.templates["default/spare"] = template(cpu="1500m")
        if with_buffer:
            cluster.buffers["default/spare"] = buffer(
                pod_template_ref="spare", replicas=1, **ready_status(status_replicas=1)
            )
        result = run(h, cluster)
        assert result.scale_up.decisions == ()
        return [u.node for u in result.scale_down.unneeded]

    assert len(unneeded(with_buffer=False)) == 1
    assert unneeded(with_buffer=True) == []


def test_nothing_happens_with_both_flags_off() -> None:
    h, cluster = harness(
        capacity_buffer_controller_enabled=False, capacity_buffer_pod_injection_enabled=False
    )
    h.provider.add_group("g", 0, 10, nodes=0, cpu="2", memory="8Gi")
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=2,
                                              **ready_status())
    result = run(h, cluster)
    assert result.capacity_buffers == () and result.scale_up.decisions == ()


def test_the_events_of_placeholder_pods_go_to_their_buffer() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=0, cpu="2", memory="8Gi")
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=3)
    result = run(h, cluster)
    events = events_for_result(result, ObjectRef.config_map("kube-system", "status"))
    assert not [e for e in events if e.involved.kind == "Pod"]
    [event] = [e for e in events if e.involved.kind == "CapacityBuffer"]
    assert (event.involved.name, event.involved.namespace, event.involved.uid) == (
        "spare", "default", "uid-spare"
    )
    assert event.involved.api_version == "autoscaling.x-k8s.io/v1beta1"
    assert (event.reason, event.message) == (
        "TriggeredScaleUp",
        "capacity buffer 3 fake pods triggered scale-up: [{g 0->2 (max: 10)}]",
    )


def test_placeholder_pods_no_group_can_help_are_told_on_their_buffer() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 1, nodes=1, cpu="2", memory="8Gi")
    cluster.templates["default/spare"] = template(cpu="1500m")
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=3)
    result = run(h, cluster)
    events = events_for_result(result, ObjectRef.config_map("kube-system", "status"))
    assert not [e for e in events if e.involved.kind == "Pod"]
    [event] = [e for e in events if e.involved.kind == "CapacityBuffer"]
    assert event.reason == "NotTriggerScaleUp"
    assert event.message == (
        "capacity buffer 2 fake pods didn't trigger scale-up: "
        "1 max node group size reached,1 max node group size reached"
    )


def test_placeholder_pods_are_not_counted_as_the_clusters_pending_pods() -> None:
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=0, cpu="2", memory="8Gi")
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=3)
    result = run(h, cluster)
    assert result.scale_up.decisions
    assert result.pending_pods == ()


def test_a_buffer_whose_template_could_not_be_written_is_not_injected() -> None:
    """Its writer said why in the status; until the template is written, no placeholder."""
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=0, cpu="2", memory="8Gi")
    failed = Condition(
        "ReadyForProvisioning", "False", "error",
        "Buffer not ready for provisioning: failed to create or update managed pod template: "
        "HTTP 403 Forbidden", T0,
    )
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=2,
                                              conditions=(failed,))
    result = run(h, cluster)
    assert result.scale_up.decisions == () and result_of(result, "spare").pods == ()
    # The template is still handed to its writer, to try again.
    assert result_of(result, "spare").template is not None
    provisioning = cond(cluster, "spare", "Provisioning")
    assert (provisioning.status, provisioning.reason) == ("False", "NotReadyForProvisioning")


@pytest.mark.parametrize(
    ("kind", "api_group", "replicas", "percentage", "chunks"),
    [
        pytest.param("StatefulSet", "apps", 5, 50, 2, id="statefulset-rounds-down"),
        pytest.param("Job", "batch", 3, 100, 3, id="job-parallelism"),
        pytest.param("ReplicationController", "core", 10, 10, 1, id="rc-core-group"),
    ],
)
def test_a_scalable_ref_takes_its_workloads_replicas(
    kind: str, api_group: str, replicas: int, percentage: int, chunks: int
) -> None:
    h, cluster = harness(capacity_buffer_pod_injection_enabled=False)
    cluster.controllers.append(Controller(kind, "default", "w", "uid-w", replicas=replicas))
    h.provider.add_group("g", 0, 10, nodes=1, cpu="8", memory="32Gi")
    node = next(iter(cluster.nodes))
    owner = OwnerRef(kind, "w", "uid-w", True)
    h.add_pods([running_pod("w-0", node, cpu="250m", owner=owner)])
    cluster.buffers["default/w"] = buffer(
        "w", scalable_ref=ScalableRef(api_group, kind, "w"), percentage=percentage
    )
    run(h, cluster)
    assert cluster.buffers["default/w"].status_replicas == chunks


def test_a_quota_of_another_scope_does_not_limit_the_buffer() -> None:
    h, cluster = harness(capacity_buffer_pod_injection_enabled=False)
    cluster.buffers["default/spare"] = buffer(pod_template_ref="spare", replicas=3)
    cluster.quotas += [
        # Best-effort pods only: the chunk requests CPU and memory.
        ResourceQuota("default", "best-effort", "q1", hard=(("requests.cpu", 0),),
                      scopes=(ScopeRequirement("BestEffort", "Exists"),)),
        # Terminating pods only: a buffer's never terminate.
        ResourceQuota("default", "batch", "q2", hard=(("requests.cpu", 0),),
                      scopes=(ScopeRequirement("Terminating", "Exists"),)),
        # Another namespace's.
        ResourceQuota("other", "compute", "q3", hard=(("requests.cpu", 0),)),
        # This one applies: two chunks of 1 CPU fit.
        ResourceQuota("default", "not-best-effort", "q4", hard=(("cpu", 2000),),
                      scopes=(ScopeRequirement("NotBestEffort", "Exists"),)),
    ]
    run(h, cluster)
    assert cluster.buffers["default/spare"].status_replicas == 2
    assert cond(cluster, "spare", "LimitedByQuotas").message == (
        "Buffer replicas limited from 3 to 2 due to quotas: not-best-effort"
    )


def test_a_node_holding_a_placeholder_is_removable_when_it_fits_elsewhere() -> None:
    """The placeholder is safe to evict: the node is unneeded, the chunk moved on paper to
    a node with room (and never evicted: it does not exist)."""
    h, cluster = harness(capacity_buffer_controller_enabled=False)
    h.provider.add_group("g", 0, 10, nodes=3, cpu="2", memory="8Gi")
    full, empty, half = sorted(cluster.nodes)
    h.add_pods([running_pod("a", full, cpu="1700m"), running_pod("b", half, cpu="1")])
    cluster.templates["default/spare"] = template(cpu="500m")
    cluster.buffers["default/spare"] = buffer(
        pod_template_ref="spare", replicas=1, **ready_status(status_replicas=1)
    )
    result = run(h, cluster)
    assert [(u.node, u.destinations) for u in result.scale_down.unneeded] == [
        (empty, {"default/capacity-buffer-spare-1": half})
    ]


def test_the_placeholders_take_the_shape_of_the_written_template() -> None:
    """Once the cluster holds the managed PodTemplate the status names (built by the
    server-side dry-run: a LimitRange's default requests, say), the placeholders are made
    from it, not from the source."""
    h, cluster = harness()
    h.provider.add_group("g", 0, 10, nodes=0, cpu="2", memory="8Gi")
    managed = template("capacitybuffer-spare-pod-template", cpu="1500m")
    cluster.templates["default/capacitybuffer-spare-pod-template"] = managed
    cluster.buffers["default/spare"] = buffer(
        pod_template_ref="spare", replicas=2,
        **ready_status(status_pod_template_ref="capacitybuffer-spare-pod-template"),
    )
    result = run(h, cluster)
    # Two chunks of 1.5 CPUs (the source's 1 CPU would fit one 2-CPU node).
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("g", 2)]


def test_limits_count_chunks_of_the_written_template() -> None:
    h, cluster = harness(capacity_buffer_pod_injection_enabled=False)
    cluster.templates["default/capacitybuffer-spare-pod-template"] = template(
        "capacitybuffer-spare-pod-template", cpu="1500m"
    )
    cluster.buffers["default/spare"] = buffer(
        pod_template_ref="spare", limits=Resources(cpu=3000),
        **ready_status(status_pod_template_ref="capacitybuffer-spare-pod-template"),
    )
    run(h, cluster)
    # 3 CPUs of 1.5-CPU chunks (the source's 1 CPU would make 3).
    assert cluster.buffers["default/spare"].status_replicas == 2
