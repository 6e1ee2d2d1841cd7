"""deploy/: the manifests parse, fit together, and grant exactly the API calls the code makes.

The RBAC every provider needs is the same in each deploy/<provider>/rbac.yaml
(tests/deploy/test_plain_manifests.py); deploy/aws/ stands for them all here, since the aws
provider makes no Kubernetes calls of its own."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from clusterscaler.commands.cli import load_plugins, parse_autoscaler_args
from clusterscaler.commands.runtime import KubeRuntime
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.kube.eventwriter import BackgroundEventSink
from clusterscaler.model import Taint, parse_pod
from clusterscaler.plugins.sim import EMBEDDED_CONFIG_KEY
from clusterscaler.plugins.sim import build_provider as build_sim_provider
from clusterscaler.report.events import ObjectRef
from clusterscaler.report.status import AutoscalerStatus
from clusterscaler.testing.fakekube import RecordedRequest
from clusterscaler.testing.rbac import RbacAuthorizer

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
COMMON = DEPLOY / "aws"
NAMESPACE = "kube-system"


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((COMMON / name).read_text()) if d]


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
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
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


def container_args() -> list[str]:
    """The flags after the binary: the manifests write them all in `command`, as CA's do."""
    c = container()
    command = [*c["command"], *c.get("args", [])]
    assert command[0] == "clusterscaler"
    return command[1:]


