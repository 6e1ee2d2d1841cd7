"""Nodes a group adopts by its `nodeSelector` carry no group label: `explain` and the
simulated cluster's events still name their group, as the cloud provider does."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import load_plugins, main
from clusterscaler.commands.explain import evaluate, explain, render
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.model import ClusterObjects, Node, OwnerRef
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.offline.simulatedcluster import SimulatedCluster
from clusterscaler.plugins.sim import EMBEDDED_CONFIG_KEY, build_provider
from clusterscaler.simulator.builders import make_node, make_pod

_, REGISTRY = load_plugins([])
ROOT = Path(__file__).resolve().parents[3]
EKS_SNAPSHOT = ROOT / "examples" / "snapshots" / "eks-cluster.json"
EKS_GROUPS = ROOT / "examples" / "cloud-configs" / "eks-nodegroups.yaml"
NOW = datetime(2024, 6, 1, 12, tzinfo=UTC)
POOL = "eks.amazonaws.com/nodegroup"
CLOUD = {
    "nodeGroups": [
        {"name": "general", "minSize": 0, "maxSize": 5, "nodeSelector": {POOL: "general"}},
        {"name": "memory", "minSize": 0, "maxSize": 5, "nodeSelector": {POOL: "memory"}},
    ]
}
RS = OwnerRef(kind="ReplicaSet", name="app", uid="rs-app", controller=True)


def eks_node(name: str, pool: str) -> Node:
    node = make_node(name, cpu="4", labels={POOL: pool}, provider_id=f"aws:///us-east-1a/i-{name}")
    return node.with_(creation_time=NOW - timedelta(hours=1))


def busy_pod(name: str, node: str) -> Any:
    return make_pod(
        name, "3500m", "1Gi", node_name=node, phase="Running", owner=RS,
        creation_time=NOW - timedelta(minutes=30),
    )


def test_explain_names_the_group_of_adopted_nodes() -> None:
    objects = ClusterObjects(
        nodes=[eks_node("a-1", "general"), eks_node("b-1", "memory"), eks_node("c-1", "other")],
        pods=[busy_pod("p1", "a-1"), busy_pod("p2", "b-1")],
    )
    options = replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: CLOUD})
    result, provider = evaluate(REGISTRY, options, objects, NOW)

    report = explain(result, objects, options, NOW, provider)

    groups = {n.node: n.node_group for n in report.nodes}
    assert groups == {"a-1": "general", "b-1": "memory", "c-1": ""}
    reasons = {n.node: n.reason for n in report.nodes}
    assert reasons["a-1"] == reasons["b-1"] == "NotUnderutilized"
    assert reasons["c-1"] == "NotAutoscaled"
    # Without the provider only group labels are known: the adopted nodes have none.
    assert {n.node_group for n in explain(result, objects, options, NOW).nodes} == {""}
    rows = [line.split()[:2] for line in render(report).split("\nNodes\n", 1)[1].splitlines()]
    assert rows[1:] == [["a-1", "general"], ["b-1", "memory"], ["c-1", "-"]]


def test_explain_command_names_the_groups_of_the_eks_snapshot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # With the memory pool at its maximum the loop evaluates scale-down of every node.
    capped = tmp_path / "capped.yaml"
    capped.write_text(EKS_GROUPS.read_text().replace("maxSize: 4", "maxSize: 1"))
    code = main(["explain", "--snapshot", str(EKS_SNAPSHOT), "--cloud-config", str(capped)])
    out, err = capsys.readouterr()
    assert code == 0, err
    # The node table ends at the next section (its template mismatches, here).
    nodes = out.split("\nNodes\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    groups = {line.split()[0]: line.split()[1] for line in nodes if line.strip()}
    assert len(groups) == 4
    assert set(groups.values()) == {"general", "memory"}


def make_sim(nodes: list[Node]) -> tuple[Any, SimulatedCluster]:
    clock = VirtualClock()
    cluster = SimulatedCluster(ClusterObjects(nodes=nodes), clock)
    options = replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: CLOUD})
    provider = build_provider(ProviderContext(options=options, cluster=cluster, clock=clock))
    return provider, cluster


def test_deleted_adopted_node_event_carries_its_group() -> None:
    provider, cluster = make_sim([eks_node("a-1", "general"), eks_node("b-1", "memory")])
    general = provider.node_group("general")
    general.delete_nodes([cluster.nodes["a-1"]])

    (event,) = [e for e in cluster.events if e.action == "node-deleted"]
    assert (event.node_group, event.detail) == ("general", "0 pods on it")


def test_new_nodes_of_an_adopted_group_register_under_it() -> None:
    provider, cluster = make_sim([eks_node("a-1", "general"), eks_node("b-1", "memory")])
    provider.node_group("memory").increase_size(1)
    cluster.clock.advance(timedelta(minutes=2))
    cluster.step()

    ready = [(e.node_group, e.detail) for e in cluster.events if e.action == "node-ready"]
    assert ready == [("memory", "memory-00001")]


def test_group_of_without_a_provider_reads_the_group_label() -> None:
    cluster = SimulatedCluster(ClusterObjects(), VirtualClock())
    labelled = make_node("n", labels={"clusterscaler.io/node-group": "small"})
    assert cluster.group_of(labelled) == "small"
    assert cluster.group_of(eks_node("a-1", "general")) == ""
