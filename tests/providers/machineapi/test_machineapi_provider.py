"""The machineapi provider against the fake Kubernetes API server, over HTTP."""

from __future__ import annotations

import copy
import time
from typing import Any

import clusterscaler_machineapi.plugin as machineapi_plugin
import pytest
import structlog
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    ConfigurationError,
    InstanceErrorClass,
    InstanceState,
    NodeGroup,
    NodeGroupOptions,
)
from clusterscaler.model import Node, Resources, parse_node
from clusterscaler.testing.fakekube import FakeKubeServer, cluster_api_resources
from clusterscaler_machineapi.template import CannotScaleFromZeroError
from machineapi_builders import (
    CAPI,
    OPENSHIFT,
    OPENSHIFT_NS,
    MachineController,
    limits,
    machine,
    node,
    provider_id_for,
    resource_name,
    scalable,
)

MS_OS = resource_name(OPENSHIFT, "MachineSet")
M_OS = resource_name(OPENSHIFT, "Machine")
MS_CAPI = resource_name(CAPI, "MachineSet")
MD_CAPI = resource_name(CAPI, "MachineDeployment")
M_CAPI = resource_name(CAPI, "Machine")
CAP = "capacity.cluster-autoscaler.kubernetes.io"
OS_CAPACITY = {f"{OPENSHIFT}/vCPU": "4", f"{OPENSHIFT}/memoryMb": "16384"}


def as_node(kube: FakeKubeServer, name: str) -> Node:
    raw = kube.get("nodes", name)
    assert raw is not None
    return parse_node(raw)


def replicas(kube: FakeKubeServer, resource: str, name: str, namespace: str = OPENSHIFT_NS) -> int:
    obj = kube.get(resource, name, namespace)
    assert obj is not None
    return int(obj["spec"]["replicas"])


def groups(provider: CloudProvider) -> dict[str, NodeGroup]:
    return {g.id: g for g in provider.node_groups()}


def openshift_set(kube: FakeKubeServer, name: str, *, min_size: int = 0, max_size: int = 5, replicas: int = 0, **kw: Any) -> dict[str, Any]:
    annotations = {**limits(OPENSHIFT, min_size, max_size), **OS_CAPACITY, **kw.pop("annotations", {})}
    return kube.create(scalable(name, replicas=replicas, annotations=annotations, **kw))


# --------------------------------------------------------------------------- registration


def test_registered_as_machineapi_and_clusterapi(register_plugin: Any) -> None:
    registry = register_plugin(machineapi_plugin, name="machineapi")
    assert registry.cloud_providers["machineapi"].factory is machineapi_plugin.build_provider
    assert registry.cloud_providers["clusterapi"].factory is machineapi_plugin.build_provider
    assert registry.aliases["cloud provider"]["clusterapi"] == "machineapi"