def test_deployment_runs_clusterscaler_with_health_check_probes():
    deployment = by_kind("Deployment")
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == by_kind("ServiceAccount")["metadata"]["name"]
    assert (
        deployment["spec"]["selector"]["matchLabels"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    c = container()
    assert c["command"][0] == "clusterscaler"
    port = next(p for p in c["ports"] if p["name"] == "http")["containerPort"]
    # No --address: the default serves /metrics and /health-check on the container's port.
    assert deployment_options().address == f":{port}"
    assert c["livenessProbe"]["httpGet"] == {"path": "/health-check", "port": port}


def test_deployment_flags_exist():
    known = {f.name.replace("_", "-") for f in dataclasses.fields(AutoscalingOptions)}
    for arg in container_args():
        flag = arg.split("=", 1)[0]
        assert flag.startswith("--") and flag[2:] in known, arg


def test_dockerfile_installs_the_entry_point():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["clusterscaler"]' in dockerfile
    assert "USER 65534" in dockerfile
    assert "EXPOSE 8085" in dockerfile


# --------------------------------------------------------------------------- RBAC


def authorizer(*names: str) -> RbacAuthorizer:
    return RbacAuthorizer.from_manifests([DEPLOY / n for n in names])


def authorized(request: RecordedRequest) -> bool:
    return authorizer("aws/rbac.yaml").allows(request)


def req(
    verb: str, group: str, resource: str, namespace: str = "", name: str = "", sub: str = ""
) -> RecordedRequest:
    return RecordedRequest("GET", "", {}, verb, group, resource, sub, namespace, name, 200)


LEASES = "coordination.k8s.io"
STATUS = "cluster-autoscaler-status"


@pytest.mark.parametrize(
    ("request_", "allowed"),
    [
        (req("list", "", "nodes"), True),
        (req("delete", "", "nodes", name="n1"), False),
        (req("create", "", "nodes"), False),
        (req("update", "", "configmaps", "default", STATUS), False),
        (req("update", "", "configmaps", NAMESPACE, "other"), False),
        (req("update", "", "configmaps", NAMESPACE, STATUS), True),
        (req("delete", "", "configmaps", NAMESPACE, STATUS), False),
        (req("get", "", "configmaps", NAMESPACE, "cluster-autoscaler-priority-expander"), False),
        (req("list", "", "configmaps", NAMESPACE), True),
        (req("list", "", "configmaps"), False),
        (req("update", LEASES, "leases", NAMESPACE, "someone-else"), False),
        (req("create", LEASES, "leases", NAMESPACE), True),
        (req("create", LEASES, "leases", "default"), False),
        (req("create", "", "pods", "apps", "p", "eviction"), True),
        (req("delete", "", "pods", "apps", "p"), False),
        (req("update", "", "pods", "apps", "p", "status"), False),
        (req("create", "", "events", "apps"), True),
        (req("patch", "", "events", "apps", "e"), True),
        (req("update", "", "events", "apps", "e"), False),
        (req("list", "", "services"), False),
        (req("get", "apps", "replicasets", "apps", "rs"), False),
        (req("get", "", "", ""), True),
        (req("patch", "cluster.x-k8s.io", "machinesets", "ns", "ms", "scale"), False),
    ],
    ids=[
        "list-nodes",
        "no-node-deletion",
        "no-node-creation",
        "status-only-in-own-namespace",
        "only-named-configmaps",
        "status-configmap",
        "no-configmap-deletion",
        "priority-expander-configmap-read-from-the-cache",
        "configmap-cache",
        "configmap-cache-only-in-own-namespace",
        "only-own-lease",
        "lease-creation",
        "lease-creation-only-in-own-namespace",
        "evictions",
        "no-pod-deletion",
        "no-pod-status",
        "events",
        "event-patches",
        "no-event-updates",
        "no-services",
        "caches-are-not-read-by-name",
        "discovery",
        "no-machine-api-without-its-manifest",
    ],
)
def test_authorizer_model(request_, allowed):
    assert authorized(request_) is allowed


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


def deployment_options() -> AutoscalingOptions:
    """The options of the Deployment's container, parsed as the binary parses them."""
    args = container_args()
    host, registry = load_plugins(args)
    options, _ = parse_autoscaler_args(args, host, registry)
    return options


def test_deployment_namespace_is_that_of_the_role_and_service_account():
    options = deployment_options()
    namespace = by_kind("ServiceAccount")["metadata"]["namespace"]
    assert options.namespace == namespace
    assert options.lease_namespace == namespace
    assert by_kind("Deployment")["metadata"]["namespace"] == namespace
    assert by_kind("RoleBinding")["metadata"]["namespace"] == namespace


def pod(name: str, namespace: str, node: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def test_rbac_grants_exactly_the_calls_of_the_kubernetes_integration(fake_kube):
    """Every call of the Kubernetes edge, wired from the Deployment's flags, is allowed by
    deploy/aws/rbac.yaml, and every permission there is used by one of them (cluster-wide ones
    by a call that no Role in the autoscaler's namespace could serve)."""
    options = deployment_options()
    fake_kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}})
    # Pods in two namespaces: evictions and reads are not tied to one namespace.
    for name, namespace in (("p1", "apps"), ("q1", "batch")):
        fake_kube.create(pod(name, namespace, "n1"))

    api = fake_kube.api_client()
    runtime = KubeRuntime.from_options(options, api_client=api, identity="me", serve=False)
    try:
        assert runtime.elector is not None and runtime.status_writer is not None
        with runtime.source as source:
            assert source.wait_for_sync(10)
            source.snapshot()

        actions = runtime.actions
        actions.add_taint("n1", Taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule"))
        actions.remove_taint("n1", "ToBeDeletedByClusterAutoscaler")
        actions.set_unschedulable("n1", True)
        for name, namespace in (("p1", "apps"), ("q1", "batch")):
            evicted = parse_pod(fake_kube.get("pods", name, namespace))
            actions.evict(evicted, 30)
            assert not actions.pod_exists(evicted)

        # Leader election: create the Lease, renew it, release it.
        assert runtime.elector.try_acquire_or_renew()
        assert runtime.elector.try_acquire_or_renew()
        # The status ConfigMap: created, then updated.
        assert runtime.status_writer.write(AutoscalerStatus(time=datetime.now(UTC)))
        assert runtime.status_writer.write(AutoscalerStatus(time=datetime.now(UTC)))

        recorder = runtime.recorder
        recorder.normal(
            ObjectRef.pod("apps", "p1"), "ScaleDown", "deleting pod for node scale down"
        )
        # The same event five minutes later patches the first one (its count plus one).
        sink = recorder.sink
        assert isinstance(sink, BackgroundEventSink) and sink.flush()
        later = datetime.now(UTC) + timedelta(minutes=5)
        recorder.clock = sink.sink.correlator.clock = lambda: later
        recorder.normal(
            ObjectRef.pod("apps", "p1"), "ScaleDown", "deleting pod for node scale down"
        )
        recorder.normal(
            ObjectRef.node("n1"), "ScaleDown", "marked the node as toBeDeleted/unschedulable"
        )
        recorder.normal(runtime.status_ref, "ScaledUpGroup", "m")
        assert isinstance(recorder.sink, BackgroundEventSink)
        assert recorder.sink.flush()
        assert runtime.elector.release()
    finally:
        runtime.stop()
        api.close()

    # Every call succeeded except the reads that find nothing (the Lease and the ConfigMap
    # before their creation, the evicted pods): a failed exercise would prove little.
    failed = {(r.verb, r.status) for r in fake_kube.requests if r.status >= 400}
    assert failed <= {("get", 404)}
    rbac = authorizer("aws/rbac.yaml")
    assert rbac.denied(fake_kube.requests) == []
    assert [str(g) for g in rbac.unused(fake_kube.requests)] == []


def test_the_sim_manifest_grants_exactly_the_node_calls_of_the_sim_provider(fake_kube):
    """`--cloud-provider=sim` against an API server creates and deletes Node objects."""
    config = {
        "nodeGroups": [
            {
                "name": "small",
                "minSize": 0,
                "maxSize": 3,
                "template": {"status": {"capacity": {"cpu": "2", "memory": "8Gi"}}},
            }
        ]
    }
    options = dataclasses.replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: config})
    api = fake_kube.api_client()
    try:
        provider = build_sim_provider(ProviderContext(options=options, kube_api=api))
        [small] = provider.node_groups()
        small.increase_size(1)
        provider.refresh()
        small.delete_nodes(list(provider.backend.list_nodes()))
    finally:
        api.close()

    assert fake_kube.list("nodes") == []
    assert [r for r in fake_kube.requests if r.status >= 400] == []
    assert authorizer("sim/rbac.yaml").denied(fake_kube.requests) == []
    # Creating and deleting Node objects is the sim (and kwok) provider's alone.
    assert authorizer("aws/rbac.yaml").denied(fake_kube.requests) != []


