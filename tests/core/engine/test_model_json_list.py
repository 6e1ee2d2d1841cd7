"""`ClusterObjects.from_json_list` parses a JSON List straight from its text: the objects
and the errors must be those of `from_list(json.loads(text))`, whatever the pods hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from clusterscaler.model import (
    ClusterObjects,
    ModelError,
    decode_list_page,
    parse_pod,
    parse_pod_json,
)
from hypothesis import given, settings
from hypothesis import strategies as st

ABSENT = object()

UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1", "controller": True}

META_CHOICES: dict[str, list[Any]] = {
    "name": ["web-1", "web-2", "", None, 5, ABSENT],
    "namespace": [ABSENT, "default", "batch", None, ""],
    "uid": [ABSENT, "uid-1", None],
    "labels": [ABSENT, None, {"app": "web"}, {"app": "web", "tier": "a"}, "bad"],
    "annotations": [ABSENT, {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}, 3],
    "ownerReferences": [
        ABSENT,
        None,
        [],
        [RS],
        [{"kind": "Node", "name": "n", "uid": "x"}, RS],
        "bad",
        [{"kind": 1, "name": "x"}],
        [3],
    ],
    "creationTimestamp": [ABSENT, "2024-05-01T10:00:00Z", "2024-05-01T10:00:00+02:00", "nope"],
    "deletionTimestamp": [ABSENT, None, "2024-05-01T11:00:00Z", 7],
}


def container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": "x", **fields}


SPEC_CHOICES: dict[str, list[Any]] = {
    "containers": [
        [container(resources={"requests": {"cpu": "200m", "memory": "200"}})],
        [container(resources={"requests": {"cpu": "1", "nvidia.com/gpu": "1"}})],
        [container(resources={"limits": {"cpu": "1", "memory": "1Gi"}})],
        [container(resources={"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}})],
        [container(), container(resources={"requests": {"memory": "64Mi"}})],
        [
            container(
                resources={"requests": {"cpu": "1"}},
                ports=[{"containerPort": 80, "hostPort": 8080}],
            )
        ],
        [container(resources={})],
        [container(resources={"requests": {"cpu": "lots"}})],
        [container(resources={"requests": "bad"})],
        [container(resources=5)],
        [3],
        [],
        "bad",
        ABSENT,
    ],
    "initContainers": [
        ABSENT,
        [container(resources={"requests": {"cpu": "2"}})],
        [container(resources={"requests": {"cpu": "50m"}}, restartPolicy="Always")],
        "bad",
    ],
    "overhead": [ABSENT, {"cpu": "10m"}, {"cpu": "x"}],
    "resources": [ABSENT, {"requests": {"memory": "2Gi"}}],
    "nodeName": [ABSENT, "node-1", "node-2", None],
    "priority": [ABSENT, 0, 1000, None, "high", True],
    "terminationGracePeriodSeconds": [ABSENT, 30, 1.5],
    "tolerations": [
        ABSENT,
        [{"key": "k", "operator": "Exists"}],
        [{"key": "k", "operator": "Maybe"}],
        [{"key": "k", "value": {"nested": 1}}],
        "bad",
    ],
    "nodeSelector": [ABSENT, None, {"zone": "a"}, ["bad"]],
    "affinity": [
        ABSENT,
        None,
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
        {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "Like"}]}]
                }
            }
        },
    ],
    "topologySpreadConstraints": [
        ABSENT,
        [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["tier"],
            }
        ],
        [{"maxSkew": 0, "topologyKey": "z"}],
    ],
    "volumes": [
        ABSENT,
        [{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}],
        [{"name": "tmp", "emptyDir": {}}],
        [{"name": "data", "persistentVolumeClaim": {}}],
    ],
    "schedulerName": [ABSENT, "default-scheduler", "other"],
    "priorityClassName": [ABSENT, "critical"],
    "preemptionPolicy": [ABSENT, "Never"],
    # DRA claims: read on the JSON route from the spec's text, as the rest of the spec.
    "resourceClaims": [
        ABSENT,
        ABSENT,
        ABSENT,
        None,
        [],
        [
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            {"name": "nic", "resourceClaimName": "shared-nic"},
        ],
        [{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}],
        "bad",
    ],
}

STATUS_CHOICES: list[Any] = [
    ABSENT,
    None,
    {"phase": "Running"},
    {"phase": "Pending", "conditions": [UNSCHEDULABLE]},
    {"conditions": [{"type": "Ready", "status": "True"}, 3]},
    {"conditions": "bad"},
    {"nominatedNodeName": "node-1"},
    {"phase": "Running", "conditions": None},
    ["bad"],
    [],
    {
        "phase": "Pending",
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}],
    },
    {"phase": "Running", "resourceClaimStatuses": [{"name": "gpu"}]},
    {"resourceClaimStatuses": None},
    {"resourceClaimStatuses": [{"name": 3}]},
]


def _pick(choices: dict[str, list[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({k: st.sampled_from(v) for k, v in choices.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not ABSENT}
    )


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": draw(st.sampled_from(["Pod", ABSENT]))}
    pod["metadata"] = draw(st.one_of(_pick(META_CHOICES), st.sampled_from([ABSENT, None, 3])))
    pod["spec"] = draw(
        st.one_of(
            _pick(SPEC_CHOICES),
            _pick(SPEC_CHOICES),
            _pick(SPEC_CHOICES),
            st.sampled_from([ABSENT, None, 3]),
        )
    )
    pod["status"] = draw(st.sampled_from(STATUS_CHOICES))
    return {k: v for k, v in pod.items() if v is not ABSENT}


OTHER_OBJECTS: list[Any] = [
    {
        "kind": "Node",
        "metadata": {"name": "node-1", "labels": {"zone": "a"}},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    },
    {"kind": "Node", "metadata": {"name": "node-2"}, "status": {"capacity": {"cpu": "x"}}},
    {
        "kind": "ReplicaSet",
        "apiVersion": "apps/v1",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
    },
    {"kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}, "data": {"a": "b"}},
    {"kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "csi.example.com"},
    {"kind": "Service", "metadata": {"name": "svc"}},
    {"metadata": {"name": "no-kind"}},
    {"kind": 5},
    3,
    "text",
]


def outcome(fn: Any) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except (ModelError, ValueError, TypeError, AttributeError, KeyError) as exc:
        return type(exc).__name__, str(exc)


def assert_same(doc: Any, strict: bool = False) -> None:
    text = json.dumps(doc)
    fast = outcome(lambda: ClusterObjects.from_json_list(text, strict=strict))
    # Only a document without an items array is left to the general route.
    assert fast != ("ok", None)
    assert fast == outcome(lambda: ClusterObjects.from_list(json.loads(text), strict=strict))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(pods(), pods(), pods(), st.sampled_from(OTHER_OBJECTS)), min_size=1, max_size=6
    ),
    st.sampled_from(["List", "PodList", "NodeList", ABSENT]),
    st.booleans(),
)
def test_same_objects_and_errors_as_from_list(items: list[Any], kind: Any, strict: bool) -> None:
    doc: dict[str, Any] = {"apiVersion": "v1", "items": items}
    if kind is not ABSENT:
        doc["kind"] = kind
    assert_same(doc, strict)


@settings(max_examples=100, deadline=None)
@given(st.lists(pods(), min_size=2, max_size=8))
def test_pods_sharing_a_spec_text_keep_their_own_fields(items: list[Any]) -> None:
    """Pods of a workload share the spec parsed from its text; what comes from the
    metadata and status (and the affinity and spread that depend on labels) stays each
    pod's own."""
    spec = {
        "containers": [container(resources={"requests": {"cpu": "200m"}})],
        "topologySpreadConstraints": SPEC_CHOICES["topologySpreadConstraints"][1],
    }
    for item in items:
        item["spec"] = spec
    assert_same({"kind": "List", "items": items})


