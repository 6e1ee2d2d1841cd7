"""The sim provider's group index: sizes from the in-memory cluster's journal of node
changes, equal to a full scan, in time linear in the deletions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import CloudProviderError, InstanceErrorInfo
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.loop.taints import TaintConfig
from clusterscaler.model import ClusterObjects, Node, Taint
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.offline.simulatedcluster import NodeTable, SimulatedCluster
from clusterscaler.plugins.sim import (
    EMBEDDED_CONFIG_KEY,
    NODE_GROUP_LABEL,
    SimCloudProvider,
    build_provider,
    parse_cloud_config,
)
from clusterscaler.plugins.sim.provider import GroupIndex
from clusterscaler.simulator.builders import make_node
from hypothesis import given, settings
from hypothesis import strategies as st

POOL = "eks.amazonaws.com/nodegroup"
TEMPLATE = {"status": {"capacity": {"cpu": "4", "memory": "16Gi"}}}
CONFIG = {
    "nodeGroups": [
        {"name": "a", "minSize": 1, "maxSize": 2000, "template": TEMPLATE},
        {"name": "b", "minSize": 0, "maxSize": 2000, "template": TEMPLATE},
        {"name": "pool", "minSize": 0, "maxSize": 2000, "nodeSelector": {POOL: "p"},
         "template": TEMPLATE},
    ]
}


class CountingBackend:
    """The in-memory cluster seen through the calls a provider makes to it."""

    def __init__(self, cluster: SimulatedCluster, *, journal: bool = True) -> None:
        self.cluster = cluster
        self.listed = 0
        if journal:
            self.node_version = cluster.node_version
            self.node_changes_since = cluster.node_changes_since
            self.get_node = cluster.get_node

    def list_nodes(self) -> Sequence[Node]:
        self.listed += 1
        return self.cluster.list_nodes()

    def list_pending_nodes(self) -> Sequence[Node]:
        return self.cluster.list_pending_nodes()

    def create_node(self, node: Node, ready_after: timedelta) -> None:
        self.cluster.create_node(node, ready_after)

    def delete_node(self, name: str) -> None:
        self.cluster.delete_node(name)

    def cancel_pending_node(self, name: str) -> bool:
        return self.cluster.cancel_pending_node(name)

    def provisioning_error(self, group: str) -> InstanceErrorInfo | None:
        return self.cluster.provisioning_error(group)


def node(name: str, group: str | None = None, pool: str | None = None) -> Node:
    labels = {}
    if group:
        labels[NODE_GROUP_LABEL] = group
    if pool:
        labels[POOL] = pool
    return make_node(name, labels=labels)


def provider_for(backend: Any) -> SimCloudProvider:
    return SimCloudProvider(parse_cloud_config(CONFIG), backend, TaintConfig())


def test_deleting_nodes_one_call_at_a_time_lists_the_cluster_once() -> None:
    nodes = [node(f"a-{i:04d}", "a") for i in range(1000)]
    nodes += [node(f"b-{i:04d}", "b") for i in range(1000)]
    cluster = SimulatedCluster(ClusterObjects(nodes=nodes), VirtualClock())
    backend = CountingBackend(cluster)
    group = provider_for(backend).node_group("b")
    assert group is not None

    for i in range(1000):
        group.delete_nodes([cluster.nodes[f"b-{i:04d}"]])

    assert backend.listed == 1
    assert group.target_size() == 0
    assert len(cluster.nodes) == 1000


def test_the_minimum_is_still_enforced_per_call() -> None:
    nodes = [node(f"a-{i}", "a") for i in range(3)]
    cluster = SimulatedCluster(ClusterObjects(nodes=nodes), VirtualClock())
    group = provider_for(CountingBackend(cluster)).node_group("a")
    assert group is not None
    group.delete_nodes([cluster.nodes["a-0"]])
    group.delete_nodes([cluster.nodes["a-1"]])
    try:
        group.delete_nodes([cluster.nodes["a-2"]])
    except CloudProviderError as exc:
        assert "min size reached, deleting 1 of 1 nodes would go below min 1" in str(exc)
    else:
        raise AssertionError("deleting the last node of a group with minSize 1 succeeded")
    assert list(cluster.nodes) == ["a-2"]


def test_in_memory_cluster_gets_the_index_and_a_plain_backend_does_not() -> None:
    cluster = SimulatedCluster(ClusterObjects(), VirtualClock())
    assert GroupIndex.supports(cluster)
    assert not GroupIndex.supports(CountingBackend(cluster, journal=False))
    options = replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: CONFIG})
    provider = build_provider(ProviderContext(options=options, cluster=cluster))
    assert all(g.index is not None for g in provider.node_groups())


def test_node_table_journal_reaches_back_only_so_far() -> None:
    table = NodeTable()
    start = table.version
    table["x"] = node("x")
    table["y"] = node("y")
    table.pop("x")
    table.pop("missing", None)
    assert table.changes_since(start) == ["x", "y", "x"]
    assert table.changes_since(table.version) == []
    assert table.changes_since(table.version + 1) is None
    for _ in range(NodeTable.JOURNAL):
        table["y"] = node("y")
    assert table.changes_since(start) is None
    assert table.changes_since(table.version - 2) == ["y", "y"]


OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "taint", "relabel", "deleting", "up", "down", "step"]),
        st.integers(0, 11),
        st.sampled_from(["a", "b", "pool"]),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_indexed_sizes_equal_a_full_scan(ops: list[tuple[str, int, str]]) -> None:
    """Whatever happens to the nodes, inside the provider or around it, the indexed groups
    agree with groups that scan the cluster."""
    clock = VirtualClock()
    cluster = SimulatedCluster(ClusterObjects(), clock)
    indexed = provider_for(CountingBackend(cluster))
    scanning = provider_for(CountingBackend(cluster, journal=False))
    at = datetime(2024, 1, 1, tzinfo=UTC)
    for op, i, group in ops:
        name = f"n-{i}"
        current = cluster.nodes.get(name)
        try:
            if op == "add" and current is None:
                cluster.add_node(node(name, None if group == "pool" else group, "p"))
            elif op == "remove" and current is not None:
                cluster.remove_node(name)
            elif op == "taint" and current is not None:
                cluster.add_taint(name, Taint(key=f"t{i}", value="", effect="NoSchedule"))
            elif op == "relabel" and current is not None:
                labels = {k: v for k, v in current.labels.items() if k != NODE_GROUP_LABEL}
                cluster.add_node(current.with_(labels=labels))
            elif op == "deleting" and current is not None:
                cluster.add_node(current.with_(deletion_time=at))
            elif op == "up":
                grp = indexed.node_group(group)
                assert grp is not None
                grp.increase_size(1 + i % 3)
            elif op == "down" and current is not None:
                grp = indexed.node_group(group)
                assert grp is not None
                grp.delete_nodes([current])
            elif op == "step":
                clock.advance(timedelta(seconds=30 * (i + 1)))
                cluster.step()
        except CloudProviderError:
            pass
        for mine, theirs in zip(indexed.node_groups(), scanning.node_groups(), strict=True):
            # The same Node objects; a node that moved between groups may be listed later.
            by_name = {n.name: n for n in mine.registered_nodes()}
            assert by_name == {n.name: n for n in theirs.registered_nodes()}, mine.id
            assert len(by_name) == len(mine.registered_nodes())
            assert mine.target_size() == theirs.target_size(), mine.id
