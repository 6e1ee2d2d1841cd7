"""`--nodes`, `--node-group-auto-discovery`, cloud-config and activity parsing (no AWS needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clusterscaler.interfaces.cloudprovider import ConfigurationError, InstanceErrorClass
from clusterscaler_aws.activities import error_code, launch_error
from clusterscaler_aws.cloud_config import parse_cloud_config, resolve_region
from clusterscaler_aws.instance_types import kube_arch, static_table
from clusterscaler_aws.service import ScalingActivity
from clusterscaler_aws.specs import (
    NODE_GROUP_FLAGS,
    NodeGroupSpec,
    parse_discovery_spec,
    parse_node_group_spec,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1:10:workers", NodeGroupSpec("workers", 1, 10)),
        ("0:1:a:b", NodeGroupSpec("a:b", 0, 1)),
        (" 2 : 3 : spaced ", NodeGroupSpec("spaced", 2, 3)),
    ],
    ids=["plain", "name-with-colon", "spaces"],
)
def test_nodes_flag(value: str, expected: Any) -> None:
    assert parse_node_group_spec(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1:10", "expected <min>:<max>:<asg-name>"),
        ("a:10:x", "integers"),
        ("-1:10:x", "negative"),
        ("5:3:x", "below min"),
        ("0:0:x", "at least 1"),
        ("1:2:", "name is empty"),
    ],
    ids=["missing-name", "not-integer", "negative-min", "max-below-min", "zero-max", "empty-name"],
)
def test_bad_nodes_flag(value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        parse_node_group_spec(value)
    assert "--nodes=" in str(info.value)


def test_an_asg_named_twice_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="more than once"):
        NODE_GROUP_FLAGS.nodes(["0:1:a", "0:2:a"])


@given(
    min_size=st.integers(0, 1000),
    extra=st.integers(0, 1000),
    name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,40}", fullmatch=True),
)
def test_nodes_flag_round_trips(min_size: int, extra: int, name: str) -> None:
    max_size = max(1, min_size + extra)
    assert parse_node_group_spec(f"{min_size}:{max_size}:{name}") == NodeGroupSpec(
        name.strip(), min_size, max_size
    )


@pytest.mark.parametrize(
    ("value", "tags", "filters"),
    [
        (
            "asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/prod",
            {"k8s.io/cluster-autoscaler/enabled": None, "k8s.io/cluster-autoscaler/prod": None},
            [
                {"Name": "tag-key", "Values": ["k8s.io/cluster-autoscaler/enabled"]},
                {"Name": "tag-key", "Values": ["k8s.io/cluster-autoscaler/prod"]},
            ],
        ),
        (
            "asg:tag=team=data,env",
            {"team": "data", "env": None},
            [{"Name": "tag:team", "Values": ["data"]}, {"Name": "tag-key", "Values": ["env"]}],
        ),
        ("asg:tag=k=", {"k": ""}, [{"Name": "tag:k", "Values": [""]}]),
    ],
    ids=["keys-only", "key-value-and-key", "empty-value"],
)
def test_discovery_spec(value: str, tags: dict[str, str], filters: list[dict[str, object]]) -> None:
    spec = parse_discovery_spec(value)
    assert dict(spec.tags) == tags
    assert spec.filters() == filters


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("mig:namePrefix=x", "unsupported discoverer 'mig'"),
        ("asg:name=x", "only parameter is 'tag'"),
        ("asg", "expected asg:tag="),
        ("asg:tag=a,,b", "empty tag entry"),
        ("asg:tag==v", "has no key"),
    ],
    ids=["other-discoverer", "other-parameter", "no-colon", "empty-entry", "no-key"],
)
def test_bad_discovery_spec(value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_discovery_spec(value)


@pytest.mark.parametrize(
    ("tags", "matches"),
    [
        ({"a": "1", "b": "x"}, True),
        ({"a": "1"}, False),
        ({"a": "2", "b": "x"}, False),
    ],
    ids=["all-present", "key-missing", "value-differs"],
)
def test_discovery_matching(tags: dict[str, str], matches: bool) -> None:
    assert parse_discovery_spec("asg:tag=a=1,b").matches(tags) is matches


# --- activities ---------------------------------------------------------------------------

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("Could not launch Spot Instances. UnfulfillableCapacity - Unable to fulfill capacity.", "UnfulfillableCapacity"),
        ("We currently do not have sufficient p3.2xlarge capacity in the Availability Zone you requested", "InsufficientInstanceCapacity"),
        ("You have requested more vCPU capacity than your current vCPU limit of 64 allows", "VcpuLimitExceeded"),
        ("You have requested more instances (21) than your current instance limit of 20 allows", "InstanceLimitExceeded"),
        ("Access denied when attempting to assume role", "ScalingActivityFailed"),
    ],
    ids=["coded", "capacity-phrase", "vcpu-phrase", "instance-limit-phrase", "unknown"],
)
def test_error_codes_from_activity_messages(message: str, code: str) -> None:
    assert error_code(message) == code


def _activity(minutes: int, status: str, message: str = "InsufficientInstanceCapacity - none") -> ScalingActivity:
    return ScalingActivity(start_time=T0 + timedelta(minutes=minutes), status_code=status, status_message=message)


@pytest.mark.parametrize(
    ("activities", "since", "error"),
    [
        ([_activity(1, "Failed")], None, "InsufficientInstanceCapacity"),
        ([_activity(1, "Failed"), _activity(2, "Successful")], None, None),
        ([_activity(1, "Successful"), _activity(2, "Failed")], None, "InsufficientInstanceCapacity"),
        ([_activity(1, "Failed")], T0 + timedelta(minutes=5), None),
        ([_activity(6, "InProgress"), _activity(5, "Failed")], T0, "InsufficientInstanceCapacity"),
        ([], None, None),
    ],
    ids=["failed", "recovered", "failed-after-success", "before-our-request", "in-progress-skipped", "none"],
)
def test_launch_error(activities: list[ScalingActivity], since: datetime | None, error: str | None) -> None:
    result = launch_error(activities, since)
    assert (result.error_code if result else None) == error
    if result is not None:
        assert result.error_class is InstanceErrorClass.OUT_OF_RESOURCES


# --- cloud config and region -------------------------------------------------------------

CLOUD_CONFIG = """
[Global]
Zone = eu-west-1b

