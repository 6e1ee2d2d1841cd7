"""Parsing of `--nodes`, `--node-group-auto-discovery=mig:...`, MIG references and gce.conf:
each bad input names the flag or file, the field and the expected form."""

from __future__ import annotations

from pathlib import Path

import pytest
from clusterscaler.api import ConfigurationError
from clusterscaler_gce.cloud_config import (
    load_cloud_config,
    parse_cloud_config,
    resolve_location,
)
from clusterscaler_gce.refs import MigRef, parse_instance_url, parse_mig, parse_provider_id
from clusterscaler_gce.specs import (
    NODE_GROUP_FLAGS,
    parse_discovery_spec,
    parse_node_group_spec,
)

MIG_URL = "https://www.googleapis.com/compute/v1/projects/my-proj/zones/us-central1-b/instanceGroups/pool"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"1:5:{MIG_URL}", MigRef("my-proj", "us-central1-b", "pool")),
        ("0:3:https://content.googleapis.com/compute/v1/projects/my-proj/zones/europe-west4-a/instanceGroupManagers/pool",
         MigRef("my-proj", "europe-west4-a", "pool")),
        ("0:3:my-proj/us-central1-b/pool", MigRef("my-proj", "us-central1-b", "pool")),
        ("0:3:my-proj/us-central1/pool", MigRef("my-proj", "us-central1", "pool")),
        ("0:3:projects/my-proj/regions/us-east4/instanceGroups/pool", MigRef("my-proj", "us-east4", "pool")),
    ],
    ids=["url", "igm-url", "short-zonal", "short-regional", "relative-regional"],
)
def test_nodes_spec_forms(value: str, expected: MigRef) -> None:
    spec = parse_node_group_spec(value)
    assert spec.name == expected
    assert spec.min_size <= spec.max_size


def test_regional_ref_url_and_region() -> None:
    ref = MigRef("my-proj", "us-central1", "pool")
    assert ref.regional and ref.region == "us-central1"
    assert ref.url.endswith("/projects/my-proj/regions/us-central1/instanceGroups/pool")
    zonal = MigRef("my-proj", "us-central1-b", "pool")
    assert not zonal.regional and zonal.region == "us-central1"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1:5", "expected <min>:<max>:<MIG>"),
        ("a:5:my-proj/us-central1-b/pool", "min 'a' is not an integer"),
        ("-1:5:my-proj/us-central1-b/pool", "min -1 is negative"),
        ("5:1:my-proj/us-central1-b/pool", "max 1 is below min 5"),
        ("0:0:my-proj/us-central1-b/pool", "max must be at least 1"),
        ("0:3:pool", "is not a MIG reference"),
        ("0:3:my-proj/us-central1-b/Pool_1", "MIG name 'Pool_1' is not a GCE resource name"),
        ("0:3:my-proj/nowhere/pool", "'nowhere' is neither a zone"),
        ("0:3:https://www.googleapis.com/compute/v1/projects/my-proj/zones/us-central1-b/instances/vm", "names a 'instances' resource"),
        ("0:3:https://www.googleapis.com/compute/v1/projects/my-proj/zones/us-central1/instanceGroups/p", "'us-central1' is not a zone"),
    ],
    ids=["short", "min-nan", "min-negative", "max-below-min", "max-zero", "bare-name", "bad-name",
         "bad-location", "instance-url", "region-as-zone"],
)
def test_bad_nodes_specs(value: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_node_group_spec(value)
    assert f"--nodes={value!r}" in str(info.value)
    assert message in str(info.value)
    assert "expected" in str(info.value)


def test_a_mig_given_twice_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="given more than once"):
        NODE_GROUP_FLAGS.nodes([f"0:3:{MIG_URL}", "1:4:my-proj/us-central1-b/pool"])


