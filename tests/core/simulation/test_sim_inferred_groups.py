"""Node groups inferred from a real cluster's snapshot, with no cloud-config: the shipped EKS,
GKE, AKS and OpenShift snapshots through `simulate --once --json` and `explain`, the keys
that name a group (labels, machine annotations), the bounds (`--nodes`,
`--node-group-bounds`, the assumed defaults) and bad bounds input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.model import Node
from clusterscaler.offline.inference import (
    Bounds,
    infer_node_groups,
    parse_bounds_doc,
    parse_nodes_flags,
)
from clusterscaler.offline.loader import InputError, load_snapshot

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOTS = ROOT / "examples" / "snapshots"
ASSUMED_BOTH = ["minSize", "maxSize"]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def once_json(capsys: pytest.CaptureFixture[str], platform: str, *extra: str) -> dict[str, Any]:
    code, out, err = cli(
        capsys, "simulate", "--snapshot", str(SNAPSHOTS / f"{platform}.json"), "--once", "--json", *extra
    )
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


# Per platform: the groups (name, key, node count), the nodes left out with the start of
# their reason, and the one scale-up a loop makes.
PLATFORMS = {
    "eks": (
        [("ng-general", "eks.amazonaws.com/nodegroup", 2), ("ng-spot", "alpha.eksctl.io/nodegroup-name", 1)],
        {
            "fargate-ip-192-168-71-205.us-west-2.compute.internal": "EKS Fargate node",
            "ip-192-168-33-17.ec2.internal": "provisioned by Karpenter (karpenter.sh/nodepool=default)",
        },
        ("ng-spot", 1, 2, 2),
    ),
    "gke": (
        [
            ("default-pool", "cloud.google.com/gke-nodepool", 2),
            ("highmem-pool", "cloud.google.com/gke-nodepool", 1),
        ],
        {},
        ("highmem-pool", 1, 2, 1),
    ),
    "aks": (
        [("nodepool1", "kubernetes.azure.com/agentpool", 2), ("userpool", "kubernetes.azure.com/agentpool", 1)],
        {
            "aks-default-x7p2k": "provisioned by Karpenter (karpenter.sh/nodepool=default)",
            "virtual-node-aci-linux": "virtual node (type=virtual-kubelet)",
        },
        ("userpool", 1, 2, 3),
    ),
    "openshift": (
        [
            ("ocp-7xk2p-worker-us-east-1a", "machine.openshift.io/machine", 2),
            ("ocp-7xk2p-worker-us-east-1b", "machine.openshift.io/machine", 1),
        ],
        {
            f"ip-10-0-{n}.ec2.internal": "control-plane node (node-role.kubernetes.io/control-plane)"
            for n in ("12-34", "45-67", "78-90")
        },
        ("ocp-7xk2p-worker-us-east-1b", 1, 2, 1),
    ),
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_snapshot_groups_are_inferred_without_a_cloud_config(platform: str) -> None:
    groups, left_out, _ = PLATFORMS[platform]
    inference = infer_node_groups(load_snapshot(SNAPSHOTS / f"{platform}.json").nodes)
    assert [(g.name, g.inferred_from, len(g.nodes)) for g in inference.groups] == groups
    assert {n.name: n.reason for n in inference.not_inferred}.keys() == left_out.keys()
    for entry in inference.not_inferred:
        assert entry.reason.startswith(left_out[entry.name])


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_once_json_scales_the_inferred_group_and_shows_assumed_bounds(
    capsys: pytest.CaptureFixture[str], platform: str
) -> None:
    groups, left_out, (group, before, after, pods) = PLATFORMS[platform]
    doc = once_json(capsys, platform)
    assert list(doc) == ["scaleUp", "scaleDown", "unschedulable", "unremovable", "inferredNodeGroups", "notInferred"]
    [up] = doc["scaleUp"]
    assert (up["nodeGroup"], up["from"], up["to"], len(up["pods"])) == (group, before, after, pods)
    assert doc["unschedulable"] == []
    assert doc["inferredNodeGroups"] == [
        {
            "name": name,
            "inferredFrom": key,
            "nodes": count,
            "minSize": 0,
            "maxSize": 1000,
            "boundsFrom": "assumed",
            "assumed": ASSUMED_BOTH,
        }
        for name, key, count in groups
    ]
    assert [n["node"] for n in doc["notInferred"]] == sorted(left_out)
    assert all(set(n) == {"node", "reason"} for n in doc["notInferred"])


def test_explain_lists_the_inferred_groups_then_the_answers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "explain", "--snapshot", str(SNAPSHOTS / "openshift.json"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Node groups inferred from the snapshot (no --cloud-config)"
    assert lines[1].split() == ["NODE", "GROUP", "INFERRED", "FROM", "NODES", "MIN", "MAX", "BOUNDS", "FROM"]
    assert lines[2].split() == [
        "ocp-7xk2p-worker-us-east-1a", "machine.openshift.io/machine", "2", "0", "(assumed)", "1000", "(assumed)", "assumed",
    ]
    assert "Nodes in no node group" in lines
    assert out.index("Nodes in no node group") < out.index("Pending pods") < out.index("\nNodes\n")
    row = next(line for line in lines if line.startswith("shop/search-reindex-"))
    assert row.split()[1:5] == ["ocp-7xk2p-worker-us-east-1b", "yes", "scale-up", "1"]
    # Control-plane nodes are not autoscaled; the workers are answered.
    assert next(line for line in lines if line.startswith("ip-10-0-12-34.ec2.internal  -")).split()[2:] == ["no", "6%", "cpu", "NotAutoscaled"]
    assert "ip-10-0-20-12.ec2.internal  ocp-7xk2p-worker-us-east-1a  yes        23% cpu      unneeded" in out


def test_explain_json_carries_the_inference(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "explain", "--snapshot", str(SNAPSHOTS / "aks.json"), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [g["name"] for g in doc["inferredNodeGroups"]] == ["nodepool1", "userpool"]
    assert [n["node"] for n in doc["notInferred"]] == ["aks-default-x7p2k", "virtual-node-aci-linux"]
    reasons = {u["node"]: u["reason"] for u in doc["unremovable"]}
    assert reasons["aks-default-x7p2k"] == "NotAutoscaled"
    assert reasons["aks-userpool-28417539-vmss000000"] == "NotUnderutilized"


def test_timeline_json_starts_with_the_node_groups_and_new_nodes_copy_the_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The pending pod selects the highmem pool and tolerates its taint: it runs only if the
    # new node carries the pool's label and the taint tolerated, i.e. copies a pool node.
    code, out, err = cli(
        capsys, "simulate", "--snapshot", str(SNAPSHOTS / "gke.json"), "--json", "--duration", "3m"
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0]["type"] == "nodeGroups"
    assert [g["name"] for g in lines[0]["inferredNodeGroups"]] == ["default-pool", "highmem-pool"]
    assert lines[-1]["type"] == "summary"
    assert lines[-1]["finalNodes"] == {"default-pool": 2, "highmem-pool": 2}
    assert lines[-1]["stillPending"] == 0


def test_nodes_flags_and_bounds_file_set_the_bounds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bounds = tmp_path / "bounds.yaml"
    bounds.write_text("nodeGroups:\n  ng-general: {maxSize: 6}\n  ng-spot: {minSize: 1, maxSize: 2}\n")
    doc = once_json(capsys, "eks", "--node-group-bounds", str(bounds), "--nodes=1:3:ng-spot")
    assert {g["name"]: (g["minSize"], g["maxSize"], g["boundsFrom"], g["assumed"]) for g in doc["inferredNodeGroups"]} == {
        "ng-general": (0, 6, str(bounds), ["minSize"]),
        "ng-spot": (1, 3, "--nodes", []),
    }
    assert [(u["nodeGroup"], u["to"]) for u in doc["scaleUp"]] == [("ng-spot", 2)]


def test_max_size_from_nodes_flag_stops_the_scale_up(capsys: pytest.CaptureFixture[str]) -> None:
    doc = once_json(capsys, "gke", "--nodes=1:1:highmem-pool")
    assert doc["scaleUp"] == []
    [entry] = doc["unschedulable"]
    assert entry["pod"].startswith("batch/report-builder-")
    assert entry["reasons"]["highmem-pool"] == "max node group size reached: target 1 >= max 1"


def test_a_cloud_config_still_declares_the_groups(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(
        capsys,
        "simulate",
        "--snapshot",
        str(SNAPSHOTS / "eks-cluster.json"),
        "--cloud-config",
        str(ROOT / "examples" / "cloud-configs" / "eks-nodegroups.yaml"),
        "--once",
        "--json",
    )
    assert code == 0, err
    assert list(json.loads(out)) == ["scaleUp", "scaleDown", "unschedulable", "unremovable"]


# --------------------------------------------------------------------------- keys


def node(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Node:
    return Node(name, labels=labels or {}, annotations=annotations or {})


KEY_CASES = [
    pytest.param(node("n", {"kops.k8s.io/instancegroup": "nodes-us-east-1a"}), ("nodes-us-east-1a", "kops.k8s.io/instancegroup"), id="kops"),
    pytest.param(node("n", {"agentpool": "pool2"}), ("pool2", "agentpool"), id="aks-legacy-label"),
    pytest.param(
        node("n", {"alpha.eksctl.io/nodegroup-name": "b", "eks.amazonaws.com/nodegroup": "a"}),
        ("a", "eks.amazonaws.com/nodegroup"),
        id="eks-label-before-eksctl",
    ),
    pytest.param(
        node("n", {"cluster.x-k8s.io/deployment-name": "md-0"}, {"cluster.x-k8s.io/owner-kind": "MachineSet", "cluster.x-k8s.io/owner-name": "md-0-x7f2k"}),
        ("md-0", "cluster.x-k8s.io/deployment-name"),
        id="capi-deployment-label",
    ),
    pytest.param(
        node("n", annotations={"cluster.x-k8s.io/owner-kind": "MachineSet", "cluster.x-k8s.io/owner-name": "md-0-x7f2k", "cluster.x-k8s.io/machine": "md-0-x7f2k-abcde"}),
        ("md-0-x7f2k", "cluster.x-k8s.io/owner-name"),
        id="capi-owner-machineset",
    ),
    pytest.param(
        node("n", annotations={"cluster.x-k8s.io/machine": "workers-4mnpq-z8vtk"}),
        ("workers-4mnpq", "cluster.x-k8s.io/machine"),
        id="capi-machine-name",
    ),
    pytest.param(
        node("n", annotations={"machine.openshift.io/machine": "openshift-machine-api/ocp-infra-us-east-1a-q2w3e"}),
        ("ocp-infra-us-east-1a", "machine.openshift.io/machine"),
        id="openshift-machine",
    ),
    pytest.param(
        node("n", {"clusterscaler.io/node-group": "general"}), ("general", "clusterscaler.io/node-group"), id="sim-label"
    ),
]


@pytest.mark.parametrize(("member", "expected"), KEY_CASES)
def test_the_key_a_node_carries_names_its_group(member: Node, expected: tuple[str, str]) -> None:
    [group] = infer_node_groups([member]).groups
    assert (group.name, group.inferred_from, group.nodes) == (*expected, ("n",))


LEFT_OUT_CASES = [
    pytest.param(
        node("n", {"karpenter.sh/nodepool": "default", "eks.amazonaws.com/nodegroup": "ng"}),
        "provisioned by Karpenter (karpenter.sh/nodepool=default)",
        id="karpenter-before-labels",
    ),
    pytest.param(node("n", {"karpenter.sh/provisioner-name": "default"}), "provisioned by Karpenter (karpenter.sh/provisioner-name=default)", id="karpenter-v1alpha5"),
    pytest.param(
        node("n", {"node-role.kubernetes.io/control-plane": "", "kops.k8s.io/instancegroup": "control-plane-us-east-1a"}),
        "control-plane node (node-role.kubernetes.io/control-plane): not autoscaled",
        id="kops-control-plane",
    ),
    pytest.param(
        node("n", annotations={"machine.openshift.io/machine": "openshift-machine-api/ocp-master-0"}),
        "annotation machine.openshift.io/machine: machine 'openshift-machine-api/ocp-master-0' is not named as a MachineSet names its machines",
        id="machine-without-set",
    ),
    pytest.param(
        node("n", {"cloud.google.com/gke-nodepool": "-bad-"}),
        "label cloud.google.com/gke-nodepool: expected a node group name (letters, digits, '-', '_' or '.', alphanumeric at both ends, at most 63 characters), got '-bad-'",
        id="bad-label-value",
    ),
    pytest.param(node("n", {"kubernetes.io/os": "linux"}), "no node-group label (eks.amazonaws.com/nodegroup, ", id="no-key"),
]


@pytest.mark.parametrize(("member", "reason"), LEFT_OUT_CASES)
def test_a_node_in_no_group_is_listed_with_the_reason(member: Node, reason: str) -> None:
    inference = infer_node_groups([member])
    assert inference.groups == ()
    [entry] = inference.not_inferred
    assert entry.name == "n"
    assert entry.reason.startswith(reason)


def test_one_name_from_two_keys_keeps_the_first_key() -> None:
    inference = infer_node_groups(
        [node("b", {"kops.k8s.io/instancegroup": "x"}), node("a", {"agentpool": "x"}), node("c", {"agentpool": "x"})]
    )
    [group] = inference.groups
    assert (group.name, group.inferred_from, group.nodes) == ("x", "agentpool", ("a", "c"))
    [entry] = inference.not_inferred
    assert entry.name == "b"
    assert entry.reason == (
        "kops.k8s.io/instancegroup names node group 'x', which other nodes' agentpool names too: "
        "expected one key per node group"
    )


def test_member_nodes_are_labelled_in_a_copy_only() -> None:
    objects = load_snapshot(SNAPSHOTS / "eks.json")
    inference = infer_node_groups(objects.nodes)
    labelled = inference.label_members(objects)
    groups = {n.name: n.labels.get("clusterscaler.io/node-group") for n in labelled.nodes}
    assert groups["ip-192-168-20-93.ec2.internal"] == "ng-spot"
    assert groups["ip-192-168-33-17.ec2.internal"] is None
    assert all("clusterscaler.io/node-group" not in n.labels for n in objects.nodes)
    assert inference.cloud_config()["nodeGroups"][1] == {
        "name": "ng-spot", "minSize": 0, "maxSize": 1000, "nodeSelector": {"clusterscaler.io/node-group": "ng-spot"},
    }


# --------------------------------------------------------------------------- bad bounds

BAD_BOUNDS_DOCS = [
    pytest.param(["a"], "b.yaml: expected nodeGroups: {<node group>: {minSize: <int>, maxSize: <int>, price: <per node-hour>}}, got 'list'", id="not-a-map"),
    pytest.param({"groups": {}}, "b.yaml: expected nodeGroups: {<node group>: {minSize: <int>, maxSize: <int>, price: <per node-hour>}}, got ['groups']", id="wrong-key"),
    pytest.param({"nodeGroups": ["x"]}, "b.yaml: nodeGroups: expected a map of node group name to {minSize, maxSize}, got ['x']", id="groups-not-a-map"),
    pytest.param({"nodeGroups": {"x": {"minSize": -1}}}, "b.yaml: nodeGroups.x.minSize: expected a non-negative integer, got -1", id="negative"),
    pytest.param({"nodeGroups": {"x": {"maxSize": True}}}, "b.yaml: nodeGroups.x.maxSize: expected a non-negative integer, got True", id="bool"),
    pytest.param({"nodeGroups": {"x": {"minSize": 3, "maxSize": 2}}}, "b.yaml: nodeGroups.x.maxSize: expected an integer >= minSize (3), got 2", id="max-below-min"),
    pytest.param({"nodeGroups": {"x": {"max": 2}}}, "b.yaml: nodeGroups.x: expected {minSize: <int>, maxSize: <int>, price: <per node-hour>} (each may be left out), got {'max': 2}", id="unknown-field"),
    pytest.param({"nodeGroups": {"-x": {"maxSize": 2}}}, "b.yaml: nodeGroups: expected node group names", id="bad-name"),
    pytest.param({"nodeGroups": {"x": {"price": -1}}}, "b.yaml: nodeGroups.x.price: expected a non-negative number (price per node-hour), got -1", id="negative-price"),
    pytest.param({"nodeGroups": {"x": {"price": "cheap"}}}, "b.yaml: nodeGroups.x.price: expected a non-negative number (price per node-hour), got 'cheap'", id="price-not-a-number"),
]


@pytest.mark.parametrize(("doc", "message"), BAD_BOUNDS_DOCS)
def test_bad_bounds_file_names_the_group_and_field(doc: Any, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_bounds_doc(doc, "b.yaml")
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["1:5"], "--nodes='1:5': expected <min>:<max>:<node group> with non-negative integers and min <= max"),
        (["a:5:x"], "--nodes='a:5:x': expected <min>:<max>:<node group>"),
        (["3:2:x"], "--nodes='3:2:x': max: expected an integer >= min (3), got 2"),
        (["1:2:x", "1:3:x"], "--nodes='1:3:x': node group 'x': given more than once"),
    ],
)
def test_bad_nodes_flag_names_the_value(values: list[str], message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_nodes_flags(values)
    assert str(info.value).startswith(message)


def test_bounds_for_a_group_not_inferred_are_refused() -> None:
    with pytest.raises(InputError) as info:
        infer_node_groups([node("n", {"agentpool": "a"})], {"b": Bounds(1, 2, "b.yaml", "b.yaml: nodeGroups.b")})
    assert str(info.value) == (
        "b.yaml: nodeGroups.b: node group 'b': expected one of the node groups inferred from the snapshot (a)"
    )


def test_bounds_file_with_a_cloud_config_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bounds = tmp_path / "bounds.yaml"
    bounds.write_text("nodeGroups: {general: {maxSize: 3}}\n")
    code, _, err = cli(
        capsys,
        "explain",
        "--snapshot",
        str(SNAPSHOTS / "small-cluster.json"),
        "--cloud-config",
        str(ROOT / "examples" / "cloud-configs" / "general.yaml"),
        "--node-group-bounds",
        str(bounds),
    )
    assert code == 2
    assert f"--node-group-bounds {str(bounds)!r}: expected only without --cloud-config" in err


def test_unreadable_bounds_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = cli(
        capsys, "simulate", "--snapshot", str(SNAPSHOTS / "gke.json"), "--once",
        "--node-group-bounds", str(tmp_path / "missing.yaml"),
    )
    assert code == 2
    assert f"--node-group-bounds {str(tmp_path / 'missing.yaml')!r}: cannot read the file" in err
