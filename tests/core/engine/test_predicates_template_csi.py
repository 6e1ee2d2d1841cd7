"""CSI attach limits of template nodes (`Node.csi_volume_limits`).

A provider that knows how many volumes of a CSI driver a new node may attach (Cluster API's
`capacity.cluster-autoscaler.kubernetes.io/csi-driver`) states it on the template node, as
its CSINode would once the node exists; copies of the template keep it, and the
NodeVolumeLimits predicate counts volumes against it. A node's real CSINode wins.
"""

from __future__ import annotations

from clusterscaler.model import (
    CSINode,
    NodeInfo,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Volume,
)
from clusterscaler.simulator import check_predicates
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler.simulator.snapshot import ClusterSnapshot
from clusterscaler.simulator.templatecopier import TemplateCopier

EBS = "ebs.csi.aws.com"
LIMIT = "node(s) exceed max volume count"


def claim_pod(name: str, claim: str) -> Pod:
    return make_pod(name, "100m", volumes=(Volume("d", "persistentVolumeClaim", claim_name=claim),))


def storage(*csinodes: CSINode) -> ClusterSnapshot:
    """Claims c0..c3: c0 and c1 bound to EBS volumes, c2 and c3 still to be provisioned."""
    return ClusterSnapshot(
        pvs=[PersistentVolume(f"pv-{i}", csi_driver=EBS) for i in range(2)],
        pvcs=[
            *(PersistentVolumeClaim("default", f"c{i}", volume_name=f"pv-{i}", phase="Bound") for i in range(2)),
            *(PersistentVolumeClaim("default", f"c{i}", storage_class="gp3") for i in (2, 3)),
        ],
        storage_classes=[StorageClass("gp3", EBS, "WaitForFirstConsumer")],
        csinodes=list(csinodes),
    )


def test_copies_of_a_template_node_count_volumes_against_its_limits() -> None:
    template = make_node("tpl", cpu="8").with_(csi_volume_limits={EBS: 2})
    copier = TemplateCopier(NodeInfo(template))
    snap = storage()
    node, pods = copier.copy("tpl-1")
    assert node.csi_volume_limits == {EBS: 2}
    snap.add_node(node, pods)
    for i, claim in enumerate(("c0", "c2")):
        pod = claim_pod(f"p{i}", claim)
        assert check_predicates(pod, snap.get("tpl-1"), snap) is None
        snap.add_pod(pod, "tpl-1")
    # A third volume, bound or to be provisioned, does not fit; a pod without one still does.
    assert check_predicates(claim_pod("p2", "c1"), snap.get("tpl-1"), snap) == LIMIT
    assert check_predicates(claim_pod("p3", "c3"), snap.get("tpl-1"), snap) == LIMIT
    assert check_predicates(make_pod("plain", "100m"), snap.get("tpl-1"), snap) is None
    # The same volume again is no new attachment.
    assert check_predicates(claim_pod("again", "c0"), snap.get("tpl-1"), snap) is None
    # Another copy of the template has room of its own.
    other, _ = copier.copy("tpl-2")
    snap.add_node(other)
    assert check_predicates(claim_pod("p2", "c1"), snap.get("tpl-2"), snap) is None


def test_no_limit_stated_and_other_drivers_are_not_limited() -> None:
    snap = storage()
    snap.add_node(make_node("free", cpu="8").with_(csi_volume_limits={EBS: None}))
    snap.add_node(make_node("efs-only", cpu="8").with_(csi_volume_limits={"efs.csi.aws.com": 0}))
    snap.add_node(make_node("plain", cpu="8"))
    for name in ("free", "efs-only", "plain"):
        for i, claim in enumerate(("c0", "c1", "c2")):
            pod = claim_pod(f"{name}-{i}", claim)
            assert check_predicates(pod, snap.get(name), snap) is None
            snap.add_pod(pod, name)


def test_a_real_csinode_wins_over_the_stated_limits() -> None:
    snap = storage(CSINode("n1", {EBS: 1}))
    snap.add_node(make_node("n1", cpu="8").with_(csi_volume_limits={EBS: 5}))
    snap.add_pod(claim_pod("p0", "c0"), "n1")
    assert check_predicates(claim_pod("p1", "c1"), snap.get("n1"), snap) == LIMIT
