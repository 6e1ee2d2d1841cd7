"""The GCE edge: every Compute API call the provider makes, returning plain data.

Calls go through google-cloud-compute's REST transport. Nothing above this module sees the
client's message types; it receives the dataclasses below. Every failure becomes a
`CloudProviderError` naming the call and the object (a missing MIG a
`NodeGroupNotFoundError`). Reads are retried a few times on rate limits and server errors;
writes are not, since the next loop decides again with fresh data.

Operations (resize, deleteInstances) are polled with the project's own
`ZoneOperationsClient`/`RegionOperationsClient` on the same endpoint: the client library's
`operation.result()` polls through an internal client that ignores a custom endpoint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog
from clusterscaler.api import CloudProviderError, ConfigurationError, NodeGroupNotFoundError
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth import exceptions as auth_exc
from google.cloud import compute_v1

from clusterscaler_gce.cloud_config import CloudConfig
from clusterscaler_gce.credentials import build_credentials
from clusterscaler_gce.machine_types import MachineType
from clusterscaler_gce.refs import InstanceRef, MigRef, last_segment, parse_instance_url
from clusterscaler_gce.reserved import MIB

log = structlog.get_logger()
T = TypeVar("T")

CALL_TIMEOUT = 30.0
OPERATION_TIMEOUT = 20.0
OPERATION_POLL_INTERVAL = 0.1
OPERATION_MAX_POLL_INTERVAL = 1.0
READ_ATTEMPTS = 3
RETRY_DELAY = 0.2
_RETRIABLE_CODES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class MigDescription:
    """What instanceGroupManagers.get says about one MIG."""

    ref: MigRef
    target_size: int
    instance_template: str  # URL
    base_instance_name: str = ""
    zones: tuple[str, ...] = ()  # a regional MIG's distribution zones; the zone otherwise
    is_stable: bool = True


@dataclass(frozen=True, slots=True)
class InstanceError:
    code: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class ManagedInstance:
    """One entry of listManagedInstances."""

    ref: InstanceRef
    current_action: str = "NONE"
    instance_status: str = ""
    errors: tuple[InstanceError, ...] = ()


@dataclass(frozen=True, slots=True)
class Accelerator:
    type: str
    count: int


@dataclass(frozen=True, slots=True)
class Disk:
    boot: bool
    type: str  # PERSISTENT or SCRATCH
    disk_type: str  # pd-balanced, local-ssd, ...
    size_gb: int


@dataclass(frozen=True, slots=True)
class InstanceTemplate:
    """The parts of an instance template that shape a node."""

    name: str
    machine_type: str
    accelerators: tuple[Accelerator, ...] = ()
    disks: tuple[Disk, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    preemptible: bool = False
    provisioning_model: str = ""


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "code", None)
    return int(code) if isinstance(code, int) else None


class ComputeService:
    """The Compute API clients for one endpoint and one set of credentials."""

    def __init__(
        self,
        config: CloudConfig,
        *,
        credentials: Any | None = None,
        operation_timeout: float = OPERATION_TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.endpoint = config.api_endpoint
        self.operation_timeout = operation_timeout
        self._sleep = sleep
        if credentials is None:
            credentials = build_credentials(config)
        options = ClientOptions(api_endpoint=config.api_endpoint) if config.api_endpoint else None

        def make(cls: Any) -> Any:
            return cls(credentials=credentials, transport="rest", client_options=options)

        self.igm = make(compute_v1.InstanceGroupManagersClient)
        self.region_igm = make(compute_v1.RegionInstanceGroupManagersClient)
        self.templates = make(compute_v1.InstanceTemplatesClient)
        self.region_templates = make(compute_v1.RegionInstanceTemplatesClient)
        self.machine_types = make(compute_v1.MachineTypesClient)
        self.zone_operations = make(compute_v1.ZoneOperationsClient)
        self.region_operations = make(compute_v1.RegionOperationsClient)
        self.regions = make(compute_v1.RegionsClient)
        self.instances = make(compute_v1.InstancesClient)
        self._calls: dict[str, int] = {}
        self._lock = threading.Lock()

    # --- plumbing ---------------------------------------------------------------------------

    def calls(self) -> dict[str, int]:
        """How many calls of each kind were made (for logs and tests)."""
        with self._lock:
            return dict(self._calls)

    def _count(self, call: str) -> None:
        with self._lock:
            self._calls[call] = self._calls.get(call, 0) + 1

    def _call(self, call: str, what: str, fn: Callable[[], T], *, read: bool = True, mig: MigRef | None = None) -> T:
        attempts = READ_ATTEMPTS if read else 1
        for attempt in range(1, attempts + 1):
            self._count(call)
            try:
                return fn()
            except gexc.NotFound as exc:
                message = f"GCE {call} {what}: not found: {exc.message}"
                if mig is not None:
                    raise NodeGroupNotFoundError(message) from None
                raise CloudProviderError(message) from None
            except gexc.GoogleAPICallError as exc:
                if _code(exc) in _RETRIABLE_CODES and attempt < attempts:
                    log.debug("gce_call_retry", call=call, target=what, code=_code(exc), attempt=attempt)
                    self._sleep(RETRY_DELAY * attempt)
                    continue
                raise CloudProviderError(f"GCE {call} {what} failed: {_code(exc)} {exc.message}") from None
            except (auth_exc.GoogleAuthError, ConfigurationError) as exc:
                raise CloudProviderError(f"GCE {call} {what}: credentials failed: {exc}") from None
            except (OSError, ValueError) as exc:
                # Transport errors (connection refused, reset, bad JSON) from requests.
                if attempt < attempts:
                    self._sleep(RETRY_DELAY * attempt)
                    continue
                raise CloudProviderError(f"GCE {call} {what} failed: {exc}") from None
        raise AssertionError("unreachable")

    # --- MIGs -------------------------------------------------------------------------------

    def get_mig(self, ref: MigRef) -> MigDescription:
        if ref.regional:
            igm = self._call(
                "regionInstanceGroupManagers.get", f"MIG {ref}",
                lambda: self.region_igm.get(project=ref.project, region=ref.location,
                                            instance_group_manager=ref.name, timeout=CALL_TIMEOUT),
                mig=ref,
            )
        else:
            igm = self._call(
                "instanceGroupManagers.get", f"MIG {ref}",
                lambda: self.igm.get(project=ref.project, zone=ref.location,
                                     instance_group_manager=ref.name, timeout=CALL_TIMEOUT),
                mig=ref,
            )
        return self._describe(ref, igm)

    def _describe(self, ref: MigRef, igm: Any) -> MigDescription:
        if ref.regional:
            zones = tuple(sorted(last_segment(z.zone) for z in igm.distribution_policy.zones))
        else:
            zones = (ref.location,)
        return MigDescription(
            ref=ref,
            target_size=int(igm.target_size),
            instance_template=str(igm.instance_template),
            base_instance_name=str(igm.base_instance_name),
            zones=zones,
            is_stable=bool(igm.status.is_stable) if "status" in igm else True,
        )

    def list_migs(self, project: str, location: str, name_filter: str, *, regional: bool) -> list[MigDescription]:
        """MIGs of a zone (or, `regional`, the regional MIGs of a region) whose name matches
        the filter (`name eq <re2>`)."""
        compute = compute_v1

        def fetch() -> list[Any]:
            if regional:
                request = compute.ListRegionInstanceGroupManagersRequest(
                    project=project, region=location, filter=name_filter
                )
                return list(self.region_igm.list(request=request, timeout=CALL_TIMEOUT))
            request = compute.ListInstanceGroupManagersRequest(project=project, zone=location, filter=name_filter)
            return list(self.igm.list(request=request, timeout=CALL_TIMEOUT))

        call = "regionInstanceGroupManagers.list" if regional else "instanceGroupManagers.list"
        items = self._call(call, f"{project}/{location}", fetch)
        return [self._describe(MigRef(project, location, str(igm.name)), igm) for igm in items]

    def list_managed_instances(self, ref: MigRef) -> list[ManagedInstance]:
        if ref.regional:
            def fetch() -> list[Any]:
                return list(self.region_igm.list_managed_instances(
                    project=ref.project, region=ref.location, instance_group_manager=ref.name,
                    timeout=CALL_TIMEOUT))
            call = "regionInstanceGroupManagers.listManagedInstances"
        else:
            def fetch() -> list[Any]:
                return list(self.igm.list_managed_instances(
                    project=ref.project, zone=ref.location, instance_group_manager=ref.name,
                    timeout=CALL_TIMEOUT))
            call = "instanceGroupManagers.listManagedInstances"
        items = self._call(call, f"MIG {ref}", fetch, mig=ref)
        result: list[ManagedInstance] = []
        for item in items:
            try:
                instance = parse_instance_url(str(item.instance))
            except ValueError as exc:
                raise CloudProviderError(f"GCE {call} MIG {ref}: {exc}") from None
            errors: tuple[InstanceError, ...] = ()
            if "last_attempt" in item and "errors" in item.last_attempt:
                errors = tuple(
                    InstanceError(code=str(e.code), message=str(e.message))
                    for e in item.last_attempt.errors.errors
                )
            result.append(
                ManagedInstance(
                    ref=instance,
                    current_action=str(item.current_action or "NONE"),
                    instance_status=str(item.instance_status or ""),
                    errors=errors,
                )
            )
        return result

    def resize(self, ref: MigRef, size: int) -> None:
        if ref.regional:
            op = self._call(
                "regionInstanceGroupManagers.resize", f"MIG {ref} to {size}",
                lambda: self.region_igm.resize_unary(project=ref.project, region=ref.location,
                                                     instance_group_manager=ref.name, size=size,
                                                     timeout=CALL_TIMEOUT),
                read=False, mig=ref,
            )
        else:
            op = self._call(
                "instanceGroupManagers.resize", f"MIG {ref} to {size}",
                lambda: self.igm.resize_unary(project=ref.project, zone=ref.location,
                                              instance_group_manager=ref.name, size=size,
                                              timeout=CALL_TIMEOUT),
                read=False, mig=ref,
            )
        self.wait(ref, op, f"resize of MIG {ref} to {size}")

    def delete_instances(self, ref: MigRef, instances: Sequence[InstanceRef]) -> None:
        urls = [i.url for i in instances]
        compute = compute_v1
        what = f"MIG {ref} ({len(urls)} instance(s))"
        if ref.regional:
            body = compute.RegionInstanceGroupManagersDeleteInstancesRequest(instances=urls)
            op = self._call(
                "regionInstanceGroupManagers.deleteInstances", what,
                lambda: self.region_igm.delete_instances_unary(
                    project=ref.project, region=ref.location, instance_group_manager=ref.name,
                    region_instance_group_managers_delete_instances_request_resource=body,
                    timeout=CALL_TIMEOUT),
                read=False, mig=ref,
            )
        else:
            zbody = compute.InstanceGroupManagersDeleteInstancesRequest(instances=urls)
            op = self._call(
                "instanceGroupManagers.deleteInstances", what,
                lambda: self.igm.delete_instances_unary(
                    project=ref.project, zone=ref.location, instance_group_manager=ref.name,
                    instance_group_managers_delete_instances_request_resource=zbody,
                    timeout=CALL_TIMEOUT),
                read=False, mig=ref,
            )
        self.wait(ref, op, f"deleteInstances on {what}")

    def wait(self, ref: MigRef, op: Any, what: str) -> None:
        """Poll `op` (operations.get) until it is DONE; raise when it failed or did not finish
        within the operation timeout."""
        done = compute_v1.Operation.Status.DONE
        deadline = time.monotonic() + self.operation_timeout
        name = str(op.name)
        interval = OPERATION_POLL_INTERVAL
        while op.status != done:
            if time.monotonic() >= deadline:
                raise CloudProviderError(
                    f"GCE operation {name} ({what}) did not finish within {self.operation_timeout:g}s"
                )
            self._sleep(interval)
            interval = min(interval * 2, OPERATION_MAX_POLL_INTERVAL)
            op = self._get_operation(ref, op, name)
        if "error" in op and op.error.errors:
            details = "; ".join(f"{e.code}: {e.message}" for e in op.error.errors)
            raise CloudProviderError(f"GCE operation {name} ({what}) failed: {details}")

    def _get_operation(self, ref: MigRef, op: Any, name: str) -> Any:
        if ref.regional:
            def get_region() -> Any:
                return self.region_operations.get(
                    project=ref.project, region=ref.location, operation=name, timeout=CALL_TIMEOUT)

            return self._call("regionOperations.get", f"operation {name}", get_region)
        zone = last_segment(str(op.zone)) if op.zone else ref.location

        def get_zone() -> Any:
            return self.zone_operations.get(project=ref.project, zone=zone, operation=name, timeout=CALL_TIMEOUT)

        return self._call("zoneOperations.get", f"operation {name}", get_zone)

    # --- templates, machine types, regions, instances ---------------------------------------

    def get_instance_template(self, url: str) -> InstanceTemplate:
        parts = url.split("/")
        name = parts[-1]
        try:
            project = parts[parts.index("projects") + 1]
        except (ValueError, IndexError):
            raise CloudProviderError(f"instance template URL {url!r}: expected .../projects/<p>/global/instanceTemplates/<name>") from None
        if "regions" in parts:
            region = parts[parts.index("regions") + 1]
            template = self._call(
                "regionInstanceTemplates.get", f"instance template {project}/{region}/{name}",
                lambda: self.region_templates.get(project=project, region=region,
                                                  instance_template=name, timeout=CALL_TIMEOUT),
            )
        else:
            template = self._call(
                "instanceTemplates.get", f"instance template {project}/{name}",
                lambda: self.templates.get(project=project, instance_template=name, timeout=CALL_TIMEOUT),
            )
        props = template.properties
        metadata = {str(item.key): str(item.value) for item in props.metadata.items}
        disks = tuple(
            Disk(
                boot=bool(d.boot),
                type=str(d.type_ or "PERSISTENT"),
                disk_type=last_segment(str(d.initialize_params.disk_type)) if d.initialize_params.disk_type else "",
                size_gb=int(d.initialize_params.disk_size_gb or d.disk_size_gb or 0),
            )
            for d in props.disks
        )
        return InstanceTemplate(
            name=str(template.name) or name,
            machine_type=last_segment(str(props.machine_type)),
            accelerators=tuple(
                Accelerator(type=last_segment(str(a.accelerator_type)), count=int(a.accelerator_count))
                for a in props.guest_accelerators
            ),
            disks=disks,
            metadata=metadata,
            preemptible=bool(props.scheduling.preemptible),
            provisioning_model=str(props.scheduling.provisioning_model or ""),
        )

    def get_machine_type(self, project: str, zone: str, name: str) -> MachineType:
        mt = self._call(
            "machineTypes.get", f"machine type {project}/{zone}/{name}",
            lambda: self.machine_types.get(project=project, zone=zone, machine_type=name, timeout=CALL_TIMEOUT),
        )
        return MachineType(name=name, cpu=int(mt.guest_cpus), memory=int(mt.memory_mb) * MIB)

    def region_zones(self, project: str, region: str) -> list[str]:
        found = self._call(
            "regions.get", f"region {project}/{region}",
            lambda: self.regions.get(project=project, region=region, timeout=CALL_TIMEOUT),
        )
        return sorted(last_segment(str(z)) for z in found.zones)

    def instance_exists(self, ref: InstanceRef) -> bool:
        def fetch() -> bool:
            try:
                self.instances.get(project=ref.project, zone=ref.zone, instance=ref.name, timeout=CALL_TIMEOUT)
            except gexc.NotFound:
                return False
            return True

        return self._call("instances.get", f"instance {ref.project}/{ref.zone}/{ref.name}", fetch)


def chunks(items: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
