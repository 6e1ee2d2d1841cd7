"""The in-memory cloud provider that tests of the loop and of plugins run against."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.framework.pluginmanager import PluginHost
from clusterscaler.interfaces.cloudprovider import (
    CloudProvider,
    CloudProviderError,
    InstanceErrorClass,
    InstanceErrorInfo,
    InstanceState,
    NodeGroup,
)
from clusterscaler.interfaces.registry import Registry
from clusterscaler.loop.autoscaler import Autoscaler
from clusterscaler.loop.decisions import ScaleUpStatus
from clusterscaler.model import Node
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.simulator.builders import make_pod
from clusterscaler.simulator.utilization import GPU_RESOURCE
from clusterscaler.testing.fakecloud import (
    ESTABLISHED_AGE,
    GPU_LABEL,
    GROUP_LABEL,
    FakeCloud,
    FakeNodeGroup,
)
from hypothesis import given, settings
from hypothesis import strategies as st

T0 = datetime(2024, 6, 1, tzinfo=UTC)


def cloud(name: str = "fake", existing_since: datetime | None = None) -> FakeCloud[InMemoryCluster]:
    return FakeCloud(InMemoryCluster(), VirtualClock(T0), name=name, existing_since=existing_since)


def test_satisfies_the_provider_protocols() -> None:
    c = FakeCloud()
    g = c.add_group("g")
    assert isinstance(c, CloudProvider)
    assert isinstance(g, NodeGroup)
    assert c.name == "fake" and c.gpu_label() == GPU_LABEL
    assert c.pricing() is None and c.resource_limiter() is None


def test_running_nodes_are_named_after_the_group_and_carry_the_clouds_scheme() -> None:
    c = cloud(name="acme")
    g = c.add_group("web", 1, 5, nodes=2, cpu="2", memory="8Gi", labels={"tier": "front"})
    assert sorted(c.cluster.nodes) == ["web-1", "web-2"]
    node = c.cluster.nodes["web-2"]
    assert node.provider_id == "acme://web-2"
    assert node.labels[GROUP_LABEL] == "web"
    assert node.labels["tier"] == "front"
    assert node.labels["kubernetes.io/hostname"] == "web-2"
    assert node.allocatable.cpu == 2000
    assert node.creation_time == T0 - ESTABLISHED_AGE
    assert g.target_size() == 2
    assert [i.state for i in g.nodes()] == [InstanceState.RUNNING] * 2
    assert c.node_group_for_node(node) is g
    assert c.has_instance(node)


def test_existing_since_and_created_set_the_running_nodes_creation_time() -> None:
    since = T0 - timedelta(days=3)
    c = cloud(existing_since=since)
    c.add_group("a", nodes=1)
    c.add_group("b", nodes=1, created=T0 - timedelta(hours=1))
    assert c.cluster.nodes["a-1"].creation_time == since
    assert c.cluster.nodes["b-1"].creation_time == T0 - timedelta(hours=1)


def test_gpus_become_an_extended_resource_of_the_template() -> None:
    c = cloud()
    g = c.add_group("gpu", gpus=2, labels={GPU_LABEL: "a100"})
    template = g.template_node_info().node
    assert template.name == "gpu-template"
    assert template.allocatable.extended[GPU_RESOURCE] == 2
    assert template.labels[GPU_LABEL] == "a100"


def test_requested_instances_become_ready_nodes_when_registered() -> None:
    clock = VirtualClock(T0)
    c = FakeCloud(clock=clock)
    g = c.add_group("g", 0, 5, nodes=1)
    clock.advance(timedelta(minutes=3))
    g.increase_size(3)
    assert g.target_size() == 4
    assert [i.id for i in g.nodes() if i.state is InstanceState.CREATING] == [
        "fake://g-2",
        "fake://g-3",
        "fake://g-4",
    ]
    assert "g-2" not in c.cluster.nodes
    made = g.register(2)
    assert [n.name for n in made] == ["g-2", "g-3"]
    assert made[0].creation_time == T0 + timedelta(minutes=3)
    assert made[0].ready and made[0].uid == "uid-g-2"
    assert sorted(c.cluster.nodes) == ["g-1", "g-2", "g-3"]
    assert [n.name for n in g.register()] == ["g-4"]
    assert g.calls == [("increase_size", 3)] and g.increases == [3]


def test_instant_groups_register_within_increase_size() -> None:
    c = cloud()
    g = c.add_group("g", instant=True)
    g.increase_size(2)
    assert sorted(c.cluster.nodes) == ["g-1", "g-2"]


def test_instances_with_a_create_error_never_register() -> None:
    c = cloud()
    g = c.add_group("g")
    g.create_error = InstanceErrorInfo(InstanceErrorClass.OUT_OF_RESOURCES, "InsufficientCapacity")
    g.increase_size(1)
    assert g.register() == []
    (instance,) = g.nodes()
    assert instance.state is InstanceState.CREATING and instance.error == g.create_error


def test_clouds_that_list_no_requested_capacity_only_raise_the_target() -> None:
    c = cloud()
    g = c.add_group("g")
    g.lists_requested = False
    g.increase_size(2)
    assert g.target_size() == 2 and g.nodes() == []
    g.decrease_target_size(-2)
    assert g.target_size() == 0
    assert g.calls == [("increase_size", 2), ("decrease_target_size", -2)]


@pytest.mark.parametrize(
    ("setup", "call", "message"),
    [
        (lambda g: None, lambda g: g.increase_size(5), r"node group g: increase by 5 from 2 "),
        (lambda g: None, lambda g: g.increase_size(0), r"node group g: .*positive delta, got 0"),
        (
            lambda g: setattr(g, "fail_increase", "quota exceeded"),
            lambda g: g.increase_size(1),
            r"^node group g: quota exceeded$",
        ),
        (
            lambda g: setattr(g, "fail_delete", "API down"),
            lambda g: g.delete_nodes([g.cloud.cluster.nodes["g-1"]]),
            r"^node group g: API down$",
        ),
        (
            lambda g: None,
            lambda g: g.decrease_target_size(-1),
            r"node group g: cannot decrease the target by -1",
        ),
        (
            lambda g: setattr(g, "template_error", "no instance type"),
            lambda g: g.template_node_info(),
            r"^no instance type$",
        ),
    ],
    ids=["above-max", "zero-delta", "fail-increase", "fail-delete", "below-instances", "template"],
)
def test_refused_calls_raise_a_provider_error_naming_the_group(
    setup: Callable[[FakeNodeGroup], object], call: Callable[[FakeNodeGroup], object], message: str
) -> None:
    c = cloud()
    g = c.add_group("g", 1, 6, nodes=2)
    setup(g)
    with pytest.raises(CloudProviderError, match=message):
        call(g)
    assert g.target_size() == 2 and sorted(c.cluster.nodes) == ["g-1", "g-2"]


def test_delete_nodes_deletes_all_or_none() -> None:
    c = cloud()
    g = c.add_group("g", 0, 5, nodes=3)
    other = c.add_group("h", nodes=1)
    stranger = c.cluster.nodes["h-1"]
    with pytest.raises(CloudProviderError, match="node group g: h-1 is not a member"):
        g.delete_nodes([c.cluster.nodes["g-1"], stranger])
    assert sorted(c.cluster.nodes) == ["g-1", "g-2", "g-3", "h-1"] and g.deleted == []
    g.delete_nodes([c.cluster.nodes["g-1"], c.cluster.nodes["g-3"]])
    assert sorted(c.cluster.nodes) == ["g-2", "h-1"]
    assert g.deleted == ["g-1", "g-3"] and g.target_size() == 1
    assert not c.has_instance(c.cluster.nodes["g-2"].with_(provider_id="fake://g-1"))
    assert other.deleted == []


def test_delete_nodes_refuses_to_go_below_min_size() -> None:
    c = cloud()
    g = c.add_group("g", 2, 5, nodes=2)
    with pytest.raises(CloudProviderError, match="would go below min size 2"):
        g.delete_nodes([c.cluster.nodes["g-1"]])
    assert g.calls == [("delete_nodes", ["g-1"])] and g.deleted == []


def test_refresh_error_and_unknown_nodes() -> None:
    c = cloud()
    c.refresh()
    c.refresh_error = "credentials expired"
    with pytest.raises(CloudProviderError, match="credentials expired"):
        c.refresh()
    assert c.node_group_for_node(Node(name="elsewhere")) is None
    c.add_group("g")
    with pytest.raises(ValueError, match="node group g: id: expected a new id"):
        c.add_group("g")


def test_an_autoscaler_scales_up_the_fake_cloud(
    installed_plugins: tuple[PluginHost, Registry],
) -> None:
    # What a plugin test does: a real loop over the fake cloud, with the installed plugins.
    _, registry = installed_plugins
    clock = VirtualClock(T0)
    cluster = InMemoryCluster()
    c = FakeCloud(cluster, clock)
    small = c.add_group("small", 0, 5, cpu="2", memory="8Gi")
    cluster.add_pod(
        make_pod("p", "1", "1Gi", unschedulable=True, creation_time=T0 - timedelta(minutes=1))
    )
    autoscaler = Autoscaler.from_registry(
        registry,
        options=AutoscalingOptions(),
        provider=c,
        source=cluster,
        actions=cluster,
        clock=clock,
    )
    result = autoscaler.run_once(clock.now())
    assert result.scale_up.status is ScaleUpStatus.SUCCESSFUL
    assert small.increases == [1]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["grow", "register", "delete", "shrink"]), st.integers(1, 4)),
        max_size=25,
    )
)
def test_sizes_and_nodes_stay_consistent(ops: list[tuple[str, int]]) -> None:
    """Whatever the calls, accepted or refused: min <= target <= max, every instance is
    counted in the target, and the cluster's nodes are exactly the running instances."""
    c = cloud()
    g: FakeNodeGroup = c.add_group("g", 1, 8, nodes=2)
    for op, n in ops:
        try:
            if op == "grow":
                g.increase_size(n)
            elif op == "register":
                g.register(n)
            elif op == "delete":
                g.delete_nodes(sorted(c.cluster.nodes.values(), key=lambda x: x.name)[:n])
            else:
                g.decrease_target_size(-n)
        except CloudProviderError:
            pass
        assert g.min_size <= g.target_size() <= g.max_size
        assert len(g.nodes()) <= g.target_size()
        running = {i.id for i in g.nodes() if i.state is InstanceState.RUNNING}
        assert {n.provider_id for n in c.cluster.nodes.values()} == running
