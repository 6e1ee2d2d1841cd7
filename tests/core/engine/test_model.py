from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from clusterscaler.model import (
    ClusterObjects,
    Controller,
    CSINode,
    DaemonSet,
    ModelError,
    Node,
    PersistentVolume,
    Pod,
    PodDisruptionBudget,
    Resources,
    Taint,
    Toleration,
    parse_node,
    parse_object,
    parse_pod,
)
from clusterscaler.model.node import NodeChanges
from clusterscaler.model.pod import PodChanges
from clusterscaler.model.resources import ResourcesChanges
from hypothesis import given
from hypothesis import strategies as st

GI = 1 << 30
MI = 1 << 20


def pod_json(spec: dict, **meta) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default", **meta},
        "spec": spec,
    }


def c(name="c", requests=None, limits=None, restart=None, ports=None):
    out: dict = {"name": name, "image": "x"}
    res = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    if res:
        out["resources"] = res
    if restart:
        out["restartPolicy"] = restart
    if ports:
        out["ports"] = ports
    return out


REQUEST_CASES = [
    (
        "one container",
        {"containers": [c(requests={"cpu": "500m", "memory": "1Gi"})]},
        Resources(500, GI, 1),
    ),
    (
        "sum of containers",
        {
            "containers": [
                c(requests={"cpu": "1"}),
                c("d", requests={"cpu": "250m", "memory": "1Mi"}),
            ]
        },
        Resources(1250, MI, 1),
    ),
    (
        "largest init container wins",
        {
            "containers": [c(requests={"cpu": "100m", "memory": "100Mi"})],
            "initContainers": [c("i", requests={"cpu": "2", "memory": "10Mi"})],
        },
        Resources(2000, 100 * MI, 1),
    ),
    (
        "sidecar init container adds",
        {
            "containers": [c(requests={"cpu": "100m"})],
            "initContainers": [c("s", requests={"cpu": "200m"}, restart="Always")],
        },
        Resources(300, 0, 1),
    ),
    (
        "init after sidecar runs beside it",
        {
            "containers": [c(requests={"cpu": "100m"})],
            "initContainers": [
                c("s", requests={"cpu": "200m"}, restart="Always"),
                c("i", requests={"cpu": "1"}),
            ],
        },
        Resources(1200, 0, 1),
    ),
    (
        "overhead added",
        {"containers": [c(requests={"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}},
        Resources(1250, 120 * MI, 1),
    ),
    (
        "pod-level resources replace the containers' cpu and memory",
        {
            "containers": [
                c(requests={"cpu": "100m", "memory": "1Gi", "ephemeral-storage": "1Gi"})
            ],
            "resources": {"requests": {"cpu": "2"}},
        },
        Resources(2000, GI, 1, GI),
    ),
    (
        "limits default missing requests",
        {"containers": [c(requests={"cpu": "100m"}, limits={"cpu": "1", "memory": "1Gi"})]},
        Resources(100, GI, 1),
    ),
    (
        "extended and ephemeral storage",
        {"containers": [c(requests={"nvidia.com/gpu": "2", "ephemeral-storage": "1Gi"})]},
        Resources(0, 0, 1, GI, {"nvidia.com/gpu": 2}),
    ),
    ("no requests still takes a pod slot", {"containers": [c()]}, Resources(pods=1)),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [r[1:] for r in REQUEST_CASES], ids=[r[0] for r in REQUEST_CASES]
)
def test_pod_requests_as_the_scheduler_computes_them(spec, expected):
    assert parse_pod(pod_json(spec)).requests == expected


def test_malformed_quantity_error_names_pod_and_field():
    raw = pod_json({"containers": [c(requests={"cpu": "lots"})]})
    with pytest.raises(ModelError) as err:
        parse_pod(raw)
    assert "Pod default/web-1" in str(err.value)
    assert "spec.containers[0].resources.requests.cpu" in str(err.value)


BAD_PODS = [
    ("no containers", {"metadata": {"name": "p"}, "spec": {}}, "spec.containers"),
    ("no name", {"metadata": {}, "spec": {"containers": []}}, "metadata.name"),
    (
        "bad toleration operator",
        pod_json({"containers": [], "tolerations": [{"key": "a", "operator": "Maybe"}]}),
        "spec.tolerations[0].operator",
    ),
    (
        "bad node affinity operator",
        pod_json(
            {
                "containers": [],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "a", "operator": "Like"}]}
                            ]
                        }
                    }
                },
            }
        ),
        "matchExpressions[0].operator",
    ),
    (
        "spread maxSkew zero",
        pod_json(
            {"containers": [], "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "z"}]}
        ),
        "spec.topologySpreadConstraints[0].maxSkew",
    ),
]