[ServiceOverride "1"]
Service = autoscaling
Region = eu-west-1
URL = https://autoscaling.internal.example
SigningRegion = eu-west-1
"""


def test_cloud_config_overrides_and_region() -> None:
    config = parse_cloud_config(CLOUD_CONFIG)
    override = config.endpoint_for("autoscaling", "eu-west-1")
    assert override is not None and override.url == "https://autoscaling.internal.example"
    assert config.endpoint_for("ec2", "eu-west-1") is None
    assert resolve_region(config, {}) == "eu-west-1"
    assert resolve_region(config, {"AWS_REGION": "us-west-2"}) == "us-west-2"
    assert resolve_region(config, {"AWS_DEFAULT_REGION": "ap-south-1"}) == "ap-south-1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[ServiceOverride "1"]\nService = autoscaling\nRegion = x\n', "lacks url"),
        ('[ServiceOverride "1"]\nService = s3\nRegion = x\nURL = http://x\n', "Service='s3'"),
        ("not ini", "not a valid INI"),
    ],
    ids=["missing-url", "unknown-service", "not-ini"],
)
def test_bad_cloud_config(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_cloud_config(text, source="/etc/aws.conf")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("9" * 5000 + "\n", "line 1: expected a [section] header before any key, got '999"),
        ("[Global]\n" + "9" * 5000 + "\n" + "x\n", "line 2: expected `key = value`"),
        ("[Global]\nZone = a\nzone = b\n", "line 3: key 'zone' given twice in section 'Global'"),
        ("[Global]\n[Global]\n", "line 2: section 'Global' given twice"),
    ],
    ids=["no-header", "bad-lines", "duplicate-key", "duplicate-section"],
)
def test_a_malformed_cloud_config_is_one_bounded_line_naming_where(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_cloud_config(text, source="/etc/aws.conf")
    error = str(caught.value)
    assert error.startswith("/etc/aws.conf: not a valid INI cloud-config: "), error
    assert message in error, error
    assert "\n" not in error and len(error) < 600, error


def test_no_region_anywhere_says_where_to_set_it() -> None:
    with pytest.raises(ConfigurationError, match="AWS_REGION"):
        resolve_region(parse_cloud_config(""), {})


# --- static instance table ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "vcpu", "memory_mib", "gpu", "arch"),
    [
        ("m5.large", 2, 8192, 0, "amd64"),
        ("m7g.xlarge", 4, 16384, 0, "arm64"),
        ("p3.8xlarge", 32, 249856, 4, "amd64"),
        ("t3.micro", 2, 1024, 0, "amd64"),
    ],
    ids=["m5", "graviton", "gpu", "burstable"],
)
def test_static_table_entries(name: str, vcpu: int, memory_mib: int, gpu: int, arch: str) -> None:
    info = static_table()[name]
    assert (info.vcpu, info.memory_mib, info.gpu, info.architecture) == (vcpu, memory_mib, gpu, arch)


@pytest.mark.parametrize(
    ("archs", "expected"),
    [(["x86_64"], "amd64"), (["i386", "x86_64"], "amd64"), (["arm64"], "arm64"), (["arm64_mac"], "arm64")],
    ids=["x86_64", "i386-and-x86_64", "arm64", "mac-arm"],
)
def test_kube_arch(archs: list[str], expected: Any) -> None:
    assert kube_arch(archs) == expected
