"""What MachineSet annotations mean: limits, discovery, options and scale-from-zero capacity."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from clusterscaler.interfaces.cloudprovider import ConfigurationError, NodeGroupOptions
from clusterscaler.model import Resources, Taint
from clusterscaler_machineapi.apigroups import ApiGroup
from clusterscaler_machineapi.discovery import allowed, parse_discovery_spec, parse_discovery_specs
from clusterscaler_machineapi.objects import (
    ScalableResource,
    normalize_provider_id,
    parse_scalable,
)
from clusterscaler_machineapi.settings import SizeLimits, group_options, size_limits
from clusterscaler_machineapi.template import (
    CannotScaleFromZeroError,
    build_template_node_info,
    read_capacity,
)
from hypothesis import given
from hypothesis import strategies as st
from machineapi_builders import CAPI, OPENSHIFT, limits, scalable

GIB = 1024**3
MIB = 1024**2


def resource(group: str = OPENSHIFT, kind: str = "MachineSet", **kw: Any) -> ScalableResource:
    raw = scalable("workers", group=group, kind=kind, **kw)
    return parse_scalable(raw, ApiGroup(group, "v1beta1"), kind)


# --------------------------------------------------------------------------- size limits


@pytest.mark.parametrize(
    ("min_size", "max_size", "expected"),
    [
        ("1", "5", SizeLimits(1, 5)),
        (None, "3", SizeLimits(0, 3)),
        ("2", "2", SizeLimits(2, 2)),
        (" 0 ", "+4", SizeLimits(0, 4)),
        (None, None, None),
        ("0", "0", None),
    ],
    ids=["both", "min-missing-means-0", "min-equals-max", "whitespace-and-plus", "not-annotated", "max-0-not-scaled"],
)
@pytest.mark.parametrize("group", [OPENSHIFT, CAPI])
def test_size_limits(group: str, min_size: str | None, max_size: str | None, expected: SizeLimits | None) -> None:
    assert size_limits(resource(group, annotations=limits(group, min_size, max_size))) == expected


@pytest.mark.parametrize(
    ("min_size", "max_size", "message"),
    [
        ("one", "5", "min-size: expected a non-negative integer, got 'one'"),
        ("-1", "5", "min-size: expected a non-negative integer, got '-1'"),
        ("1", "2.5", "max-size: expected a non-negative integer, got '2.5'"),
        ("4", "2", "max-size: expected an integer >= machine.openshift.io/cluster-api-autoscaler-node-group-min-size (4), got 2"),
        ("1", None, "max-size is missing"),
    ],
    ids=["non-integer", "negative", "fraction", "max-below-min", "min-without-max"],
)
def test_bad_size_annotations_name_the_object_and_annotation(
    min_size: str | None, max_size: str | None, message: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        size_limits(resource(annotations=limits(OPENSHIFT, min_size, max_size)))
    assert "MachineSet openshift-machine-api/workers" in str(info.value)
    assert message in str(info.value)


def test_annotations_of_the_other_group_are_ignored() -> None:
    # A Cluster API MachineSet is not autoscaled by OpenShift's annotation names.
    assert size_limits(resource(CAPI, annotations=limits(OPENSHIFT, 1, 3))) is None


@given(st.integers(0, 1000), st.integers(0, 1000))
def test_size_limits_accept_exactly_ordered_pairs(low: int, high: int) -> None:
    r = resource(annotations=limits(OPENSHIFT, low, high))
    if high < low:
        with pytest.raises(ConfigurationError):
            size_limits(r)
    elif high == 0:
        assert size_limits(r) is None
    else:
        assert size_limits(r) == SizeLimits(low, high)


# --------------------------------------------------------------------------- discovery


@pytest.mark.parametrize(
    ("spec", "kw", "matches"),
    [
        ("clusterapi:namespace=openshift-machine-api", {}, True),
        ("clusterapi:namespace=other", {}, False),
        ("clusterapi:clusterName=prod", {"cluster_name": "prod"}, True),
        ("clusterapi:clusterName=prod", {"labels": {"cluster.x-k8s.io/cluster-name": "prod"}}, True),
        ("clusterapi:clusterName=prod", {"cluster_name": "dev"}, False),
        ("clusterapi:color=green,size=xl", {"labels": {"color": "green", "size": "xl"}}, True),
        ("clusterapi:color=green,size=xl", {"labels": {"color": "green"}}, False),
        ("clusterapi:", {}, True),
    ],
    ids=["namespace", "other-namespace", "cluster-name-spec", "cluster-name-label", "other-cluster", "labels", "missing-label", "empty"],
)
def test_discovery_spec_matching(spec: str, kw: dict[str, Any], matches: bool) -> None:
    r = resource(CAPI, namespace="openshift-machine-api", **kw)
    assert parse_discovery_spec(spec).matches(r) is matches


def test_any_discovery_spec_admits_a_resource_and_none_admits_all() -> None:
    r = resource(CAPI, namespace="team-b")
    specs = parse_discovery_specs(["clusterapi:namespace=team-a", "clusterapi:namespace=team-b"])
    assert allowed(specs, r)
    assert not allowed(specs[:1], r)
    assert allowed([], r)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("asg:tag=foo", "unsupported discoverer 'asg'; the machineapi provider supports only clusterapi:"),
        ("clusterapi:namespace", "'namespace' must be key=value"),
        ("clusterapi:color=", "'color=' must be key=value"),
        ("clusterapi:a=1,a=2", "label 'a' is given twice"),
    ],
    ids=["other-discoverer", "no-value", "empty-value", "duplicate-label"],
)
def test_bad_discovery_specs_are_errors(spec: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_discovery_spec(spec)
    assert "--node-group-auto-discovery" in str(info.value)
    assert fragment in str(info.value)


# --------------------------------------------------------------------------- provider IDs


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("aws:///us-east-1a/i-123", "aws://us-east-1a/i-123", True),
        (
            "azure:///subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/vm-1",
            "azure:///subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm-1",
            True,
        ),
        ("gce://proj/us-central1-a/vm-1", "gce://proj/us-central1-b/vm-1", False),
        ("aws:///us-east-1a/i-123", "aws:///us-east-1a/i-1234", False),
    ],
    ids=["aws-slashes", "azure-case", "gce-other-zone", "other-instance"],
)
def test_provider_id_normalisation(a: str, b: str, same: bool) -> None:
    assert (normalize_provider_id(a) == normalize_provider_id(b)) is same


# --------------------------------------------------------------------------- options


def test_group_options_override_only_what_is_annotated() -> None:
    defaults = NodeGroupOptions(
        scale_down_utilization_threshold=0.5, scale_down_unneeded_time=timedelta(minutes=10)
    )
    r = resource(
        CAPI,
        annotations={
            f"{CAPI}/autoscaling-options-scaledownutilizationthreshold": "0.7",
            f"{CAPI}/autoscaling-options-scaledownunneededtime": "1h30m",
            f"{CAPI}/autoscaling-options-maxnodeprovisiontime": "20m",
            f"{CAPI}/autoscaling-options-scaledownunreadytime": "5m",
            f"{CAPI}/autoscaling-options-scaledowngpuutilizationthreshold": "0.2",
        },
    )
    assert group_options(r, defaults) == NodeGroupOptions(
        scale_down_utilization_threshold=0.7,
        scale_down_gpu_utilization_threshold=0.2,
        scale_down_unneeded_time=timedelta(hours=1, minutes=30),
        scale_down_unready_time=timedelta(minutes=5),
        max_node_provision_time=timedelta(minutes=20),
    )


def test_group_options_none_without_annotations_and_bad_values_keep_defaults() -> None:
    defaults = NodeGroupOptions(scale_down_utilization_threshold=0.5)
    assert group_options(resource(OPENSHIFT), defaults) is None
    r = resource(
        OPENSHIFT,
        annotations={
            f"{OPENSHIFT}/autoscaling-options-scaledownutilizationthreshold": "1.5",
            f"{OPENSHIFT}/autoscaling-options-scaledownunneededtime": "ten minutes",
            f"{OPENSHIFT}/autoscaling-options-maxnodeprovisiontime": "30m",
        },
    )
    overrides = group_options(r, defaults)
    # Only the valid annotation's override; the core lays it over the flags.
    assert overrides == NodeGroupOptions(max_node_provision_time=timedelta(minutes=30))
    assert overrides.over(defaults) == NodeGroupOptions(
        scale_down_utilization_threshold=0.5, max_node_provision_time=timedelta(minutes=30)
    )


# --------------------------------------------------------------------------- capacity

CAP = "capacity.cluster-autoscaler.kubernetes.io"


@pytest.mark.parametrize(
    ("group", "annotations", "expected"),
    [
        (
            CAPI,
            {f"{CAP}/cpu": "4", f"{CAP}/memory": "16G"},
            Resources(cpu=4000, memory=16 * 10**9, pods=110),
        ),
        (
            CAPI,
            {
                f"{CAP}/cpu": "500m",
                f"{CAP}/memory": "8Gi",
                f"{CAP}/ephemeral-disk": "100Gi",
                f"{CAP}/maxPods": "58",
                f"{CAP}/gpu-type": "amd.com/gpu",
                f"{CAP}/gpu-count": "2",
            },
            Resources(cpu=500, memory=8 * GIB, pods=58, ephemeral_storage=100 * GIB, extended={"amd.com/gpu": 2}),
        ),
        (
            CAPI,
            {f"{CAP}/cpu": "8", f"{CAP}/memory": "32Gi", f"{CAP}/gpu-count": "1"},
            Resources(cpu=8000, memory=32 * GIB, pods=110, extended={"nvidia.com/gpu": 1}),
        ),
        (
            OPENSHIFT,
            {f"{OPENSHIFT}/vCPU": "2", f"{OPENSHIFT}/memoryMb": "7680", f"{OPENSHIFT}/GPU": "1"},
            Resources(cpu=2000, memory=7680 * MIB, pods=250, extended={"nvidia.com/gpu": 1}),
        ),
        (
            OPENSHIFT,
            {f"{OPENSHIFT}/vCPU": "2", f"{OPENSHIFT}/memoryMb": "8192", f"{OPENSHIFT}/maxPods": "100"},
            Resources(cpu=2000, memory=8 * GIB, pods=100),
        ),
        (
            OPENSHIFT,
            {f"{CAP}/cpu": "16", f"{OPENSHIFT}/vCPU": "2", f"{OPENSHIFT}/memoryMb": "1024"},
            Resources(cpu=16000, memory=GIB, pods=250),
        ),
    ],
    ids=["capi-minimal", "capi-everything", "capi-gpu-default-type", "openshift-keys", "openshift-max-pods", "capacity-keys-first"],
)
def test_capacity_annotations(group: str, annotations: dict[str, str], expected: Resources) -> None:
    r = resource(group, annotations=annotations)
    assert read_capacity(r).resources == expected
    info = build_template_node_info(r)
    assert info.node.capacity == expected
    assert info.node.allocatable == expected
    assert info.pods == ()


@pytest.mark.parametrize(
    ("annotations", "missing"),
    [
        ({}, ["cpu", "memory"]),
        ({f"{CAP}/cpu": "4"}, ["memory"]),
        ({f"{OPENSHIFT}/memoryMb": "4096"}, ["cpu"]),
    ],
    ids=["nothing", "no-memory", "no-cpu"],
)
def test_missing_capacity_names_the_machineset_and_the_annotations(
    annotations: dict[str, str], missing: list[str]
) -> None:
    with pytest.raises(CannotScaleFromZeroError) as info:
        read_capacity(resource(annotations=annotations))
    message = str(info.value)
    assert "MachineSet openshift-machine-api/workers cannot scale from zero" in message
    for name in missing:
        assert f"{CAP}/{name}" in message
    assert len(info.value.missing) == len(missing)


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        ({f"{CAP}/cpu": "four", f"{CAP}/memory": "1Gi"}, f"annotation {CAP}/cpu: expected a Kubernetes quantity"),
        ({f"{OPENSHIFT}/vCPU": "2.5", f"{CAP}/memory": "1Gi"}, f"annotation {OPENSHIFT}/vCPU: expected a non-negative integer"),
        ({f"{CAP}/cpu": "1", f"{CAP}/memory": "1Gi", f"{CAP}/taints": "dedicated=gpu"}, f"annotation {CAP}/taints: expected a list of key=value:Effect"),
        ({f"{CAP}/cpu": "1", f"{CAP}/memory": "1Gi", f"{CAP}/labels": "zone"}, f"annotation {CAP}/labels: expected a list of key=value"),
    ],
    ids=["bad-cpu", "fractional-vcpu", "taint-without-effect", "label-without-value"],
)
def test_malformed_capacity_annotations(annotations: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        read_capacity(resource(annotations=annotations))
    assert "MachineSet openshift-machine-api/workers" in str(info.value)
    assert fragment in str(info.value)


def test_template_labels_and_taints() -> None:
    r = resource(
        OPENSHIFT,
        annotations={
            f"{OPENSHIFT}/vCPU": "4",
            f"{OPENSHIFT}/memoryMb": "16384",
            f"{CAP}/labels": "team=ml, kubernetes.io/arch=arm64",
            f"{CAP}/taints": "dedicated=ml:NoSchedule,spot:PreferNoSchedule",
        },
        template_labels={"node-role.kubernetes.io/worker": "", "team": "web"},
        taints=[{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}, {"key": "x", "effect": "NoExecute"}],
        provider_spec={"instanceType": "m6g.xlarge", "placement": {"availabilityZone": "eu-west-1b", "region": "eu-west-1"}},
    )
    node = build_template_node_info(r).node
    assert node.labels["node-role.kubernetes.io/worker"] == ""
    assert node.labels["team"] == "ml"  # the annotation wins over the template
    assert node.labels["kubernetes.io/arch"] == "arm64"
    assert node.labels["beta.kubernetes.io/arch"] == "arm64"
    assert node.labels["kubernetes.io/os"] == "linux"
    assert node.labels["kubernetes.io/hostname"] == node.name
    assert node.labels["node.kubernetes.io/instance-type"] == "m6g.xlarge"
    assert node.labels["topology.kubernetes.io/zone"] == "eu-west-1b"
    assert node.labels["topology.kubernetes.io/region"] == "eu-west-1"
    assert set(node.taints) == {
        Taint("dedicated", "ml", "NoSchedule"),
        Taint("x", "", "NoExecute"),
        Taint("spot", "", "PreferNoSchedule"),
    }
    assert node.ready


def test_capi_failure_domain_is_the_zone_and_unknowns_are_left_out() -> None:
    raw = scalable("md", group=CAPI, kind="MachineDeployment", annotations={f"{CAP}/cpu": "2", f"{CAP}/memory": "4Gi"})
    raw["spec"]["template"]["spec"]["failureDomain"] = "zone-a"
    node = build_template_node_info(parse_scalable(raw, ApiGroup(CAPI, "v1beta1"), "MachineDeployment")).node
    assert node.labels["topology.kubernetes.io/zone"] == "zone-a"
    assert "node.kubernetes.io/instance-type" not in node.labels
    assert "topology.kubernetes.io/region" not in node.labels
    assert node.capacity.pods == 110
