from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from clusterscaler.model import (
    CSINode,
    HostPort,
    LabelSelector,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Taint,
    Toleration,
    Volume,
)
from clusterscaler.simulator import (
    ClusterSnapshot,
    check_predicates,
    failing_predicates,
    find_fitting_node,
)
from clusterscaler.simulator.builders import affinity_term, make_node, make_pod, node_term, spread
from clusterscaler.simulator.scheduler import (
    HintingSimulator,
    format_unschedulable,
    unschedulable_reasons,
)
from hypothesis import given, settings
from hypothesis import strategies as st

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


@dataclass
class Case:
    id: str
    pod: Pod
    nodes: list[tuple[Node, list[Pod]]]
    target: str
    expected: str | None
    storage: dict = field(default_factory=dict)


def zn(name: str, zone: str, **kw) -> Node:
    return make_node(name, labels={ZONE: zone, **kw.pop("labels", {})}, **kw)


WEB = {"app": "web"}
GPU_TAINT = Taint("dedicated", "gpu", "NoSchedule")

CASES = [
    Case("fits", make_pod("p", "1", "1Gi"), [(make_node("n1", "2", "2Gi"), [])], "n1", None),
    Case(
        "insufficient cpu",
        make_pod("p", "3"),
        [(make_node("n1", "2"), [])],
        "n1",
        "Insufficient cpu",
    ),
    Case(
        "insufficient cpu counts existing pods",
        make_pod("p", "1500m"),
        [(make_node("n1", "2"), [make_pod("e", "1")])],
        "n1",
        "Insufficient cpu",
    ),
    Case(
        "insufficient cpu and memory",
        make_pod("p", "3", "5Gi"),
        [(make_node("n1", "2", "4Gi"), [])],
        "n1",
        "Insufficient cpu, Insufficient memory",
    ),
    Case(
        "insufficient gpu",
        make_pod("p", extended={"nvidia.com/gpu": 1}),
        [(make_node("n1"), [])],
        "n1",
        "Insufficient nvidia.com/gpu",
    ),
    Case(
        "gpu fits",
        make_pod("p", extended={"nvidia.com/gpu": 1}),
        [(make_node("n1", extended={"nvidia.com/gpu": 1}), [])],
        "n1",
        None,
    ),
    Case(
        "ephemeral storage",
        make_pod("p", ephemeral_storage="20Gi"),
        [(make_node("n1", ephemeral_storage="10Gi"), [])],
        "n1",
        "Insufficient ephemeral-storage",
    ),
    Case(
        "too many pods",
        make_pod("p"),
        [(make_node("n1", pods=1), [make_pod("e")])],
        "n1",
        "Too many pods",
    ),
    Case(
        "unschedulable node",
        make_pod("p"),
        [(make_node("n1", unschedulable=True), [])],
        "n1",
        "node(s) were unschedulable",
    ),
    Case(
        "unschedulable tolerated",
        make_pod(
            "p",
            tolerations=[
                Toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule")
            ],
        ),
        [(make_node("n1", unschedulable=True), [])],
        "n1",
        None,
    ),
    Case(
        "node name",
        make_pod("p", node_name="other"),
        [(make_node("n1"), [])],
        "n1",
        "node(s) didn't match the requested node name",
    ),
    Case(
        "untolerated taint",
        make_pod("p"),
        [(make_node("n1", taints=[GPU_TAINT]), [])],
        "n1",
        "node(s) had untolerated taint {dedicated: gpu}",
    ),
    Case(
        "tolerated taint",
        make_pod("p", tolerations=[Toleration("dedicated", "Equal", "gpu", "NoSchedule")]),
        [(make_node("n1", taints=[GPU_TAINT]), [])],
        "n1",
        None,
    ),
    Case(
        "NoExecute blocks",
        make_pod("p"),
        [(make_node("n1", taints=[Taint("k", "", "NoExecute")]), [])],
        "n1",
        "node(s) had untolerated taint {k: }",
    ),
    Case(
        "PreferNoSchedule never blocks",
        make_pod("p"),
        [(make_node("n1", taints=[Taint("k", "v", "PreferNoSchedule")]), [])],
        "n1",
        None,
    ),
    Case(
        "nodeSelector mismatch",
        make_pod("p", node_selector={"disk": "ssd"}),
        [(make_node("n1"), [])],
        "n1",
        "node(s) didn't match Pod's node affinity/selector",
    ),
    Case(
        "nodeSelector match",
        make_pod("p", node_selector={"disk": "ssd"}),
        [(make_node("n1", labels={"disk": "ssd"}), [])],
        "n1",
        None,
    ),
    Case(
        "affinity In",
        make_pod("p", required_node_terms=[node_term(ZONE, "In", "a", "b")]),
        [(zn("n1", "b"), [])],
        "n1",
        None,
    ),
    Case(
        "affinity NotIn",
        make_pod("p", required_node_terms=[node_term(ZONE, "NotIn", "a")]),
        [(zn("n1", "a"), [])],
        "n1",
        "node(s) didn't match Pod's node affinity/selector",
    ),
    Case(
        "affinity Exists missing",
        make_pod("p", required_node_terms=[node_term("gpu", "Exists")]),
        [(make_node("n1"), [])],
        "n1",
        "node(s) didn't match Pod's node affinity/selector",
    ),
    Case(
        "affinity DoesNotExist",
        make_pod("p", required_node_terms=[node_term("gpu", "DoesNotExist")]),
        [(make_node("n1"), [])],
        "n1",
        None,
    ),
    Case(
        "affinity Gt",
        make_pod("p", required_node_terms=[node_term("cores", "Gt", "8")]),
        [(make_node("n1", labels={"cores": "16"}), [])],
        "n1",
        None,
    ),
    Case(
        "affinity Lt fails",
        make_pod("p", required_node_terms=[node_term("cores", "Lt", "8")]),
        [(make_node("n1", labels={"cores": "16"}), [])],
        "n1",
        "node(s) didn't match Pod's node affinity/selector",
    ),
    Case(
        "terms are ORed",
        make_pod(
            "p", required_node_terms=[node_term(ZONE, "In", "x"), node_term("disk", "Exists")]
        ),
        [(make_node("n1", labels={"disk": "hdd"}), [])],
        "n1",
        None,
    ),
    Case(
        "matchFields metadata.name",
        make_pod(
            "p",
            required_node_terms=[
                node_term("x", "DoesNotExist").__class__(
                    match_fields=node_term("metadata.name", "In", "n2").match_expressions
                )
            ],
        ),
        [(make_node("n1"), []), (make_node("n2"), [])],
        "n1",
        "node(s) didn't match Pod's node affinity/selector",
    ),
    Case(
        "host port conflict",
        make_pod("p", host_ports=[8080]),
        [(make_node("n1"), [make_pod("e", host_ports=[8080])])],
        "n1",
        "node(s) didn't have free ports for the requested pod ports",
    ),
    Case(
        "host port other protocol",
        make_pod("p", host_ports=[HostPort(53, "UDP")]),
        [(make_node("n1"), [make_pod("e", host_ports=[HostPort(53, "TCP")])])],
        "n1",
        None,
    ),
    Case(
        "host port distinct IPs",
        make_pod("p", host_ports=[HostPort(80, "TCP", "10.0.0.1")]),
        [(make_node("n1"), [make_pod("e", host_ports=[HostPort(80, "TCP", "10.0.0.2")])])],
        "n1",
        None,
    ),
    Case(
        "host port wildcard IP conflicts",
        make_pod("p", host_ports=[HostPort(80, "TCP", "10.0.0.1")]),
        [(make_node("n1"), [make_pod("e", host_ports=[80])])],
        "n1",
        "node(s) didn't have free ports for the requested pod ports",
    ),
    Case(
        "anti-affinity hostname",
        make_pod("p", labels=WEB, anti_affinity=[affinity_term(HOST, WEB)]),
        [(make_node("n1"), [make_pod("e", labels=WEB)])],
        "n1",
        "node(s) didn't match pod anti-affinity rules",
    ),
    Case(
        "anti-affinity other namespace ignored",
        make_pod("p", labels=WEB, anti_affinity=[affinity_term(HOST, WEB)]),
        [(make_node("n1"), [make_pod("e", labels=WEB, namespace="other")])],
        "n1",
        None,
    ),
    Case(
        "anti-affinity namespaceSelector",
        make_pod(
            "p",
            labels=WEB,
            anti_affinity=[
                affinity_term(HOST, WEB, namespaces=(), namespace_selector=LabelSelector())
            ],
        ),
        [(make_node("n1"), [make_pod("e", labels=WEB, namespace="other")])],
        "n1",
        "node(s) didn't match pod anti-affinity rules",
    ),
    Case(
        "anti-affinity namespaceSelector by namespace name label",
        make_pod(
            "p",
            labels=WEB,
            anti_affinity=[
                affinity_term(
                    HOST,
                    WEB,
                    namespaces=(),
                    namespace_selector=LabelSelector((("kubernetes.io/metadata.name", "other"),)),
                )
            ],
        ),
        [(make_node("n1"), [make_pod("e", labels=WEB, namespace="other")])],
        "n1",
        "node(s) didn't match pod anti-affinity rules",
    ),
    Case(
        "anti-affinity zone blocks other node in zone",
        make_pod("p", labels=WEB, anti_affinity=[affinity_term(ZONE, WEB)]),
        [(zn("n1", "a"), [make_pod("e", labels=WEB)]), (zn("n2", "a"), []), (zn("n3", "b"), [])],
        "n2",
        "node(s) didn't match pod anti-affinity rules",
    ),
    Case(
        "anti-affinity zone other zone ok",
        make_pod("p", labels=WEB, anti_affinity=[affinity_term(ZONE, WEB)]),
        [(zn("n1", "a"), [make_pod("e", labels=WEB)]), (zn("n3", "b"), [])],
        "n3",
        None,
    ),
    Case(
        "existing pod anti-affinity is symmetric",
        make_pod("p", labels=WEB),
        [
            (
                make_node("n1"),
                [make_pod("e", labels={"app": "db"}, anti_affinity=[affinity_term(HOST, WEB)])],
            )
        ],
        "n1",
        "node(s) didn't satisfy existing pods anti-affinity rules",
    ),
    Case(
        "affinity needs a matching pod in the domain",
        make_pod("p", affinity=[affinity_term(ZONE, {"app": "db"})]),
        [(zn("n1", "a"), [make_pod("db", labels={"app": "db"})]), (zn("n2", "b"), [])],
        "n2",
        "node(s) didn't match pod affinity rules",
    ),
    Case(
        "affinity satisfied in zone",
        make_pod("p", affinity=[affinity_term(ZONE, {"app": "db"})]),
        [(zn("n1", "a"), [make_pod("db", labels={"app": "db"})]), (zn("n2", "a"), [])],
        "n2",
        None,
    ),
    Case(
        "first pod of a self-affine group goes anywhere",
        make_pod("p", labels=WEB, affinity=[affinity_term(ZONE, WEB)]),
        [(zn("n1", "a"), [])],
        "n1",
        None,
    ),
    Case(
        "affinity without matches and not self-matching",
        make_pod("p", affinity=[affinity_term(ZONE, {"app": "db"})]),
        [(zn("n1", "a"), [])],
        "n1",
        "node(s) didn't match pod affinity rules",
    ),
    Case(
        "affinity node lacks topology key",
        make_pod("p", labels=WEB, affinity=[affinity_term(ZONE, WEB)]),
        [(make_node("n1"), [])],
        "n1",
        "node(s) didn't match pod affinity rules",
    ),
    Case(
        "spread skew exceeded",
        make_pod("p", labels=WEB, topology_spread=[spread(ZONE, WEB)]),
        [(zn("n1", "a"), [make_pod("e1", labels=WEB)]), (zn("n2", "b"), [])],
        "n1",
        "node(s) didn't match pod topology spread constraints",
    ),
    Case(
        "spread to the empty zone",
        make_pod("p", labels=WEB, topology_spread=[spread(ZONE, WEB)]),
        [(zn("n1", "a"), [make_pod("e1", labels=WEB)]), (zn("n2", "b"), [])],
        "n2",
        None,
    ),
    Case(
        "spread maxSkew 2",
        make_pod("p", labels=WEB, topology_spread=[spread(ZONE, WEB, 2)]),
        [(zn("n1", "a"), [make_pod("e1", labels=WEB)]), (zn("n2", "b"), [])],
        "n1",
        None,
    ),
    Case(
        "spread missing label",
        make_pod("p", labels=WEB, topology_spread=[spread(ZONE, WEB)]),
        [(make_node("n1"), [])],
        "n1",
        "node(s) didn't match pod topology spread constraints (missing required label)",
    ),
    Case(
        "spread minDomains forces the minimum to zero",
        make_pod("p", labels=WEB, topology_spread=[spread(ZONE, WEB, min_domains=3)]),
        [
            (zn("n1", "a"), [make_pod("e1", labels=WEB)]),
            (zn("n2", "b"), [make_pod("e2", labels=WEB)]),
        ],
        "n1",
        "node(s) didn't match pod topology spread constraints",
    ),
    Case(
        "spread ignores domains the pod cannot use (nodeAffinityPolicy Honor)",
        make_pod("p", labels=WEB, node_selector={"pool": "x"}, topology_spread=[spread(ZONE, WEB)]),
        [(zn("n1", "a", labels={"pool": "x"}), [make_pod("e1", labels=WEB)]), (zn("n2", "b"), [])],
        "n1",
        None,
    ),
    Case(
        "spread counts tainted domains unless nodeTaintsPolicy Honor",
        make_pod("p", labels=WEB, topology_spread=[spread(ZONE, WEB)]),
        [(zn("n1", "a"), [make_pod("e1", labels=WEB)]), (zn("n2", "b", taints=[GPU_TAINT]), [])],
        "n1",
        "node(s) didn't match pod topology spread constraints",
    ),
    Case(
        "spread nodeTaintsPolicy Honor skips tainted domains",
        make_pod("p", labels=WEB, topology_spread=[spread(ZONE, WEB, node_taints_policy="Honor")]),
        [(zn("n1", "a"), [make_pod("e1", labels=WEB)]), (zn("n2", "b", taints=[GPU_TAINT]), [])],
        "n1",
        None,
    ),
    Case(
        "ScheduleAnyway never blocks",
        make_pod(
            "p",
            labels=WEB,
            topology_spread=[spread(ZONE, WEB, when_unsatisfiable="ScheduleAnyway")],
        ),
        [
            (zn("n1", "a"), [make_pod("e1", labels=WEB), make_pod("e2", labels=WEB)]),
            (zn("n2", "b"), []),
        ],
        "n1",
        None,
    ),
    Case(
        "volume zone",
        make_pod("p", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),)),
        [(zn("n1", "a"), [])],
        "n1",
        "node(s) had no available volume zone",
        {"pv_labels": {ZONE: "b"}},
    ),
    Case(
        "volume zone multi-zone PV",
        make_pod("p", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),)),
        [(zn("n1", "a"), [])],
        "n1",
        None,
        {"pv_labels": {ZONE: "b__a"}},
    ),
    Case(
        "volume node affinity",
        make_pod("p", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),)),
        [(zn("n1", "a"), [])],
        "n1",
        "node(s) had volume node affinity conflict",
        {"pv_affinity": (node_term(ZONE, "In", "b"),)},
    ),
    Case(
        "unbound WaitForFirstConsumer claim fits",
        make_pod("p", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),)),
        [(zn("n1", "a"), [])],
        "n1",
        None,
        {"unbound": "WaitForFirstConsumer"},
    ),
    Case(
        "unbound Immediate claim",
        make_pod("p", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),)),
        [(zn("n1", "a"), [])],
        "n1",
        "pod has unbound immediate PersistentVolumeClaims",
        {"unbound": "Immediate"},
    ),
    Case(
        "ReadWriteOncePod claim in use",
        make_pod("p", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),)),
        [
            (zn("n1", "a"), []),
            (
                zn("n2", "a"),
                [make_pod("e", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),))],
            ),
        ],
        "n1",
        "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode",
        {"rwop": True},
    ),
    Case(
        "ReadWriteOncePod claim free",
        make_pod("p", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),)),
        [(zn("n1", "a"), [])],
        "n1",
        None,
        {"rwop": True},
    ),
    Case(
        "csi volume limit",
        make_pod("p", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),)),
        [
            (
                zn("n1", "a"),
                [
                    make_pod(
                        "e", volumes=(Volume("d", "persistentVolumeClaim", claim_name="other"),)
                    )
                ],
            )
        ],
        "n1",
        "node(s) exceed max volume count",
        {"csi_limit": 1},
    ),
    Case(
        "csi volume limit not reached",
        make_pod("p", volumes=(Volume("d", "persistentVolumeClaim", claim_name="data"),)),
        [
            (
                zn("n1", "a"),
                [
                    make_pod(
                        "e", volumes=(Volume("d", "persistentVolumeClaim", claim_name="other"),)
                    )
                ],
            )
        ],
        "n1",
        None,
        {"csi_limit": 2},
    ),
]


