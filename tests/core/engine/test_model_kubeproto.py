"""`clusterscaler.api.kube_proto`: Nodes and Pods through Kubernetes' protobuf encoding and
back to the model, and protocol files declared from tables."""

from __future__ import annotations

import pytest
from clusterscaler.api import kube_proto, parse_node, parse_pod
from clusterscaler.model import OwnerRef, Taint, Toleration
from clusterscaler.simulator.builders import make_node, make_pod

POOL = kube_proto.kube_pool()
NODE = kube_proto.message_class(POOL, f"{kube_proto.KUBE_CORE_PACKAGE}.Node")
POD = kube_proto.message_class(POOL, f"{kube_proto.KUBE_CORE_PACKAGE}.Pod")


def _round_trip(message_type: type, data: dict) -> dict:
    encoded = kube_proto.fill(message_type(), data).SerializeToString()
    return kube_proto.to_k8s(message_type.FromString(encoded))


def test_a_node_comes_back_as_the_same_model_node() -> None:
    node = make_node(
        "n1", "7500m", "30Gi", 58,
        labels={"zone": "z1"},
        taints=[Taint("gpu", "true", "NoSchedule")],
        extended={"nvidia.com/gpu": 2},
        provider_id="cloud://n1",
    )

    back = parse_node(_round_trip(NODE, node.to_k8s()))

    assert back.name == node.name
    assert back.labels == node.labels
    assert back.taints == node.taints
    assert back.allocatable == node.allocatable
    assert back.capacity == node.capacity
    assert back.provider_id == "cloud://n1"
    assert back.ready


def test_a_pod_comes_back_with_its_scheduling_fields() -> None:
    pod = make_pod(
        "web-1", "250m", "1Gi",
        namespace="shop",
        owner=OwnerRef("ReplicaSet", "web", "uid-1", True, "apps/v1"),
        tolerations=[Toleration("gpu", "Equal", "true", "NoSchedule")],
        node_selector={"zone": "z1"},
    )

    back = parse_pod(_round_trip(POD, pod.to_k8s()))

    assert (back.namespace, back.name) == ("shop", "web-1")
    assert back.requests == pod.requests
    assert back.tolerations == pod.tolerations
    assert back.node_selector == pod.node_selector
    assert back.owner is not None and back.owner.name == "web"


def test_times_and_config_map_names_keep_their_json_form() -> None:
    data = {
        "metadata": {"name": "p", "creationTimestamp": "2026-01-02T03:04:05Z"},
        "spec": {"volumes": [{"name": "cfg", "configMap": {"name": "settings"}}]},
    }

    back = _round_trip(POD, data)

    assert back["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"
    assert back["spec"]["volumes"] == [{"name": "cfg", "configMap": {"name": "settings"}}]


def test_a_protocol_file_from_a_table_with_enums_and_snake_case_names() -> None:
    pool = kube_proto.kube_pool()
    file = kube_proto.proto_file(
        "demo.proto", "demo", "proto3",
        {"Thing": [("pod_bytes", 1, "bytes"), ("state", 2, "enum .demo.Thing.State"),
                   ("sizes", 3, "map<string, int64>"), ("node", 4, f".{kube_proto.KUBE_CORE_PACKAGE}.Node")]},
        (kube_proto.KUBE_CORE_FILE,),
        {"Thing": {"State": [("unknown", 0), ("ready", 1)]}},
    )
    pool.Add(file)
    thing_type = kube_proto.message_class(pool, "demo.Thing")

    thing = thing_type(pod_bytes=b"x", state=1, sizes={"a": 2})
    thing.node.metadata.name = "n"

    decoded = thing_type.FromString(thing.SerializeToString())
    assert (decoded.pod_bytes, decoded.state, dict(decoded.sizes)) == (b"x", 1, {"a": 2})
    assert decoded.node.metadata.name == "n"
    assert thing_type.DESCRIPTOR.fields_by_name["pod_bytes"].json_name == "podBytes"
    with pytest.raises(ValueError):
        thing_type(state="missing")
