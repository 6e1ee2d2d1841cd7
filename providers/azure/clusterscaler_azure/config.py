"""The Azure cloud-config (`--cloud-config`, the `azure.json` AKS and aks-engine write) and
the environment variables that override it.

```json
{
  "cloud": "AzurePublicCloud",
  "tenantId": "...", "subscriptionId": "...", "resourceGroup": "MC_rg_cluster_westeurope",
  "location": "westeurope", "vmType": "vmss",
  "useManagedIdentityExtension": true, "userAssignedIdentityID": "<client id>",
  "vmssCacheTTLInSeconds": 60, "enableDynamicInstanceList": false, "enableVmssFlexNodes": false
}
```

Every field can also come from the environment, with the variable names Cluster Autoscaler
uses (`ARM_SUBSCRIPTION_ID`, `ARM_RESOURCE_GROUP`, `AZURE_CLIENT_ID`, ...: see `ENV_VARS`);
a variable that is set and not blank wins over the file, and where two variables name one
field the later one in `ENV_VARS` wins (`AZURE_TENANT_ID` over `ARM_TENANT_ID`), as upstream.
Fields the autoscaler does not use (an AKS azure.json has many) are ignored.
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from clusterscaler.api import ConfigurationError, config_mapping, describe_value, read_cloud_config

VM_TYPE_VMSS = "vmss"
DEFAULT_VMSS_CACHE_TTL = 60
DEFAULT_VMSS_VMS_CACHE_TTL = 300

# Name as azure.json spells it -> ARM endpoint, AAD authority host.
CLOUDS: dict[str, tuple[str, str]] = {
    "AzurePublicCloud": ("https://management.azure.com", "login.microsoftonline.com"),
    "AzureChinaCloud": ("https://management.chinacloudapi.cn", "login.chinacloudapi.cn"),
    "AzureUSGovernmentCloud": ("https://management.usgovcloudapi.net", "login.microsoftonline.us"),
}
AUTH_METHODS = ("principal", "cli")


@dataclass(frozen=True, slots=True)
class AzureConfig:
    """The parsed configuration. Field names follow azure.json (snake case here)."""

    cloud: str = "AzurePublicCloud"
    tenant_id: str = ""
    subscription_id: str = ""
    resource_group: str = ""
    location: str = ""
    vm_type: str = VM_TYPE_VMSS
    auth_method: str = "principal"
    use_managed_identity_extension: bool = False
    user_assigned_identity_id: str = ""
    use_workload_identity_extension: bool = False
    aad_federated_token_file: str = ""
    aad_client_id: str = ""
    aad_client_secret: str = ""
    aad_client_cert_path: str = ""
    aad_client_cert_password: str = ""
    resource_manager_endpoint: str = ""
    enable_dynamic_instance_list: bool = False
    enable_vmss_flex_nodes: bool = False
    enable_force_delete: bool = False
    vmss_cache_ttl_seconds: int = DEFAULT_VMSS_CACHE_TTL
    vmss_vms_cache_ttl_seconds: int = DEFAULT_VMSS_VMS_CACHE_TTL

    @property
    def arm_endpoint(self) -> str:
        """The ARM endpoint to call, without a trailing slash."""
        if self.resource_manager_endpoint:
            return self.resource_manager_endpoint.rstrip("/")
        return CLOUDS[self.cloud][0]

    @property
    def authority_host(self) -> str:
        return CLOUDS[self.cloud][1]

    @property
    def sends_no_token(self) -> bool:
        """A plain-http loopback endpoint (an emulator, a test double): no token is sent."""
        return is_plain_http_loopback(self.arm_endpoint)

    def describe(self) -> dict[str, Any]:
        """The configuration for logs: no secret, only whether one is set."""
        return {
            "cloud": self.cloud,
            "subscription_id": self.subscription_id,
            "resource_group": self.resource_group,
            "location": self.location,
            "arm_endpoint": self.arm_endpoint,
            "credential": credential_kind(self),
            "enable_dynamic_instance_list": self.enable_dynamic_instance_list,
            "enable_vmss_flex_nodes": self.enable_vmss_flex_nodes,
            "vmss_cache_ttl_seconds": self.vmss_cache_ttl_seconds,
            "vmss_vms_cache_ttl_seconds": self.vmss_vms_cache_ttl_seconds,
        }


# azure.json key -> (dataclass field, kind). Legacy spellings map to the same field; when
# a file has both, the current spelling (listed first) wins.
_STR, _BOOL, _INT = "a string", "true or false", "a whole number of seconds >= 0"
JSON_FIELDS: dict[str, tuple[str, str]] = {
    "cloud": ("cloud", _STR),
    "tenantId": ("tenant_id", _STR),
    "subscriptionId": ("subscription_id", _STR),
    "resourceGroup": ("resource_group", _STR),
    "location": ("location", _STR),
    "vmType": ("vm_type", _STR),
    "authMethod": ("auth_method", _STR),
    "useManagedIdentityExtension": ("use_managed_identity_extension", _BOOL),
    "userAssignedIdentityID": ("user_assigned_identity_id", _STR),
    "useFederatedWorkloadIdentityExtension": ("use_workload_identity_extension", _BOOL),
    "useWorkloadIdentityExtension": ("use_workload_identity_extension", _BOOL),
    "aadFederatedTokenFile": ("aad_federated_token_file", _STR),
    "aadClientId": ("aad_client_id", _STR),
    "aadClientSecret": ("aad_client_secret", _STR),
    "aadClientCertPath": ("aad_client_cert_path", _STR),
    "aadClientCertPassword": ("aad_client_cert_password", _STR),
    "resourceManagerEndpoint": ("resource_manager_endpoint", _STR),
    "enableDynamicInstanceList": ("enable_dynamic_instance_list", _BOOL),
    "enableVmssFlexNodes": ("enable_vmss_flex_nodes", _BOOL),
    "enableVmssFlex": ("enable_vmss_flex_nodes", _BOOL),
    "enableForceDelete": ("enable_force_delete", _BOOL),
    "vmssCacheTTLInSeconds": ("vmss_cache_ttl_seconds", _INT),
    "vmssCacheTTL": ("vmss_cache_ttl_seconds", _INT),
    "vmssVirtualMachinesCacheTTLInSeconds": ("vmss_vms_cache_ttl_seconds", _INT),
    "vmssVmsCacheTTL": ("vmss_vms_cache_ttl_seconds", _INT),
}

# Environment variable -> dataclass field, in the order they are applied (later wins).
ENV_VARS: tuple[tuple[str, str], ...] = (
    ("ARM_CLOUD", "cloud"),
    ("LOCATION", "location"),
    ("ARM_RESOURCE_GROUP", "resource_group"),
    ("ARM_TENANT_ID", "tenant_id"),
    ("AZURE_TENANT_ID", "tenant_id"),
    ("ARM_CLIENT_ID", "aad_client_id"),
    ("AZURE_CLIENT_ID", "aad_client_id"),
    ("AZURE_FEDERATED_TOKEN_FILE", "aad_federated_token_file"),
    ("ARM_CLIENT_SECRET", "aad_client_secret"),
    ("ARM_VM_TYPE", "vm_type"),
    ("ARM_CLIENT_CERT_PATH", "aad_client_cert_path"),
    ("ARM_CLIENT_CERT_PASSWORD", "aad_client_cert_password"),
    ("ARM_SUBSCRIPTION_ID", "subscription_id"),
    ("ARM_USE_MANAGED_IDENTITY_EXTENSION", "use_managed_identity_extension"),
    ("ARM_USE_FEDERATED_WORKLOAD_IDENTITY_EXTENSION", "use_workload_identity_extension"),
    ("ARM_USE_WORKLOAD_IDENTITY_EXTENSION", "use_workload_identity_extension"),
    ("ARM_USER_ASSIGNED_IDENTITY_ID", "user_assigned_identity_id"),
    ("AZURE_VMSS_CACHE_TTL_IN_SECONDS", "vmss_cache_ttl_seconds"),
    ("AZURE_VMSS_CACHE_TTL", "vmss_cache_ttl_seconds"),
    ("AZURE_VMSS_VMS_CACHE_TTL_IN_SECONDS", "vmss_vms_cache_ttl_seconds"),
    ("AZURE_VMSS_VMS_CACHE_TTL", "vmss_vms_cache_ttl_seconds"),
    ("AZURE_ENABLE_FORCE_DELETE", "enable_force_delete"),
    ("AZURE_ENABLE_DYNAMIC_INSTANCE_LIST", "enable_dynamic_instance_list"),
    ("AZURE_ENABLE_VMSS_FLEX_NODES", "enable_vmss_flex_nodes"),
    ("AZURE_ENABLE_VMSS_FLEX", "enable_vmss_flex_nodes"),
)

_FIELD_KINDS = {name: kind for name, kind in JSON_FIELDS.values()}
_TRUE = {"1", "t", "true"}
_FALSE = {"0", "f", "false"}


def _convert(value: Any, kind: str, where: str) -> Any:
    """`value` as the field's Python type, or an error naming `where` and the form."""
    if kind == _STR:
        if not isinstance(value, str):
            raise ConfigurationError(f"{where}={describe_value(value)}: expected {kind}")
        return value.strip()
    if kind == _BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ConfigurationError(f"{where}={describe_value(value)}: expected {kind}")
    # A whole number; JSON booleans are ints in Python and are not numbers here.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigurationError(f"{where}={describe_value(value)}: expected {kind}")
    try:
        number = int(value)
    except ValueError:
        raise ConfigurationError(f"{where}={describe_value(value)}: expected {kind}") from None
    if number < 0 or number > 2**32 - 1:
        raise ConfigurationError(f"{where}={describe_value(value)}: expected {kind}")
    return number