def build(case: Case) -> ClusterSnapshot:
    storage = case.storage
    pvs, pvcs, classes, csinodes = [], [], [], []
    if storage:
        if "unbound" in storage:
            pvcs.append(PersistentVolumeClaim("default", "data", storage_class="sc"))
            classes.append(StorageClass("sc", "ebs.csi.aws.com", storage["unbound"]))
        else:
            modes = ("ReadWriteOncePod",) if storage.get("rwop") else ("ReadWriteOnce",)
            pvcs.append(
                PersistentVolumeClaim(
                    "default", "data", volume_name="pv-data", phase="Bound", access_modes=modes
                )
            )
            pvs.append(
                PersistentVolume(
                    "pv-data",
                    labels=storage.get("pv_labels", {}),
                    node_affinity=storage.get("pv_affinity"),
                    csi_driver="ebs.csi.aws.com",
                )
            )
            pvcs.append(
                PersistentVolumeClaim("default", "other", volume_name="pv-other", phase="Bound")
            )
            pvs.append(PersistentVolume("pv-other", csi_driver="ebs.csi.aws.com"))
        if "csi_limit" in storage:
            csinodes.append(CSINode("n1", {"ebs.csi.aws.com": storage["csi_limit"]}))
    snap = ClusterSnapshot(pvs=pvs, pvcs=pvcs, storage_classes=classes, csinodes=csinodes)
    for node, pods in case.nodes:
        snap.add_node(node, pods)
    return snap


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_predicate(case: Case):
    snap = build(case)
    assert check_predicates(case.pod, snap.get(case.target), snap) == case.expected
    # The full per-filter listing agrees with the first-reason answer.
    failing = failing_predicates(case.pod, snap.get(case.target), snap)
    if case.expected is None:
        assert failing == {}
    else:
        assert case.expected in failing.values()