@pytest.mark.parametrize(("raw", "field"), [b[1:] for b in BAD_PODS], ids=[b[0] for b in BAD_PODS])
def test_bad_pods_are_rejected_naming_the_field(raw, field):
    with pytest.raises(ModelError) as err:
        parse_pod(raw)
    assert field in str(err.value)
    assert "expected" in str(err.value)


def test_pod_fields_and_properties():
    raw = pod_json(
        {
            "containers": [
                c(requests={"cpu": "1"}, ports=[{"containerPort": 80, "hostPort": 8080}])
            ],
            "nodeName": "n1",
            "priority": 100,
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
            ],
            "nodeSelector": {"disk": "ssd"},
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                {"name": "tmp", "emptyDir": {"medium": "Memory"}},
            ],
            "terminationGracePeriodSeconds": 30,
        },
        uid="u1",
        labels={"app": "web"},
        ownerReferences=[
            {"kind": "ReplicaSet", "name": "web-abc", "uid": "rs1", "controller": True}
        ],
        creationTimestamp="2024-01-02T03:04:05Z",
    )
    raw["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    pod = parse_pod(raw)
    assert pod.key == "default/web-1"
    assert pod.owner is not None and pod.owner.kind == "ReplicaSet" and pod.owner.uid == "rs1"
    assert pod.unschedulable
    assert pod.host_ports[0].port == 8080 and pod.host_ports[0].protocol == "TCP"
    assert pod.volumes[0].claim_name == "data-0"
    assert pod.volumes[1].medium == "Memory"
    assert pod.priority == 100
    assert not pod.is_mirror and not pod.is_daemonset and not pod.is_terminal
    assert pod.creation_time is not None and pod.creation_time.year == 2024
    # The pod survives a round trip through its Kubernetes form.
    again = parse_pod(json.loads(json.dumps(pod.to_k8s())))
    for f in (
        "requests",
        "tolerations",
        "node_selector",
        "host_ports",
        "owner",
        "priority",
        "unschedulable",
    ):
        assert getattr(again, f) == getattr(pod, f), f


def test_mirror_daemonset_terminal_pods():
    mirror = parse_pod(
        pod_json({"containers": []}, annotations={"kubernetes.io/config.mirror": "x"})
    )
    ds = parse_pod(
        pod_json(
            {"containers": []},
            ownerReferences=[{"kind": "DaemonSet", "name": "d", "controller": True}],
        )
    )
    done = parse_pod({**pod_json({"containers": []}), "status": {"phase": "Succeeded"}})
    assert mirror.is_mirror and ds.is_daemonset and done.is_terminal


def node_json(**overrides) -> dict:
    raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}, "uid": "nu"},
        "spec": {
            "providerID": "aws:///us-east-1a/i-1",
            "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        },
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110", "nvidia.com/gpu": "1"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    raw.update(overrides)
    return raw


def test_node_parse_and_round_trip():
    node = parse_node(node_json())
    assert node.allocatable == Resources(3920, 15 * GI, 110, 0, {"nvidia.com/gpu": 1})
    assert node.ready and not node.unschedulable
    assert node.taints == (Taint("dedicated", "gpu", "NoSchedule"),)
    assert node.provider_id == "aws:///us-east-1a/i-1"
    again = parse_node(json.loads(json.dumps(node.to_k8s())))
    assert again == node


def test_node_allocatable_defaults_to_capacity_and_not_ready():
    raw = node_json()
    del raw["status"]["allocatable"]
    raw["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    node = parse_node(raw)
    assert node.allocatable == node.capacity
    assert not node.ready


def test_node_is_immutable_and_cheap_to_copy():
    node = parse_node(node_json())
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.name = "x"  # type: ignore[misc]
    copy = node.with_(name="n2", unschedulable=True)
    assert copy.name == "n2" and copy.labels is node.labels
    assert node.with_taint(Taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule")).taints[
        -1
    ].key == ("ToBeDeletedByClusterAutoscaler")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (PodChanges, {f.name: f.type for f in dataclasses.fields(Pod)}),
        (NodeChanges, {f.name: f.type for f in dataclasses.fields(Node)}),
        (
            ResourcesChanges,
            {
                name: p.annotation
                for name, p in inspect.signature(Resources.__init__).parameters.items()
                if name != "self"
            },
        ),
    ],
    ids=["Pod", "Node", "Resources"],
)
def test_with_takes_every_field_as_typed(changes, expected):
    """`with_` takes each field of its class by name, of the field's own type: a field
    added to the class can be changed, and a type checker checks the value given."""
    assert {name: ref.__forward_arg__ for name, ref in changes.__annotations__.items()} == expected


