"""The provider through the real azure-mgmt-compute client against the fake ARM server:
discovery, instance lists, provider IDs, scaling operations, failures and caches."""

from __future__ import annotations

import time

import pytest
from azurekit import ENABLED, ProviderFactory
from clusterscaler.api import (
    CloudProvider,
    CloudProviderError,
    InstanceCreationError,
    InstanceErrorClass,
    InstanceState,
    Node,
    NodeGroup,
    NodeGroupOptions,
)
from clusterscaler_azure.testing.fakearm import AllocationFailure, FakeArm

DISCOVERY = [f"label:{ENABLED}=true"]
TAGS = {ENABLED: "true", "min": "0", "max": "5"}


def node(provider_id: str, name: str = "n") -> Node:
    return Node(name=name, provider_id=provider_id)


def wait_until(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.01)
    raise AssertionError("timed out")


# --- discovery and problems -----------------------------------------------------------------


def test_discovery_by_tags_with_per_vmss_problems(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("good", tags=TAGS)
    arm.add_vmss("nolimits", tags={ENABLED: "true"})
    arm.add_vmss("badmax", tags={ENABLED: "true", "min": "0", "max": "many"})
    arm.add_vmss("badtag", tags={**TAGS, "k8s.io_cluster-autoscaler_node-template_taint_x": "oops"})
    arm.add_vmss("flex", tags=TAGS, flexible=True)
    arm.add_vmss("unknownsku", tags=TAGS, sku="Standard_Imaginary_v9")
    arm.add_vmss("foreign", tags={"min": "0", "max": "5"})
    provider = make_provider(discovery=DISCOVERY, nodes=["1:3:missing"])

    assert isinstance(provider, CloudProvider)
    groups = {g.id: g for g in provider.node_groups()}
    assert sorted(groups) == ["badtag", "good", "unknownsku"]
    assert all(isinstance(g, NodeGroup) for g in groups.values())
    problems = {p.node_group: p.message for p in provider.problems()}
    assert set(problems) == {"nolimits", "badmax", "badtag", "flex", "unknownsku", "missing"}
    assert "tag 'min' is missing" in problems["nolimits"]
    assert "tag 'max'='many': expected a whole number" in problems["badmax"]
    assert "<value>:<effect>" in problems["badtag"]
    assert "enableVmssFlexNodes=true" in problems["flex"]
    assert "sku.name='Standard_Imaginary_v9' is not a known VM size" in problems["unknownsku"]
    assert "given by --nodes does not exist" in problems["missing"]
    assert all(p.reason == "InvalidScaleSet" for p in provider.problems())
    # A badly tagged scale set still scales from its live nodes but not from zero.
    with pytest.raises(CloudProviderError, match="VMSS 'badtag'"):
        groups["badtag"].template_node_info()
    with pytest.raises(CloudProviderError, match="not a known VM size"):
        groups["unknownsku"].template_node_info()
    assert groups["good"].template_node_info().node.labels["node.kubernetes.io/instance-type"] == "Standard_D4s_v3"
    assert groups["good"].debug() == "good (0:5, target 0, Standard_D4s_v3)"


def test_explicit_nodes_keep_the_flag_limits(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("Pool1", capacity=2, tags={"min": "0", "max": "1"})
    provider = make_provider(nodes=["1:4:pool1"])
    (group,) = provider.node_groups()
    assert (group.id, group.min_size, group.max_size, group.target_size()) == ("Pool1", 1, 4, 2)
    assert provider.problems() == []


def test_options_from_tags(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("pool", tags={**TAGS,
        "k8s.io_cluster-autoscaler_node-template_autoscaling-options_zeroormaxnodescaling": "true",
        "k8s.io_cluster-autoscaler_node-template_autoscaling-options_scaledownutilizationthreshold": "0.3"})
    arm.add_vmss("plain", tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    groups = {g.id: g for g in provider.node_groups()}
    options = groups["pool"].get_options(NodeGroupOptions(scale_down_unneeded_time=None))
    assert options is not None and options.zero_or_max_node_scaling is True
    assert options.scale_down_utilization_threshold == 0.3
    assert groups["plain"].get_options(NodeGroupOptions()) is None


# --- instances and provider IDs -------------------------------------------------------------


def test_uniform_and_flex_instances_and_case_insensitive_ids(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=2, tags=TAGS)
    arm.add_vmss("flex", capacity=1, tags=TAGS, flexible=True)
    arm.set_vm_state("uni", "1", "Creating")
    provider = make_provider(discovery=DISCOVERY, enableVmssFlexNodes=True)
    groups = {g.id: g for g in provider.node_groups()}
    uni = groups["uni"].nodes()
    assert [i.state for i in uni] == [InstanceState.RUNNING, InstanceState.CREATING]
    assert "/resourceGroups/mc_rg_cluster_westeurope/" in uni[0].id
    (flex,) = groups["flex"].nodes()
    assert "/virtualMachines/flex_" in flex.id and "virtualMachineScaleSets" not in flex.id

    # Kubelet and ARM disagree on case: the node still maps to its scale set.
    upper = uni[0].id.replace("mc_rg_cluster_westeurope", "MC_RG_CLUSTER_WESTEUROPE").replace("uni", "UNI")
    found = provider.node_group_for_node(node(upper))
    assert found is not None and found.id == "uni"
    flex_group = provider.node_group_for_node(node(flex.id.upper().replace("AZURE://", "azure://")))
    assert flex_group is not None and flex_group.id == "flex"
    assert provider.node_group_for_node(node("aws:///us-east-1a/i-1")) is None
    assert provider.node_group_for_node(node("")) is None
    other_rg = uni[0].id.replace("mc_rg_cluster_westeurope", "another-rg")
    assert provider.node_group_for_node(node(other_rg)) is None


def test_instance_list_is_cached_not_fetched_per_node(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=3, tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    lists = arm.count("GET", r"virtualmachinescalesets/uni/virtualmachines$")
    vmss_lists = arm.count("GET", r"virtualmachinescalesets$")
    (group,) = provider.node_groups()
    for _ in range(3):
        provider.refresh()
        for inst in group.nodes():
            assert provider.node_group_for_node(node(inst.id)) is group
            assert provider.has_instance(node(inst.id))
    assert arm.count("GET", r"virtualmachinescalesets/uni/virtualmachines$") == lists
    assert arm.count("GET", r"virtualmachinescalesets$") == vmss_lists


def test_has_instance_reads_again_before_saying_gone(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    (inst,) = provider.node_groups()[0].nodes()
    # A VM created behind the cache's back: listed again, so it is not reported gone.
    arm.add_vmss("uni", capacity=2, tags=TAGS)
    newer = arm.provider_ids("uni")[1]
    assert provider.has_instance(node(newer))
    arm.remove_vmss("uni")
    arm.add_vmss("uni", capacity=0, tags=TAGS)
    provider.refresh()
    assert not provider.has_instance(node(inst.id))
    assert provider.has_instance(node("azure:///subscriptions/x/resourceGroups/y/providers/"
                                      "Microsoft.Compute/virtualMachineScaleSets/z/virtualMachines/0"))


def test_failed_provisioning_becomes_an_instance_error(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=2, tags=TAGS)
    arm.set_vm_state("uni", "0", "Failed", power_state="running")
    provider = make_provider(discovery=DISCOVERY)
    first, second = provider.node_groups()[0].nodes()
    # Failed after it ran (an extension update): still a running node.
    assert (first.state, first.error) == (InstanceState.RUNNING, None)
    assert second.state is InstanceState.RUNNING


# --- scaling up -----------------------------------------------------------------------------


def test_increase_size_updates_capacity_through_a_polled_operation(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    (group,) = provider.node_groups()
    arm.hold = True
    group.increase_size(2)
    assert arm.capacity("uni") == 3 and group.target_size() == 3
    # The PATCH body carried sku.capacity in ARM's camelCase, or the fake would refuse it.
    assert arm.count("PATCH") == 1
    # In flight: refreshes do not lose the request, nor count it twice.
    provider.cache.invalidate()
    provider.refresh()
    assert group.target_size() == 3
    placeholders = [i for i in group.nodes() if i.state is InstanceState.CREATING]
    assert len(placeholders) == 2 and all(i.error is None for i in placeholders)
    with pytest.raises(CloudProviderError, match="> max 5"):
        group.increase_size(3)
    arm.release()
    assert provider.wait_for_operations(5)
    provider.refresh()
    assert group.target_size() == 3
    assert [i.state for i in group.nodes()] == [InstanceState.RUNNING] * 3
    assert arm.count("GET", r"/operations/op-") >= 1


def test_sync_refusals_raise_with_code_and_leave_the_target(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    (group,) = provider.node_groups()
    arm.fail("PATCH", r"virtualmachinescalesets/uni$", 409, "SkuNotAvailable",
             "The requested size for resource is currently not available in location 'westeurope'")
    with pytest.raises(CloudProviderError) as info:
        group.increase_size(1)
    message = str(info.value)
    assert "VMSS 'uni'" in message and "SkuNotAvailable" in message and "OutOfResources" in message
    # Classified for the core's backoff: the group backs off as OutOfResources.
    assert isinstance(info.value, InstanceCreationError)
    assert (info.value.info.error_class, info.value.info.error_code) == (
        InstanceErrorClass.OUT_OF_RESOURCES,
        "SkuNotAvailable",
    )
    assert group.target_size() == 1 and arm.capacity("uni") == 1
    arm.fail("PATCH", r"virtualmachinescalesets/uni$", 409, "OperationNotAllowed",
             "Operation could not be completed as it results in exceeding approved Total Regional Cores quota.")
    with pytest.raises(CloudProviderError, match="OperationNotAllowed"):
        group.increase_size(1)
    group.increase_size(1)
    assert group.target_size() == 2


@pytest.mark.parametrize("keep_capacity", [True, False], ids=["vms-failed", "capacity-taken-back"])
def test_allocation_failure_reports_out_of_resources(arm: FakeArm, make_provider: ProviderFactory, keep_capacity: bool) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    (group,) = provider.node_groups()
    arm.fail_allocation("uni", AllocationFailure(code="ZonalAllocationFailed", keep_capacity=keep_capacity))
    group.increase_size(2)
    assert provider.wait_for_operations(5)
    provider.refresh()
    assert group.target_size() == 3
    failed = [i for i in group.nodes() if i.error is not None]
    assert len(failed) == 2
    assert all(i.state is InstanceState.CREATING for i in failed)
    assert {(i.error.error_class, i.error.error_code) for i in failed if i.error} == {
        (InstanceErrorClass.OUT_OF_RESOURCES, "ZonalAllocationFailed")
    }
    # No second request while the failed one is not cleaned up.
    if not keep_capacity:
        with pytest.raises(CloudProviderError, match="not cleaned up yet"):
            group.increase_size(1)
    # The autoscaler deletes the failed instances (as fake nodes named by their IDs).
    group.delete_nodes([node(i.id, name=i.id) for i in failed])
    assert provider.wait_for_operations(5)
    provider.refresh()
    assert group.target_size() == 1 and arm.capacity("uni") == 1
    assert [i.state for i in group.nodes()] == [InstanceState.RUNNING]


def test_throttling_and_server_errors_are_retried(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    arm.fail("GET", r"virtualmachinescalesets$", 429, "TooManyRequests", times=1, retry_after="0")
    arm.fail("GET", r"virtualmachinescalesets/uni/virtualmachines$", 500, "InternalServerError", times=2)
    provider = make_provider(discovery=DISCOVERY)
    (group,) = provider.node_groups()
    assert len(group.nodes()) == 1
    assert arm.count("GET", r"virtualmachinescalesets$") == 2


def test_a_scale_set_that_cannot_be_read_is_a_problem_for_it_alone(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    arm.add_vmss("sick", capacity=1, tags=TAGS)
    arm.fail("GET", r"virtualmachinescalesets/sick/virtualmachines$", 403, "AuthorizationFailed",
             "The client does not have authorization", times=10)
    provider = make_provider(discovery=DISCOVERY)
    groups = {g.id: g for g in provider.node_groups()}
    assert len(groups["uni"].nodes()) == 1
    problems = {p.node_group: p.message for p in provider.problems()}
    assert "AuthorizationFailed" in problems["sick"] and "listing its VMs" in problems["sick"]
    groups["uni"].increase_size(1)
    assert groups["uni"].target_size() == 2


def test_listing_failure_fails_the_refresh_and_keeps_the_view(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    arm.fail("GET", r"virtualmachinescalesets$", 403, "AuthorizationFailed", times=10)
    provider.cache.invalidate()
    with pytest.raises(CloudProviderError, match="AuthorizationFailed"):
        provider.refresh()
    assert [g.id for g in provider.node_groups()] == ["uni"]


# --- scaling down ---------------------------------------------------------------------------


def test_delete_nodes_deletes_instances_and_drops_the_target_once_accepted(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=3, tags={**TAGS, "min": "1"})
    provider = make_provider(discovery=DISCOVERY)
    (group,) = provider.node_groups()
    a, b, c = group.nodes()
    arm.fail("POST", r"/delete$", 409, "Conflict", "operation in progress")
    with pytest.raises(CloudProviderError, match="ARM refused the deletion"):
        group.delete_nodes([node(a.id)])
    assert group.target_size() == 3 and [i.state for i in group.nodes()].count(InstanceState.DELETING) == 0
    arm.hold = True
    group.delete_nodes([node(a.id.upper().replace("AZURE://", "azure://"), "a"), node(b.id, "b")])
    assert group.target_size() == 1
    assert [i.state for i in group.nodes()] == [InstanceState.DELETING, InstanceState.DELETING, InstanceState.RUNNING]
    deletes = [c for c in arm.calls if c[0] == "POST"]
    assert len(deletes) == 2
    with pytest.raises(CloudProviderError, match=r"min size reached, nodes will not be deleted: 1 - 1 = 0 < min 1$"):
        group.delete_nodes([node(c.id)])
    arm.release()
    assert provider.wait_for_operations(5)
    provider.refresh()
    assert arm.capacity("uni") == 1 and group.target_size() == 1
    assert [i.id for i in group.nodes()] == [c.id]


def test_force_delete_nodes_goes_below_the_min_size(arm: FakeArm, make_provider: ProviderFactory) -> None:
    """--force-delete-unregistered-nodes / --force-delete-failed-nodes: a broken VM goes
    even when the scale set is at its minimum; a plain deletion refuses."""
    arm.add_vmss("uni", capacity=1, tags={**TAGS, "min": "1"})
    provider = make_provider(discovery=DISCOVERY)
    (group,) = provider.node_groups()
    (vm,) = group.nodes()
    with pytest.raises(CloudProviderError, match=r"min size reached, nodes will not be deleted: 1 - 1 = 0 < min 1$"):
        group.delete_nodes([node(vm.id)])
    assert not [c for c in arm.calls if c[0] == "POST"]
    group.force_delete_nodes([node(vm.id)])
    assert provider.wait_for_operations(5)
    provider.refresh()
    assert arm.capacity("uni") == 0 and group.target_size() == 0


def test_delete_nodes_refuses_what_it_cannot_name(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    arm.add_vmss("other", capacity=1, tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    groups = {g.id: g for g in provider.node_groups()}
    (other,) = groups["other"].nodes()
    with pytest.raises(CloudProviderError, match="does not belong to this scale set"):
        groups["uni"].delete_nodes([node(other.id)])
    unlisted = other.id.replace("/other/", "/uni/").replace("virtualMachines/0", "virtualMachines/7")
    with pytest.raises(CloudProviderError, match="not among the scale set's VMs"):
        groups["uni"].delete_nodes([node(unlisted)])
    assert arm.count("POST") == 0


def test_decrease_target_size_cancels_only_requested_capacity(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    provider = make_provider(discovery=DISCOVERY)
    (group,) = provider.node_groups()
    arm.hold = True
    group.increase_size(2)
    # ARM created the VMs in Creating state: they exist, so they cannot be cancelled.
    with pytest.raises(CloudProviderError, match="cannot lower the capacity"):
        group.decrease_target_size(-1)
    arm.release()
    assert provider.wait_for_operations(5)
    with pytest.raises(ValueError):
        group.decrease_target_size(1)


def test_decrease_target_size_of_requested_capacity_without_vms(arm: FakeArm, make_provider: ProviderFactory) -> None:
    arm.add_vmss("uni", capacity=1, tags=TAGS)
    arm.set_capacity_only("uni", 3)  # capacity Azure has not turned into VMs
    provider = make_provider(discovery=DISCOVERY)
    (group,) = provider.node_groups()
    assert group.target_size() == 3
    assert [i.state for i in group.nodes()] == [InstanceState.RUNNING] + [InstanceState.CREATING] * 2
    with pytest.raises(CloudProviderError, match="cannot lower the capacity to 0"):
        group.decrease_target_size(-3)
    group.decrease_target_size(-2)
    assert group.target_size() == 1
    assert provider.wait_for_operations(5)
    provider.refresh()
    assert arm.capacity("uni") == 1 and len(arm.vms("uni")) == 1
