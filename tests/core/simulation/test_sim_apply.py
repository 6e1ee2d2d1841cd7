"""`--apply FILE` on top of a real cluster's snapshot: manifests become the objects and pods
their controllers would create (names, labels, owner references, DaemonSet pods on the nodes
that allow them), applied in command-line order with the other changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.offline.loader import InputError, load_snapshot
from clusterscaler.offline.manifests import apply_file, template_hash
from clusterscaler.offline.setup import build_cluster
from clusterscaler.offline.simulatedcluster import SimulatedCluster

ROOT = Path(__file__).resolve().parents[3]
EKS = str(ROOT / "examples" / "snapshots" / "eks.json")
MANIFESTS = Path(__file__).parent / "manifests"
BATCH = str(MANIFESTS / "batch.yaml")
WORKLOADS = str(MANIFESTS / "workloads.json")
GENERAL_NODES = {"ip-192-168-12-40.ec2.internal", "ip-192-168-45-71.ec2.internal"}
SUFFIX = set("bcdfghjklmnpqrstvwxz2456789")


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def eks_cluster() -> SimulatedCluster:
    cluster, _ = build_cluster(load_snapshot(EKS))
    return cluster


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "manifest.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def generated(name: str, prefix: str) -> bool:
    suffix = name.removeprefix(prefix + "-")
    return name.startswith(prefix + "-") and len(suffix) == 5 and set(suffix) <= SUFFIX


def test_applied_deployment_needs_a_scale_up(capsys: pytest.CaptureFixture[str]) -> None:
    # The image-resizer pods pending in the snapshot go first, so that the scale-up is the
    # applied Deployment's: two of its four 2-cpu pods fit the general nodes, two need more.
    doc = run_json(
        capsys, "simulate", "--snapshot", EKS, "--once",
        "--apply", BATCH, "--scale", "rs/shop/image-resizer-7b9d6c5f8=3",
    )  # fmt: skip
    applied, scaled = doc["whatIf"]["changes"]
    assert applied["change"] == f"--apply {BATCH}"
    assert applied["detail"] == "3 objects, 6 pods created"
    rs = applied["objects"][0].split("ReplicaSet ")[1].split(",")[0]
    assert applied["objects"] == [
        f"Deployment shop/checkout: ReplicaSet {rs}, 4 pods",
        # Refreshed once the scheduler placed the pods: maxUnavailable 1 of 4 wants 3.
        "PodDisruptionBudget shop/checkout: 2 of 4 pods healthy, 0 disruptions allowed",
        # min(parallelism 3, completions 2).
        "Job shop/reindex: 2 pods",
    ]
    checkout = [p for p in applied["pods"] if p["pod"].startswith("shop/checkout-")]
    assert all(generated(p["pod"].removeprefix("shop/"), rs) for p in checkout)
    assert sorted(p["to"] for p in checkout) == [*sorted(GENERAL_NODES), "pending", "pending"]
    assert scaled["detail"] == "3 replicas: -2 pods"
    assert doc["whatIf"]["before"] == {
        "pendingPods": 2,
        "nodesAdded": {"ng-spot": 1},
        "nodesRemoved": [],
    }
    assert doc["whatIf"]["after"] == {
        "pendingPods": 2,
        "nodesAdded": {"ng-general": 2},
        "nodesRemoved": [],
    }
    [up] = doc["scaleUp"]
    assert (up["nodeGroup"], up["from"], up["to"]) == ("ng-general", 2, 4)
    assert all(p.startswith(f"shop/{rs}-") for p in up["pods"])


def test_changes_apply_in_command_line_order(capsys: pytest.CaptureFixture[str]) -> None:
    # After the apply, the Deployment scales through its new ReplicaSet, pending pods first.
    doc = run_json(
        capsys, "simulate", "--snapshot", EKS, "--once",
        "--apply", BATCH, "--scale", "deployment/shop/checkout=2",
    )  # fmt: skip
    assert doc["whatIf"]["changes"][1]["detail"].endswith(": -2 pods")
    assert doc["whatIf"]["after"]["nodesAdded"] == {"ng-spot": 1}
    # Before it, the Deployment does not exist yet.
    code, _, err = cli(
        capsys, "simulate", "--snapshot", EKS, "--once",
        "--scale", "deployment/shop/checkout=2", "--apply", BATCH,
    )  # fmt: skip
    assert code == 2
    assert "Deployment shop/checkout: expected a ReplicaSet of it in the snapshot" in err


def test_applied_pdb_keeps_pods_on_a_drained_node(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(
        capsys, "explain", "--snapshot", EKS,
        "--apply", BATCH, "--drain-node", "ip-192-168-12-40.ec2.internal",
    )  # fmt: skip
    drain = doc["whatIf"]["changes"][1]
    [kept] = [p for p in drain["pods"] if p["pod"].startswith("shop/checkout-")]
    assert "disruption budget shop/checkout" in kept["to"]


def test_controllers_create_their_pods_as_kubernetes_does() -> None:
    cluster = eks_cluster()
    applied = apply_file(cluster, WORKLOADS)
    assert applied.objects == [
        "StatefulSet shop/ledger: 2 pods",
        # Not on the spot node (its taint is not tolerated) nor on Fargate.
        "DaemonSet kube-system/log-shipper: 3 pods, on 3 of 5 nodes",
        "ReplicaSet shop/cache: 2 pods",
        "Pod default/" + applied.pods[-1].split("/")[1] + ": pending",
    ]
    pods = {key: cluster.pods[key] for key in applied.pods}

    ledger = [pods["shop/ledger-0"], pods["shop/ledger-1"]]
    for i, pod in enumerate(ledger):
        assert pod.owner is not None
        assert (pod.owner.kind, pod.owner.name, pod.owner.controller) == (
            "StatefulSet",
            "ledger",
            True,
        )
        assert pod.labels["statefulset.kubernetes.io/pod-name"] == f"ledger-{i}"
        assert pod.labels["app"] == "ledger"
        assert [(v.name, v.claim_name) for v in pod.volumes] == [("data", f"data-ledger-{i}")]
        assert not pod.node_name

    shippers = [p for k, p in pods.items() if k.startswith("kube-system/log-shipper-")]
    assert all(generated(p.name, "log-shipper") for p in shippers)
    assert {p.node_name for p in shippers} == {*GENERAL_NODES, "ip-192-168-33-17.ec2.internal"}
    assert all(p.is_daemonset and p.phase == "Running" for p in shippers)
    assert any(ds.name == "log-shipper" for ds in cluster.daemonsets)

    cache = [p for k, p in pods.items() if k.startswith("shop/cache-")]
    assert len(cache) == 2 and all(generated(p.name, "cache") for p in cache)
    assert all(p.owner is not None and p.owner.kind == "ReplicaSet" for p in cache)
    [debug] = [p for k, p in pods.items() if k.startswith("default/")]
    assert generated(debug.name, "debug")
    assert debug.owner is None

    # The applied controllers are controllers of the cluster: --scale reaches them.
    assert cluster.scale("StatefulSet/shop/ledger", 3) == 1
    assert "shop/ledger-2" in cluster.pods
    assert cluster.scale("ReplicaSet/shop/cache", 5) == 3


def test_deployment_pods_carry_the_template_hash() -> None:
    cluster = eks_cluster()
    applied = apply_file(cluster, BATCH)
    rs = next(
        c for c in cluster.controllers if c.kind == "ReplicaSet" and c.name.startswith("checkout-")
    )
    pod_hash = rs.name.removeprefix("checkout-")
    assert set(pod_hash) <= SUFFIX
    assert rs.owner is not None and (rs.owner.kind, rs.owner.name) == ("Deployment", "checkout")
    assert rs.selector is not None
    checkout = [cluster.pods[k] for k in applied.pods if k.startswith("shop/checkout-")]
    assert len(checkout) == 4
    for pod in checkout:
        assert pod.labels == {"app": "checkout", "pod-template-hash": pod_hash}
        assert pod.owner is not None and (pod.owner.kind, pod.owner.name) == ("ReplicaSet", rs.name)
        assert rs.selector.matches(pod.labels)
    job = [cluster.pods[k] for k in applied.pods if k.startswith("shop/reindex-")]
    assert len(job) == 2
    assert all(
        p.labels["job-name"] == "reindex" and p.owner is not None and p.owner.kind == "Job"
        for p in job
    )
    # The hash follows the template: another template, another ReplicaSet.
    assert template_hash({"spec": {"containers": [{"name": "a"}]}}) != template_hash(
        {"spec": {"containers": [{"name": "b"}]}}
    )
    # Names are derived from the objects: the same file gives the same pods.
    again = eks_cluster()
    assert apply_file(again, BATCH).pods == applied.pods


def test_applying_an_existing_deployment_rolls_it_out(tmp_path: Path) -> None:
    cluster = eks_cluster()
    old = [k for k in cluster.pods if k.startswith("shop/storefront-5d4c8b7f6-")]
    assert old
    path = write(
        tmp_path,
        """
