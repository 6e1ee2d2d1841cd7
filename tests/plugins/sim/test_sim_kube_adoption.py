"""The sim provider against a (fake) API server: groups with a `nodeSelector` adopt the
live cluster's nodes, which carry their cloud's labels and no group label."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import CloudProviderError, InstanceState
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.plugins.sim import (
    EMBEDDED_CONFIG_KEY,
    NODE_GROUP_LABEL,
    SimCloudProvider,
    build_provider,
)

POOL = "eks.amazonaws.com/nodegroup"
TEMPLATE = {"status": {"capacity": {"cpu": "4", "memory": "16Gi"}}}


def node_obj(name: str, labels: dict[str, str], provider_id: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"providerID": provider_id} if provider_id else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": spec,
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def provider_for(config: dict[str, Any], client: Any) -> SimCloudProvider:
    options = replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: config})
    provider = build_provider(ProviderContext(options=options, kube_api=client))
    provider.refresh()
    return provider


def node_list_queries(fake_kube: Any) -> list[dict[str, str]]:
    return [
        r.query
        for r in fake_kube.requests
        if r.verb == "list" and r.resource == "nodes" and r.method == "GET"
    ]


def seed(fake_kube: Any) -> None:
    fake_kube.create(node_obj("ip-10-0-1-1", {POOL: "general"}, "aws:///us-east-1a/i-1"))
    fake_kube.create(node_obj("ip-10-0-1-2", {POOL: "general"}, "aws:///us-east-1a/i-2"))
    fake_kube.create(node_obj("ip-10-0-2-1", {POOL: "memory"}, "aws:///us-east-1b/i-3"))
    # A node no group declares: listed, but never autoscaled.
    fake_kube.create(node_obj("control-plane", {"node-role.kubernetes.io/control-plane": ""}))
    fake_kube.create(node_obj("labelled-00001", {NODE_GROUP_LABEL: "labelled"}))


def test_node_selector_groups_adopt_live_nodes(fake_kube: Any, fake_kube_client: Any) -> None:
    seed(fake_kube)
    config = {
        "nodeGroups": [
            {"name": "general", "minSize": 1, "maxSize": 5, "nodeSelector": {POOL: "general"}},
            {"name": "memory", "minSize": 0, "maxSize": 3, "nodeSelector": {POOL: "memory"}},
            {"name": "labelled", "minSize": 0, "maxSize": 3, "template": TEMPLATE},
        ]
    }
    provider = provider_for(config, fake_kube_client)
    general, memory, labelled = provider.node_groups()

    assert sorted(n.name for n in general.registered_nodes()) == ["ip-10-0-1-1", "ip-10-0-1-2"]
    assert [n.name for n in memory.registered_nodes()] == ["ip-10-0-2-1"]
    assert [n.name for n in labelled.registered_nodes()] == ["labelled-00001"]
    assert (general.target_size(), memory.target_size(), labelled.target_size()) == (2, 1, 1)
    assert [i.state for i in general.nodes()] == [InstanceState.RUNNING] * 2
    by_name = {n.name: n for n in provider.backend.list_nodes()}
    assert provider.node_group_for_node(by_name["ip-10-0-2-1"]) is memory
    assert provider.node_group_for_node(by_name["control-plane"]) is None
    # Adopted nodes carry no group label: the API server is asked for every node.
    queries = node_list_queries(fake_kube)
    assert queries and all("labelSelector" not in q for q in queries)


def test_adopted_group_grows_like_its_nodes_and_deletes_them(
    fake_kube: Any, fake_kube_client: Any
) -> None:
    seed(fake_kube)
    config = {
        "nodeGroups": [
            {"name": "general", "minSize": 1, "maxSize": 5, "nodeSelector": {POOL: "general"}},
        ]
    }
    provider = provider_for(config, fake_kube_client)
    general = provider.node_groups()[0]

    general.increase_size(1)
    created = fake_kube.get("nodes", "general-00001")
    assert created is not None
    # The new node copies an adopted one, so pods selecting the pool fit it.
    assert created["metadata"]["labels"][POOL] == "general"
    assert created["metadata"]["labels"][NODE_GROUP_LABEL] == "general"
    provider.refresh()
    assert general.target_size() == 3

    adopted = next(n for n in provider.backend.list_nodes() if n.name == "ip-10-0-1-2")
    general.delete_nodes([adopted])
    assert fake_kube.get("nodes", "ip-10-0-1-2") is None
    provider.refresh()
    assert sorted(n.name for n in general.registered_nodes()) == ["general-00001", "ip-10-0-1-1"]


def test_without_node_selector_only_group_labelled_nodes_are_listed(
    fake_kube: Any, fake_kube_client: Any
) -> None:
    seed(fake_kube)
    config = {"nodeGroups": [{"name": "labelled", "minSize": 0, "maxSize": 3, "template": TEMPLATE}]}
    provider = provider_for(config, fake_kube_client)

    assert [n.name for n in provider.backend.list_nodes()] == ["labelled-00001"]
    queries = node_list_queries(fake_kube)
    assert queries and all(q.get("labelSelector") == NODE_GROUP_LABEL for q in queries)


def test_deleting_nodes_one_call_at_a_time_lists_the_api_server_once(
    fake_kube: Any, fake_kube_client: Any
) -> None:
    seed(fake_kube)
    for i in range(2, 6):
        fake_kube.create(node_obj(f"ip-10-0-1-{i + 1}", {POOL: "general"}))
    config = {
        "nodeGroups": [
            {"name": "general", "minSize": 2, "maxSize": 9, "nodeSelector": {POOL: "general"}},
        ]
    }
    provider = provider_for(config, fake_kube_client)
    general = provider.node_groups()[0]
    assert general.target_size() == 6
    before = len(node_list_queries(fake_kube))

    by_name = {n.name: n for n in provider.backend.list_nodes()}
    for name in ("ip-10-0-1-2", "ip-10-0-1-4", "ip-10-0-1-5", "ip-10-0-1-6"):
        general.delete_nodes([by_name[name]])
    with pytest.raises(CloudProviderError, match="min size reached"):
        general.delete_nodes([by_name["ip-10-0-1-1"]])

    assert len(node_list_queries(fake_kube)) == before
    assert general.target_size() == 2
    assert sorted(n.name for n in general.registered_nodes()) == ["ip-10-0-1-1", "ip-10-0-1-3"]
    stored = {o["metadata"]["name"] for o in fake_kube.list("nodes")}
    assert stored == {"ip-10-0-1-1", "ip-10-0-1-3", "ip-10-0-2-1", "control-plane",
                      "labelled-00001"}
    # The next loop lists the API server again and finds the same nodes.
    provider.refresh()
    assert general.target_size() == 2
    assert len(node_list_queries(fake_kube)) == before + 1
