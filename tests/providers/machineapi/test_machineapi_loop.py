"""The autoscaling loop with the machineapi provider, against the fake API server.

A MachineSet at zero replicas is scaled up for pending pods (from its capacity annotations),
its machines become nodes, and once the pods are gone the loop scales it back to zero
through the delete-machine annotation.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.kube.actions import KubeClusterActions
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.loop.decisions import NoScaleUpReason, ScaleUpFailureKind
from clusterscaler.testing.fakekube import FakeKubeServer
from machineapi_builders import (
    CAPI,
    OPENSHIFT,
    OPENSHIFT_NS,
    MachineController,
    limits,
    machine,
    node,
    pending_pod,
    resource_name,
    scalable,
)

M_OS = resource_name(OPENSHIFT, "Machine")
MS_OS = resource_name(OPENSHIFT, "MachineSet")


def wait_until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the informers did not catch up"
        time.sleep(0.05)


def test_loop_scales_a_machineset_from_zero_to_n_and_back(kube: FakeKubeServer, make_provider: Any, api_client: Any) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    kube.create(
        scalable(
            "workers",
            replicas=0,
            annotations={**limits(OPENSHIFT, 0, 3), f"{OPENSHIFT}/vCPU": "4", f"{OPENSHIFT}/memoryMb": "16384"},
        )
    )
    kube.create(pending_pod("web-1", "3"))
    kube.create(pending_pod("web-2", "3"))
    provider = make_provider(watch=True)
    options = dataclasses.replace(
        AutoscalingOptions(),
        scale_down_delay_after_add=timedelta(0),
        scale_down_unneeded_time=timedelta(minutes=1),
        skip_nodes_with_custom_controller_pods=False,
    )
    registry = collect_registry(build_plugin_manager())
    controller = MachineController(kube)
    with KubeClusterSource(api_client, namespace="kube-system") as source:
        assert source.wait_for_sync(10)
        loop = Autoscaler.from_registry(
            registry, options=options, provider=provider, source=source, actions=KubeClusterActions(api_client)
        )
        now = datetime(2026, 1, 1, tzinfo=UTC)

        result = loop.run_once(now)
        assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [
            ("MachineSet/openshift-machine-api/workers", 2)
        ]
        assert kube.get(MS_OS, "workers", OPENSHIFT_NS)["spec"]["replicas"] == 2  # type: ignore[index]

        # The machines come up; the pods land on them and then finish.
        controller.reconcile()
        for pod in ("web-1", "web-2"):
            kube.delete("pods", pod, "default")
        wait_until(lambda: len(source.snapshot().nodes) == 2 and not source.snapshot().pods)

        def provider_sees_machines() -> bool:
            provider.refresh()
            return len(provider.node_groups()[0].nodes()) == 2

        wait_until(provider_sees_machines)

        deleted: list[str] = []
        for step in range(1, 6):
            result = loop.run_once(now + timedelta(minutes=2 * step))
            assert result.errors == ()
            deleted += [d.node for d in result.scale_down.deletions if d.ok]
            controller.reconcile()
            if not kube.list(M_OS):
                break
        # Each machine was chosen through the delete-machine annotation, then replicas lowered.
        marks = [r for r in kube.requests if r.method == "PATCH" and r.resource == "machines"]
        assert len(marks) == 2
        assert len(deleted) == 2
        assert kube.get(MS_OS, "workers", OPENSHIFT_NS)["spec"]["replicas"] == 0  # type: ignore[index]
        assert kube.list(M_OS) == []


def test_loop_explains_a_group_that_cannot_scale_from_zero(kube: FakeKubeServer, make_provider: Any, api_client: Any) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    kube.create(scalable("bare", replicas=0, annotations=limits(OPENSHIFT, 0, 3)))
    kube.create(pending_pod("big", "2"))
    provider = make_provider()
    registry = collect_registry(build_plugin_manager())
    with KubeClusterSource(api_client, namespace="kube-system") as source:
        assert source.wait_for_sync(10)
        loop = Autoscaler.from_registry(
            registry, options=AutoscalingOptions(), provider=provider, source=source, actions=KubeClusterActions(api_client)
        )
        result = loop.run_once(datetime(2026, 1, 1, tzinfo=UTC))
    assert result.scale_up.decisions == ()
    [rejection] = result.scale_up.pods_remaining["default/big"]
    assert rejection.node_group == "MachineSet/openshift-machine-api/bare"
    assert rejection.reason is NoScaleUpReason.NO_TEMPLATE
    assert "cannot scale from zero" in rejection.detail
    assert "capacity.cluster-autoscaler.kubernetes.io/cpu" in rejection.detail


INFRA = "infrastructure.cluster.x-k8s.io"


def _capi_machine_set_from_template(kube: FakeKubeServer) -> None:
    """A Cluster API MachineSet at zero whose capacity is only in its infrastructure template."""
    from clusterscaler.testing.fakekube_resources import ResourceType

    kube.register_resource(ResourceType(INFRA, ("v1beta1",), "DockerMachineTemplate", "dockermachinetemplates"))
    kube.create(
        {
            "apiVersion": f"{INFRA}/v1beta1",
            "kind": "DockerMachineTemplate",
            "metadata": {"name": "tmpl", "namespace": "capi"},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi"}, "nodeInfo": {"architecture": "arm64"}},
        }
    )
    ms = scalable("workers", group=CAPI, namespace="capi", replicas=0, annotations=limits(CAPI, 0, 3))
    ms["spec"]["template"]["spec"]["infrastructureRef"] = {
        "apiVersion": f"{INFRA}/v1beta1",
        "kind": "DockerMachineTemplate",
        "name": "tmpl",
    }
    kube.create(ms)


def test_machines_stuck_provisioning_are_deleted_and_the_group_backs_off(
    kube: FakeKubeServer, make_provider: Any, api_client: Any
) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    _capi_machine_set_from_template(kube)
    pod = pending_pod("web-1", "3")
    pod["spec"]["nodeSelector"] = {"kubernetes.io/arch": "arm64"}
    kube.create(pod)
    provider = make_provider()
    options = dataclasses.replace(AutoscalingOptions(), max_node_provision_time=timedelta(minutes=15))
    registry = collect_registry(build_plugin_manager())
    controller = MachineController(kube, CAPI)
    group_id = "MachineSet/capi/workers"
    with KubeClusterSource(api_client, namespace="kube-system") as source:
        assert source.wait_for_sync(10)
        loop = Autoscaler.from_registry(
            registry, options=options, provider=provider, source=source, actions=KubeClusterActions(api_client)
        )
        now = datetime(2026, 1, 1, tzinfo=UTC)
        # Scaled up from zero on the template's capacity and architecture alone.
        result = loop.run_once(now)
        assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [(group_id, 1)]
        # The machine never gets a node: still Provisioning after --max-node-provision-time.
        controller.reconcile(register_nodes=False)
        [stuck] = kube.list(resource_name(CAPI, "Machine"), "capi")
        assert stuck["status"]["phase"] == "Provisioning"
        loop.run_once(now + timedelta(minutes=1))
        result = loop.run_once(now + timedelta(minutes=17))
        assert [(d.node_group, d.ok) for d in result.cleanups] == [(group_id, True)]
        [failure] = [f for f in result.scale_up_failures if f.node_group == group_id]
        assert failure.kind is ScaleUpFailureKind.TIMEOUT
        assert loop.state_tracker.backoff.active(group_id, now + timedelta(minutes=17)) is not None
        # The stuck machine was the one marked for deletion, and replicas went back down.
        machine_obj = kube.get(resource_name(CAPI, "Machine"), stuck["metadata"]["name"], "capi")
        assert machine_obj is not None
        assert f"{CAPI}/delete-machine" in machine_obj["metadata"]["annotations"]
        assert kube.get(resource_name(CAPI, "MachineSet"), "workers", "capi")["spec"]["replicas"] == 0  # type: ignore[index]


def test_failed_machines_are_deleted_and_the_group_backs_off(
    kube: FakeKubeServer, make_provider: Any, api_client: Any
) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    _capi_machine_set_from_template(kube)
    ms = kube.get(resource_name(CAPI, "MachineSet"), "workers", "capi")
    assert ms is not None
    kube.patch(resource_name(CAPI, "MachineSet"), "workers", {"spec": {"replicas": 1}}, "capi")
    failed = machine(ms, "workers-x", provider_id=None, node_name=None, phase="Failed")
    failed["status"]["failureReason"] = "CreateError"
    failed["status"]["failureMessage"] = "quota exceeded for instance type"
    kube.create(failed)
    provider = make_provider()
    registry = collect_registry(build_plugin_manager())
    group_id = "MachineSet/capi/workers"
    with KubeClusterSource(api_client, namespace="kube-system") as source:
        assert source.wait_for_sync(10)
        loop = Autoscaler.from_registry(
            registry, options=AutoscalingOptions(), provider=provider, source=source, actions=KubeClusterActions(api_client)
        )
        now = datetime(2026, 1, 1, tzinfo=UTC)
        result = loop.run_once(now)
        [failure] = [f for f in result.scale_up_failures if f.node_group == group_id]
        assert "quota exceeded" in failure.message
        assert loop.state_tracker.backoff.active(group_id, now) is not None
        assert [(d.node_group, d.ok) for d in result.cleanups] == [(group_id, True)]
        assert kube.get(resource_name(CAPI, "MachineSet"), "workers", "capi")["spec"]["replicas"] == 0  # type: ignore[index]


CAP = "capacity.cluster-autoscaler.kubernetes.io"


def _claim_pod(name: str, claim: str) -> dict[str, Any]:
    pod = pending_pod(name, "500m")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return pod


def _scale_up_for_volume_pods(kube: FakeKubeServer, make_provider: Any, api_client: Any, csi_driver: str | None) -> int:
    """How many nodes the loop asks of a MachineSet at zero for four pending pods, each
    with an EBS claim still to be provisioned; `csi_driver` is the csi-driver annotation."""
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    kube.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    annotations = {**limits(CAPI, 0, 10), f"{CAP}/cpu": "8", f"{CAP}/memory": "32Gi"}
    if csi_driver is not None:
        annotations[f"{CAP}/csi-driver"] = csi_driver
    kube.create(scalable("vols", group=CAPI, namespace="default", replicas=0, annotations=annotations))
    for i in range(4):
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"data-{i}", "namespace": "default"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "gp3",
                    "resources": {"requests": {"storage": "1Gi"}},
                },
                "status": {"phase": "Pending"},
            }
        )
        kube.create(_claim_pod(f"db-{i}", f"data-{i}"))
    provider = make_provider()
    registry = collect_registry(build_plugin_manager())
    with KubeClusterSource(api_client, namespace="kube-system") as source:
        assert source.wait_for_sync(10)
        wait_until(lambda: len(source.snapshot().pods) == 4 and len(source.snapshot().pvcs) == 4)
        loop = Autoscaler.from_registry(
            registry, options=AutoscalingOptions(), provider=provider, source=source, actions=KubeClusterActions(api_client)
        )
        result = loop.run_once(datetime(2026, 1, 1, tzinfo=UTC))
    assert result.errors == ()
    [decision] = result.scale_up.decisions
    assert decision.node_group == "MachineSet/default/vols"
    return decision.delta


def test_csi_driver_annotation_limits_volumes_per_new_node(kube: FakeKubeServer, make_provider: Any, api_client: Any) -> None:
    # Two EBS volumes per node: four pods with a volume each need two nodes, though one
    # node has the CPU and memory for all four.
    assert _scale_up_for_volume_pods(kube, make_provider, api_client, "ebs.csi.aws.com=2") == 2


def test_csi_driver_without_a_limit_or_annotation_does_not_limit(kube: FakeKubeServer, make_provider: Any, api_client: Any) -> None:
    assert _scale_up_for_volume_pods(kube, make_provider, api_client, "ebs.csi.aws.com=0,efs.csi.aws.com=1") == 1


def test_a_live_nodes_csinode_limits_the_new_nodes_copied_from_it(kube: FakeKubeServer, make_provider: Any, api_client: Any) -> None:
    # The group has a ready node, so new nodes are copies of it; its CSINode allows two EBS
    # volumes, and so does every new node's.
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    kube.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    ms = kube.create(scalable("vols", group=CAPI, namespace="default", replicas=1, annotations=limits(CAPI, 0, 10)))
    kube.create(machine(ms, "vols-0"))
    kube.create(node("vols-0"))
    kube.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "vols-0"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-0", "allocatable": {"count": 2}}]},
        }
    )
    busy = pending_pod("busy", "3800m")
    busy["spec"]["nodeName"] = "vols-0"
    busy["status"] = {"phase": "Running"}
    kube.create(busy)
    for i in range(4):
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": f"data-{i}", "namespace": "default"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3", "resources": {"requests": {"storage": "1Gi"}}},
                "status": {"phase": "Pending"},
            }
        )
        kube.create(_claim_pod(f"db-{i}", f"data-{i}"))
    provider = make_provider()
    registry = collect_registry(build_plugin_manager())
    with KubeClusterSource(api_client, namespace="kube-system") as source:
        assert source.wait_for_sync(10)
        wait_until(lambda: len(source.snapshot().pods) == 5 and len(source.snapshot().csinodes) == 1)
        loop = Autoscaler.from_registry(
            registry, options=AutoscalingOptions(), provider=provider, source=source, actions=KubeClusterActions(api_client)
        )
        result = loop.run_once(datetime(2026, 1, 1, tzinfo=UTC))
    assert result.errors == ()
    assert [(d.node_group, d.delta) for d in result.scale_up.decisions] == [("MachineSet/default/vols", 2)]
