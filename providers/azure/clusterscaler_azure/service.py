"""The Azure edge: every Azure Resource Manager call the provider makes, through
azure-mgmt-compute, returning plain data.

Nothing above this module sees SDK objects: scale sets and VMs come back as the dataclasses
below (parsed from the JSON ARM sent), failures as `ArmError` (a `CloudProviderError`)
carrying ARM's error code. Long-running operations (capacity updates, instance deletions)
return an `Operation` whose outcome is delivered to a callback by a daemon thread, so the
loop never waits for Azure to finish.

The SDK is imported when the client is built: commands that never talk to Azure do not
pay for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import structlog
from clusterscaler.api import CloudProviderError, ConfigurationError

from clusterscaler_azure.config import AzureConfig
from clusterscaler_azure.ids import parse_resource_id, provider_id_of

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

log = structlog.get_logger()

ORCHESTRATION_UNIFORM = "Uniform"
ORCHESTRATION_FLEXIBLE = "Flexible"
DEFAULT_POLLING_INTERVAL = 10.0
# Operations that ARM has not finished after this long are given up on (and the caches
# refreshed from ARM); Azure's own limit for a VMSS operation is far below.
OPERATION_TIMEOUT = 3600.0


class ArmError(CloudProviderError):
    """An ARM call failed. `code` is ARM's error code (e.g. `AllocationFailed`), `status`
    the HTTP status (0 when no answer came)."""

    def __init__(self, message: str, code: str = "", status: int = 0, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.detail = detail


@dataclass(frozen=True, slots=True)
class VmssDescription:
    """What ARM says about one scale set."""

    name: str
    id: str
    location: str
    sku_name: str
    sku_tier: str
    capacity: int
    tags: Mapping[str, str] = field(default_factory=dict)
    zones: tuple[str, ...] = ()
    orchestration_mode: str = ORCHESTRATION_UNIFORM
    provisioning_state: str = ""
    spot: bool = False
    os: str = "linux"
    os_disk_size_gb: int = 0
    os_disk_ephemeral: bool = False
    os_disk_storage_type: str = ""

    @property
    def flexible(self) -> bool:
        return self.orchestration_mode.lower() == ORCHESTRATION_FLEXIBLE.lower()


@dataclass(frozen=True, slots=True)
class VmDescription:
    """One VM of a scale set. `instance_id` is what deleteInstances takes: the Uniform
    instance ID, or the VM name of a Flexible scale set's VM."""

    provider_id: str
    instance_id: str
    name: str
    provisioning_state: str
    power_state: str = ""
    error_code: str = ""
    error_message: str = ""


def _tags(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): "" if v is None else str(v) for k, v in raw.items()}


def vmss_from_api(raw: Mapping[str, Any]) -> VmssDescription:
    """One scale set as ARM's JSON gives it. Raises `ConfigurationError` naming the scale set
    and the field when it lacks what the autoscaler needs (SKU, capacity, location)."""
    name = str(raw.get("name") or "")
    if not name:
        raise ConfigurationError(f"scale set {raw.get('id', '?')!r}: no name in the ARM reply")
    sku = raw.get("sku") or {}
    if not sku.get("name"):
        raise ConfigurationError(f"VMSS {name!r}: field sku.name is missing; expected a VM size")
    capacity = sku.get("capacity")
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 0:
        raise ConfigurationError(
            f"VMSS {name!r}: field sku.capacity={capacity!r}; expected a whole number >= 0"
        )
    if not raw.get("location"):
        raise ConfigurationError(f"VMSS {name!r}: field location is missing; expected a region")
    props = raw.get("properties") or {}
    profile = props.get("virtualMachineProfile") or {}
    os_profile = profile.get("osProfile") or {}
    os_disk = (profile.get("storageProfile") or {}).get("osDisk") or {}
    diff = os_disk.get("diffDiskSettings") or {}
    managed = os_disk.get("managedDisk") or {}
    disk_size = os_disk.get("diskSizeGB")
    return VmssDescription(
        name=name,
        id=str(raw.get("id") or ""),
        location=str(raw["location"]),
        sku_name=str(sku["name"]),
        sku_tier=str(sku.get("tier") or ""),
        capacity=capacity,
        tags=_tags(raw.get("tags")),
        zones=tuple(str(z) for z in raw.get("zones") or ()),
        orchestration_mode=str(props.get("orchestrationMode") or ORCHESTRATION_UNIFORM),
        provisioning_state=str(props.get("provisioningState") or ""),
        spot=str(profile.get("priority") or "").lower() == "spot",
        os="windows"
        if "windowsConfiguration" in os_profile or str(os_disk.get("osType", "")).lower() == "windows"
        else "linux",
        os_disk_size_gb=disk_size if isinstance(disk_size, int) and disk_size > 0 else 0,
        os_disk_ephemeral=str(diff.get("option") or "").lower() == "local",
        os_disk_storage_type=str(managed.get("storageAccountType") or ""),
    )


