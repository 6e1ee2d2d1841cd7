"""`nodeSelector` in the sim cloud-config: groups adopt the existing nodes of a real
cluster's snapshot by their cloud's labels."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.commands.cli import main
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import ConfigurationError, InstanceState
from clusterscaler.interfaces.providercontext import ProviderContext
from clusterscaler.loop.clusterstate import ClusterStateTracker
from clusterscaler.model import ClusterObjects, Node, Taint
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.offline.simulatedcluster import SimulatedCluster
from clusterscaler.plugins.sim import (
    EMBEDDED_CONFIG_KEY,
    NODE_GROUP_LABEL,
    SimCloudProvider,
    build_provider,
    parse_cloud_config,
)
from clusterscaler.simulator.builders import make_node

ROOT = Path(__file__).resolve().parents[3]
EKS_SNAPSHOT = ROOT / "examples" / "snapshots" / "eks-cluster.json"
EKS_GROUPS = ROOT / "examples" / "cloud-configs" / "eks-nodegroups.yaml"
GENERAL = ROOT / "examples" / "cloud-configs" / "general.yaml"
POOL = "eks.amazonaws.com/nodegroup"
ITYPE = "node.kubernetes.io/instance-type"


def group(name: str, selector: Any = None, **overrides: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "minSize": 0,
        "maxSize": 5,
        "template": {"status": {"capacity": {"cpu": "4", "memory": "16Gi"}}},
    }
    if selector is not None:
        out["nodeSelector"] = selector
    out.update(overrides)
    return out


def eks_node(name: str, pool: str, itype: str = "m5.xlarge", **kw: Any) -> Node:
    kw.setdefault("provider_id", f"aws:///us-east-1a/i-{name}")
    node = make_node(name, labels={POOL: pool, ITYPE: itype}, **kw)
    return node.with_(creation_time=datetime(2024, 1, 1, tzinfo=UTC))


def make(config: dict[str, Any], nodes: list[Node]) -> tuple[SimCloudProvider, SimulatedCluster]:
    clock = VirtualClock()
    cluster = SimulatedCluster(ClusterObjects(nodes=nodes), clock)
    options = replace(AutoscalingOptions(), extra={EMBEDDED_CONFIG_KEY: config})
    provider = build_provider(ProviderContext(options=options, cluster=cluster, clock=clock))
    assert isinstance(provider, SimCloudProvider)
    return provider, cluster


# --------------------------------------------------------------------------- parsing


def test_selector_labels_are_added_to_the_template() -> None:
    config = parse_cloud_config(
        {"nodeGroups": [group("general", {POOL: "general", ITYPE: "m5.xlarge"})]}
    )
    (spec,) = config.node_groups
    assert spec.node_selector == {POOL: "general", ITYPE: "m5.xlarge"}
    assert spec.template.labels[POOL] == "general"
    assert spec.template.labels[ITYPE] == "m5.xlarge"
    assert spec.template.labels[NODE_GROUP_LABEL] == "general"


def test_group_without_selector_selects_nothing() -> None:
    (spec,) = parse_cloud_config({"nodeGroups": [group("general")]}).node_groups
    assert spec.node_selector == {}
    assert not spec.selects({POOL: "general"})


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (
            [group("general", [POOL])],
            "nodeGroups[0] (general): nodeSelector: expected a non-empty map of node label "
            "to value",
        ),
        ([group("general", {})], "nodeGroups[0] (general): nodeSelector: expected a non-empty"),
        (
            [group("general", {"spot": True})],
            "nodeGroups[0] (general): nodeSelector.spot: expected a label value as a string "
            "(quote it), got True",
        ),
        (
            [group("general", {"kubernetes.io/hostname": "ip-10-0-1-5"})],
            "nodeGroups[0] (general): nodeSelector.kubernetes.io/hostname: expected a label "
            "the group's nodes share",
        ),
        (
            [group("general", {NODE_GROUP_LABEL: "other"})],
            f"nodeGroups[0] (general): nodeSelector.{NODE_GROUP_LABEL}: expected 'general' "
            "(the group's name), got 'other'",
        ),
        (
            [
                group(
                    "general",
                    {POOL: "general"},
                    template={
                        "metadata": {"labels": {POOL: "memory"}},
                        "status": {"capacity": {"cpu": "4", "memory": "16Gi"}},
                    },
                )
            ],
            f"nodeGroups[0] (general): template.metadata.labels.{POOL}: expected 'general' "
            "(the group's nodeSelector) or no value, got 'memory'",
        ),
        (
            [group("a", {POOL: "x"}), group("b", {POOL: "x"})],
            "nodeGroups[1] (b): nodeSelector: expected a selector no node shares with another "
            f"group, got {{{POOL}: x}}: every node labelled {{{POOL}: x}} would match both "
            f"it and nodeGroups[0] (a)'s {{{POOL}: x}}",
        ),
        (
            [group("a", {POOL: "x", ITYPE: "m5.large"}), group("b", {POOL: "x"})],
            f"nodeGroups[1] (b): nodeSelector: expected a selector no node shares with "
            f"another group, got {{{POOL}: x}}: every node labelled {{{POOL}: x, {ITYPE}: "
            f"m5.large}} would match both it and nodeGroups[0] (a)'s",
        ),
    ],
    ids=[
        "not-a-map",
        "empty",
        "non-string-value",
        "hostname",
        "other-group-label",
        "template-disagrees",
        "same-selector",
        "contained-selector",
    ],
)
def test_invalid_selector_names_group_and_field(groups: list[Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        parse_cloud_config({"nodeGroups": groups}, source="groups.yaml")
    assert str(err.value).startswith(f"groups.yaml: {message}"), str(err.value)


def test_selectors_on_different_values_are_exclusive() -> None:
    config = parse_cloud_config(
        {"nodeGroups": [group("a", {POOL: "a"}), group("b", {POOL: "b", ITYPE: "r5.large"})]}
    )
    assert [s.name for s in config.node_groups] == ["a", "b"]


# --------------------------------------------------------------------------- provider


CONFIG = {
    "nodeGroups": [
        group("general", {POOL: "general"}, price=0.2),
        group("memory", {POOL: "memory"}, minSize=1),
        group("labelled"),
    ]
}


def test_existing_nodes_belong_to_the_group_their_labels_select() -> None:
    nodes = [
        eks_node("g1", "general"),
        eks_node("g2", "general"),
        eks_node("m1", "memory", "r5.xlarge"),
        eks_node("other", "batch"),
        # The group label wins over a selector the node also matches.
        eks_node("moved", "general").with_(labels={POOL: "general", NODE_GROUP_LABEL: "labelled"}),
    ]
    provider, _ = make(CONFIG, nodes)
    owners = {n.name: getattr(provider.node_group_for_node(n), "id", None) for n in nodes}
    assert owners == {
        "g1": "general",
        "g2": "general",
        "m1": "memory",
        "other": None,
        "moved": "labelled",
    }
    general = provider.node_group("general")
    assert general is not None
    assert general.target_size() == 2
    # Instances are the nodes' own provider IDs, so the loop sees them registered.
    assert sorted(i.id for i in general.nodes()) == [
        "aws:///us-east-1a/i-g1",
        "aws:///us-east-1a/i-g2",
    ]
    assert {i.state for i in general.nodes()} == {InstanceState.RUNNING}
    assert provider.pricing().node_price_per_hour(nodes[0]) == pytest.approx(0.2)


def test_adopted_node_is_deleted_through_its_group_and_new_nodes_look_like_it() -> None:
    provider, cluster = make(CONFIG, [eks_node("g1", "general"), eks_node("g2", "general")])
    general = provider.node_group("general")
    memory = provider.node_group("memory")
    assert general is not None and memory is not None
    g2 = cluster.nodes["g2"]
    with pytest.raises(Exception, match="node g2 belongs to general"):
        memory.delete_nodes([g2])
    general.delete_nodes([g2])
    assert "g2" not in cluster.nodes
    assert general.target_size() == 1
    template = general.template_node_info().node
    assert template.labels[POOL] == "general"


def test_adopted_nodes_without_provider_id_are_not_unregistered_instances() -> None:
    nodes = [eks_node("g1", "general", provider_id=""), eks_node("g2", "general", provider_id="")]
    provider, _ = make(CONFIG, nodes)
    state = ClusterStateTracker(AutoscalingOptions()).update(
        datetime(2024, 1, 1, 1, tzinfo=UTC), nodes, provider
    )
    general = state.groups["general"]
    assert (general.target, general.counts.ready, general.upcoming) == (2, 2, 0)
    assert general.unregistered == [] and general.long_unregistered == []


def test_node_matched_by_two_groups_is_an_error_naming_both() -> None:
    config = {
        "nodeGroups": [
            group("on-demand", {POOL: "general"}),
            group("big", {ITYPE: "m5.4xlarge"}),
        ]
    }
    nodes = [eks_node("fine", "general"), eks_node("ip-10-0-1-5", "general", "m5.4xlarge")]
    with pytest.raises(ConfigurationError) as err:
        make(config, nodes)
    assert str(err.value) == (
        "scenario cloudConfig: node ip-10-0-1-5: matched by the nodeSelector of nodeGroups[0] "
        "(on-demand) and nodeGroups[1] (big); expected one group per node: make the "
        f"selectors exclusive, or label the node {NODE_GROUP_LABEL}=<group>"
    )


def test_node_that_becomes_ambiguous_fails_the_refresh_and_belongs_to_no_group() -> None:
    config = {
        "nodeGroups": [group("on-demand", {POOL: "general"}), group("big", {ITYPE: "m5.4xlarge"})]
    }
    provider, cluster = make(config, [eks_node("n1", "general")])
    provider.refresh()
    relabelled = cluster.nodes["n1"].with_(labels={POOL: "general", ITYPE: "m5.4xlarge"})
    cluster.add_node(relabelled)
    assert provider.node_group_for_node(relabelled) is None
    with pytest.raises(ConfigurationError, match=r"node n1: .*\(on-demand\) and .*\(big\)"):
        provider.refresh()


# --------------------------------------------------------------------------- end to end


def simulate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["simulate", "--snapshot", str(EKS_SNAPSHOT), "--once", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_example_eks_snapshot_scales_the_node_pool_its_pending_pod_selects(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = simulate(capsys, "--cloud-config", str(EKS_GROUPS), "--json")
    assert code == 0, err
    decision = json.loads(out)
    assert decision["scaleUp"] == [
        {
            "nodeGroup": "memory",
            "from": 1,
            "to": 2,
            "pods": ["default/analytics-5b7f6d9c4-p8d6n"],
        }
    ]
    assert decision["unschedulable"] == []


def test_example_eks_nodes_are_autoscaled_only_with_selectors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # With the memory pool at its maximum the loop evaluates scale-down: every node of the
    # unmodified snapshot belongs to a group. Without selectors none would.
    capped = tmp_path / "capped.yaml"
    capped.write_text(EKS_GROUPS.read_text().replace("maxSize: 4", "maxSize: 1"))
    code, out, err = simulate(capsys, "--cloud-config", str(capped), "--json")
    assert code == 0, err
    reasons = {u["node"]: u["reason"] for u in json.loads(out)["unremovable"]}
    assert len(reasons) == 4 and "NotAutoscaled" not in reasons.values()
    code, out, err = simulate(capsys, "--cloud-config", str(GENERAL), "--json")
    assert code == 0, err
    reasons = {u["node"]: u["reason"] for u in json.loads(out)["unremovable"]}
    assert set(reasons.values()) == {"NotAutoscaled"}


def test_ambiguous_cloud_config_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ambiguous = tmp_path / "ambiguous.yaml"
    ambiguous.write_text(
        EKS_GROUPS.read_text().replace(
            "      eks.amazonaws.com/nodegroup: memory\n",
            "      topology.kubernetes.io/zone: us-east-1a\n",
        )
    )
    code, _, err = simulate(capsys, "--cloud-config", str(ambiguous))
    assert code == 2
    assert "node ip-10-0-1-11.ec2.internal: matched by the nodeSelector of nodeGroups[0] " in err
    assert "(general) and nodeGroups[1] (memory)" in err


# --------------------------------------------------------------------------- no template


def test_group_with_a_selector_needs_no_template() -> None:
    (spec,) = parse_cloud_config(
        {
            "nodeGroups": [
                {"name": "general", "minSize": 0, "maxSize": 3, "nodeSelector": {POOL: "g"}}
            ]
        }
    ).node_groups
    assert spec.template is None
    with pytest.raises(
        ConfigurationError, match=r"\(general\): template: required field is missing"
    ):
        parse_cloud_config({"nodeGroups": [{"name": "general", "minSize": 0, "maxSize": 3}]})


def test_new_nodes_copy_an_adopted_node_without_its_state_taints() -> None:
    config = {
        "nodeGroups": [
            {"name": "general", "minSize": 0, "maxSize": 5, "nodeSelector": {POOL: "general"}}
        ]
    }
    taints = [
        Taint("dedicated", "web", "NoSchedule"),
        Taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule"),
        Taint("node.kubernetes.io/unreachable", "", "NoExecute"),
        Taint("startup-taint.cluster-autoscaler.kubernetes.io/cni", "", "NoSchedule"),
        Taint("example.com/draining", "", "NoSchedule"),
    ]
    adopted = eks_node("g1", "general", cpu="8", memory="32Gi", taints=taints)
    clock = VirtualClock()
    cluster = SimulatedCluster(ClusterObjects(nodes=[adopted]), clock)
    options = replace(
        AutoscalingOptions(),
        status_taint=["example.com/draining"],
        extra={EMBEDDED_CONFIG_KEY: config},
    )
    provider = build_provider(ProviderContext(options=options, cluster=cluster, clock=clock))
    general = provider.node_group("general")
    assert general is not None
    general.increase_size(1)
    (new,) = cluster.list_pending_nodes()
    assert new.name == "general-00001"
    assert new.provider_id == "sim://general/general-00001"
    assert (new.capacity, new.allocatable) == (adopted.capacity, adopted.allocatable)
    assert new.labels[POOL] == "general" and new.labels[ITYPE] == "m5.xlarge"
    assert new.labels["kubernetes.io/hostname"] == "general-00001"
    assert [(t.key, t.value) for t in new.taints] == [("dedicated", "web")]
    # The copy outlives the node it was made from.
    cluster.remove_node("g1")
    assert general.template_node_info().node.capacity == adopted.capacity


def test_group_without_template_or_node_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "groups.yaml"
    config.write_text(
        "nodeGroups:\n"
        "  - {name: general, minSize: 1, maxSize: 5, nodeSelector: {eks.amazonaws.com/nodegroup: general}}\n"
        "  - {name: spot, minSize: 0, maxSize: 5, nodeSelector: {eks.amazonaws.com/nodegroup: spot}}\n"
    )
    code, _, err = simulate(capsys, "--cloud-config", str(config))
    assert code == 2
    assert (
        "node group spot: template: required when no node matches the nodeSelector "
        "{eks.amazonaws.com/nodegroup: spot}"
    ) in err


def test_node_matched_by_two_groups_names_the_cloud_config_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The error said `sim cloud-config: node ...`, not which file: `--cloud-config` names
    it, as the other errors of the file do."""
    config = tmp_path / "groups.yaml"
    config.write_text(
        "nodeGroups:\n"
        "  - {name: general, minSize: 1, maxSize: 10, nodeSelector: {eks.amazonaws.com/nodegroup: general}}\n"
        "  - {name: m5, minSize: 0, maxSize: 4, nodeSelector: {node.kubernetes.io/instance-type: m5.xlarge}}\n"
    )
    code, _, err = simulate(capsys, "--cloud-config", str(config))
    assert code == 2
    assert err.strip().splitlines()[-1].endswith(
        f"{config}: node ip-10-0-1-11.ec2.internal: matched by the nodeSelector of "
        "nodeGroups[0] (general) and nodeGroups[1] (m5); expected one group per node: make "
        f"the selectors exclusive, or label the node {NODE_GROUP_LABEL}=<group> "
        "(and 2 more nodes)"
    )


def test_eks_snapshot_runs_with_selectors_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "groups.yaml"
    config.write_text(
        "nodeGroups:\n"
        "  - {name: general, minSize: 1, maxSize: 10, nodeSelector: {eks.amazonaws.com/nodegroup: general}}\n"
        "  - {name: memory, minSize: 0, maxSize: 4, nodeSelector: {eks.amazonaws.com/nodegroup: memory}}\n"
    )
    code, out, err = simulate(capsys, "--cloud-config", str(config), "--json")
    assert code == 0, err
    assert [(d["nodeGroup"], d["from"], d["to"]) for d in json.loads(out)["scaleUp"]] == [
        ("memory", 1, 2)
    ]