@pytest.mark.parametrize(
    "doc",
    [
        [{"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}],
        {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}},
        {"kind": "List", "items": 3},
        {"kind": "List"},
    ],
    ids=["array", "single-object", "items-not-list", "no-items"],
)
def test_other_documents_take_the_general_route(doc: Any) -> None:
    assert ClusterObjects.from_json_list(json.dumps(doc)) is None


@pytest.mark.parametrize(
    "text",
    ['{"kind": "List", "items": []', "{kind: List}", "NaN", ""],
    ids=["truncated", "yaml", "nan", "empty"],
)
def test_malformed_json_takes_the_general_route(text: str) -> None:
    assert ClusterObjects.from_json_list(text) is None


def test_bad_pod_error_names_the_pod_and_its_first_bad_field() -> None:
    good = {"kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [container()]}}
    bad = {
        "kind": "Pod",
        "metadata": {"name": "b", "namespace": "ns", "ownerReferences": "bad"},
        "spec": {
            "containers": [container(resources={"requests": {"cpu": "lots"}})],
            "priority": "x",
        },
    }
    with pytest.raises(ModelError) as info:
        ClusterObjects.from_json_list(json.dumps({"kind": "List", "items": [good, bad]}))
    assert info.value.obj == "Pod ns/b"
    assert info.value.field == "spec.containers[0].resources.requests.cpu"


@settings(max_examples=300, deadline=None)
@given(pods())
def test_parse_pod_json_as_parse_pod(pod: dict[str, Any]) -> None:
    text = json.dumps(pod).encode()
    expected = outcome(lambda: parse_pod(json.loads(text)))
    parsed = parse_pod_json(text)
    if parsed is None:
        # Left to `parse_pod`: only pods that are invalid, not shaped as the API server
        # writes them (metadata, spec and status objects) or with DRA claims.
        assert (
            expected[0] != "ok"
            or not (
                isinstance(pod.get("metadata"), dict)
                and isinstance(pod.get("spec"), dict)
                and isinstance(pod.get("status", {}), dict | None)
            )
            or "resourceClaims" in pod["spec"]
            or (pod.get("status") or {}).get("resourceClaimStatuses") is not None
        )
        return
    got, namespace = parsed
    assert ("ok", got) == expected
    assert namespace == (pod.get("metadata") or {}).get("namespace")


def test_parse_pod_json_reads_pods_with_claims_as_parse_pod() -> None:
    spec = {
        "containers": [container()],
        "resourceClaims": [{"name": "g", "resourceClaimName": "c"}],
    }
    claims = {"kind": "Pod", "metadata": {"name": "a"}, "spec": spec}
    statuses = {
        "kind": "Pod",
        "metadata": {"name": "b"},
        "spec": {
            "containers": [container()],
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
        },
        "status": {"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "b-g-1"}]},
    }
    for pod in (claims, statuses):
        parsed = parse_pod_json(json.dumps(pod).encode())
        assert parsed is not None and parsed[0] == parse_pod(pod)
        objects = ClusterObjects.from_json_list(json.dumps({"kind": "List", "items": [pod]}))
        assert objects is not None and objects.pods == [parse_pod(pod)]
    [a] = ClusterObjects.from_json_list(json.dumps({"kind": "List", "items": [claims]})).pods
    assert a.resource_claims[0].claim_name == "c"
    [b] = ClusterObjects.from_json_list(json.dumps({"kind": "List", "items": [statuses]})).pods
    assert (b.resource_claims[0].template_name, b.claim_statuses) == ("t", {"g": "b-g-1"})
    # Another pod of the same spec has its own generated claim.
    other = {**statuses, "metadata": {"name": "c"},
             "status": {"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "c-g-2"}]}}
    parsed = parse_pod_json(json.dumps(other).encode())
    assert parsed is not None and parsed[0].claim_statuses == {"g": "c-g-2"}


def test_parse_pod_json_leaves_invalid_pods_to_parse_pod() -> None:
    bad = {"metadata": {"name": "b"}, "spec": {"containers": [container(resources=5)]}}
    assert parse_pod_json(json.dumps(bad).encode()) is None
    assert parse_pod_json(b"[1, 2]") is None
    assert parse_pod_json(b'{"metadata": {"name": "x"}}') is None


def test_decode_list_page_keeps_list_metadata() -> None:
    page = decode_list_page(
        json.dumps({"metadata": {"continue": "t", "resourceVersion": "7"}, "items": [{"a": 1}]})
    )
    assert page is not None
    meta, items = page
    assert meta == {"continue": "t", "resourceVersion": "7"}
    assert [json.loads(bytes(i)) for i in items] == [{"a": 1}]
    assert decode_list_page(json.dumps({"items": None})) is None
    assert decode_list_page("[1]") is None


def token_spec(suffix: str) -> dict[str, Any]:
    """A Deployment pod's spec as the API server returns it: the projected service-account
    token volume `kube-api-access-<suffix>` is the only part that differs between pods."""
    token = f"kube-api-access-{suffix}"
    return {
        "containers": [
            container(
                resources={"requests": {"cpu": "200m", "memory": "256Mi"}},
                volumeMounts=[
                    {"name": token, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
                    {"name": "config", "mountPath": "/etc/config"},
                ],
            )
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
                            ]
                        }
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            },
        },
        "volumes": [
            {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
            {
                "name": token,
                "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
            },
        ],
    }


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            pods(),
            st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=5, max_size=5),
        ),
        min_size=2,
        max_size=8,
    )
)
def test_pods_differing_in_token_volume_names_parse_as_from_list(
    items: list[tuple[Any, str]],
) -> None:
    """Pods whose specs differ only in the token volume's name share one parse of the
    spec, and each keeps its own volume name, affinity and errors."""
    for item, suffix in items:
        item["spec"] = token_spec(suffix)
    assert_same({"kind": "List", "items": [item for item, _ in items]})


