"""Node groups read from a real provider for `--from-cluster` (`clusterscaler.offline.cloudgroups`),
against the in-memory `FakeCloud`: names, membership, templates for empty groups, groups and
nodes left out with the reason, and a provider that is never written to."""

from __future__ import annotations

import dataclasses

import pytest
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import CloudProviderError
from clusterscaler.model import ClusterObjects
from clusterscaler.offline.cloudgroups import (
    CloudWriteRefusedError,
    read_only,
    read_provider_groups,
    render_groups,
)
from clusterscaler.offline.inference import NODE_GROUP_LABEL
from clusterscaler.offline.setup import EMBEDDED_CONFIG_KEY
from clusterscaler.plugins.sim.config import parse_cloud_config
from clusterscaler.simulator.builders import make_node
from clusterscaler.testing.fakecloud import FakeCloud

MIG = "https://www.googleapis.com/compute/v1/projects/p/zones/{zone}/instanceGroups/{name}"
OPTIONS = dataclasses.replace(AutoscalingOptions(), cloud_provider="gce")


def _cloud() -> FakeCloud:
    cloud = FakeCloud(name="gce")
    cloud.add_group(MIG.format(zone="us-central1-a", name="pool"), 1, 5, nodes=2)
    cloud.add_group(MIG.format(zone="us-central1-b", name="pool"), 0, 5, cpu="8", memory="32Gi")
    cloud.add_group("pool with spaces!", 0, 2)
    return cloud


def test_groups_are_named_by_the_ids_last_segment_and_never_written() -> None:
    cloud = _cloud()
    stray = make_node("stray", "2", "4Gi", labels={NODE_GROUP_LABEL: "pool"})
    nodes = [*cloud.cluster.nodes.values(), stray]
    groups = read_provider_groups(cloud, nodes, OPTIONS)
    summary = [
        (g.name, g.provider_id.split("/")[-3] if "/" in g.provider_id else g.provider_id,
         len(g.nodes), g.min_size, g.max_size, g.template_from)
        for g in groups.groups
    ]  # fmt: skip
    assert summary == [
        ("pool", "us-central1-a", 2, 1, 5, "live node"),
        ("pool-2", "us-central1-b", 0, 0, 5, "gce provider (scale from zero)"),
        ("pool-with-spaces", "pool with spaces!", 0, 0, 2, "gce provider (scale from zero)"),
    ]  # fmt: skip
    assert [(n.name, n.reason) for n in groups.not_in_group] == [
        ("stray", "in no node group of the gce provider (no providerID)")
    ]
    assert all(not g.calls for g in cloud.groups.values())
    # Members carry their group's label; the stray node loses the one it had.
    labelled = groups.label_members(ClusterObjects(nodes=nodes))
    assert {n.name: n.labels.get(NODE_GROUP_LABEL) for n in labelled.nodes} == {
        "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instanceGroups/pool-1": "pool",
        "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/instanceGroups/pool-2": "pool",
        "stray": None,
    }
    # The sim provider accepts the groups, with the provider's template for the empty ones.
    options = groups.sim_options(OPTIONS)
    assert (options.cloud_provider, options.cloud_config, options.nodes) == ("sim", "", [])
    config = parse_cloud_config(options.extra[EMBEDDED_CONFIG_KEY])
    empty = config.group("pool-2")
    assert empty is not None and empty.template is not None
    assert (empty.template.capacity.cpu, empty.template.labels[NODE_GROUP_LABEL]) == (8000, "pool-2")
    assert "kubernetes.io/hostname" not in empty.template.labels
    live = config.group("pool")
    assert live is not None and live.template is None


def test_an_empty_group_without_a_template_is_left_out_with_the_reason() -> None:
    cloud = _cloud()
    cloud.groups[MIG.format(zone="us-central1-b", name="pool")].template_error = "no instance template"
    # A group with live nodes needs no template from the provider.
    cloud.groups[MIG.format(zone="us-central1-a", name="pool")].template_error = "unused"
    groups = read_provider_groups(cloud, list(cloud.cluster.nodes.values()), OPTIONS)
    assert [g.name for g in groups.groups] == ["pool", "pool-with-spaces"]
    [left] = groups.groups_left_out
    assert left.name.endswith("us-central1-b/instanceGroups/pool")
    assert "no live node, and the gce provider has no template for it" in left.reason
    assert "no instance template" in left.reason
    text = render_groups(groups)
    assert "Node groups of the gce provider (read only" in text
    assert "Node groups left out" in text
    doc = groups.to_json()
    assert [g["nodeGroup"] for g in doc["nodeGroupsLeftOut"]] == [left.name]
    assert doc["providerNodeGroups"][0]["boundsFrom"] == "gce provider"


def test_bounds_from_nodes_flag_are_named() -> None:
    cloud = FakeCloud(name="aws")
    cloud.add_group("general", 1, 4, nodes=1)
    options = dataclasses.replace(OPTIONS, cloud_provider="aws", nodes=["1:4:general"])
    [group] = read_provider_groups(cloud, list(cloud.cluster.nodes.values()), options).groups
    assert (group.bounds_from, group.template_from) == ("--nodes", "live node")


def test_every_write_through_the_read_only_provider_raises() -> None:
    cloud = _cloud()
    [first, *_] = read_only(cloud).node_groups()
    node = next(iter(cloud.cluster.nodes.values()))
    for write in (
        lambda: first.increase_size(1),
        lambda: first.delete_nodes([node]),
        lambda: first.decrease_target_size(-1),
    ):
        with pytest.raises(CloudWriteRefusedError, match=r"refused: the cloud provider is read only"):
            write()
    assert isinstance(CloudWriteRefusedError("x"), CloudProviderError)
    assert all(not g.calls for g in cloud.groups.values())
    assert all(g.target == len(g.instances) for g in cloud.groups.values())
