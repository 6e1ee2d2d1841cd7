"""Scale from zero from infrastructure machine templates, paused groups, MachineSet revisions.

Through the fake API server, serving an infrastructure provider's template kind as a CRD
would: the provider finds its plural by API discovery and reads the template with a GET.
"""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.interfaces.cloudprovider import CloudProviderError, ConfigurationError
from clusterscaler.model import Resources
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.fakekube_resources import ResourceType
from clusterscaler_machineapi.apigroups import ApiGroup
from clusterscaler_machineapi.infrastructure import InfrastructureTemplates
from clusterscaler_machineapi.kubeapi import KubeApi
from clusterscaler_machineapi.objects import parse_scalable
from clusterscaler_machineapi.template import CannotScaleFromZeroError
from machineapi_builders import CAPI, limits, machine, node, scalable

INFRA = "infrastructure.cluster.x-k8s.io"
TEMPLATES = f"dockermachinetemplates.{INFRA}"
GIB = 1024**3
MD_ID = "MachineDeployment/team-a/md"
CAP = "capacity.cluster-autoscaler.kubernetes.io"


@pytest.fixture(autouse=True)
def infra_kind(kube: FakeKubeServer) -> None:
    kube.register_resource(
        ResourceType(INFRA, ("v1beta2", "v1beta1"), "DockerMachineTemplate", "dockermachinetemplates")
    )