def test_resources_with_changes_only_what_it_names():
    r = Resources(cpu=500, memory=GI, pods=1, extended={"nvidia.com/gpu": 1})
    assert r.with_(memory=2 * GI) == Resources(
        cpu=500, memory=2 * GI, pods=1, extended={"nvidia.com/gpu": 1}
    )
    assert r.with_(extended=None) == Resources(cpu=500, memory=GI, pods=1)


TOLERATIONS = [
    (
        "equal match",
        Toleration("k", "Equal", "v", "NoSchedule"),
        Taint("k", "v", "NoSchedule"),
        True,
    ),
    (
        "value differs",
        Toleration("k", "Equal", "w", "NoSchedule"),
        Taint("k", "v", "NoSchedule"),
        False,
    ),
    ("exists any value", Toleration("k", "Exists"), Taint("k", "v", "NoExecute"), True),
    (
        "empty key exists tolerates all",
        Toleration("", "Exists"),
        Taint("x", "y", "NoSchedule"),
        True,
    ),
    (
        "effect differs",
        Toleration("k", "Exists", effect="NoExecute"),
        Taint("k", "v", "NoSchedule"),
        False,
    ),
    ("key differs", Toleration("j", "Exists"), Taint("k", "", "NoSchedule"), False),
    (
        "empty key equal tolerates nothing",
        Toleration("", "Equal"),
        Taint("k", "", "NoSchedule"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("tol", "taint", "ok"), [t[1:] for t in TOLERATIONS], ids=[t[0] for t in TOLERATIONS]
)
def test_toleration_matches_taint(tol, taint, ok):
    assert tol.tolerates(taint) is ok


res = st.builds(
    Resources,
    st.integers(0, 10**6),
    st.integers(0, 10**12),
    st.integers(0, 200),
    st.integers(0, 10**12),
    st.dictionaries(st.sampled_from(["nvidia.com/gpu", "example.com/foo"]), st.integers(0, 8)),
)


@given(res, res)
def test_resources_arithmetic(a, b):
    assert (a + b) - b == a
    assert a.fits(a + b)
    assert (a + b).fits(a) is b.is_zero()
    assert Resources.from_k8s(a.to_k8s(), obj="o", field="f") == a
    assert hash(a + b) == hash(b + a)


def test_resources_get_by_kubernetes_name():
    r = Resources(1500, GI, 3, 5, {"nvidia.com/gpu": 2})
    assert [
        r.get(n) for n in ("cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu", "x")
    ] == [
        1500,
        GI,
        3,
        5,
        2,
        0,
    ]
    assert r.insufficient(Resources(1000, GI, 3, 5)) == ["cpu", "nvidia.com/gpu"]


def test_cluster_objects_from_kubectl_list():
    items = [
        node_json(),
        pod_json({"containers": []}),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "fluentd", "namespace": "kube-system", "uid": "d1"},
            "spec": {
                "selector": {"matchLabels": {"app": "f"}},
                "template": {
                    "metadata": {"labels": {"app": "f"}},
                    "spec": {"containers": [c(requests={"cpu": "100m"})]},
                },
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-abc", "namespace": "default", "uid": "rs1"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {"parallelism": 4},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv1"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "claimRef": {"namespace": "default", "name": "data-0"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "topology.kubernetes.io/zone",
                                        "operator": "In",
                                        "values": ["a"],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-0", "namespace": "default"},
            "spec": {
                "volumeName": "pv1",
                "accessModes": ["ReadWriteOncePod"],
                "resources": {"requests": {"storage": "10Gi"}},
            },
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "n1"},
            "spec": {
                "drivers": [
                    {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}}
                ]
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "kube-system"},
            "data": {"k": "v"},
        },
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}},
    ]
    objs = ClusterObjects.from_list({"apiVersion": "v1", "kind": "List", "items": items})
    assert [
        len(x)
        for x in (
            objs.nodes,
            objs.pods,
            objs.pdbs,
            objs.daemonsets,
            objs.controllers,
            objs.pvs,
            objs.pvcs,
            objs.storage_classes,
            objs.csinodes,
            objs.config_maps,
        )
    ] == [1, 1, 1, 1, 2, 1, 1, 1, 1, 1]
    assert objs.skipped == {"Service": 1}
    pdb = objs.pdbs[0]
    assert (
        isinstance(pdb, PodDisruptionBudget)
        and pdb.min_available == "50%"
        and pdb.disruptions_allowed == 1
    )
    assert pdb.matches(objs.pods[0].with_(labels={"app": "web"}))
    ds = objs.daemonsets[0]
    assert isinstance(ds, DaemonSet) and ds.template is not None and ds.template.is_daemonset
    assert ds.template.requests == Resources(100, 0, 1)
    rs, job = objs.controllers
    assert isinstance(rs, Controller) and rs.replicas == 3 and job.replicas == 4
    pv = objs.pvs[0]
    assert (
        isinstance(pv, PersistentVolume)
        and pv.capacity == 10 * GI
        and pv.claim_ref == "default/data-0"
    )
    assert objs.pvcs[0].requested == 10 * GI and objs.pvcs[0].volume_name == "pv1"
    assert objs.pvcs[0].access_modes == ("ReadWriteOncePod",) and objs.pvcs[0].read_write_once_pod
    assert objs.storage_classes[0].volume_binding_mode == "WaitForFirstConsumer"
    assert isinstance(objs.csinodes[0], CSINode) and objs.csinodes[0].drivers == {
        "ebs.csi.aws.com": 25
    }
    with pytest.raises(ModelError, match="Service"):
        ClusterObjects.from_list(items, strict=True)


