"""The sim provider against the in-memory cluster and against a (fake) API server."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    ConfigurationError,
    InstanceState,
    NodeGroup,
)
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.model import ClusterObjects, Node, Resources
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.offline.simulatedcluster import SimulatedCluster
from clusterscaler.plugins.sim import (
    EMBEDDED_CONFIG_KEY,
    NODE_GROUP_LABEL,
    SimCloudProvider,
    build_provider,
    parse_cloud_config,
)
from clusterscaler.testing.fakekube import FakeKubeServer
from hypothesis import given, settings
from hypothesis import strategies as st

CONFIG = {
    "nodeGroups": [
        {
            "name": "small",
            "minSize": 1,
            "maxSize": 3,
            "price": 0.1,
            "provisionDelay": "90s",
            "template": {"status": {"capacity": {"cpu": "2", "memory": "8Gi"}}},
        },
        {
            "name": "big",
            "minSize": 0,
            "maxSize": 10,
            "template": {
                "metadata": {"labels": {"size": "big"}},
                "status": {"capacity": {"cpu": "16", "memory": "64Gi"}},
            },
        },
    ]
}


def make(
    config: dict[str, Any] = CONFIG,
) -> tuple[SimCloudProvider, SimulatedCluster, VirtualClock]:
    clock = VirtualClock()
    cluster = SimulatedCluster(ClusterObjects(), clock)
    options = replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: config})
    provider = build_provider(ProviderContext(options=options, cluster=cluster, clock=clock))
    return provider, cluster, clock


def test_satisfies_protocols() -> None:
    provider, _, _ = make()
    assert isinstance(provider, CloudProvider)
    assert all(isinstance(g, NodeGroup) for g in provider.node_groups())
    assert [g.id for g in provider.node_groups()] == ["small", "big"]


def test_increase_size_creates_nodes_after_the_provision_delay() -> None:
    provider, cluster, clock = make()
    small = provider.node_groups()[0]
    small.increase_size(2)
    assert small.target_size() == 2
    states = [i.state for i in small.nodes()]
    assert states == [InstanceState.CREATING, InstanceState.CREATING]
    assert cluster.nodes == {}

    clock.advance(timedelta(seconds=89))
    cluster.step()
    assert cluster.nodes == {}
    clock.advance(timedelta(seconds=1))
    cluster.step()
    names = sorted(cluster.nodes)
    assert names == ["small-00001", "small-00002"]
    node = cluster.nodes["small-00001"]
    assert node.ready
    assert node.labels[NODE_GROUP_LABEL] == "small"
    assert node.labels["kubernetes.io/hostname"] == "small-00001"
    assert node.provider_id == "sim://small/small-00001"
    assert node.creation_time == clock.now()
    assert [i.state for i in small.nodes()] == [InstanceState.RUNNING] * 2
    assert {i.id for i in small.nodes()} == {"sim://small/small-00001", "sim://small/small-00002"}
    assert provider.node_group_for_node(node) is small


def test_increase_beyond_max_is_refused() -> None:
    provider, _, _ = make()
    small = provider.node_groups()[0]
    small.increase_size(3)
    with pytest.raises(
        CloudProviderError, match=r"small: increase_size: size increase too large, 3 \+ 1 = 4 > max 3"
    ):
        small.increase_size(1)
    with pytest.raises(CloudProviderError, match="expected a positive delta"):
        small.increase_size(0)


def test_delete_nodes_respects_min_and_ownership() -> None:
    provider, cluster, clock = make()
    small, big = provider.node_groups()
    small.increase_size(2)
    big.increase_size(1)
    clock.advance(timedelta(minutes=2))
    cluster.step()
    a, b = (cluster.nodes[n] for n in ("small-00001", "small-00002"))
    with pytest.raises(CloudProviderError, match="belongs to big"):
        small.delete_nodes([cluster.nodes["big-00001"]])
    with pytest.raises(CloudProviderError, match="min size reached"):
        small.delete_nodes([a, b])
    small.delete_nodes([a])
    assert sorted(cluster.nodes) == ["big-00001", "small-00002"]
    assert small.target_size() == 1


def test_decrease_target_size_cancels_only_requests() -> None:
    provider, cluster, clock = make()
    big = provider.node_groups()[1]
    big.increase_size(1)
    clock.advance(timedelta(minutes=1))
    cluster.step()
    big.increase_size(2)
    with pytest.raises(CloudProviderError, match="attempt to delete existing nodes"):
        big.decrease_target_size(-3)
    big.decrease_target_size(-1)
    assert big.target_size() == 2
    clock.advance(timedelta(minutes=1))
    cluster.step()
    assert sorted(cluster.nodes) == ["big-00001", "big-00002"]


def test_failing_group_reports_instance_errors() -> None:
    provider, cluster, clock = make()
    big = provider.node_groups()[1]
    cluster.fail_group("big", "OutOfCapacity", "no capacity in zone", out_of_resources=True)
    big.increase_size(2)
    instances = big.nodes()
    assert len(instances) == 2
    assert all(i.error is not None and i.error.error_code == "OutOfCapacity" for i in instances)
    assert big.target_size() == 2
    clock.advance(timedelta(hours=1))
    cluster.step()
    assert cluster.nodes == {}
    # The autoscaler removes failed instances by deleting their placeholder nodes.
    placeholder = Node(
        name="big-00001", labels={NODE_GROUP_LABEL: "big"}, provider_id=instances[0].id
    )
    big.delete_nodes([placeholder])
    big.decrease_target_size(-1)
    assert big.target_size() == 0
    cluster.recover_group("big")
    big.increase_size(1)
    assert big.nodes()[0].error is None


def test_failed_and_pending_instances_go_even_at_min_size() -> None:
    provider, cluster, clock = make()
    small = provider.node_groups()[0]  # min 1
    cluster.fail_group("small", "QuotaExceeded", "", out_of_resources=False)
    small.increase_size(1)
    failed = small.nodes()[0]
    small.delete_nodes([Node(name=failed.id, provider_id=failed.id)])
    assert small.target_size() == 0
    cluster.recover_group("small")
    small.increase_size(1)
    pending = small.nodes()[0]
    small.delete_nodes([Node(name=pending.id, provider_id=pending.id)])
    assert small.target_size() == 0
    clock.advance(timedelta(hours=1))
    cluster.step()
    assert cluster.nodes == {}


def test_template_node_info_looks_like_a_new_node() -> None:
    provider, _, _ = make()
    info = provider.node_groups()[1].template_node_info()
    assert info.pods == ()
    assert info.node.labels["size"] == "big"
    assert info.node.labels[NODE_GROUP_LABEL] == "big"
    assert info.node.allocatable == Resources(cpu=16000, memory=64 * 1024**3, pods=110)
    assert info.node.ready


def test_pricing_uses_group_price_and_resource_rates() -> None:
    provider, _, _ = make()
    pricing = provider.pricing()
    start = datetime(2024, 1, 1, tzinfo=UTC)
    small = provider.node_groups()[0].template_node_info().node
    big = provider.node_groups()[1].template_node_info().node
    assert pricing.node_price(small, start, start + timedelta(hours=2)) == pytest.approx(0.2)
    # Unpriced groups cost their resources: 16 cores and 64 GiB per hour.
    assert pricing.node_price(big, start, start + timedelta(hours=1)) == pytest.approx(
        16 * 0.033174 + 64 * 0.004446
    )
    assert pricing.node_price(big, start, start) == 0


def test_nodes_outside_the_config_are_not_autoscaled() -> None:
    provider, _, _ = make()
    stranger = Node(name="x", labels={NODE_GROUP_LABEL: "unknown"})
    assert provider.node_group_for_node(stranger) is None
    assert provider.node_group_for_node(Node(name="y")) is None
    by_id = Node(name="z", provider_id="sim://small/z")
    assert provider.node_group_for_node(by_id) is provider.node_groups()[0]


def test_factory_needs_a_config_and_a_backend() -> None:
    with pytest.raises(ConfigurationError, match="--cloud-config"):
        build_provider(ProviderContext(options=AutoscalingOptions(), cluster=object()))
    options = replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: CONFIG})
    with pytest.raises(ConfigurationError, match="neither an in-memory cluster nor"):
        build_provider(ProviderContext(options=options))
    with pytest.raises(ConfigurationError, match="does not offer list_nodes"):
        build_provider(ProviderContext(options=options, cluster=object()))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["up", "down", "cancel", "tick"]), st.integers(1, 4)), max_size=25
    )
)
def test_target_size_stays_within_bounds(ops: list[tuple[str, int]]) -> None:
    """Whatever the sequence of calls, refused calls change nothing and the target never
    leaves [min, max] once it is inside."""
    provider, cluster, clock = make(
        {"nodeGroups": [{**CONFIG["nodeGroups"][0], "minSize": 0, "maxSize": 6}]}
    )
    group = provider.node_groups()[0]
    for op, n in ops:
        before = group.target_size()
        try:
            if op == "up":
                group.increase_size(n)
            elif op == "down":
                group.delete_nodes(list(cluster.nodes.values())[:n])
            elif op == "cancel":
                group.decrease_target_size(-n)
            else:
                clock.advance(timedelta(seconds=45 * n))
                cluster.step()
        except CloudProviderError:
            assert group.target_size() == before
        assert 0 <= group.target_size() <= 6
        assert group.target_size() == len(group.nodes())


def test_kube_backend_creates_and_deletes_node_objects() -> None:
    with FakeKubeServer() as fake_kube:
        client = fake_kube.api_client()
        try:
            _check_kube_backend(fake_kube, client)
        finally:
            client.close()


def _check_kube_backend(fake_kube: Any, fake_kube_client: Any) -> None:
    options = replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: CONFIG})
    provider = build_provider(ProviderContext(options=options, kube_api=fake_kube_client))
    small = provider.node_groups()[0]
    small.increase_size(2)
    stored = fake_kube.list("nodes")
    names = sorted(o["metadata"]["name"] for o in stored)
    assert names == ["small-00001", "small-00002"]
    obj = fake_kube.get("nodes", "small-00001")
    assert obj["metadata"]["labels"][NODE_GROUP_LABEL] == "small"
    assert obj["spec"]["providerID"] == "sim://small/small-00001"
    provider.refresh()
    assert small.target_size() == 2
    assert [i.state for i in small.nodes()] == [InstanceState.RUNNING] * 2
    node = next(n for n in provider.backend.list_nodes() if n.name == "small-00002")
    small.delete_nodes([node])
    assert [o["metadata"]["name"] for o in fake_kube.list("nodes")] == ["small-00001"]
    assert small.target_size() == 1


def test_registered_as_the_sim_cloud_provider(register_plugin: Any) -> None:
    import clusterscaler.plugins.sim as sim_plugin

    registry = register_plugin(sim_plugin, name="sim")
    assert registry.cloud_providers["sim"].factory is build_provider
    assert parse_cloud_config(CONFIG).group("big") is not None