def infra_template(
    name: str = "md-tmpl",
    *,
    capacity: dict[str, Any] | None = None,
    node_info: dict[str, Any] | None = None,
    namespace: str = "team-a",
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if capacity is not None:
        status["capacity"] = capacity
    if node_info is not None:
        status["nodeInfo"] = node_info
    return {
        "apiVersion": f"{INFRA}/v1beta2",
        "kind": "DockerMachineTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {}}},
        "status": status,
    }


def with_ref(obj: dict[str, Any], ref: dict[str, Any] | None = None, name: str = "md-tmpl") -> dict[str, Any]:
    obj["spec"]["template"]["spec"]["infrastructureRef"] = ref or {
        "apiVersion": f"{INFRA}/v1beta1",
        "kind": "DockerMachineTemplate",
        "name": name,
    }
    return obj


def deployment(
    annotations: dict[str, str] | None = None,
    *,
    ref: dict[str, Any] | None = None,
    replicas: int = 0,
    template_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    obj = scalable(
        "md",
        group=CAPI,
        kind="MachineDeployment",
        namespace="team-a",
        replicas=replicas,
        annotations={**limits(CAPI, 0, 5), **(annotations or {})},
        template_labels=template_labels,
    )
    return with_ref(obj, ref)


def problems(provider: Any, group_id: str = MD_ID) -> dict[str, str]:
    return {p.reason: p.message for p in provider.problems() if p.node_group == group_id}


def test_capacity_and_system_info_come_from_the_template(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(
        infra_template(
            capacity={"cpu": "8", "memory": "32Gi", "ephemeral-storage": "100Gi", "nvidia.com/gpu": "1"},
            node_info={"operatingSystem": "linux", "architecture": "arm64"},
        )
    )
    kube.create(deployment())
    provider = make_provider()
    [group] = provider.node_groups()
    assert problems(provider) == {}
    info = group.template_node_info()
    assert info.node.capacity == Resources(
        cpu=8000, memory=32 * GIB, pods=110, ephemeral_storage=100 * GIB, extended={"nvidia.com/gpu": 1}
    )
    assert info.node.allocatable == info.node.capacity
    assert info.node.labels["kubernetes.io/arch"] == "arm64"
    assert info.node.labels["beta.kubernetes.io/arch"] == "arm64"
    assert info.node.labels["kubernetes.io/os"] == "linux"


def test_annotations_win_over_the_template(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(infra_template(capacity={"cpu": "8", "memory": "32Gi", "pods": "60"}))
    kube.create(deployment({f"{CAP}/cpu": "2", f"{CAP}/labels": "kubernetes.io/arch=s390x"}))
    [group] = make_provider().node_groups()
    info = group.template_node_info()
    assert (info.node.capacity.cpu, info.node.capacity.memory, info.node.capacity.pods) == (2000, 32 * GIB, 60)
    assert info.node.labels["kubernetes.io/arch"] == "s390x"


def test_v1beta2_reference_by_api_group_uses_the_preferred_version(
    kube: FakeKubeServer, make_provider: Any
) -> None:
    kube.create(infra_template(capacity={"cpu": "4", "memory": "8Gi"}))
    kube.create(deployment(ref={"apiGroup": INFRA, "kind": "DockerMachineTemplate", "name": "md-tmpl"}))
    [group] = make_provider().node_groups()
    assert group.template_node_info().node.capacity.cpu == 4000
    gets = [r.path for r in kube.requests if r.method == "GET" and "dockermachinetemplates" in r.path]
    assert gets and all(f"/apis/{INFRA}/v1beta2/namespaces/team-a/" in p for p in gets)


def test_default_arch_from_the_environment(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(infra_template(capacity={"cpu": "4", "memory": "8Gi"}))
    kube.create(deployment())
    [group] = make_provider(environ={"CAPI_SCALE_ZERO_DEFAULT_ARCH": "arm64"}).node_groups()
    assert group.template_node_info().node.labels["kubernetes.io/arch"] == "arm64"


def test_an_unknown_default_arch_is_refused(kube: FakeKubeServer, make_provider: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"CAPI_SCALE_ZERO_DEFAULT_ARCH='x86'.*amd64, arm64"):
        make_provider(environ={"CAPI_SCALE_ZERO_DEFAULT_ARCH": "x86"})


def test_a_missing_template_is_a_named_problem(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(deployment())
    provider = make_provider()
    found = problems(provider)
    assert "DockerMachineTemplate team-a/md-tmpl" in found["InvalidInfrastructureTemplate"]
    assert "does not exist" in found["InvalidInfrastructureTemplate"]
    assert "MachineDeployment team-a/md" in found["InvalidInfrastructureTemplate"]
    assert "CannotScaleFromZero" in found
    [group] = provider.node_groups()
    with pytest.raises(CannotScaleFromZeroError):
        group.template_node_info()


def test_a_template_without_capacity_cannot_scale_from_zero(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(infra_template())
    kube.create(deployment())
    found = problems(make_provider())
    assert list(found) == ["CannotScaleFromZero"]
    assert "status.capacity of its infrastructure template DockerMachineTemplate team-a/md-tmpl" in found[
        "CannotScaleFromZero"
    ]


@pytest.mark.parametrize(
    ("capacity", "node_info", "message"),
    [
        ({"cpu": "four", "memory": "8Gi"}, None, "DockerMachineTemplate team-a/md-tmpl: status.capacity.cpu: expected a Kubernetes quantity"),
        ({"cpu": "4", "memory": ["8Gi"]}, None, "status.capacity.memory: expected a Kubernetes quantity"),
        ({"cpu": "4", "memory": "8Gi"}, {"architecture": 64}, "status.nodeInfo.architecture: expected a string"),
    ],
    ids=["bad-quantity", "not-a-string", "bad-arch"],
)
def test_bad_template_fields_name_the_template_and_field(
    kube: FakeKubeServer, make_provider: Any, capacity: dict[str, Any], node_info: Any, message: str
) -> None:
    kube.create(infra_template(capacity=capacity, node_info=node_info))
    kube.create(deployment())
    provider = make_provider()
    found = " ".join(problems(provider).values())
    assert message in found
    [group] = provider.node_groups()
    with pytest.raises(ConfigurationError, match="DockerMachineTemplate team-a/md-tmpl"):
        group.template_node_info()


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"kind": "DockerMachineTemplate", "name": "x"}, "expected apiVersion (group/version) or apiGroup"),
        ({"apiVersion": "v1beta1", "kind": "DockerMachineTemplate", "name": "x"}, "infrastructureRef.apiVersion: expected group/version"),
        ({"apiVersion": f"{INFRA}/v1beta1", "name": "x"}, "infrastructureRef.kind: expected a non-empty string"),
        ({"apiVersion": f"{INFRA}/v1beta1", "kind": "NoSuchTemplate", "name": "x"}, f"{INFRA}/v1beta1 serves no kind NoSuchTemplate"),
        ({"apiGroup": "infrastructure.example.com", "kind": "T", "name": "x"}, "API group infrastructure.example.com is not served"),
    ],
    ids=["no-version", "version-without-group", "no-kind", "unknown-kind", "unknown-group"],
)
def test_bad_references_name_the_resource_and_field(
    kube: FakeKubeServer, make_provider: Any, ref: dict[str, Any], message: str
) -> None:
    kube.create(deployment({f"{CAP}/cpu": "2", f"{CAP}/memory": "4Gi"}, ref=ref))
    provider = make_provider()
    found = problems(provider)
    assert message in found["InvalidInfrastructureTemplate"]
    assert "MachineDeployment team-a/md" in found["InvalidInfrastructureTemplate"]
    # The annotations still describe a node: the group scales from zero on them.
    [group] = provider.node_groups()
    assert group.template_node_info().node.capacity.cpu == 2000


def test_a_group_that_cannot_reach_zero_reads_its_template_only_when_asked(
    kube: FakeKubeServer, make_provider: Any
) -> None:
    kube.create(infra_template(capacity={"cpu": "4", "memory": "8Gi"}))
    obj = deployment(replicas=2)
    obj["metadata"]["annotations"].update(limits(CAPI, 1, 5))
    kube.create(obj)
    provider = make_provider()
    [group] = provider.node_groups()
    assert not [r for r in kube.requests if "dockermachinetemplates" in r.path]
    assert group.template_node_info().node.capacity.cpu == 4000


def test_templates_are_read_once_per_ttl() -> None:
    now = [0.0]
    calls: list[tuple[str, ...]] = []

    class Api:
        def preferred_versions(self) -> dict[str, str]:
            return {INFRA: "v1beta2"}

        def resource_kinds(self, group: str, version: str) -> dict[str, str]:
            return {"DockerMachineTemplate": "dockermachinetemplates"}

        def get(self, *args: str) -> dict[str, Any]:
            calls.append(args)
            return infra_template(capacity={"cpu": "1", "memory": "1Gi"})

    lookup = InfrastructureTemplates(Api(), ttl=60, clock=lambda: now[0])  # type: ignore[arg-type]
    resource = parse_scalable(deployment(), ApiGroup(CAPI, "v1beta1"), "MachineDeployment")
    lookup(resource)
    lookup(resource)
    assert len(calls) == 1
    now[0] = 61
    template = lookup(resource)
    assert len(calls) == 2
    assert template is not None and template.capacity == {"cpu": "1", "memory": "1Gi"}


def test_dra_driver_gpus_are_not_an_extended_resource(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(
        deployment(
            {
                f"{CAP}/cpu": "4",
                f"{CAP}/memory": "8Gi",
                f"{CAP}/gpu-count": "2",
                f"{CAP}/dra-driver": "gpu.nvidia.com",
                f"{CAP}/csi-driver": "ebs.csi.aws.com=25, efs.csi.aws.com=0",
            }
        )
    )
    kube.create(infra_template())
    [group] = make_provider().node_groups()
    info = group.template_node_info()
    node = info.node
    assert node.capacity.extended == {}
    # The CSI drivers a new node has, with their attach limits (0: none stated).
    assert node.csi_volume_limits == {"ebs.csi.aws.com": 25, "efs.csi.aws.com": None}
    # The GPUs are the devices of the driver's ResourceSlice, as upstream predicts it: one
    # pool named after the node, `gpu-<i>` of type gpu.
    [gpus] = info.resource_slices
    assert (gpus.driver, gpus.node_name, gpus.pool.name) == ("gpu.nvidia.com", node.name, node.name)
    assert [d.name for d in gpus.devices] == ["gpu-0", "gpu-1"]
    assert all(d.attributes == {"gpu.nvidia.com/type": "gpu"} for d in gpus.devices)


def test_gpus_without_a_dra_driver_have_no_slices(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(deployment({f"{CAP}/cpu": "4", f"{CAP}/memory": "8Gi", f"{CAP}/gpu-count": "2"}))
    kube.create(infra_template())
    [group] = make_provider().node_groups()
    info = group.template_node_info()
    assert info.resource_slices == ()
    assert info.node.capacity.extended == {"nvidia.com/gpu": 2}


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({f"{CAP}/dra-driver": "GPU_nvidia", f"{CAP}/gpu-count": "2"},
         f"annotation {CAP}/dra-driver: expected a DRA driver name: a lowercase DNS subdomain "
         "of at most 63 characters, such as gpu.nvidia.com, got 'GPU_nvidia'"),
        ({f"{CAP}/dra-driver": " ", f"{CAP}/gpu-count": "2"},
         f"annotation {CAP}/dra-driver: expected a DRA driver name"),
        ({f"{CAP}/dra-driver": "gpu.nvidia.com", f"{CAP}/gpu-count": "129"},
         f"annotation {CAP}/gpu-count: expected at most 128 GPUs for one DRA driver (one "
         "ResourceSlice), got '129'"),
    ],
    ids=["bad-driver", "empty-driver", "too-many-gpus"],
)
def test_bad_dra_annotations_are_named(kube: FakeKubeServer, make_provider: Any, annotations: dict[str, str], message: str) -> None:
    kube.create(infra_template())
    kube.create(deployment({f"{CAP}/cpu": "4", f"{CAP}/memory": "8Gi", **annotations}))
    found = problems(make_provider())
    assert message in found["InvalidCapacityAnnotations"], found
    assert "MachineDeployment team-a/md" in found["InvalidCapacityAnnotations"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ebs.csi.aws.com", "csi-driver: expected a list of driver=volume-limit"),
        ("ebs.csi.aws.com=-1", "csi-driver: expected a list of driver=volume-limit"),
        ("=3", "csi-driver: expected a list of driver=volume-limit"),
    ],
)
def test_bad_csi_driver_annotations_are_named(kube: FakeKubeServer, make_provider: Any, value: str, message: str) -> None:
    kube.create(infra_template())
    kube.create(deployment({f"{CAP}/cpu": "4", f"{CAP}/memory": "8Gi", f"{CAP}/csi-driver": value}))
    found = problems(make_provider())
    assert message in found["InvalidCapacityAnnotations"]
    assert "MachineDeployment team-a/md" in found["InvalidCapacityAnnotations"]


# --------------------------------------------------------------------------- paused groups


def test_paused_groups_are_not_scaled_and_say_why(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(infra_template(capacity={"cpu": "4", "memory": "8Gi"}))
    kube.create(deployment({"cluster.x-k8s.io/paused": ""}))
    ms = kube.create(
        scalable(
            "ms",
            group=CAPI,
            namespace="team-a",
            replicas=1,
            annotations={**limits(CAPI, 1, 3), "cluster.x-k8s.io/paused": "true"},
        )
    )
    kube.create(machine(ms, "m1"))
    kube.create(node("m1"))
    provider = make_provider()
    assert provider.node_groups() == []
    assert "is paused (annotation cluster.x-k8s.io/paused)" in problems(provider)["Paused"]
    assert "MachineSet team-a/ms is paused" in problems(provider, "MachineSet/team-a/ms")["Paused"]
    from clusterscaler.model import parse_node

    raw = kube.get("nodes", "m1")
    assert raw is not None
    assert provider.node_group_for_node(parse_node(raw)) is None

    kube.patch(f"machinedeployments.{CAPI}", "md", {"metadata": {"annotations": {"cluster.x-k8s.io/paused": None}}}, "team-a")
    provider.refresh()
    assert [g.id for g in provider.node_groups()] == [MD_ID]


# --------------------------------------------------------------------------- revisions


def machine_set_of(md: dict[str, Any], name: str, revision: str | None, template_labels: dict[str, str]) -> dict[str, Any]:
    annotations = {} if revision is None else {"machinedeployment.clusters.x-k8s.io/revision": revision}
    obj = scalable(name, group=CAPI, namespace="team-a", owner=md, annotations=annotations, template_labels=template_labels)
    return with_ref(obj, name=f"{name}-tmpl")


def test_the_current_machine_set_is_the_template_source(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(infra_template("old-tmpl", capacity={"cpu": "2", "memory": "4Gi"}))
    kube.create(infra_template("new-tmpl", capacity={"cpu": "16", "memory": "64Gi"}))
    md = kube.create(deployment(template_labels={"tier": "md"}))
    kube.create(machine_set_of(md, "old", "9", {"tier": "old"}))
    kube.create(machine_set_of(md, "new", "10", {"tier": "new"}))
    [group] = make_provider().node_groups()
    info = group.template_node_info()
    assert info.node.capacity.cpu == 16000
    assert info.node.labels["tier"] == "new"


def test_a_bad_revision_is_named_and_the_deployment_is_the_source(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(infra_template(capacity={"cpu": "4", "memory": "8Gi"}))
    md = kube.create(deployment(template_labels={"tier": "md"}))
    kube.create(machine_set_of(md, "new", "ten", {"tier": "new"}))
    provider = make_provider()
    message = problems(provider)["InvalidRevisionAnnotation"]
    assert "MachineSet team-a/new: annotation machinedeployment.clusters.x-k8s.io/revision: expected a non-negative integer, got 'ten'" in message
    [group] = provider.node_groups()
    assert group.template_node_info().node.labels["tier"] == "md"


@pytest.mark.parametrize(
    ("cluster_spec", "cluster_annotations", "how"),
    [
        ({"paused": True}, {}, "spec.paused is true"),
        ({}, {"cluster.x-k8s.io/paused": ""}, "annotation cluster.x-k8s.io/paused"),
    ],
    ids=["spec", "annotation"],
)
@pytest.mark.parametrize("watch", [False, True])
def test_the_groups_of_a_paused_cluster_are_not_scaled(
    kube: FakeKubeServer,
    make_provider: Any,
    cluster_spec: dict[str, Any],
    cluster_annotations: dict[str, str],
    how: str,
    watch: bool,
) -> None:
    kube.register_resource(ResourceType(CAPI, ("v1beta1",), "Cluster", "clusters"))
    kube.create(
        {
            "apiVersion": f"{CAPI}/v1beta1",
            "kind": "Cluster",
            "metadata": {"name": "prod", "namespace": "team-a", "annotations": cluster_annotations},
            "spec": cluster_spec,
        }
    )
    kube.create(infra_template(capacity={"cpu": "4", "memory": "8Gi"}))
    obj = deployment()
    obj["spec"]["clusterName"] = "prod"
    kube.create(obj)
    other = scalable("other", group=CAPI, namespace="team-a", annotations=limits(CAPI, 1, 3), replicas=1, cluster_name="dev")
    kube.create(other)
    provider = make_provider(watch=watch)
    assert [g.id for g in provider.node_groups()] == ["MachineSet/team-a/other"]
    assert f"MachineDeployment team-a/md belongs to Cluster team-a/prod, which is paused ({how})" in problems(provider)["Paused"]

    kube.patch(f"clusters.{CAPI}", "prod", {"spec": {"paused": False}, "metadata": {"annotations": None}}, "team-a")
    if watch:
        import time

        deadline = time.monotonic() + 5
        while len(provider.node_groups()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            provider.refresh()
    else:
        provider.refresh()
    assert sorted(g.id for g in provider.node_groups()) == [MD_ID, "MachineSet/team-a/other"]


def test_a_bad_cluster_pause_is_named(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.register_resource(ResourceType(CAPI, ("v1beta1",), "Cluster", "clusters"))
    kube.create(
        {"apiVersion": f"{CAPI}/v1beta1", "kind": "Cluster", "metadata": {"name": "prod", "namespace": "team-a"}, "spec": {"paused": "yes"}}
    )
    obj = deployment({f"{CAP}/cpu": "2", f"{CAP}/memory": "4Gi"})
    obj["spec"]["clusterName"] = "prod"
    kube.create(obj)
    provider = make_provider()
    assert provider.node_groups() == []
    assert "Cluster team-a/prod: spec.paused: expected true or false, got 'yes'" in problems(provider, "Cluster/team-a/prod")["InvalidObject"]


def test_a_forbidden_template_is_unavailable_and_read_again_later(kube: FakeKubeServer, api_client: Any) -> None:
    kube.create(infra_template(capacity={"cpu": "4", "memory": "8Gi"}))
    fault = kube.add_fault(method="GET", path="/dockermachinetemplates/", status=403, message="forbidden")
    now = [0.0]
    lookup = InfrastructureTemplates(KubeApi(api_client), failure_ttl=30, clock=lambda: now[0])
    resource = parse_scalable(deployment(), ApiGroup(CAPI, "v1beta1"), "MachineDeployment")
    with pytest.raises(CloudProviderError, match=r"MachineDeployment team-a/md: spec.template.spec.infrastructureRef \(DockerMachineTemplate team-a/md-tmpl\): reading the template is forbidden; grant get") as info:
        lookup(resource)
    assert not isinstance(info.value, ConfigurationError)
    kube.remove_fault(fault)
    # The failure is kept for failure_ttl, then the template is read again.
    with pytest.raises(CloudProviderError, match="forbidden"):
        lookup(resource)
    now[0] = 31
    template = lookup(resource)
    assert template is not None and template.capacity["cpu"] == "4"
