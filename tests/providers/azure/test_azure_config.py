"""Parsing without Azure: azure.json and environment, specs, provider IDs, tags, SKUs and
error codes. Every bad input gets an error naming the object, the field and the form."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from clusterscaler.api import ConfigurationError, InstanceErrorClass, NodeGroupOptions, Taint
from clusterscaler_azure import ids
from clusterscaler_azure.config import build_config, load_config, parse_azure_json
from clusterscaler_azure.errors import error_class
from clusterscaler_azure.skus import SkuCatalogue, from_resource_sku, static_table
from clusterscaler_azure.specs import (
    NODE_GROUP_FLAGS,
    DiscoveredLimits,
    limits_from_tags,
    match_discovery,
    parse_discovery_spec,
)
from clusterscaler_azure.tags import parse_node_group_options, parse_template_tags
from hypothesis import given, settings
from hypothesis import strategies as st

BASE = {"subscriptionId": "sub", "resourceGroup": "rg", "tenantId": "t"}


def config(doc: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    return build_config(parse_azure_json(json.dumps(doc)), env or {})


# --- azure.json and environment -----------------------------------------------------------


def test_azure_json_fields_and_defaults() -> None:
    cfg = config({
        **BASE, "cloud": "azurechinacloud", "location": "chinaeast2", "vmType": "VMSS",
        "useManagedIdentityExtension": True, "userAssignedIdentityID": "client-1",
        "enableDynamicInstanceList": True, "enableVmssFlexNodes": True,
        "vmssCacheTTLInSeconds": 30, "unknownAksField": {"ignored": True},
    })
    assert (cfg.cloud, cfg.vm_type, cfg.location) == ("AzureChinaCloud", "vmss", "chinaeast2")
    assert cfg.arm_endpoint == "https://management.chinacloudapi.cn"
    assert cfg.authority_host == "login.chinacloudapi.cn"
    assert cfg.use_managed_identity_extension and cfg.user_assigned_identity_id == "client-1"
    assert cfg.enable_dynamic_instance_list and cfg.enable_vmss_flex_nodes
    assert (cfg.vmss_cache_ttl_seconds, cfg.vmss_vms_cache_ttl_seconds) == (30, 300)
    assert cfg.describe()["credential"] == "ManagedIdentityCredential"
    assert "aadClientSecret" not in json.dumps(cfg.describe())


def test_legacy_spellings_and_the_current_one_wins() -> None:
    cfg = config({**BASE, "vmssCacheTTL": 10, "enableVmssFlex": True})
    assert (cfg.vmss_cache_ttl_seconds, cfg.enable_vmss_flex_nodes) == (10, True)
    cfg = config({**BASE, "vmssCacheTTL": 10, "vmssCacheTTLInSeconds": 20})
    assert cfg.vmss_cache_ttl_seconds == 20


def test_environment_overrides_the_file_with_upstream_precedence() -> None:
    env = {
        "ARM_SUBSCRIPTION_ID": "env-sub", "ARM_RESOURCE_GROUP": "env-rg",
        "ARM_TENANT_ID": "arm-tenant", "AZURE_TENANT_ID": "azure-tenant",
        "ARM_CLIENT_ID": "arm-client", "AZURE_CLIENT_ID": "azure-client",
        "ARM_CLIENT_SECRET": "s3cret", "AZURE_VMSS_CACHE_TTL": "15",
        "AZURE_ENABLE_DYNAMIC_INSTANCE_LIST": "true", "ARM_CLOUD": "AzureUSGovernmentCloud",
        "LOCATION": "usgovvirginia", "AZURE_ENABLE_VMSS_FLEX_NODES": "1",
    }
    cfg = config(BASE, env)
    assert (cfg.subscription_id, cfg.resource_group) == ("env-sub", "env-rg")
    assert (cfg.tenant_id, cfg.aad_client_id) == ("azure-tenant", "azure-client")
    assert cfg.vmss_cache_ttl_seconds == 15 and cfg.enable_dynamic_instance_list
    assert cfg.arm_endpoint == "https://management.usgovcloudapi.net"
    assert cfg.location == "usgovvirginia" and cfg.enable_vmss_flex_nodes
    assert cfg.describe()["credential"] == "ClientSecretCredential"


def test_environment_alone_without_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", "sub")
    monkeypatch.setenv("ARM_RESOURCE_GROUP", "rg")
    monkeypatch.setenv("ARM_USE_WORKLOAD_IDENTITY_EXTENSION", "true")
    monkeypatch.setenv("AZURE_TENANT_ID", "t")
    monkeypatch.setenv("AZURE_CLIENT_ID", "c")
    monkeypatch.setenv("AZURE_FEDERATED_TOKEN_FILE", "/var/run/secrets/token")
    cfg = load_config("")
    assert cfg.use_workload_identity_extension
    assert cfg.aad_federated_token_file == "/var/run/secrets/token"
    assert cfg.describe()["credential"] == "WorkloadIdentityCredential"


def test_without_explicit_credentials_default_azure_credential_is_used() -> None:
    assert config({"subscriptionId": "s", "resourceGroup": "r"}).describe()["credential"] == (
        "DefaultAzureCredential"
    )


@pytest.mark.parametrize(
    ("doc", "env", "expected"),
    [
        ({**BASE, "subscriptionId": ""}, {}, "field subscriptionId is not set"),
        ({"subscriptionId": "s"}, {}, "field resourceGroup is not set"),
        ({**BASE, "cloud": "AzureStackCloud"}, {}, "expected one of AzurePublicCloud"),
        ({**BASE, "vmType": "standard"}, {}, "field vmType (ARM_VM_TYPE)='standard': expected 'vmss'"),
        ({**BASE, "useManagedIdentityExtension": "yes"}, {}, "field useManagedIdentityExtension='yes': expected true or false"),
        ({**BASE, "vmssCacheTTLInSeconds": -5}, {}, "field vmssCacheTTLInSeconds=-5: expected a whole number of seconds"),
        ({**BASE, "vmssCacheTTLInSeconds": True}, {}, "field vmssCacheTTLInSeconds=True"),
        ({**BASE, "tenantId": 7}, {}, "field tenantId=7: expected a string"),
        (BASE, {"AZURE_VMSS_CACHE_TTL": "1m"}, "environment variable AZURE_VMSS_CACHE_TTL='1m': expected a whole number"),
        (BASE, {"ARM_USE_MANAGED_IDENTITY_EXTENSION": "maybe"}, "ARM_USE_MANAGED_IDENTITY_EXTENSION='maybe': expected true or false"),
        ({**BASE, "useManagedIdentityExtension": True, "useWorkloadIdentityExtension": True}, {}, "expected at most one"),
        ({"subscriptionId": "s", "resourceGroup": "r", "aadClientId": "c", "aadClientSecret": "x"}, {}, "field tenantId is not set"),
        ({**BASE, "aadClientSecret": "x"}, {}, "aadClientSecret is set without aadClientId"),
        ({**BASE, "resourceManagerEndpoint": "http://arm.example.com"}, {}, "plain http is only accepted on the loopback"),
        ({**BASE, "resourceManagerEndpoint": "ftp://x"}, {}, "field resourceManagerEndpoint='ftp://x': expected an https URL"),
        ({**BASE, "authMethod": "msi"}, {}, "field authMethod='msi': expected one of principal, cli"),
    ],
    ids=["no-subscription", "no-resource-group", "unknown-cloud", "vm-type", "bool-field",
         "negative-ttl", "bool-as-ttl", "number-as-string", "env-ttl", "env-bool",
         "msi-and-workload-identity", "secret-without-tenant", "secret-without-client",
         "remote-plain-http", "bad-endpoint", "auth-method"],
)
def test_bad_configuration_names_field_and_form(doc: dict[str, Any], env: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        config(doc, env)
    assert expected in str(info.value)


def test_unreadable_and_malformed_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"--cloud-config='/nonexistent/azure\.json': cannot read the file: No such file or directory$"):
        load_config("/nonexistent/azure.json", {})
    bad = tmp_path / "azure.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigurationError, match=f"{bad}: not valid JSON"):
        load_config(str(bad), {})
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigurationError, match="expected a JSON object"):
        load_config(str(bad), {})


def test_loopback_endpoint_sends_no_token() -> None:
    cfg = config({**BASE, "resourceManagerEndpoint": "http://127.0.0.1:8080/"})
    assert cfg.sends_no_token and cfg.arm_endpoint == "http://127.0.0.1:8080"
    assert not config({**BASE, "resourceManagerEndpoint": "https://arm.local"}).sends_no_token


# --- specs ----------------------------------------------------------------------------------


def test_nodes_specs() -> None:
    (spec,) = NODE_GROUP_FLAGS.nodes(["0:10:aks-pool-12345678-vmss"])
    assert (spec.min_size, spec.max_size, spec.name) == (0, 10, "aks-pool-12345678-vmss")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1:3"], "expected <min>:<max>:<vmss-name>"),
        (["a:3:x"], "min and max must be integers"),
        (["-1:3:x"], "min -1 is negative"),
        (["4:3:x"], "max 3 is below min 4"),
        (["0:0:x"], "max must be at least 1"),
        (["0:3:"], "is not a scale set name"),
        (["0:3:x", "1:2:X"], "scale set 'X' is given more than once"),
    ],
)
def test_bad_nodes_specs(values: list[str], expected: str) -> None:
    with pytest.raises(ConfigurationError, match="--nodes=") as info:
        NODE_GROUP_FLAGS.nodes(values)
    assert expected in str(info.value)


def test_discovery_spec_with_limits_and_case_insensitive_tag_names() -> None:
    spec = parse_discovery_spec("label:Cluster-Autoscaler-Enabled=true,name=c1,min=1,max=5")
    assert dict(spec.selector) == {"cluster-autoscaler-enabled": "true", "name": "c1"}
    assert (spec.min_size, spec.max_size) == (1, 5)
    assert spec.matches({"cluster-autoscaler-ENABLED": "true", "Name": "c1", "other": "x"})
    assert not spec.matches({"cluster-autoscaler-enabled": "True", "name": "c1"})


def test_several_discovery_specs_must_all_match_and_give_the_strictest_limits() -> None:
    specs = NODE_GROUP_FLAGS.discovery(["label:a=1,min=1,max=9", "label:b=2,min=2,max=5"])
    assert match_discovery(specs, {"a": "1", "b": "2"}) == DiscoveredLimits(2, 5)
    assert match_discovery(specs, {"a": "1"}) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("asg:tag=x", "unsupported discoverer 'asg'"),
        ("label", "expected label:<tag>=<value>"),
        ("label:a", "entry 'a' is not <tag>=<value>"),
        ("label:a=", "entry 'a=' is not <tag>=<value>"),
        ("label:min=1", "no tag to match"),
        ("label:a=1,min=x", "min='x' is not a node count"),
        ("label:a=1,min=3,max=2", "max 2 is below min 3"),
    ],
)
def test_bad_discovery_specs(value: str, expected: str) -> None:
    with pytest.raises(ConfigurationError, match="--node-group-auto-discovery=") as info:
        parse_discovery_spec(value)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("tags", "discovered", "expected"),
    [
        ({"min": "1", "max": "4"}, DiscoveredLimits(None, None), (1, 4)),
        ({"MAX": "4"}, DiscoveredLimits(0, None), (0, 4)),
        ({}, DiscoveredLimits(2, 3), (2, 3)),
        ({}, DiscoveredLimits(None, 3), "tag 'min' is missing"),
        ({"min": "one", "max": "3"}, DiscoveredLimits(None, None), "tag 'min'='one': expected a whole number"),
        ({"min": "3", "max": "2"}, DiscoveredLimits(None, None), "expected min <= max"),
    ],
    ids=["tags", "case-insensitive-with-spec-min", "spec-only", "missing-min", "bad-min", "min-above-max"],
)
def test_limits_of_a_discovered_scale_set(tags: dict[str, str], discovered: DiscoveredLimits, expected: Any) -> None:
    if isinstance(expected, tuple):
        assert limits_from_tags("pool", tags, discovered) == expected
    else:
        with pytest.raises(ConfigurationError, match="VMSS 'pool'") as info:
            limits_from_tags("pool", tags, discovered)
        assert expected in str(info.value)


# --- provider IDs ---------------------------------------------------------------------------

UNIFORM = ("azure:///subscriptions/SUB/resourceGroups/MC_RG/providers/Microsoft.Compute/"
           "virtualMachineScaleSets/pool1/virtualMachines/3")


def test_provider_ids_parse_both_orchestrations_in_any_case() -> None:
    ref = ids.parse_provider_id(UNIFORM.lower().replace("azure://", "AZURE://"))
    assert ref is not None and (ref.vmss, ref.instance_id, ref.flexible) == ("pool1", "3", False)
    flex = ids.parse_provider_id("azure:///subscriptions/s/resourceGroups/rg/providers/"
                                 "Microsoft.Compute/virtualMachines/flex_0a")
    assert flex is not None and flex.flexible and flex.instance_id == "flex_0a"
    assert ids.key(UNIFORM) == ids.key(UNIFORM.lower() + "/")
    for other in ("aws:///us-east-1a/i-1", "azure:///subscriptions/s/resourceGroups/rg", "", "kind://x"):
        assert ids.parse_provider_id(other) is None


def test_provider_id_of_an_arm_id_lowercases_only_the_resource_group() -> None:
    arm_id = UNIFORM[len("azure://"):]
    assert ids.provider_id_of(arm_id) == UNIFORM.replace("MC_RG", "mc_rg")


# --- tags -----------------------------------------------------------------------------------

T = "k8s.io_cluster-autoscaler_node-template_"


def test_template_tags_decode_underscores() -> None:
    parsed = parse_template_tags("pool", {
        T + "label_example.com_role": "db",
        T + "label_my~2label": "x",
        T + "taint_dedicated": "db:NoExecute",
        T + "resources_nvidia.com_gpu": "2",
        T + "autoscaling-options_scaledownunneededtime": "5m",
        "aks-managed-poolName": "pool",
    })
    assert dict(parsed.labels) == {"example.com/role": "db", "my_label": "x"}
    assert parsed.taints == (Taint("dedicated", "db", "NoExecute"),)
    assert dict(parsed.resources) == {"nvidia.com/gpu": "2"}
    assert dict(parsed.options) == {"scaledownunneededtime": "5m"}
    assert parsed.errors == ()


@pytest.mark.parametrize(
    ("tag", "value", "expected"),
    [
        (T + "label_-bad", "x", "a label key after"),
        (T + "label_ok", "v" * 64, "at most 63"),
        (T + "taint_t", "v:Sometimes", "effect one of"),
        (T + "taint_t", "novalue", "<value>:<effect>"),
        (T + "resources_bad name", "1", "a resource name after"),
    ],
)
def test_bad_template_tags_name_vmss_tag_and_form(tag: str, value: str, expected: str) -> None:
    parsed = parse_template_tags("pool", {tag: value, T + "label_good": "yes"})
    (error,) = parsed.errors
    assert "VMSS 'pool'" in str(error) and tag in str(error) and expected in str(error)
    assert dict(parsed.labels) == {"good": "yes"}


@pytest.mark.parametrize(
    ("options", "expected", "errors"),
    [
        ({}, None, 0),
        ({"ZeroOrMaxNodeScaling": "true", "maxnodeprovisiontime": "20m"},
         NodeGroupOptions(zero_or_max_node_scaling=True, max_node_provision_time=timedelta(minutes=20)), 0),
        ({"scaledownutilizationthreshold": "2", "scaledownunreadytime": "1h"},
         NodeGroupOptions(scale_down_unready_time=timedelta(hours=1)), 1),
        ({"nosuch": "1"}, None, 1),
    ],
    ids=["none", "zero-or-max", "one-bad", "unknown"],
)
def test_autoscaling_options_tags(options: dict[str, str], expected: Any, errors: int) -> None:
    parsed, problems = parse_node_group_options("pool", options)
    assert parsed == expected and len(problems) == errors


_families = st.sampled_from(["label_", "taint_", "resources_", "autoscaling-options_", "other_"])


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.builds(lambda f, n: T + f + n, _families, st.text("abZ09-._~2 ", max_size=10)),
                       st.text("ab09-._: NoSchedule", max_size=16), max_size=6))
def test_every_template_tag_is_used_or_reported(tags: dict[str, str]) -> None:
    parsed = parse_template_tags("pool", tags)
    reported = {e.tag for e in parsed.errors}
    for tag in tags:
        if tag.startswith((T + "label_", T + "taint_", T + "resources_")):
            assert tag in reported or any(
                tag.endswith(k.replace("_", "~2").replace("/", "_"))
                for k in [*parsed.labels, *(t.key for t in parsed.taints), *parsed.resources]
            )


# --- SKUs and error codes -------------------------------------------------------------------


def test_static_sku_table() -> None:
    table = static_table()
    assert len(table) > 1000
    d4 = table["standard_d4s_v3"]
    assert (d4.vcpu, d4.memory_mib, d4.gpu, d4.architecture) == (4, 16384, 0, "amd64")
    assert table["standard_d2ps_v5"].architecture == "arm64"
    assert table["standard_nc6s_v3"].nvidia
    catalogue = SkuCatalogue(None, dynamic=False)
    promo = catalogue.get("Standard_D4s_v3_Promo", "westeurope")
    assert promo is not None and promo.vcpu == 4
    assert catalogue.get("Standard_Nonexistent", "westeurope") is None


def test_resource_sku_parsing_and_dynamic_catalogue_with_fallback() -> None:
    raw = {"resourceType": "virtualMachines", "name": "Standard_Z8", "capabilities": [
        {"name": "vCPUs", "value": "8"}, {"name": "MemoryGB", "value": "0.75"},
        {"name": "GPUs", "value": "1"}, {"name": "CpuArchitectureType", "value": "Arm64"}]}
    info = from_resource_sku(raw)
    assert info is not None and (info.vcpu, info.memory_mib, info.gpu, info.architecture) == (8, 768, 1, "arm64")
    assert from_resource_sku({"resourceType": "disks", "name": "x"}) is None
    calls: list[str] = []

    def listing(location: str) -> list[dict[str, Any]]:
        calls.append(location)
        return [raw]

    catalogue = SkuCatalogue(listing, dynamic=True)
    assert catalogue.get("standard_z8", "westeurope") == info
    assert catalogue.get("Standard_D4s_v3", "westeurope") is not None  # the table answers
    assert calls == ["westeurope"]  # one call per location

    def broken(location: str) -> list[dict[str, Any]]:
        raise RuntimeError("throttled")

    fallback = SkuCatalogue(broken, dynamic=True)
    found = fallback.get("Standard_D4s_v3", "westeurope")
    assert found is not None and found.vcpu == 4


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        ("SkuNotAvailable", "", InstanceErrorClass.OUT_OF_RESOURCES),
        ("AllocationFailed", "", InstanceErrorClass.OUT_OF_RESOURCES),
        ("OverconstrainedAllocationRequest", "", InstanceErrorClass.OUT_OF_RESOURCES),
        ("ZonalAllocationFailed", "", InstanceErrorClass.OUT_OF_RESOURCES),
        ("QuotaExceeded", "", InstanceErrorClass.OUT_OF_RESOURCES),
        ("OperationNotAllowed", "Operation could not be completed as it results in exceeding approved standardDSv3Family Cores quota.", InstanceErrorClass.OUT_OF_RESOURCES),
        ("OperationNotAllowed", "The VM size is not supported for this image.", InstanceErrorClass.OTHER),
        ("InvalidParameter", "", InstanceErrorClass.OTHER),
    ],
)
def test_error_codes_classified(code: str, message: str, expected: InstanceErrorClass) -> None:
    assert error_class(code, message) is expected