def test_pods_of_a_workload_share_parsed_constraints_but_keep_their_token_volume() -> None:
    def item(name: str, suffix: str, app: str = "web") -> dict[str, Any]:
        meta = {"name": name, "namespace": "default", "labels": {"app": app}}
        return {"kind": "Pod", "metadata": meta, "spec": token_spec(suffix)}

    objects = ClusterObjects.from_json_list(
        json.dumps(
            {
                "kind": "List",
                "items": [item("a", "x1y2z"), item("b", "q9w8e"), item("c", "r5t6y", app="api")],
            }
        )
    )
    assert objects is not None
    a, b, c = objects.pods
    assert [v.name for v in a.volumes] == ["config", "data", "kube-api-access-x1y2z"]
    assert [v.name for v in b.volumes] == ["config", "data", "kube-api-access-q9w8e"]
    assert b.volumes[1].claim_name == "shared"
    # The same labels and namespace: the same parsed object, so grouping them is cheap.
    assert a.affinity is b.affinity
    assert a.requests is b.requests
    # Other labels: parsed for them (an anti-affinity term may select the pod itself).
    assert c.affinity == a.affinity and c.affinity is not a.affinity


def daemonset_pod(name: str, node: str, status: dict[str, Any]) -> dict[str, Any]:
    """A DaemonSet pod bound to `node`: its affinity names the node too."""
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system", "labels": {"app": "agent"}},
        "spec": {
            "nodeName": node,
            "containers": [container(resources={"requests": {"cpu": "50m"}})],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    }
                }
            },
        },
        "status": status,
    }


