"""Cluster API MachinePools as node groups, against the fake API server."""

from __future__ import annotations

from typing import Any

import pytest
from clusterscaler.interfaces.cloudprovider import CloudProviderError, InstanceState
from clusterscaler.model import Node, parse_node
from clusterscaler.testing.fakekube import FakeKubeServer
from clusterscaler.testing.fakekube_resources import ResourceType
from machineapi_builders import (
    CAPI,
    limits,
    machine,
    node,
    provider_id_for,
    resource_name,
    scalable,
)

MP = resource_name(CAPI, "MachinePool")
M = resource_name(CAPI, "Machine")
POOL_ID = "MachinePool/capi/pool"
INFRA = "infrastructure.cluster.x-k8s.io"


def pool(
    replicas: int,
    provider_ids: list[str],
    *,
    annotations: dict[str, str] | None = None,
    infra_ref: dict[str, str] | None = None,
) -> dict[str, Any]:
    obj = scalable(
        "pool",
        group=CAPI,
        kind="MachinePool",
        namespace="capi",
        replicas=replicas,
        annotations={**limits(CAPI, 1, 5), **(annotations or {})},
    )
    obj["spec"]["providerIDList"] = provider_ids
    if infra_ref:
        obj["spec"]["template"]["spec"]["infrastructureRef"] = infra_ref
    return obj


def as_node(kube: FakeKubeServer, name: str) -> Node:
    raw = kube.get("nodes", name)
    assert raw is not None
    return parse_node(raw)


def replicas(kube: FakeKubeServer) -> int:
    obj = kube.get(MP, "pool", "capi")
    assert obj is not None
    return int(obj["spec"]["replicas"])


def test_a_pool_without_machines_is_a_node_group_of_its_provider_ids(
    kube: FakeKubeServer, make_provider: Any
) -> None:
    kube.create(pool(2, [provider_id_for("p1"), provider_id_for("p2")]))
    for name in ("p1", "p2", "other"):
        kube.create(node(name))
    provider = make_provider()
    [group] = provider.node_groups()
    assert group.id == POOL_ID
    assert [(i.id, i.state) for i in group.nodes()] == [
        (provider_id_for("p1"), InstanceState.RUNNING),
        (provider_id_for("p2"), InstanceState.RUNNING),
    ]
    assert provider.node_group_for_node(as_node(kube, "p1")).id == POOL_ID
    assert provider.node_group_for_node(as_node(kube, "other")) is None

    group.increase_size(1)
    assert replicas(kube) == 3
    kube.patch(MP, "pool", {"spec": {"replicas": 2}}, "capi")
    provider.refresh()
    [group] = provider.node_groups()
    # No Machine to mark: replicas go down and the pool's provider picks the instance.
    group.delete_nodes([as_node(kube, "p1")])
    assert replicas(kube) == 1
    assert not [r for r in kube.requests if r.method == "PATCH" and r.resource == "machines"]
    with pytest.raises(CloudProviderError, match=r"min size reached, nodes will not be deleted: 1 - 1 = 0 < min 1$"):
        group.delete_nodes([as_node(kube, "p2")])


def test_a_node_of_another_group_is_refused(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(pool(2, [provider_id_for("p1")]))
    kube.create(node("stranger"))
    [group] = make_provider().node_groups()
    with pytest.raises(CloudProviderError, match=r"node stranger .* has no Machine; nothing was deleted"):
        group.delete_nodes([as_node(kube, "stranger")])
    assert replicas(kube) == 2


def test_machine_pool_machines_are_marked_before_the_decrement(
    kube: FakeKubeServer, make_provider: Any
) -> None:
    mp = kube.create(pool(2, [provider_id_for("m1"), provider_id_for("m2")]))
    for name in ("m1", "m2"):
        kube.create(machine(mp, name))
        kube.create(node(name))
    provider = make_provider()
    [group] = provider.node_groups()
    # The Machines carry the pool's provider IDs: each instance is listed once.
    assert sorted(i.id for i in group.nodes()) == [provider_id_for("m1"), provider_id_for("m2")]
    group.delete_nodes([as_node(kube, "m2")])
    marked = kube.get(M, "m2", "capi")
    assert marked is not None and f"{CAPI}/delete-machine" in marked["metadata"]["annotations"]
    assert replicas(kube) == 1


def test_cancelling_counts_the_pool_instances_as_nodes(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(pool(3, [provider_id_for("p1"), provider_id_for("p2")]))
    [group] = make_provider().node_groups()
    with pytest.raises(CloudProviderError, match="would delete existing nodes"):
        group.decrease_target_size(-2)
    group.decrease_target_size(-1)
    assert replicas(kube) == 2


def test_a_pool_scales_from_zero_on_its_infrastructure_machine_pool(
    kube: FakeKubeServer, make_provider: Any
) -> None:
    kube.register_resource(ResourceType(INFRA, ("v1beta1",), "DockerMachinePool", "dockermachinepools"))
    kube.create(
        {
            "apiVersion": f"{INFRA}/v1beta1",
            "kind": "DockerMachinePool",
            "metadata": {"name": "pool-infra", "namespace": "capi"},
            "status": {"capacity": {"cpu": "2", "memory": "8Gi"}},
        }
    )
    ref = {"apiVersion": f"{INFRA}/v1beta1", "kind": "DockerMachinePool", "name": "pool-infra"}
    kube.create(pool(0, [], annotations=limits(CAPI, 0, 5), infra_ref=ref))
    provider = make_provider()
    assert provider.problems() == []
    [group] = provider.node_groups()
    assert group.nodes() == []
    assert group.template_node_info().node.capacity.cpu == 2000


def test_a_bad_provider_id_list_is_a_named_problem(kube: FakeKubeServer, make_provider: Any) -> None:
    obj = pool(1, [])
    obj["spec"]["providerIDList"] = "aws:///i-1"
    kube.create(obj)
    provider = make_provider()
    assert provider.node_groups() == []
    [problem] = provider.problems()
    assert problem.node_group == POOL_ID
    assert "MachinePool capi/pool: spec.providerIDList: expected a list of provider IDs" in problem.message


def test_a_paused_pool_is_not_scaled(kube: FakeKubeServer, make_provider: Any) -> None:
    kube.create(pool(1, [provider_id_for("p1")], annotations={"cluster.x-k8s.io/paused": ""}))
    kube.create(node("p1"))
    provider = make_provider()
    assert provider.node_groups() == []
    assert provider.node_group_for_node(as_node(kube, "p1")) is None
    assert [p.reason for p in provider.problems()] == ["Paused"]
