"""Provider IDs of Azure nodes and the ARM resource IDs behind them.

A node of a Uniform scale set carries
`azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachineScaleSets/<vmss>/virtualMachines/<instance-id>`;
a node of a Flexible one `azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<vm-name>`.
ARM names are case-insensitive and real clusters mix cases (kubelet lower-cases the resource
group, ARM answers with upper case), so IDs are compared through `key()`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "azure://"
PROVIDER_ID_FORM = (
    "azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/"
    "virtualMachineScaleSets/<vmss>/virtualMachines/<instance-id> (or .../virtualMachines/<name>)"
)
_RESOURCE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
    r"(?:virtualMachineScaleSets/(?P<vmss>[^/]+)/virtualMachines/(?P<instance>[^/]+)"
    r"|virtualMachines/(?P<vm>[^/]+))$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class VmRef:
    """What a provider ID names. `vmss` is empty for a Flexible scale set's VM."""

    subscription: str
    resource_group: str
    vmss: str
    instance_id: str  # the Uniform instance ID, or the VM name for a Flexible VM

    @property
    def flexible(self) -> bool:
        return not self.vmss


def parse_resource_id(resource_id: str) -> VmRef | None:
    """Parse the ARM ID of a scale set VM or of a VM; `None` for anything else."""
    match = _RESOURCE.match(resource_id.rstrip("/"))
    if match is None:
        return None
    return VmRef(
        subscription=match["sub"],
        resource_group=match["rg"],
        vmss=match["vmss"] or "",
        instance_id=match["instance"] or match["vm"],
    )


def parse_provider_id(provider_id: str) -> VmRef | None:
    """Parse an `azure://` provider ID; `None` when it is not one of an Azure VM."""
    if provider_id[: len(PREFIX)].lower() != PREFIX:
        return None
    return parse_resource_id(provider_id[len(PREFIX) :])


def provider_id_of(resource_id: str) -> str:
    """The provider ID kubelet gives the VM with this ARM ID (resource group lower-cased,
    as the Azure cloud provider reports it)."""
    match = _RESOURCE.match(resource_id.rstrip("/"))
    if match is None:
        return PREFIX + resource_id
    start, end = match.span("rg")
    return PREFIX + resource_id[:start] + resource_id[start:end].lower() + resource_id[end:]


def key(provider_id: str) -> str:
    """The form in which provider IDs are compared."""
    return provider_id.strip().rstrip("/").lower()


def vmss_provider_id(subscription: str, resource_group: str, vmss: str, instance_id: str) -> str:
    return (
        f"{PREFIX}/subscriptions/{subscription}/resourceGroups/{resource_group.lower()}/providers/"
        f"Microsoft.Compute/virtualMachineScaleSets/{vmss}/virtualMachines/{instance_id}"
    )
