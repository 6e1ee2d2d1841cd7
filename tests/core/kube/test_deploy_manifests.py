"""deploy/: the manifests parse, fit together, and grant every API call the code makes."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from clusterscaler.events import EventRecorder, ObjectRef
from clusterscaler.kube.actions import KubeClusterActions
from clusterscaler.kube.events import KubeEventSink
from clusterscaler.kube.leaderelection import LeaderElectionConfig, LeaderElector
from clusterscaler.kube.source import KubeClusterSource
from clusterscaler.kube.status import KubeStatusWriter
from clusterscaler.model import Taint, parse_pod
from clusterscaler.options import AutoscalingOptions
from clusterscaler.status import AutoscalerStatus
from clusterscaler.testing.fakekube import RecordedRequest
from clusterscaler.testing.rbac import RbacAuthorizer

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
NAMESPACE = "kube-system"


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def by_kind(kind: str) -> dict:
    found = [d for d in documents("rbac.yaml") + documents("deployment.yaml") if d["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def test_manifests_parse_with_expected_kinds():
    kinds = sorted(d["kind"] for name in ("rbac.yaml", "deployment.yaml") for d in documents(name))
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]


def test_bindings_tie_the_service_account_to_the_roles():
    account = by_kind("ServiceAccount")["metadata"]
    for binding, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        doc = by_kind(binding)
        assert doc["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role,
            "name": by_kind(role)["metadata"]["name"],
        }
        assert doc["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]
    assert by_kind("Role")["metadata"]["namespace"] == account["namespace"]


def container() -> dict:
    return by_kind("Deployment")["spec"]["template"]["spec"]["containers"][0]


def test_deployment_runs_clusterscaler_with_health_check_probes():
    deployment = by_kind("Deployment")
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == by_kind("ServiceAccount")["metadata"]["name"]
    assert (
        deployment["spec"]["selector"]["matchLabels"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    c = container()
    assert c["command"] == ["clusterscaler"]
    port = next(p for p in c["ports"] if p["name"] == "http")["containerPort"]
    assert f"--address=:{port}" in c["args"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"]["path"] == "/health-check"
        assert c[probe]["httpGet"]["port"] in ("http", port)


def test_deployment_flags_exist():
    known = {f.name.replace("_", "-") for f in dataclasses.fields(AutoscalingOptions)}
    for arg in container()["args"]:
        flag = arg.split("=", 1)[0]
        assert flag.startswith("--") and flag[2:] in known, arg


def test_dockerfile_installs_the_entry_point():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["clusterscaler"]' in dockerfile
    assert "USER 65534" in dockerfile
    assert "EXPOSE 8085" in dockerfile


# --------------------------------------------------------------------------- RBAC coverage


def authorizer(*names: str) -> RbacAuthorizer:
    return RbacAuthorizer.from_manifests([DEPLOY / n for n in names])


def authorized(request: RecordedRequest) -> bool:
    return authorizer("rbac.yaml").allows(request)


def req(
    verb: str, group: str, resource: str, namespace: str = "", name: str = "", sub: str = ""
) -> RecordedRequest:
    return RecordedRequest("GET", "", {}, verb, group, resource, sub, namespace, name, 200)


@pytest.mark.parametrize(
    ("request_", "allowed"),
    [
        (req("list", "", "nodes"), True),
        (req("delete", "", "nodes", name="n1"), False),
        (req("update", "", "configmaps", "default", "cluster-autoscaler-status"), False),
        (req("update", "", "configmaps", NAMESPACE, "other"), False),
        (req("update", "", "configmaps", NAMESPACE, "cluster-autoscaler-status"), True),
        (req("list", "", "configmaps", NAMESPACE), True),
        (req("update", "coordination.k8s.io", "leases", NAMESPACE, "someone-else"), False),
        (req("create", "", "pods", "apps", "p", "eviction"), True),
        (req("get", "", "", ""), True),
        (req("patch", "cluster.x-k8s.io", "machinesets", "ns", "ms", "scale"), False),
    ],
    ids=[
        "list-nodes",
        "no-node-deletion",
        "status-only-in-own-namespace",
        "only-named-configmaps",
        "status-configmap",
        "configmap-cache",
        "only-own-lease",
        "evictions",
        "discovery",
        "no-machine-api-without-its-manifest",
    ],
)
def test_authorizer_model(request_, allowed):
    assert authorized(request_) is allowed


def test_machine_api_manifest_adds_scale_and_annotation_rights():
    both = authorizer("rbac.yaml", "rbac-machineapi.yaml")
    for group, plural in (
        ("cluster.x-k8s.io", "machinedeployments"),
        ("machine.openshift.io", "machinesets"),
    ):
        assert both.allows(req("patch", group, plural, "ns", "ms", "scale"))
        assert both.allows(req("watch", group, plural, "ns"))
        assert both.allows(req("patch", group, "machines", "ns", "m-1"))
        assert not both.allows(req("delete", group, "machines", "ns", "m-1"))
    assert both.allows(
        req("get", "infrastructure.cluster.x-k8s.io", "awsmachinetemplates", "ns", "t")
    )


def test_binding_to_a_missing_role_is_an_error(tmp_path):
    bad = tmp_path / "rbac.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "b"},
                "roleRef": {"kind": "ClusterRole", "name": "missing"},
                "subjects": [
                    {"kind": "ServiceAccount", "name": "cluster-autoscaler", "namespace": NAMESPACE}
                ],
            }
        )
    )
    with pytest.raises(ValueError, match="ClusterRoleBinding b: roleRef"):
        RbacAuthorizer.from_manifests([bad])


def test_cluster_role_covers_every_api_call_of_the_kubernetes_integration(fake_kube):
    api = fake_kube.api_client()
    fake_kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}})
    for name in ("p1", "p2"):
        fake_kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "apps"},
                "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
                "status": {"phase": "Running"},
            }
        )

    with KubeClusterSource(api, namespace=NAMESPACE) as source:
        assert source.wait_for_sync(5)
        source.snapshot()

    actions = KubeClusterActions(api)
    actions.add_taint("n1", Taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule"))
    actions.remove_taint("n1", "ToBeDeletedByClusterAutoscaler")
    actions.set_unschedulable("n1", True)
    p1 = parse_pod(fake_kube.get("pods", "p1", "apps"))
    actions.pod_exists(p1)
    actions.evict(p1, 30)

    recorder = EventRecorder(KubeEventSink(api))
    recorder.normal(ObjectRef.pod("apps", "p1"), "ScaleDown", "deleting pod for node scale down")
    recorder.normal(
        ObjectRef.node("n1"), "ScaleDown", "marked the node as toBeDeleted/unschedulable"
    )
    recorder.normal(
        ObjectRef.config_map(NAMESPACE, "cluster-autoscaler-status"), "ScaledUpGroup", "m"
    )

    writer = KubeStatusWriter(api, namespace=NAMESPACE)
    assert writer.write(AutoscalerStatus(time=datetime.now(UTC)))
    assert writer.write(AutoscalerStatus(time=datetime.now(UTC)))

    options = AutoscalingOptions()
    config = dataclasses.replace(
        LeaderElectionConfig.from_options(options), retry_period=timedelta(seconds=1)
    )
    elector = LeaderElector(api, config, identity="me")
    assert elector.try_acquire_or_renew()
    assert elector.try_acquire_or_renew()
    assert elector.release()

    made = {(r.verb, r.group, r.resource, r.subresource) for r in fake_kube.requests}
    # The exercise above must reach every kind of call, or this test proves little.
    assert {
        ("watch", "", "pods", ""),
        ("update", "", "nodes", ""),
        ("create", "", "pods", "eviction"),
        ("create", "", "events", ""),
        ("create", "", "configmaps", ""),
        ("update", "", "configmaps", ""),
        ("create", "coordination.k8s.io", "leases", ""),
        ("update", "coordination.k8s.io", "leases", ""),
    } <= made
    assert authorizer("rbac.yaml").denied(fake_kube.requests) == []