def test_discovery_spec() -> None:
    spec = parse_discovery_spec("mig:namePrefix=gke-prod-,min=1,max=10")
    assert (spec.name_prefix, spec.min_size, spec.max_size) == ("gke-prod-", 1, 10)
    assert spec.matches("gke-prod-pool-1")
    assert not spec.matches("gke-prod-")  # the prefix alone is not a match, as `^p.+`
    assert not spec.matches("x-gke-prod-pool")
    assert spec.filter == "name eq gke-prod-.+"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("asg:tag=foo", "unsupported discoverer 'asg'"),
        ("mig", "expected mig:namePrefix"),
        ("mig:namePrefix=p,min=0", "max missing"),
        ("mig:namePrefix=p,max=3", "min missing"),
        ("mig:min=0,max=3", "namePrefix missing"),
        ("mig:namePrefix=,min=0,max=3", "empty namePrefix"),
        ("mig:namePrefix=p,min=0,max=3,zone=x", "unsupported key 'zone'"),
        ("mig:namePrefix=p,min=4,max=3", "min 4 is greater than max 3"),
        ("mig:namePrefix=p,min=0,max=0", "max 0 must be at least 1"),
        ("mig:namePrefix=p,min=x,max=3", "min 'x' is not an integer"),
        ("mig:namePrefix=p(,min=0,max=3", "is not a valid regular expression"),
        ("mig:namePrefix=p,min=0,min=1,max=3", "key 'min' is given twice"),
        ("mig:namePrefix", "'namePrefix' is not key=value"),
    ],
)
def test_bad_discovery_specs(value: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_discovery_spec(value)
    assert f"--node-group-auto-discovery={value!r}" in str(info.value)
    assert message in str(info.value)


def test_provider_ids_and_instance_urls() -> None:
    ref = parse_instance_url("https://www.googleapis.com/compute/v1/projects/p-123456/zones/us-central1-b/instances/vm-1")
    assert ref.provider_id == "gce://p-123456/us-central1-b/vm-1"
    assert parse_provider_id(ref.provider_id) == ref
    assert parse_provider_id("aws:///us-east-1a/i-1") is None
    assert parse_provider_id("gce://only/two") is None
    with pytest.raises(ValueError, match=r"expected .*/instances/<name>"):
        parse_instance_url("https://www.googleapis.com/compute/v1/projects/p/zones/z-1-a/disks/d")
    assert parse_mig("example.com:my-proj/us-central1-b/pool", "test").project == "example.com:my-proj"


def test_cloud_config_full() -> None:
    config = parse_cloud_config(
        """
        ; comment
        [Global]
        project-id = "my-proj"
        network-name = default
        node-tags = tag-a
        node-tags = tag-b   ; trailing comment
        local-zone = us-central1-b
        multizone
        token-url = nil
        api-endpoint = https://compute.example.com/compute/v1/
        node-instance-prefix = gke-
        """,
        source="gce.conf",
    )
    assert config.project_id == "my-proj"
    assert config.node_tags == ("tag-a", "tag-b")
    assert config.multizone and not config.regional
    assert config.token_url == ""
    assert config.api_endpoint == "https://compute.example.com"
    assert not config.anonymous
    assert config.extra["node-instance-prefix"] == ("gke-",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[global]\nproject-idd = x\n", "unknown key 'project-idd' in [global]; expected one of"),
        ("[other]\nproject-id = x\n", "unknown section [other]; expected only [global]"),
        ("project-id = x\n", "outside a section"),
        ("[global]\nregional = maybe\n", "regional = 'maybe': expected true or false"),
        ("[global]\nlocal-zone = us-central1\n", "local-zone = 'us-central1': expected a zone"),
        ("[global]\nproject-id = a\nproject-id = b\n", "'project-id' is given more than once"),
        ("[global]\napi-endpoint = http://compute.example.com\n", "plain http is only accepted for loopback"),
        ("[global]\napi-endpoint = https://example.com/other/path\n", "unexpected path"),
        ("[global]\napi-endpoint = ftp://x\n", "not an http(s) URL"),
        ("[global]\nproject-id\n", "key 'project-id' has no value"),
        ("[global]\ntoken-url = file:///etc/token\n", "token-url = 'file:///etc/token': expected an http(s) URL"),
        ('[global]\nproject-id = "unterminated\n', "unterminated quoted value"),
    ],
    ids=["unknown-key", "unknown-section", "no-section", "bad-bool", "region-as-zone", "twice",
         "plain-http", "bad-path", "bad-scheme", "no-value", "bad-token-url", "quote"],
)
def test_bad_cloud_configs(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_cloud_config(text, source="/etc/gce.conf")
    assert str(info.value).startswith("/etc/gce.conf: ")
    assert message in str(info.value)


def test_loopback_http_endpoint_is_anonymous() -> None:
    config = parse_cloud_config("[global]\napi-endpoint = http://127.0.0.1:8085\n")
    assert config.api_endpoint == "http://127.0.0.1:8085"
    assert config.anonymous


def test_unreadable_cloud_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"--cloud-config='.*missing.conf': cannot read the file: No such file or directory$"):
        load_cloud_config(str(tmp_path / "missing.conf"))


def test_location_from_config_and_regional() -> None:
    zonal = resolve_location(parse_cloud_config("[global]\nproject-id = p-12345\nlocal-zone = europe-west1-c\n"))
    assert (zonal.project, zonal.location, zonal.regional, zonal.region) == ("p-12345", "europe-west1-c", False, "europe-west1")
    regional = resolve_location(parse_cloud_config("[global]\nproject-id = p-12345\nlocal-zone = europe-west1-c\nregional = true\n"))
    assert (regional.location, regional.regional) == ("europe-west1", True)


def test_location_without_config_or_metadata_server_says_where_to_set_it() -> None:
    with pytest.raises(ConfigurationError) as info:
        resolve_location(parse_cloud_config(""), environ={"GCE_METADATA_HOST": "127.0.0.1:9"})
    message = str(info.value)
    assert "no project or location" in message
    assert "set project-id and local-zone in the [global] section of --cloud-config" in message