def test_spread_counts_update_as_pods_are_placed():
    snap = ClusterSnapshot()
    for name, zone in (("n1", "a"), ("n2", "b"), ("n3", "c")):
        snap.add_node(zn(name, zone))
    placed = []
    for i in range(9):
        pod = make_pod(f"w{i}", labels=WEB, topology_spread=[spread(ZONE, WEB)])
        node = find_fitting_node(pod, snap)
        assert node is not None
        snap.add_pod(pod, node)
        placed.append(node)
    assert sorted(placed.count(n) for n in ("n1", "n2", "n3")) == [3, 3, 3]


def test_anti_affinity_one_per_node_then_unschedulable():
    snap = ClusterSnapshot()
    for i in range(3):
        snap.add_node(make_node(f"n{i}"))
    for i in range(3):
        pod = make_pod(f"w{i}", labels=WEB, anti_affinity=[affinity_term(HOST, WEB)])
        node = find_fitting_node(pod, snap)
        assert node is not None
        snap.add_pod(pod, node)
    extra = make_pod("w9", labels=WEB, anti_affinity=[affinity_term(HOST, WEB)])
    assert find_fitting_node(extra, snap) is None
    reasons = unschedulable_reasons(extra, snap)
    assert reasons == {"node(s) didn't match pod anti-affinity rules": 3}
    assert format_unschedulable(reasons, 3) == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    )


