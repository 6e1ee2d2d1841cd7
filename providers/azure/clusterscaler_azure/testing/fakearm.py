"""A small fake of Azure Resource Manager's compute API on 127.0.0.1, for tests.

It answers what the `azure` provider calls, as ARM does (JSON in ARM's camelCase, errors as
`{"error": {"code", "message"}}`, paging with `nextLink`, long-running operations as 202
with an `Azure-AsyncOperation` URL to poll):

- scale sets of a resource group: list, get, PATCH (`sku.capacity`; 200 with the updated
  model), POST deleteInstances (202);
- their VMs: `virtualMachineScaleSets/<name>/virtualMachines` (Uniform) and
  `virtualMachines?$filter='virtualMachineScaleSet/id' eq '<id>'` (Flexible), with
  instance views when `$expand=instanceView`;
- Resource SKUs of a location;
- faults: a status and error code for the next N calls matching a method and path (500s,
  429 with Retry-After, SkuNotAvailable, quota), allocation failures of the next capacity
  increase (VMs left in a failed provisioning state, or capacity taken back), operations
  held in progress until released.

Use it with the real client: `ComputeManagementClient(credential=<any object with
get_token>, subscription_id=..., base_url=arm.url, authentication_policy=SansIOHTTPPolicy())`,
or with the provider through azure.json's `resourceManagerEndpoint`.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.testing.fakehttp import FakeHttpHandler, FakeHttpServer

Json = dict[str, Any]


@dataclass
class Fault:
    """Answer the next `times` calls matching `method` and `path` (a regex searched in the
    lower-cased path) with `status` and an ARM error body."""

    method: str
    path: str
    status: int
    code: str
    message: str = "injected fault"
    times: int = 1
    retry_after: str | None = None


@dataclass
class AllocationFailure:
    """The next capacity increase of a scale set fails asynchronously with `code`."""

    code: str = "AllocationFailed"
    message: str = "Allocation failed. We do not have sufficient capacity for the requested VM size in this region."
    keep_capacity: bool = True  # True: VMs stay in Failed state; False: ARM takes capacity back


@dataclass
class _Operation:
    id: str
    complete: Callable[[], Json | None]  # returns an error body, or None on success
    status: str = "InProgress"
    error: Json | None = None


@dataclass
class _Vmss:
    name: str
    sku: str
    capacity: int
    tags: dict[str, str]
    zones: list[str]
    flexible: bool
    spot: bool
    windows: bool
    os_disk_gb: int | None
    ephemeral: bool
    storage_type: str | None
    location: str
    provisioning_state: str = "Succeeded"
    vms: dict[str, Json] = field(default_factory=dict)  # instance ID (or VM name) -> VM
    next_instance: int = 0
    allocation_failure: AllocationFailure | None = None
    # True: a capacity increase creates no VM (capacity Azure holds, not turned into VMs).
    held: bool = False


class FakeArm(FakeHttpServer):
    """The fake ARM server. `with FakeArm() as arm:` starts it on a free port."""

    def __init__(
        self,
        subscription: str = "00000000-0000-0000-0000-000000000001",
        resource_group: str = "MC_rg_cluster_westeurope",
        location: str = "westeurope",
        *,
        page_size: int = 50,
        retry_after: str | None = None,
    ) -> None:
        self.subscription = subscription
        self.resource_group = resource_group
        self.location = location
        self.page_size = page_size
        # Whole seconds, sent with accepted operations and their status replies; azure-core
        # waits that long between polls (None: the client's polling interval applies).
        self.retry_after = retry_after
        self.lock = threading.RLock()
        self.calls: list[tuple[str, str, dict[str, str]]] = []
        self.faults: list[Fault] = []
        self.skus: list[Json] = []
        self._vmss: dict[str, _Vmss] = {}
        self._ops: dict[str, _Operation] = {}
        self._op_ids = itertools.count(1)
        self.hold = False

    # --- lifecycle -----------------------------------------------------------------------

    thread_name = "fake-arm"

    def handler(self) -> type[FakeHttpHandler]:
        return _handler(self)

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.faults.clear()
            self.skus.clear()
            self._vmss.clear()
            self._ops.clear()
            self.hold = False

    # --- setting up ----------------------------------------------------------------------

    @property
    def rg_path(self) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}"

    def vmss_id(self, name: str) -> str:
        return f"{self.rg_path}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}"

    def add_vmss(
        self,
        name: str,
        *,
        sku: str = "Standard_D4s_v3",
        capacity: int = 0,
        tags: dict[str, str] | None = None,
        zones: list[str] | None = None,
        flexible: bool = False,
        spot: bool = False,
        windows: bool = False,
        os_disk_gb: int | None = 128,
        ephemeral: bool = False,
        storage_type: str | None = "Premium_LRS",
        location: str | None = None,
    ) -> None:
        with self.lock:
            vmss = _Vmss(
                name=name, sku=sku, capacity=0, tags=dict(tags or {}), zones=list(zones or []),
                flexible=flexible, spot=spot, windows=windows, os_disk_gb=os_disk_gb,
                ephemeral=ephemeral, storage_type=storage_type, location=location or self.location,
            )
            self._vmss[name.lower()] = vmss
            for _ in range(capacity):
                self._new_vm(vmss, "Succeeded")
            vmss.capacity = capacity

    def set_capacity_only(self, name: str, capacity: int) -> None:
        """Set the capacity without creating or removing VMs (capacity Azure holds but has
        not turned into VMs)."""
        with self.lock:
            self._get(name).capacity = capacity

    def hold_capacity(self, name: str) -> None:
        """Capacity increases of this scale set from now on create no VM."""
        with self.lock:
            self._get(name).held = True

    def set_tags(self, name: str, tags: dict[str, str]) -> None:
        with self.lock:
            self._get(name).tags = dict(tags)

    def remove_vmss(self, name: str) -> None:
        with self.lock:
            del self._vmss[name.lower()]

    def add_sku(self, name: str, vcpus: int, memory_gb: float, *, gpus: int = 0,
                arch: str = "x64", location: str | None = None) -> None:
        caps = [{"name": "vCPUs", "value": str(vcpus)}, {"name": "MemoryGB", "value": str(memory_gb)},
                {"name": "CpuArchitectureType", "value": arch}]
        if gpus:
            caps.append({"name": "GPUs", "value": str(gpus)})
        with self.lock:
            self.skus.append({
                "resourceType": "virtualMachines", "name": name, "tier": "Standard",
                "size": name.split("_", 1)[-1], "locations": [location or self.location],
                "capabilities": caps,
            })

    def fail(self, method: str, path: str, status: int, code: str, message: str = "injected fault",
             *, times: int = 1, retry_after: str | None = None) -> None:
        with self.lock:
            self.faults.append(Fault(method.upper(), path.lower(), status, code, message, times,
                                     retry_after))

    def fail_allocation(self, name: str, failure: AllocationFailure | None = None) -> None:
        with self.lock:
            self._get(name).allocation_failure = failure or AllocationFailure()

    def set_vm_state(self, name: str, instance: str, provisioning_state: str,
                     power_state: str | None = None) -> None:
        with self.lock:
            vm = self._get(name).vms[instance]
            vm["properties"]["provisioningState"] = provisioning_state
            vm["properties"]["instanceView"] = _instance_view(provisioning_state, power_state)

    # --- reading the state ---------------------------------------------------------------

    def capacity(self, name: str) -> int:
        with self.lock:
            return self._get(name).capacity

    def vms(self, name: str) -> list[Json]:
        with self.lock:
            return [json.loads(json.dumps(vm)) for vm in self._get(name).vms.values()]

    def provider_ids(self, name: str, state: str = "Succeeded") -> list[str]:
        """`azure://` provider IDs of the VMs in a provisioning state, as kubelet reports them
        (resource group lower-cased)."""
        result = []
        for vm in self.vms(name):
            if vm["properties"]["provisioningState"] == state:
                result.append("azure://" + vm["id"].replace(
                    f"/resourceGroups/{self.resource_group}/",
                    f"/resourceGroups/{self.resource_group.lower()}/"))
        return result

    def count(self, method: str, pattern: str = "") -> int:
        with self.lock:
            return sum(1 for m, p, _ in self.calls
                       if m == method.upper() and re.search(pattern.lower(), p.lower()))

    def pending_operations(self) -> int:
        with self.lock:
            return sum(1 for op in self._ops.values() if op.status == "InProgress")

    def release(self) -> None:
        """Let held operations finish (at their next poll)."""
        with self.lock:
            self.hold = False

    # --- internals -------------------------------------------------------------------------

    def _get(self, name: str) -> _Vmss:
        return self._vmss[name.lower()]

    def _new_vm(self, vmss: _Vmss, state: str) -> Json:
        index = vmss.next_instance
        vmss.next_instance += 1
        if vmss.flexible:
            vm_name = f"{vmss.name}_{index:08x}"
            key = vm_name
            vm_id = f"{self.rg_path}/providers/Microsoft.Compute/virtualMachines/{vm_name}"
            vm: Json = {"id": vm_id, "name": vm_name, "location": vmss.location,
                        "properties": {"virtualMachineScaleSet": {"id": self.vmss_id(vmss.name)}}}
        else:
            key = str(index)
            vm_id = f"{self.vmss_id(vmss.name)}/virtualMachines/{index}"
            vm = {"id": vm_id, "name": f"{vmss.name}_{index}", "instanceId": key,
                  "location": vmss.location, "sku": {"name": vmss.sku}, "properties": {}}
        vm["properties"]["provisioningState"] = state
        vm["properties"]["instanceView"] = _instance_view(state, None)
        vmss.vms[key] = vm
        return vm

    def _vmss_json(self, vmss: _Vmss) -> Json:
        os_profile: Json = {"computerNamePrefix": vmss.name}
        os_profile["windowsConfiguration" if vmss.windows else "linuxConfiguration"] = {}
        os_disk: Json = {"createOption": "FromImage", "osType": "Windows" if vmss.windows else "Linux"}
        if vmss.os_disk_gb:
            os_disk["diskSizeGB"] = vmss.os_disk_gb
        if vmss.ephemeral:
            os_disk["diffDiskSettings"] = {"option": "Local"}
        if vmss.storage_type:
            os_disk["managedDisk"] = {"storageAccountType": vmss.storage_type}
        profile: Json = {"osProfile": os_profile, "storageProfile": {"osDisk": os_disk}}
        if vmss.spot:
            profile["priority"] = "Spot"
            profile["evictionPolicy"] = "Delete"
        body: Json = {
            "id": self.vmss_id(vmss.name),
            "name": vmss.name,
            "type": "Microsoft.Compute/virtualMachineScaleSets",
            "location": vmss.location,
            "tags": dict(vmss.tags),
            "sku": {"name": vmss.sku, "tier": "Standard", "capacity": vmss.capacity},
            "properties": {
                "orchestrationMode": "Flexible" if vmss.flexible else "Uniform",
                "provisioningState": vmss.provisioning_state,
                "virtualMachineProfile": profile,
            },
        }
        if vmss.zones:
            body["zones"] = list(vmss.zones)
        return body

    def _operation(self, complete: Callable[[], Json | None]) -> _Operation:
        op = _Operation(id=f"op-{next(self._op_ids)}", complete=complete)
        self._ops[op.id] = op
        return op

    def _op_url(self, op: _Operation) -> str:
        return (f"{self.url}/subscriptions/{self.subscription}/providers/Microsoft.Compute/"
                f"locations/{self.location}/operations/{op.id}?api-version=2024-07-01")

    def _poll(self, op_id: str) -> Json | None:
        op = self._ops.get(op_id)
        if op is None:
            return None
        if op.status == "InProgress" and not self.hold:
            op.error = op.complete()
            op.status = "Failed" if op.error else "Succeeded"
        body: Json = {"name": op.id, "status": op.status, "startTime": "2026-01-01T00:00:00Z"}
        if op.error:
            body["error"] = op.error
        return body

    def _update(self, vmss: _Vmss, body: Json) -> tuple[int, Json]:
        sku = body.get("sku") or {}
        capacity = sku.get("capacity")
        if not isinstance(capacity, int) or capacity < 0:
            return 400, _error("InvalidParameter", f"sku.capacity {capacity!r} is not valid")
        if "tags" in body:
            vmss.tags = dict(body["tags"] or {})
        old = vmss.capacity
        vmss.capacity = capacity
        failure = vmss.allocation_failure if capacity > old else None
        vmss.allocation_failure = None
        if capacity > old:
            created = [] if vmss.held else [self._new_vm(vmss, "Creating") for _ in range(capacity - old)]
        else:
            created = []
            doomed = sorted(vmss.vms.values(), key=lambda v: v["name"])[capacity:]
            for vm in doomed:
                vm["properties"]["provisioningState"] = "Deleting"
        vmss.provisioning_state = "Updating"

        def complete() -> Json | None:
            with self.lock:
                vmss.provisioning_state = "Succeeded"
                if capacity < old:
                    for key in [k for k, v in vmss.vms.items()
                                if v["properties"]["provisioningState"] == "Deleting"]:
                        del vmss.vms[key]
                    return None
                if failure is None:
                    for vm in created:
                        vm["properties"]["provisioningState"] = "Succeeded"
                        vm["properties"]["instanceView"] = _instance_view("Succeeded", "running")
                    return None
                if failure.keep_capacity:
                    for vm in created:
                        vm["properties"]["provisioningState"] = "Failed"
                        vm["properties"]["instanceView"] = {"statuses": [{
                            "code": f"ProvisioningState/failed/{failure.code}",
                            "level": "Error", "displayStatus": "Provisioning failed",
                            "message": failure.message}]}
                else:
                    for vm in created:
                        vmss.vms.pop(_vm_key(vm), None)
                    vmss.capacity = old
                return {"code": failure.code, "message": failure.message}

        op = self._operation(complete)
        # ARM answers a scale set PATCH with 200, the updated model and the operation to poll.
        return 200, {"_op": op, **self._vmss_json(vmss)}

    def _delete_instances(self, vmss: _Vmss, body: Json) -> tuple[int, Json]:
        wanted = [str(i) for i in body.get("instanceIds") or []]
        if not wanted:
            return 400, _error("InvalidParameter", "instanceIds is required")
        unknown = [i for i in wanted if i not in vmss.vms]
        if unknown:
            return 404, _error("NotFound", f"instances {unknown} not found in {vmss.name}")
        for i in wanted:
            vmss.vms[i]["properties"]["provisioningState"] = "Deleting"

        def complete() -> Json | None:
            with self.lock:
                for i in wanted:
                    if vmss.vms.pop(i, None) is not None:
                        vmss.capacity = max(0, vmss.capacity - 1)
            return None

        return 202, {"_op": self._operation(complete)}

    def handle(self, method: str, raw_path: str, body: Json | None) -> tuple[int, Json, dict[str, str]]:
        parts = urllib.parse.urlsplit(raw_path)
        path = parts.path.rstrip("/")
        query = {k: v[0] for k, v in urllib.parse.parse_qs(parts.query).items()}
        with self.lock:
            self.calls.append((method, path, query))
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and re.search(fault.path, path.lower()):
                    fault.times -= 1
                    headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
                    return fault.status, _error(fault.code, fault.message), headers
            return self._route(method, path, query, body or {})

    def _route(self, method: str, path: str, query: dict[str, str], body: Json) -> tuple[int, Json, dict[str, str]]:
        seg = path.split("/")[1:]
        low = [s.lower() for s in seg]
        not_found: tuple[int, Json, dict[str, str]] = (
            404, _error("ResourceNotFound", f"{path} was not found"), {}
        )
        if len(low) < 2 or low[0] != "subscriptions" or low[1] != self.subscription.lower():
            return 404, _error("SubscriptionNotFound", f"subscription {seg[1] if len(seg) > 1 else ''!r} not found"), {}
        rest = low[2:]
        if rest[:3] == ["providers", "microsoft.compute", "skus"] and method == "GET":
            location = _location_filter(query.get("$filter", ""))
            items = [s for s in self.skus if location is None
                     or location in [loc.lower() for loc in s["locations"]]]
            return 200, {"value": items}, {}
        if rest[:3] == ["providers", "microsoft.compute", "locations"] and len(rest) == 6 and rest[4] == "operations":
            status = self._poll(seg[7])
            if status is None:
                return not_found
            return 200, status, self._retry_header()
        if rest[:2] != ["resourcegroups", self.resource_group.lower()] or rest[2:4] != ["providers", "microsoft.compute"]:
            return not_found
        rest = rest[4:]
        if rest == ["virtualmachinescalesets"] and method == "GET":
            items = [self._vmss_json(v) for _, v in sorted(self._vmss.items())]
            return 200, self._page(items, query, path), {}
        if rest == ["virtualmachines"] and method == "GET":
            target = _vmss_filter(query.get("$filter", ""))
            items = []
            for vmss in self._vmss.values():
                if not vmss.flexible or (target is not None and target != self.vmss_id(vmss.name).lower()):
                    continue
                items.extend(_vm_reply(vm, query) for vm in vmss.vms.values())
            return 200, self._page(items, query, path), {}
        if len(rest) >= 2 and rest[0] == "virtualmachinescalesets":
            found = self._vmss.get(rest[1])
            if found is None:
                return not_found
            if len(rest) == 2 and method == "GET":
                return 200, self._vmss_json(found), {}
            if len(rest) == 2 and method == "PATCH":
                return self._accepted(*self._update(found, body))
            if rest[2:] == ["delete"] and method == "POST":
                return self._accepted(*self._delete_instances(found, body))
            if rest[2:] == ["virtualmachines"] and method == "GET":
                if found.flexible:
                    return 400, _error("OperationNotAllowed", "use virtualMachines for Flexible scale sets"), {}
                items = [_vm_reply(vm, query)
                         for _, vm in sorted(found.vms.items(), key=lambda kv: int(kv[0]))]
                return 200, self._page(items, query, path), {}
        return not_found

    def _accepted(self, status: int, reply: Json) -> tuple[int, Json, dict[str, str]]:
        op = reply.pop("_op", None)
        if op is None:
            return status, reply, {}
        headers = {"Azure-AsyncOperation": self._op_url(op), **self._retry_header()}
        return status, reply, headers

    def _retry_header(self) -> dict[str, str]:
        return {"Retry-After": self.retry_after} if self.retry_after is not None else {}

    def _page(self, items: list[Json], query: dict[str, str], path: str) -> Json:
        start = int(query.get("$skiptoken", "0") or 0)
        page = items[start : start + self.page_size]
        reply: Json = {"value": page}
        if start + self.page_size < len(items):
            q = {k: v for k, v in query.items() if k != "$skiptoken"}
            q["$skiptoken"] = str(start + self.page_size)
            reply["nextLink"] = f"{self.url}{path}?{urllib.parse.urlencode(q)}"
        return reply


def _vm_key(vm: Json) -> str:
    return str(vm.get("instanceId") or vm["name"])


def _instance_view(state: str, power: str | None) -> Json:
    statuses = [{"code": f"ProvisioningState/{state.lower()}", "level": "Info"}]
    if power is None and state == "Succeeded":
        power = "running"
    if power:
        statuses.append({"code": f"PowerState/{power}", "level": "Info"})
    return {"statuses": statuses}


def _vm_reply(vm: Json, query: dict[str, str]) -> Json:
    reply: Json = json.loads(json.dumps(vm))
    if query.get("$expand", "").lower() != "instanceview":
        reply["properties"].pop("instanceView", None)
    return reply


def _location_filter(text: str) -> str | None:
    match = re.search(r"location\s+eq\s+'([^']*)'", text, re.IGNORECASE)
    return match.group(1).lower() if match else None


def _vmss_filter(text: str) -> str | None:
    match = re.search(r"virtualMachineScaleSet/id'?\s+eq\s+'([^']*)'", text, re.IGNORECASE)
    return match.group(1).lower() if match else None


def _error(code: str, message: str) -> Json:
    return {"error": {"code": code, "message": message}}


def _handler(arm: FakeArm) -> type[FakeHttpHandler]:
    class Handler(FakeHttpHandler):
        def serve(self, method: str) -> None:
            raw = self.read_body()
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                self._send(400, _error("InvalidRequestContent", "body is not JSON"), {})
                return
            status, reply, headers = arm.handle(method, self.path, body)
            self._send(status, reply, headers)

        def _send(self, status: int, reply: Json, headers: dict[str, str]) -> None:
            data = json.dumps(reply).encode() if reply or status != 202 else b""
            headers = {"x-ms-request-id": "fake", **headers}
            self.send_body(status, data, "application/json; charset=utf-8", headers)

    return Handler