def _instance_view_state(view: Mapping[str, Any]) -> tuple[str, str, str]:
    """(power state, provisioning error code, its message) from a VM's instance view."""
    power = ""
    code = ""
    message = ""
    for status in view.get("statuses") or []:
        status_code = str(status.get("code") or "")
        if status_code.startswith("PowerState/"):
            power = status_code.split("/", 1)[1]
        elif status_code.lower().startswith("provisioningstate/failed/"):
            code = status_code.split("/", 2)[2]
            message = str(status.get("message") or status.get("displayStatus") or "")
    return power, code, message


def vm_from_api(raw: Mapping[str, Any], *, flexible: bool) -> VmDescription | None:
    """One VM of a scale set list; `None` for an entry without an ID (being deleted)."""
    resource_id = str(raw.get("id") or "")
    if not resource_id:
        return None
    ref = parse_resource_id(resource_id)
    props = raw.get("properties") or {}
    power, code, message = _instance_view_state(props.get("instanceView") or {})
    if flexible:
        instance_id = str(raw.get("name") or (ref.instance_id if ref else ""))
    else:
        instance_id = str(raw.get("instanceId") or (ref.instance_id if ref else ""))
    return VmDescription(
        provider_id=provider_id_of(resource_id),
        instance_id=instance_id,
        name=str(raw.get("name") or ""),
        provisioning_state=str(props.get("provisioningState") or ""),
        power_state=power,
        error_code=code,
        error_message=message,
    )


def arm_error(exc: BaseException, what: str) -> ArmError:
    """An `ArmError` for a failed SDK call about `what` (names the object and the call)."""
    code = ""
    status = 0
    detail = str(exc)
    error = getattr(exc, "error", None)
    if error is not None:
        code = str(getattr(error, "code", "") or "")
        detail = str(getattr(error, "message", "") or detail)
    status = int(getattr(exc, "status_code", 0) or 0)
    if not code:
        response = getattr(exc, "response", None)
        code = _code_from_body(response)
    first_line = detail.strip().splitlines()[0] if detail.strip() else type(exc).__name__
    label = f"{code}: " if code else ""
    return ArmError(f"{what} failed: {label}{first_line}", code=code, status=status, detail=detail)


def _code_from_body(response: Any) -> str:
    if response is None:
        return ""
    try:
        body = response.json()
    except Exception:
        return ""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            return str(error.get("code") or "")
    return ""


