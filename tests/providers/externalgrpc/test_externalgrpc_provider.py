"""The externalgrpc provider against a provider service of ours: node groups, sizes,
instances, templates, options, pricing, GPUs, caching per loop and the errors upstream maps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from clusterscaler.api import (
    CloudProviderError,
    InstanceErrorClass,
    InstanceState,
    NodeGroupOptions,
    Taint,
    kube_proto,
)
from clusterscaler.interfaces.cloudprovider import provider_problems
from clusterscaler.simulator.builders import make_node, make_pod
from clusterscaler_externalgrpc import protocol
from clusterscaler_externalgrpc.provider import NotImplementedByService, ServiceError
from externalgrpc_fakes import FakeInstance, FakeService, Fault
from externalgrpckit import ProviderFactory

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _template(name: str = "tmpl", cpu: str = "4", gpus: int = 0) -> Any:
    return make_node(
        name,
        cpu,
        "16Gi",
        labels={"node.kubernetes.io/instance-type": f"c{cpu}", "pool": "a"},
        taints=[Taint("dedicated", "batch", "NoSchedule")],
        extended={"nvidia.com/gpu": gpus} if gpus else None,
    )


# --------------------------------------------------------------------------- node groups


def test_node_groups_with_their_sizes_and_debug(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("small", 0, 5, debug="small pool")
    service.add_group("large", 1, 10, target=2)
    provider = make_provider()

    groups = provider.node_groups()

    assert [(g.id, g.min_size, g.max_size) for g in groups] == [("small", 0, 5), ("large", 1, 10)]
    assert groups[0].debug() == "small pool"
    assert groups[1].debug() == "large (min 1, max 10)"
    assert [g.target_size() for g in groups] == [0, 2]
    assert all(g.exist() for g in groups)


def test_node_groups_are_cached_until_the_next_refresh(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("a", 0, 5)
    provider = make_provider()

    first = provider.node_groups()
    assert provider.node_groups() is first
    assert service.count("NodeGroups") == 1

    service.add_group("b", 0, 5)
    provider.refresh()

    assert service.count("Refresh") == 1
    assert [g.id for g in provider.node_groups()] == ["a", "b"]
    assert service.count("NodeGroups") == 2


def test_invalid_node_groups_are_left_out_with_a_problem_and_the_others_served(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    service.add_group("good", 0, 3)
    service.extra_groups = [
        protocol.message("NodeGroup", id="", minSize=0, maxSize=3),
        protocol.message("NodeGroup", id="negative", minSize=-1, maxSize=3),
        protocol.message("NodeGroup", id="inverted", minSize=4, maxSize=3),
        protocol.message("NodeGroup", id="good", minSize=0, maxSize=9),
    ]
    provider = make_provider()

    assert [(g.id, g.max_size) for g in provider.node_groups()] == [("good", 3)]
    problems = {p.node_group: p.message for p in provider_problems(provider)}
    assert set(problems) == {"nodeGroups[1]", "negative", "inverted", "good"}
    assert "id: expected a non-empty node group id" in problems["nodeGroups[1]"]
    assert "minSize: expected 0 or more, got -1" in problems["negative"]
    assert "maxSize: expected at least minSize (4), got 3" in problems["inverted"]
    assert "twice" in problems["good"]


def test_a_failed_node_groups_call_gives_none_this_time_and_is_asked_again(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    service.add_group("a", 0, 5)
    service.faults["NodeGroups"] = Fault(grpc.StatusCode.INTERNAL, "database down")
    provider = make_provider()

    assert provider.node_groups() == []
    (problem,) = provider_problems(provider)
    assert problem.reason == "NodeGroupsFailed"
    assert "INTERNAL: database down" in problem.message

    del service.faults["NodeGroups"]
    assert [g.id for g in provider.node_groups()] == ["a"]
    assert provider_problems(provider) == []


def test_a_failed_refresh_is_an_error_of_the_loop(service: FakeService, make_provider: ProviderFactory) -> None:
    service.faults["Refresh"] = Fault(grpc.StatusCode.UNAVAILABLE, "restarting")
    provider = make_provider()

    with pytest.raises(ServiceError, match=r"Refresh .*UNAVAILABLE: restarting") as caught:
        provider.refresh()
    assert isinstance(caught.value, CloudProviderError)
    assert caught.value.code == "UNAVAILABLE"


# --------------------------------------------------------------------------- sizes


def test_increase_size_asks_the_service_within_the_max(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("a", 0, 3, target=1)
    provider = make_provider()
    (group,) = provider.node_groups()

    group.increase_size(2)

    assert group.target_size() == 3
    (request,) = service.requests_of("NodeGroupIncreaseSize")
    assert (request.id, request.delta) == ("a", 2)
    with pytest.raises(CloudProviderError, match="a: increase_size: size increase too large, 3 \\+ 1 = 4 > max 3"):
        group.increase_size(1)
    with pytest.raises(CloudProviderError, match="expected a positive delta"):
        group.increase_size(0)
    assert service.count("NodeGroupIncreaseSize") == 1


def test_delete_nodes_sends_the_nodes_and_refuses_to_go_below_min(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    fake = service.add_group("a", 1, 5, target=3)
    provider = make_provider()
    (group,) = provider.node_groups()
    nodes = [
        make_node(f"n{i}", labels={"pool": "a"}, provider_id=inst.id)
        for i, inst in enumerate(fake.instances)
    ]

    group.delete_nodes(nodes[:2])

    (request,) = service.requests_of("NodeGroupDeleteNodes")
    assert request.id == "a"
    assert [(n.name, n.providerID, n.labels["pool"]) for n in request.nodes] == [
        ("n0", "fake://a/1", "a"),
        ("n1", "fake://a/2", "a"),
    ]
    assert group.target_size() == 1
    with pytest.raises(CloudProviderError, match=r"min size reached, nodes will not be deleted: 1 - \d+ = -?\d+ < min 1$"):
        group.delete_nodes(nodes[2:])
    assert service.count("NodeGroupDeleteNodes") == 1


def test_a_refused_deletion_is_an_error_naming_the_group(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("a", 0, 5, target=1)
    provider = make_provider()
    (group,) = provider.node_groups()

    with pytest.raises(ServiceError, match=r"node group a: NodeGroupDeleteNodes .*UNKNOWN: not in a"):
        group.delete_nodes([make_node("stranger", provider_id="fake://b/1")])


def test_a_group_the_service_no_longer_has_is_an_error_naming_it(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    """Upstream's example service answers a call about an unknown group with a plain Go
    error: status UNKNOWN, `NodeGroup "<id>", not found`."""
    service.add_group("a", 0, 5, target=1)
    provider = make_provider()
    (group,) = provider.node_groups()
    del service.groups["a"]

    with pytest.raises(ServiceError, match=r'node group a: NodeGroupTargetSize on \S+: UNKNOWN: NodeGroup "a", not found$') as raised:
        group.target_size()
    assert (raised.value.method, raised.value.code) == ("NodeGroupTargetSize", "UNKNOWN")


def test_decrease_target_size_cancels_requested_capacity(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("a", 0, 5, target=1)
    provider = make_provider()
    (group,) = provider.node_groups()
    group.increase_size(2)

    group.decrease_target_size(-1)

    (request,) = service.requests_of("NodeGroupDecreaseTargetSize")
    assert (request.id, request.delta) == ("a", -1)
    assert group.target_size() == 2
    with pytest.raises(CloudProviderError, match="expected a negative delta, got 1"):
        group.decrease_target_size(1)


def test_a_negative_target_size_is_refused(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("a", 0, 5).target = -2
    provider = make_provider()
    (group,) = provider.node_groups()

    with pytest.raises(ServiceError, match="targetSize: expected 0 or more, got -2"):
        group.target_size()


# --------------------------------------------------------------------------- instances


def test_instances_with_their_states_and_errors(service: FakeService, make_provider: ProviderFactory) -> None:
    fake = service.add_group("a", 0, 9)
    fake.instances = [
        FakeInstance("i-running", protocol.STATE_RUNNING),
        FakeInstance("i-creating", protocol.STATE_CREATING),
        FakeInstance("i-deleting", protocol.STATE_DELETING),
        FakeInstance("i-unknown", protocol.STATE_UNSPECIFIED, "ignored", "no state, no error"),
        FakeInstance("i-stockout", protocol.STATE_CREATING, "ZONE_RESOURCE_POOL_EXHAUSTED", "no capacity", 1),
        FakeInstance("i-quota", protocol.STATE_CREATING, "QUOTA", "over quota", 99),
        FakeInstance("", protocol.STATE_RUNNING),
    ]
    provider = make_provider()
    (group,) = provider.node_groups()

    instances = {i.id: i for i in group.nodes()}

    assert list(instances) == ["i-running", "i-creating", "i-deleting", "i-unknown", "i-stockout", "i-quota"]
    assert instances["i-running"].state is InstanceState.RUNNING
    assert instances["i-creating"].state is InstanceState.CREATING
    assert instances["i-deleting"].state is InstanceState.DELETING
    assert instances["i-unknown"].state is None and instances["i-unknown"].error is None
    stockout = instances["i-stockout"].error
    assert stockout is not None
    assert (stockout.error_class, stockout.error_code, stockout.error_message) == (
        InstanceErrorClass.OUT_OF_RESOURCES, "ZONE_RESOURCE_POOL_EXHAUSTED", "no capacity"
    )
    quota = instances["i-quota"].error
    assert quota is not None and quota.error_class is InstanceErrorClass.OTHER
    # Upstream's example service sends an empty errorInfo with every state: no error.
    assert instances["i-running"].error is None


# --------------------------------------------------------------------------- node -> group


def test_node_group_for_node_is_cached_per_loop(service: FakeService, make_provider: ProviderFactory) -> None:
    fake = service.add_group("a", 0, 5, target=1)
    provider = make_provider()
    groups = provider.node_groups()
    node = make_node("n1", provider_id=fake.instances[0].id)
    stranger = make_node("other", provider_id="elsewhere://1")

    assert provider.node_group_for_node(node) is groups[0]
    assert provider.node_group_for_node(node) is groups[0]
    assert provider.node_group_for_node(stranger) is None
    assert provider.node_group_for_node(stranger) is None
    # The answer "no group" is not cached, as upstream.
    assert service.count("NodeGroupForNode") == 3
    (first, *_) = service.requests_of("NodeGroupForNode")
    assert (first.node.name, first.node.providerID) == ("n1", "fake://a/1")

    provider.refresh()
    group = provider.node_group_for_node(node)
    assert group is not None and group.id == "a"
    assert service.count("NodeGroupForNode") == 4


def test_node_group_for_node_failures_leave_the_node_alone(service: FakeService, make_provider: ProviderFactory) -> None:
    fake = service.add_group("a", 0, 5, target=1)
    service.faults["NodeGroupForNode"] = Fault(grpc.StatusCode.UNAVAILABLE)
    provider = make_provider()
    node = make_node("n1", provider_id=fake.instances[0].id)

    assert provider.node_group_for_node(node) is None
    del service.faults["NodeGroupForNode"]
    group = provider.node_group_for_node(node)
    assert group is not None and group.id == "a"
    assert provider.has_instance(node)


# --------------------------------------------------------------------------- templates


def test_template_node_from_node_bytes_is_cached_per_loop(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("gpu", 0, 5, template=_template("gpu-template", "8", gpus=2))
    provider = make_provider()
    (group,) = provider.node_groups()

    info = group.template_node_info()

    node = info.node
    assert node.name == "gpu-template"
    assert node.labels["pool"] == "a"
    assert node.allocatable.cpu == 8000
    assert node.allocatable.memory == 16 * 2**30
    assert node.allocatable.extended["nvidia.com/gpu"] == 2
    assert [(t.key, t.value, t.effect) for t in node.taints] == [("dedicated", "batch", "NoSchedule")]
    assert info.pods == ()
    assert group.template_node_info() is info
    assert service.count("NodeGroupTemplateNodeInfo") == 1

    provider.refresh()
    (again,) = provider.node_groups()
    again.template_node_info()
    assert service.count("NodeGroupTemplateNodeInfo") == 2


def test_a_template_without_a_name_is_given_one(service: FakeService, make_provider: ProviderFactory) -> None:
    pb = kube_proto.fill(protocol.message("Node"), _template().to_k8s())
    pb.metadata.ClearField("name")
    service.add_group("a", 0, 5).template_bytes = pb.SerializeToString()
    provider = make_provider()
    (group,) = provider.node_groups()

    assert group.template_node_info().node.name == "template-node-for-a"


def test_template_unimplemented_is_not_implemented(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("a", 0, 5)
    service.faults["NodeGroupTemplateNodeInfo"] = Fault(grpc.StatusCode.UNIMPLEMENTED)
    provider = make_provider()
    (group,) = provider.node_groups()

    for _ in range(2):
        with pytest.raises(NotImplementedByService, match=r"node group a: NodeGroupTemplateNodeInfo .*not implemented"):
            group.template_node_info()
    assert service.count("NodeGroupTemplateNodeInfo") == 1


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (None, "the service returned no template node \\(nodeBytes\\)"),
        (b"\xff\xff\xff", "nodeBytes: expected a protobuf-encoded v1.Node"),
        (
            kube_proto.fill(
                protocol.message("Node"),
                {"metadata": {"name": "x"}, "status": {"capacity": {"cpu": "lots"}}},
            ).SerializeToString(),
            "nodeBytes: .*status.capacity",
        ),
    ],
    ids=["empty", "not-protobuf", "bad-quantity"],
)
def test_bad_templates_are_errors_naming_the_group_and_field(
    service: FakeService, make_provider: ProviderFactory, payload: bytes | None, message: str
) -> None:
    fake = service.add_group("a", 0, 5)
    fake.template_bytes = payload
    provider = make_provider()
    (group,) = provider.node_groups()

    with pytest.raises(CloudProviderError, match=f"node group a: NodeGroupTemplateNodeInfo: {message}"):
        group.template_node_info()


def test_a_failed_template_call_is_asked_again(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("a", 0, 5, template=_template())
    service.faults["NodeGroupTemplateNodeInfo"] = Fault(grpc.StatusCode.UNAVAILABLE)
    provider = make_provider()
    (group,) = provider.node_groups()

    with pytest.raises(ServiceError, match="UNAVAILABLE"):
        group.template_node_info()
    del service.faults["NodeGroupTemplateNodeInfo"]
    assert group.template_node_info().node.name == "tmpl"


# --------------------------------------------------------------------------- options


DEFAULTS = NodeGroupOptions(
    scale_down_utilization_threshold=0.5,
    scale_down_gpu_utilization_threshold=0.6,
    scale_down_unneeded_time=timedelta(minutes=10),
    scale_down_unready_time=timedelta(minutes=20),
    max_node_provision_time=timedelta(minutes=15, milliseconds=500),
    zero_or_max_node_scaling=False,
    ignore_daemonsets_utilization=True,
)


def test_get_options_sends_the_defaults_and_reads_every_field(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    def options(group: str, defaults: Any) -> Any:
        reply = protocol.message("NodeGroupAutoscalingOptions")
        reply.CopyFrom(defaults)
        reply.scaleDownUtilizationThreshold = 0.25
        reply.scaleDownUnneededDuration.seconds = 120
        reply.zeroOrMaxNodeScaling = True
        return reply

    service.add_group("a", 0, 5)
    service.options = options
    provider = make_provider()
    (group,) = provider.node_groups()

    got = group.get_options(DEFAULTS)

    (request,) = service.requests_of("NodeGroupGetOptions")
    sent = request.defaults
    assert request.id == "a"
    assert (sent.scaleDownUtilizationThreshold, sent.scaleDownGpuUtilizationThreshold) == (0.5, 0.6)
    assert (sent.scaleDownUnneededDuration.seconds, sent.scaleDownUnreadyDuration.seconds) == (600, 1200)
    assert (sent.MaxNodeProvisionDuration.seconds, sent.MaxNodeProvisionDuration.nanos) == (900, 500_000_000)
    assert (sent.zeroOrMaxNodeScaling, sent.ignoreDaemonSetsUtilization) == (False, True)
    assert got == NodeGroupOptions(
        scale_down_utilization_threshold=0.25,
        scale_down_gpu_utilization_threshold=0.6,
        scale_down_unneeded_time=timedelta(minutes=2),
        scale_down_unready_time=timedelta(minutes=20),
        max_node_provision_time=timedelta(minutes=15, milliseconds=500),
        zero_or_max_node_scaling=True,
        ignore_daemonsets_utilization=True,
    )


def test_get_options_unimplemented_or_empty_means_the_flags(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    service.add_group("a", 0, 5)
    provider = make_provider()
    (group,) = provider.node_groups()

    assert group.get_options(DEFAULTS) is None  # UNIMPLEMENTED
    service.options = lambda group, defaults: None
    assert group.get_options(DEFAULTS) is None  # no options in the reply


def test_get_options_out_of_range_is_an_error_naming_the_field(
    service: FakeService, make_provider: ProviderFactory
) -> None:
    service.add_group("a", 0, 5)
    service.options = lambda group, defaults: protocol.message(
        "NodeGroupAutoscalingOptions", scaleDownUtilizationThreshold=1.5
    )
    provider = make_provider()
    (group,) = provider.node_groups()

    with pytest.raises(ServiceError, match=r"node group a: NodeGroupGetOptions: scaleDownUtilizationThreshold: expected a number from 0 to 1, got 1.5"):
        group.get_options(DEFAULTS)


# --------------------------------------------------------------------------- pricing and GPUs


def test_prices_from_the_service(service: FakeService, make_provider: ProviderFactory) -> None:
    service.node_prices = {"c4": 0.5}
    service.pod_price = 0.125
    provider = make_provider()
    pricing = provider.pricing()
    node = _template("priced")
    pod = make_pod("web-1", "1", "1Gi", namespace="shop")

    assert pricing.node_price(node, T0, T0 + timedelta(hours=2)) == 1.0
    assert pricing.pod_price(pod, T0, T0 + timedelta(hours=1)) == 0.125

    (node_request,) = service.requests_of("PricingNodePrice")
    assert node_request.node.name == "priced"
    assert node_request.startTimestamp.seconds == int(T0.timestamp())
    (pod_request,) = service.requests_of("PricingPodPrice")
    decoded = kube_proto.to_k8s(protocol.message_type("Pod").FromString(pod_request.pod_bytes))
    assert decoded["metadata"]["name"] == "web-1"
    assert decoded["metadata"]["namespace"] == "shop"
    assert decoded["spec"]["containers"][0]["resources"]["requests"]["cpu"] in ("1", "1000m")


def test_pricing_unimplemented_is_not_implemented(service: FakeService, make_provider: ProviderFactory) -> None:
    service.faults["PricingNodePrice"] = Fault(grpc.StatusCode.UNIMPLEMENTED)
    service.faults["PricingPodPrice"] = Fault(grpc.StatusCode.UNIMPLEMENTED)
    provider = make_provider()

    with pytest.raises(NotImplementedByService):
        provider.pricing().node_price(_template(), T0, T0 + timedelta(hours=1))
    with pytest.raises(NotImplementedByService):
        provider.pricing().pod_price(make_pod("p"), T0, T0 + timedelta(hours=1))


def test_gpu_label_and_types_are_asked_once(service: FakeService, make_provider: ProviderFactory) -> None:
    provider = make_provider()

    assert provider.gpu_label() == "cloud.example.com/accelerator"
    assert provider.gpu_label() == "cloud.example.com/accelerator"
    provider.refresh()
    assert provider.gpu_label() == "cloud.example.com/accelerator"
    assert provider.available_gpu_types() == {"nvidia-a100", "nvidia-t4"}
    assert provider.available_gpu_types() == {"nvidia-a100", "nvidia-t4"}
    assert service.count("GPULabel") == 1
    assert service.count("GetAvailableGPUTypes") == 1
    assert provider.resource_limiter() is None


def test_a_failed_gpu_label_is_empty_and_asked_again(service: FakeService, make_provider: ProviderFactory) -> None:
    service.faults["GPULabel"] = Fault(grpc.StatusCode.INTERNAL)
    provider = make_provider()

    assert provider.gpu_label() == ""
    del service.faults["GPULabel"]
    assert provider.gpu_label() == "cloud.example.com/accelerator"


# --------------------------------------------------------------------------- calls


def test_a_slow_service_times_out_after_grpc_timeout(service: FakeService, make_provider: ProviderFactory) -> None:
    service.add_group("a", 0, 5)
    service.delays["NodeGroupTargetSize"] = 2.0
    provider = make_provider(grpc_timeout="200ms")
    (group,) = provider.node_groups()

    with pytest.raises(ServiceError, match=r"no answer within grpc_timeout \(0.2s\)") as caught:
        group.target_size()
    assert caught.value.code == "DEADLINE_EXCEEDED"


def test_an_unreachable_service_is_an_error_naming_its_address(make_provider: ProviderFactory) -> None:
    provider = make_provider(address="127.0.0.1:1", grpc_timeout="2s")

    with pytest.raises(ServiceError, match=r"refresh: Refresh on 127.0.0.1:1: (UNAVAILABLE|DEADLINE)"):
        provider.refresh()


def test_cleanup_calls_the_service_and_closes_the_channel(service: FakeService, make_provider: ProviderFactory) -> None:
    provider = make_provider()

    provider.cleanup()

    assert service.count("Cleanup") == 1
    with pytest.raises(ServiceError, match="closed channel"):
        provider.refresh()