apiVersion: apps/v1
kind: Deployment
metadata: {name: storefront, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: storefront}}
  template:
    metadata: {labels: {app: storefront, version: v2}}
    spec:
      containers: [{name: web, image: storefront:2, resources: {requests: {cpu: 100m}}}]
""",
    )
    applied = apply_file(cluster, path)
    [line] = applied.objects
    assert line.endswith(", 2 pods, ReplicaSets storefront-5d4c8b7f6 scaled to 0")
    assert not any(k in cluster.pods for k in old)
    old_rs = next(c for c in cluster.controllers if c.name == "storefront-5d4c8b7f6")
    assert old_rs.replicas == 0
    assert len(applied.pods) == 2
    assert all(cluster.pods[k].labels["version"] == "v2" for k in applied.pods)


def test_a_job_suspended_or_indexed(tmp_path: Path) -> None:
    cluster = eks_cluster()
    path = write(
        tmp_path,
        """
apiVersion: batch/v1
kind: Job
metadata: {name: shard, namespace: batch}
spec:
  completionMode: Indexed
  completions: 5
  parallelism: 2
  template:
    spec: {containers: [{name: w, image: w:1}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: later, namespace: batch}
spec:
  suspend: true
  template:
    spec: {containers: [{name: w, image: w:1}]}
""",
    )
    applied = apply_file(cluster, path)
    assert applied.objects == ["Job batch/shard: 2 pods", "Job batch/later: 0 pods"]
    names = sorted(k.removeprefix("batch/") for k in applied.pods)
    assert [n[: len("shard-0-")] for n in names] == ["shard-0-", "shard-1-"]
    assert [
        cluster.pods["batch/" + n].labels["batch.kubernetes.io/job-completion-index"] for n in names
    ] == ["0", "1"]


BAD = [
    (
        "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: web}\nspec:\n  replicas: 2\n"
        "  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: other}}\n"
        "    spec: {containers: [{name: c, image: i}]}\n",
        "Deployment default/web: spec.selector: expected a label selector matching "
        "spec.template.metadata.labels {'app': 'other'}",
    ),
    (
        "kind: ReplicaSet\napiVersion: apps/v1\nmetadata: {name: web, namespace: shop}\nspec:\n"
        "  replicas: -1\n  selector: {matchLabels: {app: web}}\n  template:\n"
        "    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: i}]}\n",
        "ReplicaSet shop/web: spec.replicas: expected a non-negative integer, got -1",
    ),
    (
        "kind: StatefulSet\napiVersion: apps/v1\nmetadata: {name: db}\nspec:\n"
        "  selector: {matchLabels: {app: db}}\n",
        "StatefulSet default/db: spec.template: expected a pod template",
    ),
    (
        "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: web}\nspec:\n"
        "  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n"
        "    spec: {containers: [{name: c, image: i, resources: {requests: {cpu: lots}}}]}\n",
        "Deployment default/web: spec.template.spec.containers[0].resources.requests",
    ),
    (
        "kind: Service\napiVersion: v1\nmetadata: {name: web}\n",
        "document 1 (Service web): kind: expected one of Deployment, ReplicaSet, StatefulSet, "
        "Job, DaemonSet, Pod, PodDisruptionBudget, ResourceSlice, DeviceClass, ResourceClaim, "
        "ResourceClaimTemplate, PodTemplate, ProvisioningRequest, CapacityQuota, CapacityBuffer, got 'Service'",
    ),
    (
        "kind: Deployment\napiVersion: extensions/v1beta1\nmetadata: {name: web}\n",
        "document 1 (Deployment web): apiVersion: expected apps/v1, got 'extensions/v1beta1'",
    ),
    ("- just\n- a list\n", "document 1: expected a Kubernetes object"),
    ("kind: [unclosed\n", "expected Kubernetes objects in YAML or JSON"),
    ("", "expected Kubernetes objects in YAML or JSON, got an empty file"),
    (
        "kind: Pod\napiVersion: v1\nmetadata: {name: p}\nspec:\n  nodeName: nowhere\n"
        "  containers: [{name: c, image: i}]\n",
        "Pod default/p: spec.nodeName: expected the name of a node of the cluster",
    ),
    (
        "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: b}\nspec:\n"
        "  minAvailable: 1\n  maxUnavailable: 1\n",
        "PodDisruptionBudget default/b: spec: expected minAvailable or maxUnavailable, not both",
    ),
    (
        "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: b}\nspec: {minAvailable: x}\n"
        "---\nkind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: b}\nspec: {}\n",
        "PodDisruptionBudget default/b: spec.minAvailable: expected a non-negative integer or a percentage",
    ),
    (
        # The API server refuses it (`must not be greater than 100%`): so does --apply.
        "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: b}\nspec: {maxUnavailable: 150%}\n",
        "PodDisruptionBudget default/b: spec.maxUnavailable: expected a non-negative integer or a percentage of at most 100% such as 50%",
    ),
    (
        "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: b}\nspec: {}\n"
        "---\nkind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: b}\nspec: {}\n",
        "PodDisruptionBudget default/b: given more than once; expected each object once",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_manifest_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    code, _, err = cli(capsys, "simulate", "--snapshot", EKS, "--once", "--apply", path)
    assert code == 2, err
    assert f"--apply {path!r}: " in err
    assert message in err


def test_an_existing_pod_cannot_be_applied_again(tmp_path: Path) -> None:
    cluster = eks_cluster()
    name = next(p.name for p in cluster.pods.values() if p.namespace == "shop")
    path = write(
        tmp_path,
        f"kind: Pod\napiVersion: v1\nmetadata: {{name: {name}, namespace: shop}}\n"
        "spec: {containers: [{name: c, image: i}]}\n",
    )
    with pytest.raises(
        InputError,
        match=rf"Pod shop/{name}: metadata.name: expected a pod the cluster does not have",
    ):
        apply_file(cluster, path)


def test_a_missing_file_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "explain", "--snapshot", EKS, "--apply", "/nonexistent/app.yaml")
    assert code == 2
    assert "--apply '/nonexistent/app.yaml': cannot read the file" in err


def test_the_documented_example_is_real(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    docs = (ROOT / "docs" / "simulate.md").read_text(encoding="utf-8")
    code, out, err = cli(
        capsys, "simulate", "--snapshot", EKS, "--once",
        "--apply", "examples/manifests/checkout.yaml", "--scale", "rs/shop/image-resizer-7b9d6c5f8=3",
    )  # fmt: skip
    assert code == 0, err
    shown = out[out.index("Changes\n") : out.index("\n\nPending pods")]
    assert shown in docs


def test_priority_class_names_resolve_as_admission_does(tmp_path: Path) -> None:
    cluster = eks_cluster()
    path = write(
        tmp_path,
        """
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: agent, namespace: kube-system}
spec:
  replicas: 1
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      priorityClassName: system-node-critical
      containers: [{name: a, image: a:1}]
---
apiVersion: v1
kind: Pod
metadata: {name: batch-1, namespace: default}
spec:
  priorityClassName: no-such-class
  containers: [{name: b, image: b:1}]
""",
    )
    applied = apply_file(cluster, path)
    agent, batch = (cluster.pods[k] for k in applied.pods)
    assert agent.priority == 2000001000
    assert not batch.priority