def test_find_fitting_node_prefers_hint_and_filter():
    snap = ClusterSnapshot()
    snap.add_node(make_node("n1"))
    snap.add_node(make_node("n2"))
    pod = make_pod("p", "1")
    assert find_fitting_node(pod, snap) == "n1"
    assert find_fitting_node(pod, snap, hint="n2") == "n2"
    assert find_fitting_node(pod, snap, node_filter=lambda ni: ni.name != "n1") == "n2"


class CountingSnapshot(ClusterSnapshot):
    """Counts how often predicates look at other pods."""

    scans = 0

    def pods(self):
        self.scans += 1
        return super().pods()

    def pods_in_namespace(self, namespace):
        self.scans += 1
        return super().pods_in_namespace(namespace)

    def anti_affinity_pods(self):
        self.scans += 1
        return super().anti_affinity_pods()

    def watch(self, key, build, **kwargs):
        # A new watcher is filled from every node and pod of the snapshot.
        if key not in self._watchers:
            self.scans += 1
        return super().watch(key, build, **kwargs)


def test_pods_without_affinity_do_not_scan_other_pods():
    snap = CountingSnapshot()
    snap.add_node(
        make_node("n1", "64", "256Gi", 1000),
        [make_pod(f"e{i}", "1m", labels=WEB) for i in range(200)],
    )
    assert check_predicates(make_pod("p", "1"), snap.get("n1"), snap) is None
    assert snap.scans == 0
    # A pod with anti-affinity does look (the counter works).
    assert check_predicates(
        make_pod("q", anti_affinity=[affinity_term(HOST, WEB)]), snap.get("n1"), snap
    )
    assert snap.scans > 0