class _NoToken:
    """The credential of a plain-http loopback endpoint: the pipeline never asks it."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        raise CloudProviderError("no Azure token is sent to a plain http loopback endpoint")


def make_credential(config: AzureConfig) -> TokenCredential:
    """The azure-identity credential `config` selects (see `config.credential_kind`)."""
    if config.sends_no_token:
        return cast("TokenCredential", _NoToken())
    from azure import identity

    authority = config.authority_host
    if config.use_managed_identity_extension:
        client_id = config.user_assigned_identity_id or None
        return identity.ManagedIdentityCredential(client_id=client_id)
    if config.use_workload_identity_extension:
        return identity.WorkloadIdentityCredential(
            tenant_id=config.tenant_id,
            client_id=config.aad_client_id or None,
            token_file_path=config.aad_federated_token_file or None,
            authority=authority,
        )
    if config.auth_method == "cli":
        return identity.AzureCliCredential(tenant_id=config.tenant_id)
    if config.aad_client_id and config.aad_client_secret:
        return identity.ClientSecretCredential(
            config.tenant_id, config.aad_client_id, config.aad_client_secret, authority=authority
        )
    if config.aad_client_id and config.aad_client_cert_path:
        return identity.CertificateCredential(
            config.tenant_id,
            config.aad_client_id,
            certificate_path=config.aad_client_cert_path,
            password=config.aad_client_cert_password or None,
            authority=authority,
        )
    return identity.DefaultAzureCredential(
        authority=authority,
        managed_identity_client_id=config.user_assigned_identity_id or config.aad_client_id or None,
        workload_identity_client_id=config.aad_client_id or None,
    )


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """Transport knobs: retries of throttled and failed calls, operation polling."""

    polling_interval: float = DEFAULT_POLLING_INTERVAL
    retry_total: int = 3
    retry_backoff_factor: float = 0.8
    retry_backoff_max: float = 60.0
    timeout: float = 60.0


class Operation:
    """A long-running ARM operation that ARM accepted. `on_done(error)` is called once
    (from a daemon thread) when it ends, with `None` on success."""

    def __init__(self, poller: Any, what: str, on_done: Callable[[ArmError | None], None]) -> None:
        self.what = what
        self._poller = poller
        self._on_done = on_done
        self.done = threading.Event()
        self.error: ArmError | None = None
        self._thread = threading.Thread(target=self._wait, name=f"azure-op {what}", daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        error: ArmError | None = None
        try:
            self._poller.result(timeout=OPERATION_TIMEOUT)
            if not self._poller.done():
                error = ArmError(f"{self.what}: not finished after {OPERATION_TIMEOUT:.0f}s",
                                 code="OperationTimedOut")
        except Exception as exc:
            error = arm_error(exc, self.what)
        self.error = error
        try:
            self._on_done(error)
        except Exception:
            log.exception("azure_operation_callback_failed", operation=self.what)
        finally:
            self.done.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)


class ArmService:
    """Thin wrapper over ComputeManagementClient for one subscription and resource group."""

    def __init__(
        self,
        config: AzureConfig,
        settings: ClientSettings | None = None,
        credential: TokenCredential | None = None,
    ) -> None:
        from azure.core.pipeline.policies import SansIOHTTPPolicy
        from azure.mgmt.compute import ComputeManagementClient

        self.config = config
        self.settings = settings or ClientSettings()
        s = self.settings
        kwargs: dict[str, Any] = {
            "polling_interval": s.polling_interval,
            "retry_total": s.retry_total,
            "retry_backoff_factor": s.retry_backoff_factor,
            "retry_backoff_max": s.retry_backoff_max,
            "connection_timeout": s.timeout,
            "read_timeout": s.timeout,
            "user_agent": "clusterscaler-azure",
        }
        if config.sends_no_token:
            # The bearer-token policy refuses plain http; a loopback emulator needs no token.
            kwargs["authentication_policy"] = SansIOHTTPPolicy()
            log.warning("azure_arm_endpoint_without_token", endpoint=config.arm_endpoint)
        if config.resource_manager_endpoint:
            kwargs["base_url"] = config.arm_endpoint
            kwargs["credential_scopes"] = [config.arm_endpoint + "/.default"]
        else:
            from azure.core import AzureClouds

            clouds = {
                "AzurePublicCloud": AzureClouds.AZURE_PUBLIC_CLOUD,
                "AzureChinaCloud": AzureClouds.AZURE_CHINA_CLOUD,
                "AzureUSGovernmentCloud": AzureClouds.AZURE_US_GOVERNMENT,
            }
            kwargs["cloud_setting"] = clouds[config.cloud]
        # Typed as Any: dict bodies are sent verbatim (camelCase), which the SDK's overloads
        # for model objects do not describe.
        self._client: Any = ComputeManagementClient(
            credential=credential or make_credential(config),
            subscription_id=config.subscription_id,
            **kwargs,
        )
        self.resource_group = config.resource_group

    def close(self) -> None:
        self._client.close()

    # --- reads ---------------------------------------------------------------------------

    def list_vmss(self) -> list[dict[str, Any]]:
        """Every scale set of the resource group, as ARM's JSON (parsed per scale set by the
        caller, so that one malformed scale set does not hide the others)."""
        what = f"listing the scale sets of resource group {self.resource_group!r}"
        try:
            return [item.as_dict() for item in
                    self._client.virtual_machine_scale_sets.list(self.resource_group)]
        except Exception as exc:
            raise arm_error(exc, what) from exc

    def get_vmss(self, name: str) -> dict[str, Any] | None:
        """One scale set as ARM's JSON, `None` when it does not exist."""
        try:
            item = self._client.virtual_machine_scale_sets.get(self.resource_group, name)
        except Exception as exc:
            error = arm_error(exc, f"VMSS {name!r}: get")
            if error.status == 404:
                return None
            raise error from exc
        return dict(item.as_dict())

    def list_vms(self, vmss: VmssDescription) -> list[VmDescription]:
        """The VMs of a scale set with their instance views (power state, provisioning
        errors): VirtualMachineScaleSetVMs for Uniform, VirtualMachines for Flexible."""
        what = f"VMSS {vmss.name!r}: listing its VMs"
        try:
            if vmss.flexible:
                pages: Iterable[Any] = self._client.virtual_machines.list(
                    self.resource_group,
                    filter=f"'virtualMachineScaleSet/id' eq '{vmss.id}'",
                    expand="instanceView",
                )
            else:
                pages = self._client.virtual_machine_scale_set_vms.list(
                    self.resource_group, vmss.name, expand="instanceView"
                )
            raws = [item.as_dict() for item in pages]
        except Exception as exc:
            raise arm_error(exc, what) from exc
        result: list[VmDescription] = []
        for raw in raws:
            vm = vm_from_api(raw, flexible=vmss.flexible)
            if vm is not None:
                result.append(vm)
        return result

    def list_skus(self, location: str) -> list[dict[str, Any]]:
        what = f"listing the resource SKUs of location {location!r}"
        try:
            return [item.as_dict() for item in
                    self._client.resource_skus.list(filter=f"location eq '{location}'")]
        except Exception as exc:
            raise arm_error(exc, what) from exc

    # --- long-running writes -------------------------------------------------------------

    def begin_set_capacity(
        self,
        vmss: VmssDescription,
        capacity: int,
        on_done: Callable[[ArmError | None], None],
    ) -> Operation:
        """PATCH the scale set's `sku.capacity`. Returns once ARM accepted the update;
        raises `ArmError` when it refused it."""
        what = f"VMSS {vmss.name!r}: setting sku.capacity to {capacity}"
        body: dict[str, Any] = {"sku": {"name": vmss.sku_name, "capacity": capacity}}
        if vmss.sku_tier:
            body["sku"]["tier"] = vmss.sku_tier
        try:
            poller = self._client.virtual_machine_scale_sets.begin_update(
                self.resource_group, vmss.name, body
            )
        except Exception as exc:
            raise arm_error(exc, what) from exc
        return Operation(poller, what, on_done)

    def begin_delete_instances(
        self,
        vmss: VmssDescription,
        instance_ids: Sequence[str],
        on_done: Callable[[ArmError | None], None],
        *,
        force: bool = False,
    ) -> Operation:
        """POST deleteInstances for these instance IDs. Returns once ARM accepted the
        deletion; raises `ArmError` when it refused it."""
        what = f"VMSS {vmss.name!r}: deleting instances {', '.join(instance_ids)}"
        kwargs: dict[str, Any] = {"force_deletion": True} if force else {}
        try:
            poller = self._client.virtual_machine_scale_sets.begin_delete_instances(
                self.resource_group, vmss.name, {"instanceIds": list(instance_ids)}, **kwargs
            )
        except Exception as exc:
            raise arm_error(exc, what) from exc
        return Operation(poller, what, on_done)
