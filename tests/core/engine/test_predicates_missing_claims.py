"""A pod whose claim does not exist, is lost, is being deleted or (for a generic ephemeral
volume) is not the pod's own fits no node, in kube-scheduler's words (VolumeBinding's
`podHasPVCs`, VolumeZone's `getPVbyPod`), when the snapshot knows the cluster's storage
objects; a snapshot without any leaves the claims unchecked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from clusterscaler.framework.schedulerconfig import SchedulerConfig
from clusterscaler.model import (
    ClusterObjects,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Volume,
)
from clusterscaler.model.storage import ANN_BIND_COMPLETED, parse_pvc
from clusterscaler.simulator import ClusterSnapshot, check_predicates
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.simulator.profile import configured_filters

GI = 1024**3
POD_UID = "uid-default-p"
FAST = StorageClass("fast", "ebs.csi.aws.com", "Immediate")


def claim_pod(*volumes: Volume) -> Pod:
    pod = make_pod("p", volumes=volumes)
    assert pod.uid == POD_UID
    return pod


def pvc(name: str, volume: str = "pv", **kw: Any) -> PersistentVolumeClaim:
    """A claim bound to `volume`, unless `kw` says otherwise."""
    return replace(
        PersistentVolumeClaim(
            "default", name, uid=f"uid-{name}", storage_class="fast", volume_name=volume,
            phase="Bound", annotations={ANN_BIND_COMPLETED: "yes"}, requested=GI,
            access_modes=("ReadWriteOnce",),
        ),
        **kw,
    )


DATA = Volume("data", "persistentVolumeClaim", claim_name="data")
SCRATCH = Volume("scratch", "ephemeral")
PV = PersistentVolume("pv", storage_class="fast", capacity=GI, claim_ref="default/data",
                      phase="Bound")
ZONE_ONLY = configured_filters(
    SchedulerConfig(disabled_filters=frozenset({"VolumeBinding"}))
)
BINDING_ONLY = configured_filters(
    SchedulerConfig(disabled_filters=frozenset({"VolumeZone"}))
)

CASES = [
    ("a claim that does not exist",
     claim_pod(DATA), [], [PV],
     'persistentvolumeclaim "data" not found'),
    ("the claim of an ephemeral volume, not made yet",
     claim_pod(SCRATCH), [], [PV],
     'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"'),
    ("a claim whose volume is lost",
     claim_pod(DATA), [pvc("data", "gone", phase="Lost", annotations={})], [PV],
     'persistentvolumeclaim "data" bound to non-existent persistentvolume "gone"'),
    ("a claim being deleted",
     claim_pod(DATA), [pvc("data", deleting=True)], [PV],
     'persistentvolumeclaim "data" is being deleted'),
    ("the claim of an ephemeral volume that another pod controls",
     claim_pod(SCRATCH), [pvc("p-scratch", controller_uid="uid-default-other")], [PV],
     "PVC default/p-scratch was not created for pod default/p (pod is not owner)"),
    ("the claim of an ephemeral volume that nothing controls",
     claim_pod(SCRATCH), [pvc("p-scratch")], [PV],
     "PVC default/p-scratch was not created for pod default/p (pod is not owner)"),
    ("a bound claim whose volume does not exist",
     claim_pod(DATA), [pvc("data", "gone")], [PV],
     'persistentvolume "gone" not found'),
    ("the first volume's claim is the one named",
     claim_pod(Volume("a", "persistentVolumeClaim", claim_name="first"), DATA),
     [pvc("data", deleting=True)], [PV],
     'persistentvolumeclaim "first" not found'),
    ("a missing claim comes before another claim's unbound volume",
     claim_pod(Volume("a", "persistentVolumeClaim", claim_name="unbound"), DATA),
     [pvc("unbound", "", phase="Pending", annotations={})], [PV],
     'persistentvolumeclaim "data" not found'),
    ("the claim of an ephemeral volume the pod controls",
     claim_pod(SCRATCH), [pvc("p-scratch", controller_uid=POD_UID)], [PV], None),
    ("a bound claim whose volume exists",
     claim_pod(DATA), [pvc("data")], [PV], None),
]


@pytest.mark.parametrize(
    ("pod", "pvcs", "pvs", "reason"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_unusable_claims_fit_no_node(
    pod: Pod, pvcs: list[PersistentVolumeClaim], pvs: list[PersistentVolume], reason: str | None
) -> None:
    snap = ClusterSnapshot(pvs=pvs, pvcs=pvcs, storage_classes=[FAST])
    snap.add_node(make_node("n1"))
    snap.add_node(make_node("n2"))
    for name in ("n1", "n2"):
        assert check_predicates(pod, snap.get(name), snap) == reason, name


ZONE_ONLY_CASES = [
    ("a claim that does not exist",
     claim_pod(DATA), [], 'persistentvolumeclaim "data" not found'),
    ("a bound claim whose volume does not exist",
     claim_pod(DATA), [pvc("data", "gone")], 'persistentvolume "gone" not found'),
    # VolumeZone reads only `persistentVolumeClaim` volumes, and none of the claim's state.
    ("the claim of an ephemeral volume, not made yet", claim_pod(SCRATCH), [], None),
    ("a claim being deleted", claim_pod(DATA), [pvc("data", deleting=True)], None),
]


@pytest.mark.parametrize(
    ("pod", "pvcs", "reason"),
    [c[1:] for c in ZONE_ONLY_CASES],
    ids=[c[0] for c in ZONE_ONLY_CASES],
)
def test_volume_zone_alone_names_what_it_reads(
    pod: Pod, pvcs: list[PersistentVolumeClaim], reason: str | None
) -> None:
    snap = ClusterSnapshot(pvs=[PV], pvcs=pvcs, storage_classes=[FAST], filters=ZONE_ONLY)
    snap.add_node(make_node("n1"))
    assert check_predicates(pod, snap.get("n1"), snap) == reason


def test_volume_binding_alone_names_a_missing_volume_in_its_filters_words() -> None:
    snap = ClusterSnapshot(pvs=[PV], pvcs=[pvc("data", "gone")], storage_classes=[FAST],
                           filters=BINDING_ONLY)
    snap.add_node(make_node("n1"))
    assert check_predicates(claim_pod(DATA), snap.get("n1"), snap) == (
        "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
    )


def test_a_snapshot_without_storage_objects_leaves_claims_unchecked() -> None:
    snap = ClusterSnapshot.from_objects(ClusterObjects(nodes=[make_node("n1")]))
    assert not snap.storage_known
    for pod in (claim_pod(DATA), claim_pod(SCRATCH)):
        assert check_predicates(pod, snap.get("n1"), snap) is None


def test_a_source_that_lists_storage_knows_a_claim_is_missing_without_holding_any() -> None:
    # The live cluster's caches list claims, volumes and classes: an empty list still
    # says the claim does not exist.
    objects = ClusterObjects(nodes=[make_node("n1")], storage_listed=True)
    snap = ClusterSnapshot.from_objects(objects)
    assert snap.storage_known
    assert check_predicates(claim_pod(DATA), snap.get("n1"), snap) == (
        'persistentvolumeclaim "data" not found'
    )


def test_a_snapshot_holding_any_storage_object_knows_claims() -> None:
    objects = ClusterObjects(nodes=[make_node("n1")], storage_classes=[FAST])
    assert objects.storage_known
    snap = ClusterSnapshot.from_objects(objects)
    assert check_predicates(claim_pod(DATA), snap.get("n1"), snap) == (
        'persistentvolumeclaim "data" not found'
    )


def test_claims_read_their_deletion_and_controller() -> None:
    raw = {
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "p-scratch", "namespace": "default",
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "uid-c"},
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": POD_UID,
                 "controller": True},
            ],
        },
        "spec": {"storageClassName": "fast"},
    }
    claim = parse_pvc(raw)
    assert claim.deleting
    assert claim.controller_uid == POD_UID
    plain = parse_pvc({"kind": "PersistentVolumeClaim",
                       "metadata": {"name": "data", "namespace": "default"}})
    assert not plain.deleting
    assert plain.controller_uid == ""


def test_a_claim_a_controller_makes_unmodelled_is_not_checked() -> None:
    # A simulated cluster does not model the claims the StatefulSet and ephemeral volume
    # controllers make for the pods it creates: those claims are taken to exist.
    snap = ClusterSnapshot(pvs=[PV], storage_classes=[FAST],
                           unmodelled_claims=frozenset({"default/data", "default/p-scratch"}))
    snap.add_node(make_node("n1"))
    assert check_predicates(claim_pod(DATA, SCRATCH), snap.get("n1"), snap) is None
    other = claim_pod(Volume("other", "persistentVolumeClaim", claim_name="other"))
    assert check_predicates(other, snap.get("n1"), snap) == (
        'persistentvolumeclaim "other" not found'
    )