def test_provisioning_request_rbac_is_granted_with_the_flag_and_exactly_used(tmp_path):
    """With `extraArgs.enable-provisioning-requests`, the chart grants the calls of the
    ProvisioningRequest caches and status writer, each of them used; without, none."""
    from clusterscaler.loop.decisions import ProvisioningRequestResult
    from clusterscaler.model.provisioning import CHECK_CAPACITY, Condition
    from clusterscaler.testing import helm
    from clusterscaler.testing.fakekube import FakeKubeServer, provisioning_request_resources

    def rbac(name: str, **extra_args: object) -> RbacAuthorizer:
        docs = helm.template({"cloudProvider": "kwok", "extraArgs": extra_args})
        path = tmp_path / name
        path.write_text(yaml.safe_dump_all(docs))
        [account] = [d for d in docs if d["kind"] == "ServiceAccount"]
        return RbacAuthorizer.from_manifests(
            [path], service_account=account["metadata"]["name"]
        )

    with_flag = rbac("on.yaml", **{"enable-provisioning-requests": True})
    without = rbac("off.yaml")

    options = dataclasses.replace(deployment_options(), enable_provisioning_requests=True)
    with FakeKubeServer(resources=provisioning_request_resources()) as fake:
        fake.create({
            "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": "train", "namespace": "batch"},
            "spec": {"provisioningClassName": CHECK_CAPACITY,
                     "podSets": [{"podTemplateRef": {"name": "w"}, "count": 1}]},
        })
        api = fake.api_client()
        runtime = KubeRuntime.from_options(options, api_client=api, identity="me", serve=False)
        try:
            with runtime.source as source:
                assert source.wait_for_sync(10)
                assert [r.key for r in source.snapshot().provisioning_requests] == ["batch/train"]
            assert runtime.provreq_writer is not None
            changed = ProvisioningRequestResult(
                "batch", "train", CHECK_CAPACITY,
                (Condition("Provisioned", "True", "CapacityIsFound", "m",
                           datetime.now(UTC)),),
                ("Provisioned",),
            )
            assert runtime.provreq_writer.write([changed]) == 1
            # A week after: deleted, as CA deletes it.
            old = dataclasses.replace(changed, changed=(), delete=True)
            assert runtime.provreq_writer.write([old]) == 1
        finally:
            runtime.stop()
            api.close()
        calls = [r for r in fake.requests
                 if r.resource in ("provisioningrequests", "podtemplates")]
    assert {(r.verb, r.resource, r.subresource) for r in calls} >= {
        ("list", "provisioningrequests", ""), ("watch", "provisioningrequests", ""),
        ("get", "provisioningrequests", ""), ("update", "provisioningrequests", "status"),
        ("delete", "provisioningrequests", ""),
        ("list", "podtemplates", ""), ("watch", "podtemplates", ""),
    }
    assert with_flag.denied(calls) == []
    assert len(without.denied(calls)) == len({(r.verb, r.resource, r.subresource)
                                              for r in calls})
    # Each permission the flag adds is used by one of these calls.
    added = {str(g) for g in with_flag.grants()} - {str(g) for g in without.grants()}
    assert added and added.isdisjoint(str(g) for g in with_flag.unused(calls))