def test_unschedulable_summary_counts_each_missing_resource():
    snap = ClusterSnapshot()
    snap.add_node(make_node("n1", "1", "1Gi"))
    snap.add_node(make_node("n2", "1", "8Gi"))
    snap.add_node(make_node("n3", "8", "8Gi", taints=[GPU_TAINT]))
    pod = make_pod("p", "2", "2Gi")
    reasons = unschedulable_reasons(pod, snap)
    assert reasons == {
        "Insufficient cpu": 2,
        "Insufficient memory": 1,
        "node(s) had untolerated taint {dedicated: gpu}": 1,
    }
    assert format_unschedulable(reasons, 3) == (
        "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint "
        "{dedicated: gpu}, 2 Insufficient cpu."
    )


@settings(max_examples=40, deadline=None)
@given(
    zones=st.lists(st.sampled_from("abcd"), min_size=1, max_size=8),
    pods=st.integers(1, 25),
    max_skew=st.integers(1, 3),
)
def test_spread_placements_keep_skew_within_max(zones, pods, max_skew):
    snap = ClusterSnapshot()
    for i, zone in enumerate(zones):
        snap.add_node(zn(f"n{i}", zone, cpu="64"))
    domains = sorted(set(zones))
    for i in range(pods):
        pod = make_pod(f"w{i}", "1", labels=WEB, topology_spread=[spread(ZONE, WEB, max_skew)])
        node = find_fitting_node(pod, snap)
        assert node is not None  # some zone is always at the minimum
        snap.add_pod(pod, node)
        counts = {d: 0 for d in domains}
        for _pod, node_name in snap.pods():
            counts[snap.get(node_name).node.labels[ZONE]] += 1
        assert max(counts.values()) - min(counts.values()) <= max_skew