def test_provider_satisfies_the_protocols(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers")
    provider = make_provider()
    assert isinstance(provider, CloudProvider)
    assert all(isinstance(g, NodeGroup) for g in provider.node_groups())
    assert provider.name == "machineapi"
    assert provider.gpu_label() == "cluster-api/accelerator"
    assert provider.pricing() is None
    assert provider.resource_limiter() is None


def test_no_kubernetes_connection_is_a_configuration_error() -> None:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.interfaces.providercontext import ProviderContext

    with pytest.raises(ConfigurationError, match="needs a Kubernetes API connection"):
        machineapi_plugin.build_provider(ProviderContext(options=AutoscalingOptions()))


def test_no_machine_api_served_is_a_configuration_error(api_client: Any) -> None:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.interfaces.providercontext import ProviderContext

    with FakeKubeServer() as bare:
        client = bare.api_client()
        try:
            with pytest.raises(ConfigurationError, match="serves none of the API groups"):
                machineapi_plugin.build_provider(
                    ProviderContext(options=AutoscalingOptions(), kube_api=client), environ={}, watch=False
                )
        finally:
            client.close()


# --------------------------------------------------------------------------- discovery


def test_discovers_node_groups_in_both_api_groups(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers")
    kube.create(scalable("not-autoscaled", replicas=2))
    kube.create(scalable("capi-ms", group=CAPI, namespace="team-a", annotations=limits(CAPI, 1, 4)))
    md = kube.create(scalable("capi-md", group=CAPI, kind="MachineDeployment", namespace="team-a", annotations=limits(CAPI, 0, 10)))
    # The MachineSet a MachineDeployment runs is scaled through the deployment only,
    # even when it carries the annotations too.
    kube.create(scalable("capi-md-abc", group=CAPI, namespace="team-a", owner=md, annotations=limits(CAPI, 0, 10)))
    provider = make_provider()
    found = groups(provider)
    assert sorted(found) == [
        "MachineDeployment/team-a/capi-md",
        "MachineSet/openshift-machine-api/workers",
        "MachineSet/team-a/capi-ms",
    ]
    assert (found["MachineSet/team-a/capi-ms"].min_size, found["MachineSet/team-a/capi-ms"].max_size) == (1, 4)
    # The Cluster API groups are at zero without capacity annotations.
    assert {(p.node_group, p.reason) for p in provider.problems()} == {
        ("MachineDeployment/team-a/capi-md", "CannotScaleFromZero"),
        ("MachineSet/team-a/capi-ms", "CannotScaleFromZero"),
    }


def test_openshift_lists_its_namespace_unless_discovery_says_otherwise(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers")
    openshift_set(kube, "elsewhere", namespace="other")
    assert list(groups(make_provider())) == ["MachineSet/openshift-machine-api/workers"]
    assert list(groups(make_provider(["clusterapi:namespace=other"]))) == ["MachineSet/other/elsewhere"]
    paths = {r.path for r in kube.requests if r.resource == "machinesets" and r.method == "GET"}
    assert "/apis/machine.openshift.io/v1beta1/namespaces/other/machinesets" in paths


def test_discovery_by_cluster_name_and_labels(kube: FakeKubeServer, make_provider: Any) -> None:
    for name, cluster, color in [("a", "prod", "green"), ("b", "prod", "blue"), ("c", "dev", "green")]:
        kube.create(scalable(name, group=CAPI, namespace="ns", cluster_name=cluster, labels={"color": color}, annotations=limits(CAPI, 0, 3)))
    provider = make_provider(["clusterapi:clusterName=prod,color=green", "clusterapi:clusterName=dev"])
    assert sorted(groups(provider)) == ["MachineSet/ns/a", "MachineSet/ns/c"]


def test_capi_group_and_version_overrides(make_provider: Any, kube: FakeKubeServer) -> None:
    openshift_set(kube, "workers")
    kube.create(scalable("capi-ms", group=CAPI, namespace="ns", annotations=limits(CAPI, 0, 3)))
    only_openshift = make_provider(environ={"CAPI_GROUP": OPENSHIFT})
    assert list(groups(only_openshift)) == ["MachineSet/openshift-machine-api/workers"]
    with pytest.raises(ConfigurationError, match="does not serve"):
        make_provider(environ={"CAPI_GROUP": CAPI, "CAPI_VERSION": "v1alpha3"})


def test_version_comes_from_discovery() -> None:
    from clusterscaler.framework.options import AutoscalingOptions
    from clusterscaler.interfaces.providercontext import ProviderContext

    with FakeKubeServer(resources=cluster_api_resources(("v1beta2", "v1beta1"))) as server:
        server.create({**scalable("ms", group=CAPI, namespace="ns", annotations=limits(CAPI, 0, 3)), "apiVersion": f"{CAPI}/v1beta2"})
        client = server.api_client()
        try:
            provider = machineapi_plugin.build_provider(ProviderContext(options=AutoscalingOptions(), kube_api=client), environ={}, watch=False)
            assert [a.version for a in provider.apis] == ["v1beta2"]
            pinned = machineapi_plugin.build_provider(
                ProviderContext(options=AutoscalingOptions(), kube_api=client), environ={"CAPI_VERSION": "v1beta1"}, watch=False
            )
            assert [a.version for a in pinned.apis] == ["v1beta1"]
            assert list(groups(pinned)) == ["MachineSet/ns/ms"]
        finally:
            client.close()


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (limits(OPENSHIFT, "x", 3), "min-size: expected a non-negative integer, got 'x'"),
        (limits(OPENSHIFT, -2, 3), "min-size: expected a non-negative integer, got '-2'"),
        (limits(OPENSHIFT, 5, 3), "max-size: expected an integer >="),
    ],
    ids=["non-integer", "negative", "max-below-min"],
)
def test_bad_annotations_are_reported_for_that_group_only(
    kube: FakeKubeServer, make_provider: Any, bad: dict[str, str], fragment: str
) -> None:
    openshift_set(kube, "good")
    kube.create(scalable("broken", annotations=bad))
    provider = make_provider()
    assert list(groups(provider)) == ["MachineSet/openshift-machine-api/good"]
    [problem] = provider.problems()
    assert problem.node_group == "MachineSet/openshift-machine-api/broken"
    assert problem.reason == "InvalidSizeAnnotations"
    assert "MachineSet openshift-machine-api/broken" in problem.message
    assert fragment in problem.message


def test_listing_failure_is_a_provider_error_and_keeps_the_last_view(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers")
    provider = make_provider()
    kube.add_fault(method="GET", path="/machinesets", status=500)
    with pytest.raises(CloudProviderError, match=r"listing \S+/v1beta1 objects failed.*500"):
        provider.refresh()
    assert list(groups(provider)) == ["MachineSet/openshift-machine-api/workers"]


# --------------------------------------------------------------------------- nodes and machines


def test_node_to_group_by_provider_id_or_machine_annotation(kube: FakeKubeServer, make_provider: Any) -> None:
    ms = openshift_set(kube, "workers", replicas=3)
    kube.create(machine(ms, "m1"))
    kube.create(machine(ms, "m2", provider_id=None))
    provider = make_provider()
    group = provider.node_groups()[0]
    # The node spells its provider ID differently from its Machine.
    by_id = Node(name="n1", provider_id="aws://us-east-1a/i-m1")
    by_annotation = Node(name="n2", annotations={f"{OPENSHIFT}/machine": f"{OPENSHIFT_NS}/m2"})
    stranger = Node(name="cp-0", provider_id="aws:///us-east-1a/i-control")
    gone = Node(name="n3", annotations={f"{OPENSHIFT}/machine": f"{OPENSHIFT_NS}/deleted"})
    assert provider.node_group_for_node(by_id) is group
    assert provider.node_group_for_node(by_annotation) is group
    assert provider.node_group_for_node(stranger) is None
    assert provider.node_group_for_node(gone) is None
    assert provider.has_instance(by_id)
    assert provider.has_instance(stranger)  # unknown is not "gone"
    assert not provider.has_instance(gone)


def test_machine_of_a_recreated_machineset_is_not_mapped(kube: FakeKubeServer, make_provider: Any) -> None:
    ms = openshift_set(kube, "workers", replicas=1)
    stale_owner = copy.deepcopy(ms)
    stale_owner["metadata"]["uid"] = "00000000-old"
    kube.create(machine(stale_owner, "m1"))
    provider = make_provider()
    assert provider.node_group_for_node(Node(name="m1", provider_id=provider_id_for("m1"))) is None
    assert provider.node_groups()[0].nodes() == []


def test_machines_of_a_machinedeployment_belong_to_it(kube: FakeKubeServer, make_provider: Any) -> None:
    md = kube.create(scalable("md", group=CAPI, kind="MachineDeployment", namespace="ns", replicas=2, annotations=limits(CAPI, 0, 5)))
    old = kube.create(scalable("md-old", group=CAPI, namespace="ns", owner=md, replicas=1))
    new = kube.create(scalable("md-new", group=CAPI, namespace="ns", owner=md, replicas=1))
    kube.create(machine(old, "a"))
    kube.create(machine(new, "b"))
    provider = make_provider()
    group = groups(provider)["MachineDeployment/ns/md"]
    assert sorted(i.id for i in group.nodes()) == [provider_id_for("a"), provider_id_for("b")]
    assert provider.node_group_for_node(Node(name="b", provider_id=provider_id_for("b"))) is group


def test_nodes_lists_every_machine_with_its_state(kube: FakeKubeServer, make_provider: Any) -> None:
    ms = openshift_set(kube, "workers", replicas=4)
    kube.create(machine(ms, "running"))
    kube.create(machine(ms, "creating", provider_id=None, node_name=None, phase="Provisioning"))
    kube.create(machine(ms, "failed", provider_id=None, node_name=None, phase="Failed", failure_message="InsufficientInstanceCapacity"))
    kube.create(machine(ms, "deleting"))
    kube.patch(M_OS, "deleting", {"metadata": {"finalizers": ["machine.machine.openshift.io"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}, OPENSHIFT_NS)
    provider = make_provider()
    instances = {i.id: i for i in provider.node_groups()[0].nodes()}
    assert instances[provider_id_for("running")].state is InstanceState.RUNNING
    assert instances[provider_id_for("deleting")].state is InstanceState.DELETING
    creating = instances[f"clusterapi://{OPENSHIFT}/{OPENSHIFT_NS}/creating"]
    assert creating.state is InstanceState.CREATING and creating.error is None
    failed = instances[f"clusterapi://{OPENSHIFT}/{OPENSHIFT_NS}/failed"]
    assert failed.state is InstanceState.CREATING
    assert failed.error is not None
    assert failed.error.error_class is InstanceErrorClass.OTHER
    assert failed.error.error_code == "ProvisioningFailed"
    assert "InsufficientInstanceCapacity" in failed.error.error_message
    assert len(instances) == 4


# --------------------------------------------------------------------------- scaling up


def test_increase_size_through_the_scale_subresource(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=1, max_size=4)
    group = make_provider().node_groups()[0]
    assert group.target_size() == 1
    group.increase_size(2)
    assert replicas(kube, MS_OS, "workers") == 3
    assert group.target_size() == 3
    scale_writes = [r for r in kube.requests if r.method == "PATCH"]
    assert [(r.resource, r.subresource) for r in scale_writes] == [("machinesets", "scale")]
    assert scale_writes[0].content_type.startswith("application/merge-patch+json")


@pytest.mark.parametrize("delta", [0, -1], ids=["zero", "negative"])
def test_increase_size_rejects_non_positive(kube: FakeKubeServer, make_provider: Any, delta: int) -> None:
    openshift_set(kube, "workers", replicas=1)
    with pytest.raises(CloudProviderError, match="expected a positive delta"):
        make_provider().node_groups()[0].increase_size(delta)


def test_increase_size_never_goes_above_max(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=2, max_size=3)
    group = make_provider().node_groups()[0]
    with pytest.raises(CloudProviderError, match="> max 3"):
        group.increase_size(2)
    assert replicas(kube, MS_OS, "workers") == 2


def test_increase_size_reads_the_current_size(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=1, max_size=3)
    group = make_provider().node_groups()[0]
    assert group.target_size() == 1
    kube.patch(MS_OS, "workers", {"spec": {"replicas": 3}}, OPENSHIFT_NS)  # someone else scaled
    with pytest.raises(CloudProviderError, match="size increase too large"):
        group.increase_size(1)


def test_machinedeployment_is_scaled_not_its_machinesets(kube: FakeKubeServer, make_provider: Any) -> None:
    md = kube.create(scalable("md", group=CAPI, kind="MachineDeployment", namespace="ns", replicas=1, annotations=limits(CAPI, 1, 5)))
    kube.create(scalable("md-1", group=CAPI, namespace="ns", owner=md, replicas=1))
    group = groups(make_provider())["MachineDeployment/ns/md"]
    group.increase_size(2)
    assert replicas(kube, MD_CAPI, "md", "ns") == 3
    assert replicas(kube, MS_CAPI, "md-1", "ns") == 1


# --------------------------------------------------------------------------- scaling down


def test_delete_nodes_marks_the_machine_then_decrements(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=3, min_size=1)
    controller = MachineController(kube)
    controller.reconcile()
    provider = make_provider()
    group = provider.node_groups()[0]
    victim = sorted(i.id for i in group.nodes())[1]
    victim_name = victim.rsplit("i-", 1)[1]
    before = kube.get(M_OS, victim_name, OPENSHIFT_NS)
    group.delete_nodes([as_node(kube, victim_name)])
    after = kube.get(M_OS, victim_name, OPENSHIFT_NS)
    assert before is not None and after is not None
    added = after["metadata"]["annotations"]
    assert set(added) == {f"{OPENSHIFT}/delete-machine", f"{OPENSHIFT}/cluster-api-delete-machine"}
    # Nothing else about the machine changed.
    for obj in (before, after):
        obj["metadata"].pop("annotations", None)
        obj["metadata"].pop("resourceVersion")
    assert after == before
    assert replicas(kube, MS_OS, "workers") == 2
    controller.reconcile()
    assert kube.get(M_OS, victim_name, OPENSHIFT_NS) is None
    assert len(kube.list(M_OS)) == 2


def test_delete_nodes_capi_uses_its_own_annotation(kube: FakeKubeServer, make_provider: Any) -> None:
    ms = kube.create(scalable("ms", group=CAPI, namespace="ns", replicas=2, annotations=limits(CAPI, 0, 3)))
    kube.create(machine(ms, "a"))
    kube.create(machine(ms, "b"))
    kube.create(node("a"))
    group = make_provider().node_groups()[0]
    group.delete_nodes([as_node(kube, "a")])
    annotations = kube.get(M_CAPI, "a", "ns")["metadata"]["annotations"]  # type: ignore[index]
    assert list(annotations) == [f"{CAPI}/delete-machine"]
    assert replicas(kube, MS_CAPI, "ms", "ns") == 1


def test_delete_nodes_refuses_to_go_below_min(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=2, min_size=1)
    MachineController(kube).reconcile()
    group = make_provider().node_groups()[0]
    nodes = [as_node(kube, m["metadata"]["name"]) for m in kube.list(M_OS)]
    with pytest.raises(CloudProviderError, match=r"min size reached, nodes will not be deleted: 2 - 2 = 0 < min 1$"):
        group.delete_nodes(nodes)
    assert replicas(kube, MS_OS, "workers") == 2
    assert all(not m["metadata"].get("annotations") for m in kube.list(M_OS))


def test_delete_nodes_refuses_nodes_of_other_groups(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "a", replicas=1)
    openshift_set(kube, "b", replicas=1)
    MachineController(kube).reconcile()
    provider = make_provider()
    group_a = groups(provider)["MachineSet/openshift-machine-api/a"]
    node_of_b = next(
        as_node(kube, m["metadata"]["name"]) for m in kube.list(M_OS) if m["metadata"]["name"].startswith("b-")
    )
    with pytest.raises(CloudProviderError, match="belongs to MachineSet/openshift-machine-api/b"):
        group_a.delete_nodes([node_of_b])
    unknown = Node(name="x", provider_id="aws:///us-east-1a/i-unknown")
    with pytest.raises(CloudProviderError, match="has no Machine"):
        group_a.delete_nodes([unknown])
    assert replicas(kube, MS_OS, "a") == 1 and replicas(kube, MS_OS, "b") == 1
    assert all(not m["metadata"].get("annotations") for m in kube.list(M_OS))


def test_failed_resize_takes_the_mark_back(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=2)
    MachineController(kube).reconcile()
    group = make_provider().node_groups()[0]
    name = kube.list(M_OS)[0]["metadata"]["name"]
    kube.add_fault(method="PATCH", path="/scale$", status=500, message="etcd is sad")
    with pytest.raises(CloudProviderError, match=r"setting replicas to 1 .* failed.*etcd is sad"):
        group.delete_nodes([as_node(kube, name)])
    assert replicas(kube, MS_OS, "workers") == 2
    assert not kube.get(M_OS, name, OPENSHIFT_NS)["metadata"].get("annotations")  # type: ignore[index]


def test_delete_nodes_skips_machines_already_deleting(kube: FakeKubeServer, make_provider: Any) -> None:
    ms = openshift_set(kube, "workers", replicas=1)
    kube.create(machine(ms, "m1"))
    kube.create(node("m1"))
    kube.patch(M_OS, "m1", {"metadata": {"finalizers": ["f"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}, OPENSHIFT_NS)
    group = make_provider().node_groups()[0]
    group.delete_nodes([as_node(kube, "m1")])
    assert replicas(kube, MS_OS, "workers") == 1


def test_failed_machine_is_deleted_by_its_instance_id(kube: FakeKubeServer, make_provider: Any) -> None:
    ms = openshift_set(kube, "workers", replicas=2)
    kube.create(machine(ms, "ok"))
    kube.create(machine(ms, "bad", provider_id=None, node_name=None, phase="Failed", failure_message="quota"))
    group = make_provider().node_groups()[0]
    [failed] = [i for i in group.nodes() if i.error is not None]
    # The autoscaler removes failed instances through nodes that carry the instance id.
    group.delete_nodes([Node(name=failed.id, provider_id=failed.id)])
    assert set(kube.get(M_OS, "bad", OPENSHIFT_NS)["metadata"]["annotations"]) == {  # type: ignore[index]
        f"{OPENSHIFT}/delete-machine",
        f"{OPENSHIFT}/cluster-api-delete-machine",
    }
    assert replicas(kube, MS_OS, "workers") == 1


def test_decrease_target_size_cancels_only_machines_without_nodes(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=2)
    controller = MachineController(kube)
    controller.reconcile()
    kube.patch(MS_OS, "workers", {"spec": {"replicas": 4}}, OPENSHIFT_NS)
    controller.reconcile(register_nodes=False)
    group = make_provider().node_groups()[0]
    with pytest.raises(CloudProviderError, match="would delete existing nodes"):
        group.decrease_target_size(-3)
    assert replicas(kube, MS_OS, "workers") == 4
    group.decrease_target_size(-2)
    assert replicas(kube, MS_OS, "workers") == 2
    controller.reconcile()
    remaining = kube.list(M_OS)
    assert len(remaining) == 2
    assert all(m["status"].get("nodeRef") for m in remaining)
    with pytest.raises(CloudProviderError, match="must be negative"):
        group.decrease_target_size(1)


# --------------------------------------------------------------------------- scale from zero


def test_scale_from_zero_template(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(
        scalable(
            "gpu",
            replicas=0,
            annotations={**limits(OPENSHIFT, 0, 3), f"{OPENSHIFT}/vCPU": "8", f"{OPENSHIFT}/memoryMb": "32768", f"{OPENSHIFT}/GPU": "1"},
            template_labels={"node-role.kubernetes.io/gpu": ""},
            provider_spec={"instanceType": "g4dn.2xlarge", "placement": {"availabilityZone": "us-east-1a", "region": "us-east-1"}},
        )
    )
    provider = make_provider()
    info = provider.node_groups()[0].template_node_info()
    assert info.node.allocatable == Resources(cpu=8000, memory=32 * 1024**3, pods=250, extended={"nvidia.com/gpu": 1})
    assert info.node.labels["node.kubernetes.io/instance-type"] == "g4dn.2xlarge"
    assert info.node.labels["node-role.kubernetes.io/gpu"] == ""
    assert provider.problems() == []


def test_group_at_zero_without_capacity_is_kept_reported_and_logged(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(scalable("bare", replicas=0, annotations=limits(OPENSHIFT, 0, 3)))
    openshift_set(kube, "fine")
    with structlog.testing.capture_logs() as logs:
        provider = make_provider()
        provider.refresh()
    bare = groups(provider)["MachineSet/openshift-machine-api/bare"]
    with pytest.raises(CannotScaleFromZeroError) as info:
        bare.template_node_info()
    assert "MachineSet openshift-machine-api/bare cannot scale from zero" in str(info.value)
    [problem] = provider.problems()
    assert (problem.node_group, problem.reason) == ("MachineSet/openshift-machine-api/bare", "CannotScaleFromZero")
    errors = [e for e in logs if e["event"] == "machineapi_node_group_problem"]
    # Logged once, not again on the next refresh.
    assert len(errors) == 1
    assert errors[0]["log_level"] == "error"
    assert f"{CAP}/cpu" in errors[0]["message"]
    groups(provider)["MachineSet/openshift-machine-api/fine"].increase_size(1)


def test_get_options_from_annotations(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", annotations={f"{OPENSHIFT}/autoscaling-options-scaledownutilizationthreshold": "0.3"})
    options = make_provider().node_groups()[0].get_options(NodeGroupOptions(scale_down_utilization_threshold=0.5))
    assert options == NodeGroupOptions(scale_down_utilization_threshold=0.3)


def test_scale_from_zero_to_n_and_back(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=0, min_size=0, max_size=3)
    controller = MachineController(kube)
    provider = make_provider()
    group = provider.node_groups()[0]
    assert group.target_size() == 0 and group.nodes() == []
    group.increase_size(3)
    controller.reconcile(register_nodes=False)
    provider.refresh()
    group = provider.node_groups()[0]
    assert [i.state for i in group.nodes()] == [InstanceState.CREATING] * 3
    controller.register_pending()
    provider.refresh()
    group = provider.node_groups()[0]
    assert [i.state for i in group.nodes()] == [InstanceState.RUNNING] * 3
    group.delete_nodes([as_node(kube, m["metadata"]["name"]) for m in kube.list(M_OS)])
    controller.reconcile()
    provider.refresh()
    assert provider.node_groups()[0].target_size() == 0
    assert kube.list(M_OS) == [] and kube.list("nodes") == []


def test_deleting_the_same_node_again_does_not_decrement_twice(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=3)
    MachineController(kube).reconcile()
    provider = make_provider()
    name = kube.list(M_OS)[0]["metadata"]["name"]
    provider.node_groups()[0].delete_nodes([as_node(kube, name)])
    assert replicas(kube, MS_OS, "workers") == 2
    # A retry in the same loop, and one in the next loop before the controller acted.
    provider.node_groups()[0].delete_nodes([as_node(kube, name)])
    provider.refresh()
    provider.node_groups()[0].delete_nodes([as_node(kube, name)])
    assert replicas(kube, MS_OS, "workers") == 2
    # Another node of the group is still deleted normally.
    other = kube.list(M_OS)[1]["metadata"]["name"]
    provider.node_groups()[0].delete_nodes([as_node(kube, other)])
    assert replicas(kube, MS_OS, "workers") == 1


def test_machineset_of_a_missing_machinedeployment_is_not_scaled(kube: FakeKubeServer, make_provider: Any) -> None:
    ghost = {"apiVersion": f"{CAPI}/v1beta1", "kind": "MachineDeployment", "metadata": {"name": "gone", "uid": "u-gone"}}
    kube.create(scalable("orphan", group=CAPI, namespace="ns", owner=ghost, annotations=limits(CAPI, 0, 3)))
    assert make_provider().node_groups() == []


def test_debug_line_names_limits_and_problems(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(scalable("bare", replicas=0, annotations=limits(OPENSHIFT, 0, 3)))
    line = make_provider().node_groups()[0].debug()
    assert line.startswith("MachineSet/openshift-machine-api/bare (min: 0, max: 3, replicas: 0, machines: 0)")
    assert "CannotScaleFromZero" in line and f"{CAP}/cpu" in line


def test_same_name_in_both_api_groups_is_a_problem_not_a_merge(kube: FakeKubeServer, make_provider: Any) -> None:
    ms_capi = kube.create(scalable("workers", group=CAPI, replicas=1, annotations={**limits(CAPI, 0, 3), f"{CAP}/cpu": "1", f"{CAP}/memory": "1Gi"}))
    ms_os = openshift_set(kube, "workers", replicas=1)
    kube.create(machine(ms_capi, "capi-m"))
    kube.create(machine(ms_os, "os-m"))
    provider = make_provider()
    [group] = provider.node_groups()
    assert group.resource.api.group == CAPI  # type: ignore[attr-defined]
    assert [i.id for i in group.nodes()] == [provider_id_for("capi-m")]
    assert provider.node_group_for_node(Node(name="os-m", provider_id=provider_id_for("os-m"))) is None
    [problem] = provider.problems()
    assert problem.reason == "DuplicateNodeGroup"
    assert "exists in both cluster.x-k8s.io and machine.openshift.io" in problem.message


def test_watched_provider_follows_changes_without_listing_again(kube: FakeKubeServer, make_provider: Any) -> None:
    openshift_set(kube, "workers", replicas=1)
    provider = make_provider(watch=True)
    # MachineSets and Machines of OpenShift; and MachineDeployments of Cluster API.
    deadline = time.monotonic() + 5
    while kube.open_watches < 5:
        assert time.monotonic() < deadline, f"{kube.open_watches} watches open, expected 5"
        time.sleep(0.05)
    lists_before = len([r for r in kube.requests if r.verb == "list"])
    ms = openshift_set(kube, "more", replicas=1)
    kube.create(machine(ms, "m1"))
    deadline = time.monotonic() + 5
    while True:
        provider.refresh()
        found = groups(provider)
        if "MachineSet/openshift-machine-api/more" in found and found["MachineSet/openshift-machine-api/more"].nodes():
            break
        assert time.monotonic() < deadline, "the watch did not deliver the new objects"
        time.sleep(0.05)
    assert len([r for r in kube.requests if r.verb == "list"]) == lists_before
    # Target sizes come from the watched objects too: a loop costs no request.
    requests_before = len(kube.requests)
    assert sorted(g.target_size() for g in provider.node_groups()) == [1, 1]
    assert len(kube.requests) == requests_before
    provider.cleanup()
    deadline = time.monotonic() + 5
    while kube.open_watches:
        assert time.monotonic() < deadline, "cleanup left watches open"
        time.sleep(0.05)