def test_capacity_buffer_rbac_is_granted_with_the_flags_and_exactly_used(tmp_path):
    """With the capacity-buffer flags, the chart grants the calls of the buffer caches,
    the managed PodTemplates (built by a pod dry-run) and the status writer, each used;
    without, none."""
    from clusterscaler.loop.capacitybuffers import CapacityBufferProcessor
    from clusterscaler.testing import helm
    from clusterscaler.testing.fakekube import FakeKubeServer, capacity_buffer_resources

    def rbac(name: str, **extra_args: object) -> RbacAuthorizer:
        docs = helm.template({"cloudProvider": "kwok", "extraArgs": extra_args})
        path = tmp_path / name
        path.write_text(yaml.safe_dump_all(docs))
        [account] = [d for d in docs if d["kind"] == "ServiceAccount"]
        return RbacAuthorizer.from_manifests(
            [path], service_account=account["metadata"]["name"]
        )

    flags = {"capacity-buffer-controller-enabled": True,
             "capacity-buffer-pod-injection-enabled": True}
    with_flags = rbac("on.yaml", **flags)
    injection_only = rbac("inject.yaml", **{"capacity-buffer-pod-injection-enabled": True})
    without = rbac("off.yaml")

    options = dataclasses.replace(
        deployment_options(),
        capacity_buffer_controller_enabled=True,
        capacity_buffer_pod_injection_enabled=True,
    )
    with FakeKubeServer(resources=capacity_buffer_resources()) as fake:
        fake.create({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "spare", "namespace": "web"},
            "spec": {"podTemplateRef": {"name": "spare"}, "replicas": 2},
        })
        fake.create({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": "spare", "namespace": "web"},
            "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        })
        api = fake.api_client()
        runtime = KubeRuntime.from_options(options, api_client=api, identity="me", serve=False)
        now = datetime.now(UTC)
        try:
            with runtime.source as source:
                assert source.wait_for_sync(10)
                objects = source.snapshot()
            processor = CapacityBufferProcessor.from_options(options)
            processor.run(objects.capacity_buffers, objects.pod_templates, now=now)
            [result] = processor.results()
            assert runtime.buffer_writer is not None
            assert runtime.buffer_writer.write([result], now) == 1
            # The source changed: the managed template is updated.
            assert result.template is not None
            changed = dataclasses.replace(result, template=dataclasses.replace(
                result.template,
                template={**result.template.template, "metadata": {"labels": {"v": "2"}}},
            ))
            runtime.buffer_writer.write([changed], now)
        finally:
            runtime.stop()
            api.close()
        calls = [r for r in fake.requests
                 if r.resource in ("capacitybuffers", "podtemplates", "resourcequotas")
                 or (r.resource == "pods" and r.verb == "create")]
    assert {(r.verb, r.resource, r.subresource) for r in calls} >= {
        ("list", "capacitybuffers", ""), ("watch", "capacitybuffers", ""),
        ("get", "capacitybuffers", ""), ("update", "capacitybuffers", "status"),
        ("list", "resourcequotas", ""), ("watch", "resourcequotas", ""),
        ("list", "podtemplates", ""), ("watch", "podtemplates", ""),
        ("get", "podtemplates", ""), ("create", "podtemplates", ""),
        ("update", "podtemplates", ""), ("create", "pods", ""),
    }
    assert with_flags.denied(calls) == []
    # The injection alone reads and writes the status, never a template or a pod.
    assert {(verb, resource) for verb, _, resource, _, _ in injection_only.denied(calls)} == {
        ("get", "podtemplates"), ("create", "podtemplates"), ("update", "podtemplates"),
        ("create", "pods"),
    }
    assert without.denied(calls)
    added = {str(g) for g in with_flags.grants()} - {str(g) for g in without.grants()}
    assert added and added.isdisjoint(str(g) for g in with_flags.unused(calls))