RUNNING = {
    "phase": "Running",
    "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-01T10:00:00Z"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-05-01T09:59:00Z"},
    ],
}


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["node-1", "node-2", "node-3", "?", 'no"de', ""]),
            st.sampled_from(["ReplicaSet", "DaemonSet"]),
            st.sampled_from(
                [
                    RUNNING,
                    {"phase": "Pending", "conditions": [UNSCHEDULABLE]},
                    {"conditions": None},
                    {"conditions": "bad"},
                    {"conditions": [{"type": "PodScheduled", "reason": "Unschedulable"}]},
                ]
            ),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_running_pods_on_other_nodes_parse_as_from_list(
    pods: list[tuple[str, str, dict[str, Any]]],
) -> None:
    """Running pods of a workload differ in their node name (and a DaemonSet pod also in
    its affinity, which names its node) and in their conditions: each keeps its own."""
    items = []
    for i, (node, kind, status) in enumerate(pods):
        if kind == "DaemonSet":
            items.append(daemonset_pod(f"agent-{i}", node, status))
        else:
            spec = token_spec("abcde")
            spec["nodeName"] = node
            items.append(
                {"kind": "Pod", "metadata": {"name": f"web-{i}"}, "spec": spec, "status": status}
            )
    assert_same({"kind": "List", "items": items})


def test_running_pods_share_their_workload_spec_but_keep_their_node() -> None:
    items = []
    for i, node in enumerate(["node-1", "node-2", "node-1"]):
        spec = token_spec(f"tok{i:02d}")
        spec["nodeName"] = node
        meta = {"name": f"web-{i}", "labels": {"app": "web"}}
        items.append({"kind": "Pod", "metadata": meta, "spec": spec, "status": RUNNING})
    items.append(daemonset_pod("agent-1", "node-1", RUNNING))
    items.append(daemonset_pod("agent-2", "node-2", RUNNING))
    objects = ClusterObjects.from_json_list(json.dumps({"kind": "List", "items": items}))
    assert objects is not None
    web0, web1, _, agent1, agent2 = objects.pods
    assert [p.node_name for p in objects.pods] == ["node-1", "node-2", "node-1", "node-1", "node-2"]
    assert web0.affinity is web1.affinity and web0.requests is web1.requests
    assert not any(p.unschedulable for p in objects.pods)
    # The DaemonSet pods' affinity names their own node.
    for agent, node in ((agent1, "node-1"), (agent2, "node-2")):
        assert agent.affinity is not None and agent.affinity.node is not None
        required = agent.affinity.node.required
        assert required is not None
        assert required[0].match_fields[0].values == (node,)