@settings(max_examples=40, deadline=None)
@given(nodes=st.integers(1, 6), pods=st.integers(1, 10))
def test_hostname_anti_affinity_never_shares_a_node(nodes, pods):
    snap = ClusterSnapshot()
    for i in range(nodes):
        snap.add_node(make_node(f"n{i}"))
    placed = 0
    for i in range(pods):
        pod = make_pod(f"w{i}", labels=WEB, anti_affinity=[affinity_term(HOST, WEB)])
        node = find_fitting_node(pod, snap)
        if node is None:
            break
        snap.add_pod(pod, node)
        placed += 1
    assert placed == min(nodes, pods)
    assert all(len(ni.pods) <= 1 for ni in snap.node_infos())


@st.composite
def scenario(draw):
    zones = ["a", "b"]
    snap = ClusterSnapshot()
    for i in range(draw(st.integers(1, 4))):
        taints = [GPU_TAINT] if draw(st.booleans()) else []
        node = make_node(
            f"n{i}",
            draw(st.sampled_from(["1", "2", "4"])),
            draw(st.sampled_from(["1Gi", "4Gi"])),
            draw(st.sampled_from([2, 110])),
            labels={
                ZONE: draw(st.sampled_from(zones)),
                **({"disk": "ssd"} if draw(st.booleans()) else {}),
            },
            taints=taints,
            unschedulable=draw(st.booleans()),
        )
        existing = [
            make_pod(
                f"e{i}-{j}",
                draw(st.sampled_from(["0", "500m", "1"])),
                labels=WEB if draw(st.booleans()) else {},
                host_ports=[80] if draw(st.booleans()) else [],
            )
            for j in range(draw(st.integers(0, 2)))
        ]
        snap.add_node(node, existing)
    pod = make_pod(
        "p",
        draw(st.sampled_from(["0", "500m", "2"])),
        draw(st.sampled_from(["0", "2Gi"])),
        labels=WEB,
        tolerations=[Toleration("dedicated", "Exists")] if draw(st.booleans()) else [],
        node_selector={"disk": "ssd"} if draw(st.booleans()) else {},
        host_ports=[80] if draw(st.booleans()) else [],
        topology_spread=[spread(ZONE, WEB)] if draw(st.booleans()) else [],
        anti_affinity=[affinity_term(HOST, WEB)] if draw(st.booleans()) else [],
    )
    return snap, pod


