"""Whole loops over a cluster whose claims are listed, as the live caches list them: a
pending pod whose claim does not exist gets no new node (kube-scheduler would leave it
pending on one) and a NotTriggerScaleUp event naming the claim; a pod whose claim does
not exist cannot move off a node being drained. Without any storage information (a
snapshot file without claims, volumes or classes) the claims are not checked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.loop.decisions import NoScaleUpReason, ScaleUpStatus, UnremovableReason
from clusterscaler.model import (
    ClusterObjects,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    Volume,
)
from clusterscaler.model.storage import ANN_BIND_COMPLETED
from clusterscaler.report.events import ObjectRef, events_for_result
from loopkit import Harness, pending_pod, rs_owner, running_pod

FAST = StorageClass("fast", "ebs.csi.aws.com", "Immediate")
PV = PersistentVolume("pv-data", storage_class="fast", capacity=1, phase="Bound",
                      claim_ref="default/data")
DATA = PersistentVolumeClaim("default", "data", uid="uid-data", storage_class="fast",
                             volume_name="pv-data", phase="Bound",
                             annotations={ANN_BIND_COMPLETED: "yes"})


def with_claim(claim: str = "data") -> tuple[Volume, ...]:
    return (Volume("data", "persistentVolumeClaim", claim_name=claim),)


class StorageCluster(InMemoryCluster):
    """A cluster whose snapshots list claims, volumes and classes (`listed`), as the live
    caches do, or carry none at all (a snapshot file taken without them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listed = True
        self.pvcs: list[PersistentVolumeClaim] = []
        self.pvs: list[PersistentVolume] = [PV]
        self.classes: list[StorageClass] = [FAST]

    def snapshot(self) -> ClusterObjects:
        objects = super().snapshot()
        if self.listed:
            objects.storage_listed = True
            objects.pvcs = list(self.pvcs)
            objects.pvs = list(self.pvs)
            objects.storage_classes = list(self.classes)
        return objects


def harness() -> tuple[Harness, StorageCluster]:
    h = Harness(StorageCluster)
    assert isinstance(h.cluster, StorageCluster)
    return h, h.cluster


def not_triggered(result: Any) -> list[str]:
    events = events_for_result(result, ObjectRef.config_map("kube-system", "status"))
    return [e.message for e in events if e.reason == "NotTriggerScaleUp"]


def test_a_pod_whose_claim_does_not_exist_triggers_no_scale_up() -> None:
    h, _ = harness()
    g = h.provider.add_group("g", 0, 10, nodes=0)
    h.add_pods([pending_pod("p", volumes=with_claim())])
    result = h.run()
    assert result.scale_up.status is ScaleUpStatus.NO_OPTIONS_AVAILABLE
    assert g.target == 0
    (rejection,) = result.scale_up.pods_remaining["default/p"]
    assert rejection.reason is NoScaleUpReason.NOT_SCHEDULABLE
    assert rejection.detail == 'persistentvolumeclaim "data" not found'
    (message,) = not_triggered(result)
    assert 'persistentvolumeclaim "data" not found' in message, message


def test_the_same_pod_scales_up_once_its_claim_exists() -> None:
    h, cluster = harness()
    g = h.provider.add_group("g", 0, 10, nodes=0)
    cluster.pvcs = [DATA]
    h.add_pods([pending_pod("p", volumes=with_claim())])
    h.run()
    assert g.target == 1


def test_without_any_storage_information_claims_are_not_checked() -> None:
    h, cluster = harness()
    cluster.listed = False
    g = h.provider.add_group("g", 0, 10, nodes=0)
    h.add_pods([pending_pod("p", volumes=with_claim())])
    h.run()
    assert g.target == 1


def test_each_pod_of_a_workload_is_judged_by_its_own_ephemeral_claim() -> None:
    # The ephemeral volume controller made p0's claim but not yet p1's: p1 gets no node,
    # in kube-scheduler's words, though both pods have the same spec.
    h, cluster = harness()
    g = h.provider.add_group("g", 0, 10, nodes=0)
    scratch = (Volume("scratch", "ephemeral"),)
    pods = [pending_pod(f"p{i}", owner=rs_owner(), volumes=scratch) for i in range(2)]
    cluster.pvcs = [
        replace(DATA, name="p0-scratch", uid="uid-p0-scratch", controller_uid=pods[0].uid)
    ]
    h.add_pods(pods)
    result = h.run()
    assert g.target == 1
    assert [p for p in result.scale_up.decisions[0].pods] == ["default/p0"]
    (rejection,) = result.scale_up.pods_remaining["default/p1"]
    assert rejection.detail == (
        'waiting for ephemeral volume controller to create the persistentvolumeclaim '
        '"p1-scratch"'
    )


def test_a_pod_whose_claim_does_not_exist_cannot_move_off_a_drained_node() -> None:
    h, _ = harness()
    h.provider.add_group("g", 0, 10, nodes=2)
    h.add_pods([running_pod("big", "g-1", cpu="1")])
    h.add_pods([running_pod("small", "g-2", cpu="200m", owner=rs_owner(),
                            volumes=with_claim())])
    result = h.run()
    (u,) = [u for u in result.scale_down.unremovable if u.node == "g-2"]
    assert u.reason is UnremovableReason.NO_PLACE_TO_MOVE_PODS
    assert all(n.node != "g-2" for n in result.scale_down.unneeded)
