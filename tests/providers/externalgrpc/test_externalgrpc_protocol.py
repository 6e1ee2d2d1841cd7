"""The provider on the wire: a service that reads and writes raw bytes with a codec written
here from the field numbers of upstream's externalgrpc.proto and Kubernetes'
generated.proto, independent of the provider's message definitions. What it checks is what
a service built from those files (upstream's example service, for one) sees and sends."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from concurrent import futures
from datetime import timedelta
from typing import Any

import grpc
import pytest
from clusterscaler.api import NodeGroupOptions
from clusterscaler.simulator.builders import make_node
from clusterscaler_externalgrpc.config import ExternalGrpcConfig
from clusterscaler_externalgrpc.provider import (
    ExternalGrpcCloudProvider,
    ServiceError,
    provider_for,
)

SERVICE = "clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider"

# --------------------------------------------------------------------------- wire codec


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int32s are ten-byte varints
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(number: int, payload: bytes | str) -> bytes:
    """A length-delimited field (strings, bytes, messages, map entries)."""
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def vi(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def f64(number: int, value: float) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<d", value)


def entry(number: int, key: str, value: bytes) -> bytes:
    return ld(number, ld(1, key) + value)


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def decode(data: bytes) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 1:
            value, i = struct.unpack("<d", data[i : i + 8])[0], i + 8
        elif wire == 2:
            size, i = _read_varint(data, i)
            value, i = data[i : i + size], i + size
        else:
            raise AssertionError(f"unexpected wire type {wire} for field {number}")
        out.setdefault(number, []).append(value)
    return out


# --------------------------------------------------------------------------- raw service

Replies = dict[str, Callable[[bytes], bytes]]


@pytest.fixture
def raw_service() -> Iterator[tuple[Replies, list[tuple[str, bytes]], str]]:
    replies: Replies = {}
    seen: list[tuple[str, bytes]] = []

    def handler(name: str) -> grpc.RpcMethodHandler:
        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            seen.append((name, request))
            reply = replies.get(name)
            if reply is None:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "")
            assert reply is not None
            return reply(request)

        return grpc.unary_unary_rpc_method_handler(handle)  # bytes in, bytes out

    names = [
        "NodeGroups", "NodeGroupForNode", "PricingNodePrice", "PricingPodPrice", "GPULabel",
        "GetAvailableGPUTypes", "Cleanup", "Refresh", "NodeGroupTargetSize",
        "NodeGroupIncreaseSize", "NodeGroupDeleteNodes", "NodeGroupDecreaseTargetSize",
        "NodeGroupNodes", "NodeGroupTemplateNodeInfo", "NodeGroupGetOptions",
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {n: handler(n) for n in names}),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield replies, seen, f"127.0.0.1:{port}"
    server.stop(grace=None)


def _provider(address: str) -> ExternalGrpcCloudProvider:
    return provider_for(ExternalGrpcConfig(address, "127.0.0.1", timedelta(seconds=3)))


def _groups_reply(request: bytes) -> bytes:
    # NodeGroupsResponse{nodeGroups: [NodeGroup{id: 1, minSize: 2, maxSize: 3, debug: 4}]}
    return ld(1, ld(1, "pool-a") + vi(2, 1) + vi(3, 4) + ld(4, "pool a"))


def test_node_groups_sizes_and_increase_on_the_wire(raw_service: tuple[Replies, list[tuple[str, bytes]], str]) -> None:
    replies, seen, address = raw_service
    replies["NodeGroups"] = _groups_reply
    replies["NodeGroupTargetSize"] = lambda request: vi(1, 2)  # targetSize = 1
    replies["NodeGroupIncreaseSize"] = lambda request: b""
    provider = _provider(address)

    (group,) = provider.node_groups()
    group.increase_size(2)

    assert (group.id, group.min_size, group.max_size, group.debug()) == ("pool-a", 1, 4, "pool a")
    increase = decode(dict(seen)["NodeGroupIncreaseSize"])
    assert increase == {1: [2], 2: [b"pool-a"]}  # delta = 1, id = 2
    assert decode(dict(seen)["NodeGroupTargetSize"]) == {1: [b"pool-a"]}


def test_delete_nodes_and_node_group_for_node_send_external_grpc_nodes(
    raw_service: tuple[Replies, list[tuple[str, bytes]], str],
) -> None:
    replies, seen, address = raw_service
    replies["NodeGroups"] = _groups_reply
    replies["NodeGroupTargetSize"] = lambda request: vi(1, 3)
    replies["NodeGroupDeleteNodes"] = lambda request: b""
    replies["NodeGroupForNode"] = lambda request: ld(1, ld(1, "pool-a") + vi(2, 1) + vi(3, 4))
    provider = _provider(address)
    node = make_node("n1", labels={"pool": "a"}, provider_id="cloud://n1")
    (group,) = provider.node_groups()

    group.delete_nodes([node])
    owner = provider.node_group_for_node(node)

    assert owner is group
    request = decode(dict(seen)["NodeGroupDeleteNodes"])
    assert request[2] == [b"pool-a"]
    (sent,) = request[1]
    fields = decode(sent)  # ExternalGrpcNode{providerID: 1, name: 2, labels: 3, annotations: 4}
    assert (fields[1], fields[2]) == ([b"cloud://n1"], [b"n1"])
    labels = {decode(e)[1][0]: decode(e)[2][0] for e in fields[3]}
    assert labels[b"pool"] == b"a"
    (asked,) = decode(dict(seen)["NodeGroupForNode"])[1]
    assert decode(asked)[2] == [b"n1"]


def test_a_template_in_kubernetes_protobuf_encoding(raw_service: tuple[Replies, list[tuple[str, bytes]], str]) -> None:
    replies, _, address = raw_service
    replies["NodeGroups"] = _groups_reply
    quantity = lambda text: ld(1, text)  # noqa: E731 - Quantity{string: 1}
    node = (
        # metadata: ObjectMeta{name: 1, labels: 11}
        ld(1, ld(1, "template") + entry(11, "zone", ld(2, "z1")))
        # spec: NodeSpec{taints: 5 [Taint{key: 1, value: 2, effect: 3}]}
        + ld(2, ld(5, ld(1, "gpu") + ld(2, "true") + ld(3, "NoSchedule")))
        # status: NodeStatus{capacity: 1, allocatable: 2}
        + ld(3, entry(1, "cpu", ld(2, quantity("8"))) + entry(2, "cpu", ld(2, quantity("7500m")))
             + entry(2, "memory", ld(2, quantity("30Gi"))) + entry(2, "pods", ld(2, quantity("58"))))
    )
    replies["NodeGroupTemplateNodeInfo"] = lambda request: ld(2, node)  # nodeBytes = 2
    provider = _provider(address)
    (group,) = provider.node_groups()

    template = group.template_node_info().node

    assert template.name == "template"
    assert template.labels == {"zone": "z1"}
    assert [(t.key, t.value, t.effect) for t in template.taints] == [("gpu", "true", "NoSchedule")]
    assert template.capacity.cpu == 8000
    assert template.allocatable.cpu == 7500
    assert template.allocatable.memory == 30 * 2**30
    assert template.allocatable.pods == 58


def test_options_with_their_durations_on_the_wire(raw_service: tuple[Replies, list[tuple[str, bytes]], str]) -> None:
    replies, seen, address = raw_service
    replies["NodeGroups"] = _groups_reply
    # NodeGroupAutoscalingOptionsResponse{nodeGroupAutoscalingOptions: 1{
    #   scaleDownUtilizationThreshold: 1, ..., ignoreDaemonSetsUtilization: 7,
    #   scaleDownUnneededDuration: 8, scaleDownUnreadyDuration: 9, MaxNodeProvisionDuration: 10}}
    replies["NodeGroupGetOptions"] = lambda request: ld(
        1, f64(1, 0.3) + f64(2, 0.4) + vi(7, 1) + ld(8, vi(1, 60)) + ld(9, vi(1, 120))
        + ld(10, vi(1, 900) + vi(2, 500_000_000))
    )
    provider = _provider(address)
    (group,) = provider.node_groups()

    got = group.get_options(NodeGroupOptions(scale_down_unneeded_time=timedelta(minutes=10)))

    assert got == NodeGroupOptions(
        scale_down_utilization_threshold=0.3,
        scale_down_gpu_utilization_threshold=0.4,
        scale_down_unneeded_time=timedelta(minutes=1),
        scale_down_unready_time=timedelta(minutes=2),
        max_node_provision_time=timedelta(minutes=15, milliseconds=500),
        zero_or_max_node_scaling=False,
        ignore_daemonsets_utilization=True,
    )
    request = decode(dict(seen)["NodeGroupGetOptions"])
    assert request[1] == [b"pool-a"]
    (defaults,) = request[2]
    assert decode(decode(defaults)[8][0]) == {1: [600]}  # Duration{seconds: 1}


def test_instances_on_the_wire(raw_service: tuple[Replies, list[tuple[str, bytes]], str]) -> None:
    replies, _, address = raw_service
    replies["NodeGroups"] = _groups_reply
    # Instance{id: 1, status: 2{instanceState: 1, errorInfo: 2{errorCode: 1, errorMessage: 2,
    # instanceErrorClass: 3}}}
    replies["NodeGroupNodes"] = lambda request: (
        ld(1, ld(1, "i-1") + ld(2, vi(1, 1)))
        + ld(1, ld(1, "i-2") + ld(2, vi(1, 2) + ld(2, ld(1, "STOCKOUT") + ld(2, "none") + vi(3, 1))))
    )
    provider = _provider(address)
    (group,) = provider.node_groups()

    first, second = group.nodes()

    assert (first.id, first.state and first.state.value, first.error) == ("i-1", "Running", None)
    assert second.state is not None and second.state.value == "Creating"
    assert second.error is not None
    assert (second.error.error_class.value, second.error.error_code) == ("OutOfResources", "STOCKOUT")


def test_a_reply_that_does_not_decode_is_an_error(raw_service: tuple[Replies, list[tuple[str, bytes]], str]) -> None:
    replies, _, address = raw_service
    replies["NodeGroups"] = _groups_reply
    replies["NodeGroupTargetSize"] = lambda request: b"\x0a\xff\xff"  # a truncated field
    provider = _provider(address)
    (group,) = provider.node_groups()

    with pytest.raises(ServiceError, match=r"node group pool-a: NodeGroupTargetSize on .*: INTERNAL") as caught:
        group.target_size()
    assert caught.value.code == "INTERNAL"


def test_the_method_paths_are_upstreams(raw_service: tuple[Replies, list[tuple[str, bytes]], str]) -> None:
    replies, seen, address = raw_service
    replies["Refresh"] = lambda request: b""
    replies["GPULabel"] = lambda request: ld(1, "cloud.example.com/gpu")
    provider = _provider(address)

    provider.refresh()

    assert provider.gpu_label() == "cloud.example.com/gpu"
    assert [name for name, _ in seen] == ["Refresh", "GPULabel"]