def parse_azure_json(text: str, source: str = "azure.json") -> dict[str, Any]:
    """The fields an azure.json document sets, by dataclass field name."""
    try:
        parsed = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{source}: not valid JSON: {exc}") from exc
    document = config_mapping(parsed, source, 'a JSON object such as {"subscriptionId": ...}')
    values: dict[str, Any] = {}
    # Current spellings first, so that a legacy spelling never overrides them.
    for key, (name, kind) in JSON_FIELDS.items():
        if key not in document or document[key] is None or name in values:
            continue
        values[name] = _convert(document[key], kind, f"{source}: field {key}")
    return values


def from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The fields the environment sets (set and not blank), by dataclass field name."""
    values: dict[str, Any] = {}
    for var, name in ENV_VARS:
        raw = environ.get(var, "")
        if raw.strip():
            values[name] = _convert(raw, _FIELD_KINDS[name], f"environment variable {var}")
    return values


def build_config(
    file_values: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> AzureConfig:
    """Defaults, then the file, then the environment; validated."""
    env = os.environ if environ is None else environ
    values = {**file_values, **from_environment(env)}
    known = {f.name for f in fields(AzureConfig)}
    config = AzureConfig(**{k: v for k, v in values.items() if k in known})
    return validate(config)


def _canonical_cloud(name: str) -> str | None:
    for known in CLOUDS:
        if known.lower() == name.strip().lower():
            return known
    return None


def validate(config: AzureConfig) -> AzureConfig:
    """Normalise spellings and check that the configuration can work; errors name the
    field (and its environment variable) and the expected form."""
    cloud = _canonical_cloud(config.cloud or "AzurePublicCloud")
    if cloud is None:
        raise ConfigurationError(
            f"azure cloud-config: field cloud (ARM_CLOUD)={describe_value(config.cloud)}: expected one of "
            f"{', '.join(CLOUDS)}"
        )
    vm_type = (config.vm_type or VM_TYPE_VMSS).lower()
    if vm_type != VM_TYPE_VMSS:
        raise ConfigurationError(
            f"azure cloud-config: field vmType (ARM_VM_TYPE)={describe_value(config.vm_type)}: expected "
            "'vmss' (this provider manages Virtual Machine Scale Sets; availability-set "
            "'standard' clusters are not supported)"
        )
    auth_method = (config.auth_method or "principal").lower()
    if auth_method not in AUTH_METHODS:
        raise ConfigurationError(
            f"azure cloud-config: field authMethod={describe_value(config.auth_method)}: expected one of "
            f"{', '.join(AUTH_METHODS)}"
        )
    config = replace(config, cloud=cloud, vm_type=vm_type, auth_method=auth_method)
    if not config.subscription_id:
        raise ConfigurationError(
            "azure cloud-config: field subscriptionId is not set; expected the subscription "
            "ID in azure.json or the ARM_SUBSCRIPTION_ID environment variable"
        )
    if not config.resource_group:
        raise ConfigurationError(
            "azure cloud-config: field resourceGroup is not set; expected the resource group "
            "of the scale sets (for AKS, the node resource group MC_...) in azure.json or "
            "the ARM_RESOURCE_GROUP environment variable"
        )
    if config.use_managed_identity_extension and config.use_workload_identity_extension:
        raise ConfigurationError(
            "azure cloud-config: useManagedIdentityExtension and useWorkloadIdentityExtension "
            "are both true; expected at most one of them"
        )
    if config.aad_client_secret and not config.aad_client_id:
        raise ConfigurationError(
            "azure cloud-config: aadClientSecret is set without aadClientId; expected the "
            "service principal's client ID in aadClientId (or ARM_CLIENT_ID / AZURE_CLIENT_ID)"
        )
    needs_tenant = (
        not config.use_managed_identity_extension
        and auth_method == "principal"
        and (config.aad_client_secret or config.aad_client_cert_path
             or config.use_workload_identity_extension)
    )
    if needs_tenant and not config.tenant_id:
        raise ConfigurationError(
            "azure cloud-config: field tenantId is not set; expected the Azure AD tenant ID "
            "(ARM_TENANT_ID or AZURE_TENANT_ID) for service principal and workload identity "
            "credentials"
        )
    if config.resource_manager_endpoint:
        check_endpoint(config.resource_manager_endpoint)
    return config


def is_plain_http_loopback(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


def check_endpoint(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    form = (
        "an https URL such as https://management.local.azurestack.external, or a plain "
        "http URL on the loopback interface (http://127.0.0.1:PORT) for an emulator"
    )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"azure cloud-config: field resourceManagerEndpoint={describe_value(url)}: expected {form}"
        )
    if parts.scheme == "http" and not is_plain_http_loopback(url):
        # A token must never travel in clear text, and a remote endpoint without one is
        # not Azure Resource Manager.
        raise ConfigurationError(
            f"azure cloud-config: field resourceManagerEndpoint={describe_value(url)}: plain http is only "
            f"accepted on the loopback interface; expected {form}"
        )


def credential_kind(config: AzureConfig) -> str:
    """Which azure-identity credential `config` selects (see `service.make_credential`)."""
    if config.sends_no_token:
        return "none (plain http loopback endpoint)"
    if config.use_managed_identity_extension:
        return "ManagedIdentityCredential"
    if config.use_workload_identity_extension:
        return "WorkloadIdentityCredential"
    if config.auth_method == "cli":
        return "AzureCliCredential"
    if config.aad_client_id and config.aad_client_secret:
        return "ClientSecretCredential"
    if config.aad_client_id and config.aad_client_cert_path:
        return "CertificateCredential"
    return "DefaultAzureCredential"


def load_config(path: str, environ: Mapping[str, str] | None = None) -> AzureConfig:
    """Read `--cloud-config` (an empty path means environment only) and validate."""
    text = read_cloud_config(path)
    file_values: dict[str, Any] = {} if text is None else parse_azure_json(text, source=path)
    return build_config(file_values, environ)
