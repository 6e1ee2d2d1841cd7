"""The CloudProvider conformance suite: the contract every cloud provider keeps, as tests.

A provider, ours or a third party's, proves it keeps the contract against its own fake
cloud. It writes a `ConformanceCloud` (how to create a node group in the fake cloud, how
to build the provider over it, which Node an instance registers as) and a test class that
inherits the suite and returns that cloud from a `cloud` fixture::

    import pytest
    from clusterscaler.testing.conformance import CloudProviderConformance, ConformanceCloud

    class MyCloud(ConformanceCloud):
        ...

    class TestMyCloudConformance(CloudProviderConformance):
        @pytest.fixture
        def cloud(self, my_fake_cloud) -> MyCloud:
            return MyCloud(my_fake_cloud)

Every test builds its node groups through `ConformanceCloud.add_group`, then the provider
through `ConformanceCloud.build`, and checks what the autoscaler relies on: the sizes
(target, increase up to the max, cancelling requested capacity), deletes refused below the
min size, requested instances listed before they register, refused calls that change
nothing and say so with `CloudProviderError` (or `ValueError` for an argument out of
range), creation errors classified, a node's group found by its provider ID, the
template of an empty group to scale from zero, and the provider's name (the one
`--cloud-provider` selects it by, registered by its own distribution).
"""

from __future__ import annotations

import abc

import pytest
from clusterscaler.api import (
    CloudProvider,
    CloudProviderError,
    Instance,
    InstanceCreationError,
    InstanceErrorClass,
    InstanceState,
    Node,
    NodeGroup,
    Registry,
    is_qualified_name,
)
from clusterscaler.framework.pluginmanager import PluginHost

__all__ = ["REFUSED", "CloudProviderConformance", "ConformanceCloud"]

# What a refused call may raise: `CloudProviderError` for what the cloud or the group's
# limits refuse, `ValueError` for an argument out of range (a delta of the wrong sign).
REFUSED = (CloudProviderError, ValueError)


class ConformanceCloud(abc.ABC):
    """A provider's fake cloud, as the conformance suite drives it.

    Group names are short (`pool-a`); the cloud maps them to whatever its resources are
    called and `group_id` says which node-group id the provider gives each.
    """

    @abc.abstractmethod
    def add_group(self, name: str, *, min_size: int, max_size: int, size: int) -> None:
        """Create the group `name` in the fake cloud with `size` running instances (each
        registered as a Node, where the cloud keeps Nodes) and these limits; the provider
        built afterwards manages it (through `--nodes`, discovery or its own config)."""

    @abc.abstractmethod
    def build(self) -> CloudProvider:
        """The provider over every group added so far, built as the command line builds it
        and refreshed once."""

    @abc.abstractmethod
    def group_id(self, name: str) -> str:
        """The id the provider gives the group added as `name`."""

    def node(self, group: NodeGroup, instance: Instance) -> Node:
        """The Node that `instance` of `group` registers as. By default one named after the
        last part of its provider ID, carrying that ID; a cloud whose lookup reads more of
        the Node (labels, annotations) says so here."""
        return Node(name=instance.id.rstrip("/").rsplit("/", 1)[-1], provider_id=instance.id)

    def refresh(self, provider: CloudProvider) -> None:
        """Refresh `provider` as a loop does once its refresh interval has passed: a
        provider that throttles its reads of the cloud is made to read it again here."""
        provider.refresh()

    def foreign_node(self) -> Node:
        """A Node that no group of the cloud owns (a stranger to autoscaling)."""
        return Node(name="not-autoscaled", provider_id="conformance:///not-autoscaled")

    def hold_creation(self, name: str) -> bool:
        """From now on the cloud accepts more capacity for `name` but starts no instance
        for it, so that requested capacity stays requested (a provider may still list it
        as placeholder instances). False when the fake cloud cannot do that (the tests
        that need it are then skipped, saying why)."""
        return False

    def stockout(self, name: str) -> bool:
        """From now on the cloud refuses new instances of `name` for lack of capacity: at
        once (`InstanceCreationError`) or as listed instances that carry the error and
        never register. False when the fake cloud cannot do that (the tests that need it
        are then skipped, saying why)."""
        return False


def _group(provider: CloudProvider, group_id: str) -> NodeGroup:
    for group in provider.node_groups():
        if group.id == group_id:
            return group
    ids = [group.id for group in provider.node_groups()]
    raise AssertionError(f"no node group {group_id!r} among {ids}")


def _registered(cloud: ConformanceCloud, group: NodeGroup) -> list[Node]:
    return [cloud.node(group, instance) for instance in group.nodes()]