def test_typed_list_items_may_omit_kind():
    doc = {"kind": "PodList", "items": [{"metadata": {"name": "a"}, "spec": {"containers": []}}]}
    objs = ClusterObjects.from_list(doc)
    assert isinstance(objs.pods[0], Pod)
    doc = {
        "kind": "ReplicaSetList",
        "items": [{"metadata": {"name": "rs"}, "spec": {"replicas": 2}}],
    }
    (rs,) = ClusterObjects.from_list(doc).controllers
    assert (rs.kind, rs.replicas) == ("ReplicaSet", 2)


def test_parse_object_dispatches_by_kind():
    assert isinstance(parse_object(node_json()), Node)
    with pytest.raises(ModelError, match="kind"):
        parse_object({"kind": "Widget", "metadata": {"name": "w"}})


def test_pod_to_k8s_sets_limits_for_extended_resources():
    pod = parse_pod(
        pod_json(
            {
                "containers": [
                    c(requests={"cpu": "1", "nvidia.com/gpu": "2"}, limits={"nvidia.com/gpu": "2"})
                ]
            }
        )
    )
    resources = pod.to_k8s()["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "1", "nvidia.com/gpu": "2"}
    assert resources["limits"] == {"nvidia.com/gpu": "2"}
    assert parse_pod(pod.to_k8s()).requests == pod.requests


def test_parsed_pod_is_an_ordinary_frozen_pod():
    raw = pod_json(
        {"containers": [c(requests={"cpu": "250m", "memory": "1Gi"})], "priority": 5},
        uid="u9",
        labels={"app": "web"},
        ownerReferences=[{"kind": "ReplicaSet", "name": "web-abc", "controller": True}],
        creationTimestamp="2024-01-02T03:04:05Z",
    )
    pod = parse_pod(raw)
    built = Pod(**{f.name: getattr(pod, f.name) for f in dataclasses.fields(Pod)})
    assert pod == built and hash(pod) == hash(built)
    assert pod.requests == Resources(cpu=250, memory=1 << 30, pods=1)
    assert pod.labels == {"app": "web"} and pod.priority == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        pod.name = "other"  # type: ignore[misc]
    assert dataclasses.replace(pod, node_name="n1").node_name == "n1"


@pytest.mark.parametrize(
    "absent",
    [
        "labels",
        "annotations",
        "tolerations",
        "nodeSelector",
        "affinity",
        "topologySpreadConstraints",
        "volumes",
        "creationTimestamp",
    ],
    ids=str,
)
def test_null_and_absent_fields_parse_alike(absent):
    meta_fields = {"labels", "annotations", "creationTimestamp"}
    raw_null = pod_json({"containers": [c(requests={"cpu": "1"})]})
    (raw_null["metadata"] if absent in meta_fields else raw_null["spec"])[absent] = None
    assert parse_pod(raw_null) == parse_pod(pod_json({"containers": [c(requests={"cpu": "1"})]}))


@pytest.mark.parametrize("value", [0, False, []], ids=["zero", "false", "list"])
def test_creation_timestamp_must_be_a_timestamp(value):
    with pytest.raises(ModelError) as err:
        parse_pod(pod_json({"containers": [c()]}, creationTimestamp=value))
    assert err.value.field == "metadata.creationTimestamp"
