"""VolumeBinding and VolumeZone for static local volumes: claims bound to a volume pinned to a
node or a zone, pre-bound claims, and unbound claims of a WaitForFirstConsumer class that
only existing volumes can satisfy (kube-scheduler's `FindPodVolumes`); and VolumeZone on
its own (VolumeBinding disabled by the scheduler's configuration), as `getPVbyPod` reads a
pod's claims."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from clusterscaler.framework.schedulerconfig import SchedulerConfig
from clusterscaler.model import (
    LabelSelector,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Volume,
)
from clusterscaler.model.storage import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    NO_PROVISIONER,
    parse_pv,
    parse_pvc,
)
from clusterscaler.simulator import ClusterSnapshot, check_predicates, find_fitting_node
from clusterscaler.simulator.builders import make_node, make_pod, node_term
from clusterscaler.simulator.profile import configured_filters

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
GI = 1024**3
BIND = "node(s) didn't find available persistent volumes to bind"
AFFINITY = "node(s) had volume node affinity conflict"
IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ZONE_CONFLICT = "node(s) had no available volume zone"

LOCAL = StorageClass("local", NO_PROVISIONER, "WaitForFirstConsumer")
PROVISIONED = StorageClass(
    "zonal", "ebs.csi.aws.com", "WaitForFirstConsumer", (node_term(ZONE, "In", "b"),)
)


def pod_with(*claims: str, name: str = "p") -> Pod:
    return make_pod(name, volumes=tuple(
        Volume(f"v{i}", "persistentVolumeClaim", claim_name=c) for i, c in enumerate(claims)
    ))


def zonal(name: str, zone: str, size: int = 5, **kw: Any) -> PersistentVolume:
    """An available local volume of class `local` pinned to a zone (and labelled with it)."""
    return replace(PersistentVolume(
        name, storage_class="local", capacity=size * GI, labels={ZONE: zone},
        node_affinity=(node_term(ZONE, "In", zone),), phase="Available",
        access_modes=("ReadWriteOnce",),
    ), **kw)


def pinned(name: str, node: str, size: int = 5) -> PersistentVolume:
    """An available local volume of class `local` pinned to one node by hostname."""
    return PersistentVolume(
        name, storage_class="local", capacity=size * GI,
        node_affinity=(node_term(HOST, "In", node),), phase="Available",
        access_modes=("ReadWriteOnce",),
    )


def unbound(name: str, size: int = 1, **kw: Any) -> PersistentVolumeClaim:
    return replace(PersistentVolumeClaim(
        "default", name, uid=f"uid-{name}", storage_class="local", requested=size * GI,
        access_modes=("ReadWriteOnce",),
    ), **kw)


def bound(name: str, volume: str) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(
        "default", name, uid=f"uid-{name}", storage_class="local", volume_name=volume,
        phase="Bound", annotations={ANN_BIND_COMPLETED: "yes"}, requested=GI,
        access_modes=("ReadWriteOnce",),
    )


def node(name: str, zone: str) -> Node:
    return make_node(name, labels={ZONE: zone})


@dataclass
class Case:
    id: str
    claims: tuple[str, ...]
    pvcs: list[PersistentVolumeClaim]
    pvs: list[PersistentVolume]
    expected: dict[str, str | None]  # node name (n1 in zone a, n2 in zone b) -> reason
    classes: list[StorageClass] = field(default_factory=lambda: [LOCAL])


CASES = [
    Case("an unbound claim binds only where an available volume is",
         ("data",), [unbound("data")], [zonal("pv-b", "b")],
         {"n1": BIND, "n2": None}),
    Case("a volume pinned to a node serves no other node",
         ("data",), [unbound("data")], [pinned("pv-n1", "n1")],
         {"n1": None, "n2": BIND}),
    Case("each volume serves one claim of the pod",
         ("data", "logs"), [unbound("data"), unbound("logs")], [zonal("pv-b", "b")],
         {"n2": BIND}),
    Case("two volumes serve two claims",
         ("data", "logs"), [unbound("data"), unbound("logs")],
         [zonal("pv-b1", "b"), zonal("pv-b2", "b")],
         {"n1": BIND, "n2": None}),
    Case("a volume too small does not serve",
         ("data",), [unbound("data", size=8)], [zonal("pv-b", "b", size=5)],
         {"n2": BIND}),
    Case("a volume claimed by another claim does not serve",
         ("data",), [unbound("data")], [zonal("pv-b", "b", claim_ref="default/other")],
         {"n2": BIND}),
    Case("a volume pre-bound to the claim serves it wherever it accepts the node",
         ("data",), [unbound("data")],
         [zonal("pv-b", "b", claim_ref="default/data", phase="Bound")],
         {"n1": BIND, "n2": None}),
    Case("a volume pre-bound to a deleted claim of the same name does not serve",
         ("data",), [unbound("data")],
         [zonal("pv-b", "b", claim_ref="default/data", claim_uid="uid-old")],
         {"n2": BIND}),
    Case("a volume not Available does not serve",
         ("data",), [unbound("data")], [zonal("pv-b", "b", phase="Released")],
         {"n2": BIND}),
    Case("a volume being deleted does not serve",
         ("data",), [unbound("data")], [zonal("pv-b", "b", deleting=True)],
         {"n2": BIND}),
    Case("a volume of another class does not serve",
         ("data",), [unbound("data")],
         [PersistentVolume("pv-b", storage_class="other", capacity=5 * GI, phase="Available",
                           access_modes=("ReadWriteOnce",))],
         {"n2": BIND}, [LOCAL, StorageClass("other", NO_PROVISIONER, "WaitForFirstConsumer")]),
    Case("a volume without the claim's access mode does not serve",
         ("data",), [unbound("data")],
         [PersistentVolume("pv-b", storage_class="local", capacity=5 * GI, phase="Available",
                           access_modes=("ReadOnlyMany",))],
         {"n2": BIND}),
    Case("a volume of another volume mode does not serve",
         ("data",), [unbound("data", volume_mode="Block")], [zonal("pv-b", "b")],
         {"n2": BIND}),
    Case("a volume the claim's selector rejects does not serve",
         ("data",), [unbound("data", selector=LabelSelector((("tier", "fast"),)))],
         [zonal("pv-b", "b")],
         {"n2": BIND}),
    Case("a claim with a selected node binds only there",
         ("data",), [unbound("data", annotations={ANN_SELECTED_NODE: "n1"})],
         [zonal("pv-b", "b")],
         {"n2": BIND}),
    Case("a class that provisions serves where its topologies allow",
         ("data",), [unbound("data", storage_class="zonal")], [],
         {"n1": BIND, "n2": None}, [PROVISIONED]),
    Case("a bound claim's volume decides by its node affinity",
         ("data",), [bound("data", "pv-b")], [zonal("pv-b", "b", claim_ref="default/data",
                                                    phase="Bound")],
         {"n1": AFFINITY, "n2": None}),
    Case("a bound claim's volume decides by its zone label",
         ("data",), [bound("data", "pv-b")],
         [PersistentVolume("pv-b", storage_class="local", capacity=5 * GI, labels={ZONE: "b"},
                           claim_ref="default/data", phase="Bound")],
         {"n1": ZONE_CONFLICT, "n2": None}),
    Case("an unbound claim of a class that binds at once fails everywhere",
         ("data",), [unbound("data", storage_class="fast")], [zonal("pv-b", "b")],
         {"n1": IMMEDIATE, "n2": IMMEDIATE}, [StorageClass("fast", "ebs.csi.aws.com")]),
    Case("a claim that only names its volume is not bound yet",
         ("data",),
         [PersistentVolumeClaim("default", "data", storage_class="local", volume_name="pv-b",
                                requested=GI, access_modes=("ReadWriteOnce",))],
         [zonal("pv-b", "b", claim_ref="default/data")],
         {"n1": IMMEDIATE, "n2": IMMEDIATE}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_volume_binding(case: Case) -> None:
    snap = ClusterSnapshot(pvs=case.pvs, pvcs=case.pvcs, storage_classes=case.classes)
    snap.add_node(node("n1", "a"))
    snap.add_node(node("n2", "b"))
    pod = pod_with(*case.claims)
    for name, reason in case.expected.items():
        assert check_predicates(pod, snap.get(name), snap) == reason, name


ZONE_ONLY = configured_filters(SchedulerConfig(disabled_filters=frozenset({"VolumeBinding"})))
FAST = StorageClass("fast", "ebs.csi.aws.com")


def ephemeral_pod(name: str = "p") -> Pod:
    """A pod with one generic ephemeral volume: its claim is `<pod>-scratch`."""
    return make_pod(name, volumes=(Volume("scratch", "ephemeral"),))


ZONE_ONLY_CASES = [
    ("an unbound claim of a class that binds at once names no volume",
     pod_with("data"), [unbound("data", storage_class="fast")], [FAST],
     "PersistentVolume had no name"),
    ("an unbound claim without a class",
     pod_with("data"), [unbound("data", storage_class="")], [FAST],
     "PersistentVolumeClaim had no pv name and storageClass name"),
    ("an unbound claim of a class that does not exist",
     pod_with("data"), [unbound("data", storage_class="gone")], [FAST],
     'storageclass.storage.k8s.io "gone" not found'),
    ("an unbound claim of a WaitForFirstConsumer class is VolumeBinding's",
     pod_with("data"), [unbound("data")], [LOCAL], None),
    ("the claim of an ephemeral volume is not VolumeZone's",
     ephemeral_pod(), [unbound("p-scratch", storage_class="fast")], [FAST], None),
]


@pytest.mark.parametrize(
    ("pod", "pvcs", "classes", "reason"),
    [c[1:] for c in ZONE_ONLY_CASES],
    ids=[c[0] for c in ZONE_ONLY_CASES],
)
def test_volume_zone_without_volume_binding(
    pod: Pod, pvcs: list[PersistentVolumeClaim], classes: list[StorageClass], reason: str | None
) -> None:
    snap = ClusterSnapshot(pvcs=pvcs, storage_classes=classes, filters=ZONE_ONLY)
    snap.add_node(node("n1", "a"))
    snap.add_node(node("n2", "b"))
    for name in ("n1", "n2"):
        assert check_predicates(pod, snap.get(name), snap) == reason, name


def test_volume_zone_reads_the_zone_of_a_volume_a_claim_only_names() -> None:
    claim = PersistentVolumeClaim("default", "data", storage_class="fast", volume_name="pv-b",
                                  requested=GI, access_modes=("ReadWriteOnce",))
    snap = ClusterSnapshot(pvs=[zonal("pv-b", "b", claim_ref="default/data")], pvcs=[claim],
                           storage_classes=[FAST], filters=ZONE_ONLY)
    snap.add_node(node("n1", "a"))
    snap.add_node(node("n2", "b"))
    assert check_predicates(pod_with("data"), snap.get("n1"), snap) == ZONE_CONFLICT
    assert check_predicates(pod_with("data"), snap.get("n2"), snap) is None


@pytest.mark.parametrize("filters", [None, ZONE_ONLY], ids=["default", "zone-only"])
def test_volume_zone_reads_no_ephemeral_volume(filters: Any) -> None:
    # kube-scheduler's VolumeZone reads the pod's persistentVolumeClaim volumes only; the
    # volume has no node affinity for VolumeBinding to check.
    pv = PersistentVolume("pv-b", storage_class="local", capacity=5 * GI, labels={ZONE: "b"},
                          claim_ref="default/p-scratch", phase="Bound")
    # The ephemeral volume controller made the claim for the pod: the pod controls it.
    claim = replace(bound("p-scratch", "pv-b"), controller_uid=ephemeral_pod().uid)
    snap = ClusterSnapshot(pvs=[pv], pvcs=[claim], storage_classes=[LOCAL], filters=filters)
    snap.add_node(node("n1", "a"))
    assert check_predicates(ephemeral_pod(), snap.get("n1"), snap) is None


def test_a_volume_one_pod_was_placed_with_stays_available_to_the_next() -> None:
    """As Cluster Autoscaler, which runs VolumeBinding without its Reserve step, the
    simulation binds no volume: two pods, each with its own claim, both fit beside the one
    volume of their zone (kube-scheduler then binds one and leaves the other pending)."""
    snap = ClusterSnapshot(pvs=[zonal("pv-b", "b")], pvcs=[unbound("c1"), unbound("c2")],
                           storage_classes=[LOCAL])
    snap.add_node(node("n1", "a"))
    snap.add_node(node("n2", "b"))
    first = pod_with("c1", name="p1")
    assert find_fitting_node(first, snap) == "n2"
    snap.add_pod(first, "n2")
    assert find_fitting_node(pod_with("c2", name="p2"), snap) == "n2"


def test_the_binding_fields_are_read_from_the_objects() -> None:
    pv = parse_pv({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pv-b", "deletionTimestamp": "2026-11-27T10:00:00Z"},
        "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
                 "volumeMode": "Block", "storageClassName": "local",
                 "claimRef": {"namespace": "ns", "name": "data", "uid": "u1"},
                 "local": {"path": "/mnt/disk"}},
        "status": {"phase": "Available"},
    })
    assert (pv.capacity, pv.access_modes, pv.volume_mode, pv.deleting) == (
        5 * GI, ("ReadWriteOnce",), "Block", True)
    assert (pv.claim_ref, pv.claim_uid) == ("ns/data", "u1")
    claim = parse_pvc({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "ns", "uid": "u1"},
        "spec": {"volumeName": "pv-b", "selector": {"matchLabels": {"tier": "fast"}},
                 "resources": {"requests": {"storage": "1Gi"}}},
    })
    assert pv.bound_to(claim) and not claim.bound
    assert claim.selector is not None and claim.selector.matches({"tier": "fast"})
    assert claim.volume_mode == "Filesystem"
    completed = parse_pvc({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "ns",
                     "annotations": {ANN_BIND_COMPLETED: "yes"}},
        "spec": {"volumeName": "pv-b"},
    })
    assert completed.bound