def _one(cloud: ConformanceCloud, name: str, *, min_size: int, max_size: int, size: int) -> tuple[CloudProvider, NodeGroup]:
    cloud.add_group(name, min_size=min_size, max_size=max_size, size=size)
    provider = cloud.build()
    return provider, _group(provider, cloud.group_id(name))


def _reread(cloud: ConformanceCloud, provider: CloudProvider, name: str) -> NodeGroup:
    cloud.refresh(provider)
    return _group(provider, cloud.group_id(name))


class CloudProviderConformance:
    """The suite: inherit it in a class named `Test...` that defines a `cloud` fixture
    returning the provider's `ConformanceCloud`."""

    # --- node groups and sizes -------------------------------------------------------------

    def test_groups_are_listed_with_their_limits_and_size(self, cloud: ConformanceCloud) -> None:
        cloud.add_group("pool-a", min_size=1, max_size=5, size=2)
        cloud.add_group("pool-b", min_size=0, max_size=3, size=0)
        provider = cloud.build()

        assert isinstance(provider, CloudProvider)
        a = _group(provider, cloud.group_id("pool-a"))
        b = _group(provider, cloud.group_id("pool-b"))
        assert isinstance(a, NodeGroup)
        assert (a.min_size, a.max_size, a.target_size()) == (1, 5, 2)
        assert (b.min_size, b.max_size, b.target_size()) == (0, 3, 0)
        assert a.exist() and b.exist()
        assert a.debug() and b.debug()

    def test_every_instance_is_listed_once(self, cloud: ConformanceCloud) -> None:
        _, group = _one(cloud, "pool-a", min_size=0, max_size=5, size=3)

        ids = [instance.id for instance in group.nodes()]
        assert len(ids) == 3
        assert len(set(ids)) == 3
        assert all(ids)

    def test_refresh_keeps_groups_and_sizes(self, cloud: ConformanceCloud) -> None:
        provider, group = _one(cloud, "pool-a", min_size=0, max_size=5, size=2)
        before = [instance.id for instance in group.nodes()]

        again = _reread(cloud, provider, "pool-a")

        assert again.target_size() == 2
        assert sorted(instance.id for instance in again.nodes()) == sorted(before)

    def test_increase_size_raises_the_target(self, cloud: ConformanceCloud) -> None:
        provider, group = _one(cloud, "pool-a", min_size=0, max_size=5, size=1)

        group.increase_size(2)

        assert group.target_size() == 3
        assert _reread(cloud, provider, "pool-a").target_size() == 3

    def test_increase_size_up_to_the_max_is_allowed(self, cloud: ConformanceCloud) -> None:
        provider, group = _one(cloud, "pool-a", min_size=0, max_size=3, size=1)

        group.increase_size(2)

        assert _reread(cloud, provider, "pool-a").target_size() == 3

    @pytest.mark.parametrize(("size", "delta"), [(2, 2), (3, 1), (0, 4)], ids=["past-max", "at-max", "from-zero"])
    def test_increase_size_beyond_the_max_is_refused(self, cloud: ConformanceCloud, size: int, delta: int) -> None:
        provider, group = _one(cloud, "pool-a", min_size=0, max_size=3, size=size)

        with pytest.raises(CloudProviderError, match=r"max"):
            group.increase_size(delta)

        assert group.target_size() == size
        assert _reread(cloud, provider, "pool-a").target_size() == size

    @pytest.mark.parametrize("delta", [0, -1])
    def test_increase_size_by_nothing_is_refused(self, cloud: ConformanceCloud, delta: int) -> None:
        provider, group = _one(cloud, "pool-a", min_size=0, max_size=3, size=1)

        with pytest.raises(REFUSED):
            group.increase_size(delta)

        assert _reread(cloud, provider, "pool-a").target_size() == 1

    # --- requested capacity (upcoming and unregistered instances) ---------------------------

    def _held(self, cloud: ConformanceCloud, *, size: int, delta: int) -> tuple[CloudProvider, NodeGroup, list[str]]:
        """A group of `size` registered instances that was asked for `delta` more, which the
        cloud holds as requested capacity; the ids of the registered instances."""
        cloud.add_group("pool-a", min_size=0, max_size=10, size=size)
        if not cloud.hold_creation("pool-a"):
            pytest.skip("the fake cloud cannot hold requested capacity uncreated")
        provider = cloud.build()
        group = _group(provider, cloud.group_id("pool-a"))
        registered = [instance.id for instance in group.nodes()]
        group.increase_size(delta)
        return provider, _reread(cloud, provider, "pool-a"), registered

    def test_requested_capacity_counts_in_the_target(self, cloud: ConformanceCloud) -> None:
        _, group, registered = self._held(cloud, size=1, delta=2)

        assert group.target_size() == 3
        instances = group.nodes()
        assert set(registered) <= {instance.id for instance in instances}
        # A provider may list requested capacity as placeholder instances (never running),
        # or not at all: the autoscaler counts the rest of the target as upcoming.
        requested = [instance for instance in instances if instance.id not in registered]
        assert len(requested) in (0, 2)
        assert len({instance.id for instance in requested}) == len(requested)
        assert all(instance.state is not InstanceState.RUNNING for instance in requested)

    def test_decrease_target_size_cancels_requested_capacity(self, cloud: ConformanceCloud) -> None:
        provider, group, registered = self._held(cloud, size=1, delta=2)

        group.decrease_target_size(-1)

        again = _reread(cloud, provider, "pool-a")
        assert again.target_size() == 2
        assert set(registered) <= {instance.id for instance in again.nodes()}

    def test_decrease_target_size_stops_at_the_registered_nodes(self, cloud: ConformanceCloud) -> None:
        provider, group, registered = self._held(cloud, size=1, delta=1)

        with pytest.raises(REFUSED):
            group.decrease_target_size(-2)

        again = _reread(cloud, provider, "pool-a")
        assert again.target_size() == 2
        assert set(registered) <= {instance.id for instance in again.nodes()}

    def test_unregistered_instance_is_deleted_as_a_node(self, cloud: ConformanceCloud) -> None:
        cloud.add_group("pool-a", min_size=0, max_size=10, size=1)
        if not cloud.stockout("pool-a"):
            pytest.skip("the fake cloud cannot leave an instance unregistered")
        provider = cloud.build()
        group = _group(provider, cloud.group_id("pool-a"))
        registered = [instance.id for instance in group.nodes()]
        group.increase_size(1)
        group = _reread(cloud, provider, "pool-a")
        unregistered = [instance for instance in group.nodes() if instance.id not in registered]
        assert len(unregistered) == 1, "an instance that never started is not listed"
        (instance,) = unregistered

        # The autoscaler deletes an instance that never registered through a Node that
        # carries only its provider ID.
        group.delete_nodes([Node(name=instance.id, provider_id=instance.id)])

        again = _reread(cloud, provider, "pool-a")
        assert again.target_size() == 1
        assert [i.id for i in again.nodes()] == registered

    @pytest.mark.parametrize("delta", [0, 1])
    def test_decrease_target_size_needs_a_negative_delta(self, cloud: ConformanceCloud, delta: int) -> None:
        provider, group = _one(cloud, "pool-a", min_size=0, max_size=5, size=1)

        with pytest.raises(REFUSED):
            group.decrease_target_size(delta)

        assert _reread(cloud, provider, "pool-a").target_size() == 1

    def test_decrease_target_size_never_removes_registered_nodes(self, cloud: ConformanceCloud) -> None:
        provider, group = _one(cloud, "pool-a", min_size=0, max_size=5, size=2)
        before = sorted(instance.id for instance in group.nodes())

        with pytest.raises(REFUSED):
            group.decrease_target_size(-1)

        again = _reread(cloud, provider, "pool-a")
        assert again.target_size() == 2
        assert sorted(instance.id for instance in again.nodes()) == before

    # --- deletes ----------------------------------------------------------------------------

    def test_delete_nodes_shrinks_the_group(self, cloud: ConformanceCloud) -> None:
        provider, group = _one(cloud, "pool-a", min_size=1, max_size=5, size=3)
        nodes = _registered(cloud, group)

        group.delete_nodes(nodes[:1])

        again = _reread(cloud, provider, "pool-a")
        assert again.target_size() == 2
        live = {instance.id for instance in again.nodes()}
        assert {node.provider_id for node in nodes[1:]} <= live

    def test_delete_at_min_size_is_refused(self, cloud: ConformanceCloud) -> None:
        provider, group = _one(cloud, "pool-a", min_size=2, max_size=5, size=2)
        nodes = _registered(cloud, group)

        with pytest.raises(CloudProviderError, match=r"min size reached, nodes will not be deleted"):
            group.delete_nodes(nodes[:1])

        again = _reread(cloud, provider, "pool-a")
        assert again.target_size() == 2
        assert sorted(i.id for i in again.nodes()) == sorted(n.provider_id for n in nodes)

    def test_delete_below_min_size_is_refused_as_a_whole(self, cloud: ConformanceCloud) -> None:
        provider, group = _one(cloud, "pool-a", min_size=1, max_size=5, size=3)
        nodes = _registered(cloud, group)

        with pytest.raises(CloudProviderError, match=r"min size reached, nodes will not be deleted"):
            group.delete_nodes(nodes)

        again = _reread(cloud, provider, "pool-a")
        assert again.target_size() == 3
        assert len(again.nodes()) == 3

    def test_delete_of_another_groups_node_is_refused(self, cloud: ConformanceCloud) -> None:
        cloud.add_group("pool-a", min_size=0, max_size=5, size=2)
        cloud.add_group("pool-b", min_size=0, max_size=5, size=1)
        provider = cloud.build()
        a = _group(provider, cloud.group_id("pool-a"))
        b = _group(provider, cloud.group_id("pool-b"))
        (stranger,) = _registered(cloud, b)

        with pytest.raises(CloudProviderError):
            a.delete_nodes([stranger])

        assert _reread(cloud, provider, "pool-a").target_size() == 2
        assert _reread(cloud, provider, "pool-b").target_size() == 1

    # --- errors -----------------------------------------------------------------------------

    def test_creation_errors_are_classified(self, cloud: ConformanceCloud) -> None:
        cloud.add_group("pool-a", min_size=0, max_size=5, size=0)
        provider = cloud.build()
        if not cloud.stockout("pool-a"):
            pytest.skip("the fake cloud cannot refuse capacity")
        group = _group(provider, cloud.group_id("pool-a"))

        try:
            group.increase_size(1)
        except InstanceCreationError as exc:
            assert exc.info.error_class is InstanceErrorClass.OUT_OF_RESOURCES
            return
        errors = [i.error for i in _reread(cloud, provider, "pool-a").nodes() if i.error is not None]
        assert errors, "a stockout is neither raised nor reported on an instance"
        assert {error.error_class for error in errors} == {InstanceErrorClass.OUT_OF_RESOURCES}
        assert all(error.error_code for error in errors)

    # --- node lookup ------------------------------------------------------------------------

    def test_node_group_for_node_by_provider_id(self, cloud: ConformanceCloud) -> None:
        cloud.add_group("pool-a", min_size=0, max_size=5, size=2)
        cloud.add_group("pool-b", min_size=0, max_size=5, size=1)
        provider = cloud.build()

        for name in ("pool-a", "pool-b"):
            group = _group(provider, cloud.group_id(name))
            for node in _registered(cloud, group):
                found = provider.node_group_for_node(node)
                assert found is not None, f"no group for {node.provider_id}"
                assert found.id == group.id
                assert provider.has_instance(node)

    def test_a_stranger_has_no_node_group(self, cloud: ConformanceCloud) -> None:
        cloud.add_group("pool-a", min_size=0, max_size=5, size=1)
        provider = cloud.build()

        assert provider.node_group_for_node(cloud.foreign_node()) is None

    def test_new_instances_are_found_after_a_refresh(self, cloud: ConformanceCloud) -> None:
        provider, group = _one(cloud, "pool-a", min_size=0, max_size=5, size=1)
        group.increase_size(1)

        again = _reread(cloud, provider, "pool-a")

        for node in _registered(cloud, again):
            found = provider.node_group_for_node(node)
            assert found is not None and found.id == again.id

    # --- templates --------------------------------------------------------------------------

    def test_empty_group_has_a_template_to_scale_from_zero(self, cloud: ConformanceCloud) -> None:
        _, group = _one(cloud, "pool-a", min_size=0, max_size=5, size=0)

        info = group.template_node_info()

        node = info.node
        assert node.name
        assert node.allocatable.cpu > 0
        assert node.allocatable.memory > 0
        assert node.allocatable.pods > 0
        assert node.capacity.cpu >= node.allocatable.cpu
        assert node.capacity.memory >= node.allocatable.memory

    def test_provider_is_named_as_it_is_registered(
        self, cloud: ConformanceCloud, installed_plugins: tuple[PluginHost, Registry]
    ) -> None:
        cloud.add_group("pool-a", min_size=0, max_size=5, size=0)
        provider = cloud.build()
        _, registry = installed_plugins

        # The status ConfigMap, the metrics and `explain` name the provider by `name`: it is
        # the name `--cloud-provider` selects it by, registered by its own distribution.
        registered = registry.cloud_providers.get(provider.name)
        assert registered is not None, (
            f"provider.name {provider.name!r} is not a --cloud-provider choice; installed: "
            f"{sorted(registry.cloud_providers)}"
        )
        assert registry.aliases.get("cloud provider", {}).get(provider.name) is None, (
            f"provider.name {provider.name!r} is an alias, not the registered name"
        )
        package = type(provider).__module__.split(".")[0]
        assert getattr(registered.factory, "__module__", "").split(".")[0] == package, (
            f"--cloud-provider={provider.name} is registered by {registered.source.distribution}, "
            f"not by the package of {type(provider).__name__}"
        )
        # The GPU label is a node label key the limits read GPU types from, or empty.
        label = provider.gpu_label()
        assert label == "" or is_qualified_name(label), f"gpu_label() {label!r} is not a label key"
