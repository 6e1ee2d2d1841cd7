"""The messages of Cluster Autoscaler's external gRPC expander protocol, built at run time.

Upstream's `expander/grpcplugin/protos/expander.proto` (package `grpcplugin`):

    service Expander { rpc BestOptions (BestOptionsRequest) returns (BestOptionsResponse) {} }
    message BestOptionsRequest {
      repeated Option options = 1;
      map<string, k8s.io.api.core.v1.Node> nodeMap = 2 [deprecated = true];
      map<string, bytes> nodeBytesMap = 3;          // proto-serialized v1.Node
    }
    message BestOptionsResponse { repeated Option options = 1; }
    message Option {
      string nodeGroupId = 1;
      int32 nodeCount = 2;
      string debug = 3;
      repeated k8s.io.api.core.v1.Pod pod = 4 [deprecated = true];
      repeated bytes podBytes = 5;                  // proto-serialized v1.Pod
    }

The Nodes and Pods travel in Kubernetes' own protobuf encoding, whose schema (the part our
model holds) and the reason for descriptors built at run time rather than `protoc` output
are in `clusterscaler.api.kube_proto`: this module adds expander.proto to a pool of its own.

This module imports protobuf; `grpc_plugin` imports it only when `--expander=grpc` is used.
"""

from __future__ import annotations

from typing import Any

from clusterscaler.api import kube_proto
from google.protobuf.message import Message

__all__ = [
    "BEST_OPTIONS_METHOD",
    "BestOptionsRequest",
    "BestOptionsResponse",
    "ExpanderOption",
    "Node",
    "Pod",
    "fill",
]

BEST_OPTIONS_METHOD = "/grpcplugin.Expander/BestOptions"

_CORE = kube_proto.KUBE_CORE_PACKAGE
fill = kube_proto.fill

_GRPCPLUGIN_SCHEMA: kube_proto.Schema = {
    "BestOptionsRequest": [
        ("options", 1, "repeated .grpcplugin.Option"),
        ("nodeMap", 2, f"map<string, .{_CORE}.Node>"),
        ("nodeBytesMap", 3, "map<string, bytes>"),
    ],
    "BestOptionsResponse": [("options", 1, "repeated .grpcplugin.Option")],
    "Option": [
        ("nodeGroupId", 1, "string"),
        ("nodeCount", 2, "int32"),
        ("debug", 3, "string"),
        ("pod", 4, f"repeated .{_CORE}.Pod"),
        ("podBytes", 5, "repeated bytes"),
    ],
}


def _build_pool() -> Any:
    pool = kube_proto.kube_pool()
    expander = kube_proto.proto_file(
        "expander/grpcplugin/protos/expander.proto",
        "grpcplugin",
        "proto3",
        _GRPCPLUGIN_SCHEMA,
        (kube_proto.KUBE_CORE_FILE,),
    )
    service = expander.service.add(name="Expander")
    service.method.add(
        name="BestOptions",
        input_type=".grpcplugin.BestOptionsRequest",
        output_type=".grpcplugin.BestOptionsResponse",
    )
    pool.Add(expander)
    return pool


_POOL = _build_pool()


def _message_class(full_name: str) -> type[Message]:
    return kube_proto.message_class(_POOL, full_name)


BestOptionsRequest = _message_class("grpcplugin.BestOptionsRequest")
BestOptionsResponse = _message_class("grpcplugin.BestOptionsResponse")
ExpanderOption = _message_class("grpcplugin.Option")
Node = _message_class(f"{_CORE}.Node")
Pod = _message_class(f"{_CORE}.Pod")