@settings(max_examples=80, deadline=None)
@given(scenario())
def test_fast_path_agrees_with_each_predicate(case):
    snap, pod = case
    for ni in snap.node_infos():
        failing = failing_predicates(pod, ni, snap)
        first = next(iter(failing.values()), None)
        assert check_predicates(pod, ni, snap) == first


class CountingChecks(ClusterSnapshot):
    lookups = 0

    def node_info(self, name):
        self.lookups += 1
        return super().node_info(name)


def test_twins_of_an_unschedulable_pod_skip_the_search():
    snap = CountingChecks()
    for i in range(50):
        snap.add_node(make_node(f"n{i}", "1"))
    big = [make_pod(f"big{i}", "2", labels=WEB) for i in range(20)]
    result = HintingSimulator().try_schedule_pods(snap, big)
    assert [p.name for p in result.unschedulable] == [p.name for p in big]
    assert snap.lookups < 50 * 2  # one full search, not twenty


def test_pods_needing_other_pods_are_always_searched():
    snap = ClusterSnapshot()
    snap.add_node(zn("n1", "a"))
    needs_db = [
        make_pod(f"web{i}", affinity=[affinity_term(ZONE, {"app": "db"})]) for i in range(2)
    ]
    db = make_pod("db", labels={"app": "db"})
    result = HintingSimulator().try_schedule_pods(snap, [needs_db[0], db, needs_db[1]])
    assert [p.name for p in result.unschedulable] == ["web0"]
    assert [p.pod.name for p in result.scheduled] == ["db", "web1"]


def test_same_spec_in_another_namespace_is_searched_again():
    snap = ClusterSnapshot()
    snap.add_node(
        make_node("n1"),
        [make_pod("guard", labels={"app": "db"}, anti_affinity=[affinity_term(HOST, WEB)])],
    )
    blocked = make_pod("w-default", labels=WEB)
    other = make_pod("w-other", labels=WEB, namespace="other")
    result = HintingSimulator().try_schedule_pods(snap, [blocked, other])
    assert [p.name for p in result.unschedulable] == ["w-default"]
    assert [p.pod.name for p in result.scheduled] == ["w-other"]
