"""The cached view of the managed scale sets, their VMs, and the operations in flight.

The scale sets of the resource group are listed at most once per `vmssCacheTTLInSeconds`
(and right after one of our operations ended). The VMs of a scale set are listed at most
once per `vmssVirtualMachinesCacheTTLInSeconds`, and again at the next refresh while their
count differs from the capacity (VMs coming or going): never per node.

While an operation of ours is in flight on a scale set, its target is what we asked for,
not what a concurrent read of ARM says, so a scale-up in flight is neither lost nor counted
twice. When the operation ends the caches are refreshed from ARM.

A problem with one scale set (bad tags, missing limits, a scale set that cannot be read, an
explicitly named one that does not exist) is recorded under its name and logged; the others
are still managed. A failing list of the scale sets fails the refresh as a whole and keeps
the previous view, as the loop must not act on a partial picture.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog
from clusterscaler.api import (
    CloudProviderError,
    ConfigurationError,
    GroupIndex,
    Instance,
    InstanceErrorInfo,
    InstanceState,
    NodeGroupOptions,
    TemplateTags,
)

from clusterscaler_azure import ids
from clusterscaler_azure.errors import instance_error
from clusterscaler_azure.service import (
    ArmError,
    ArmService,
    VmDescription,
    VmssDescription,
    vmss_from_api,
)
from clusterscaler_azure.skus import SkuCatalogue
from clusterscaler_azure.specs import (
    DiscoverySpec,
    NodeGroupSpec,
    limits_from_tags,
    match_discovery,
)
from clusterscaler_azure.tags import parse_node_group_options, parse_template_tags

log = structlog.get_logger()

PLACEHOLDER_PREFIX = "placeholder-"
_RUNNING_POWER_STATES = frozenset({"running", "starting"})


def instance_state(vm: VmDescription) -> tuple[InstanceState, InstanceErrorInfo | None]:
    """A VM's provisioning state as the autoscaler sees it.

    A VM whose provisioning failed before it ever ran (no running power state) is an
    instance that failed to be created, with the error code of its instance view; one that
    failed later (an extension update) is still running.
    """
    state = vm.provisioning_state.lower()
    if state == "deleting":
        return InstanceState.DELETING, None
    if state == "creating":
        return InstanceState.CREATING, None
    if state == "failed" and vm.power_state.lower() not in _RUNNING_POWER_STATES:
        message = vm.error_message or f"Azure failed to provision VM {vm.name or vm.instance_id}"
        return InstanceState.CREATING, instance_error(vm.error_code, message)
    return InstanceState.RUNNING, None


def is_placeholder(provider_id: str) -> bool:
    return provider_id.rstrip("/").rsplit("/", 1)[-1].startswith(PLACEHOLDER_PREFIX)


@dataclass
class OperationState:
    """What this process asked of one scale set and is still waiting for. Kept across
    regenerations of the view."""

    in_flight: int = 0
    expected: int | None = None
    # Keys of VMs whose deletion ARM accepted, until a VM list no longer shows them.
    deleting: set[str] = field(default_factory=set)
    # Capacity requested by a failed operation that ARM did not keep: reported as failed
    # placeholder instances until the autoscaler deletes them.
    phantom: int = 0
    launch_error: InstanceErrorInfo | None = None


@dataclass
class VmssRecord:
    """One managed scale set as the cache knows it."""

    description: VmssDescription
    min_size: int
    max_size: int
    explicit: bool
    template_tags: TemplateTags
    options: NodeGroupOptions | None
    problems: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.description.name


@dataclass
class _VmList:
    vms: tuple[VmDescription, ...]
    at: float  # monotonic; -inf marks the list as due
    wall: datetime | None = None  # when it was read (UTC)
    error: str = ""


class VmssCache(GroupIndex[str, VmssRecord, str]):
    """Discovery, caching and bookkeeping of the managed scale sets: the records by
    lower-cased name, and the scale set of each VM by the key of its provider ID."""

    def __init__(
        self,
        service: ArmService,
        explicit: Sequence[NodeGroupSpec],
        discovery: Sequence[DiscoverySpec],
        catalogue: SkuCatalogue,
        *,
        vmss_ttl: float,
        vms_ttl: float,
        enable_flex: bool,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__()
        self._service = service
        self._wall_clock = wall_clock
        self._explicit = {spec.name.lower(): spec for spec in explicit}
        self._discovery = list(discovery)
        self._catalogue = catalogue
        self._vmss_ttl = vmss_ttl
        self._vms_ttl = vms_ttl
        self._enable_flex = enable_flex
        self._clock = clock
        self._vm_lists: dict[str, _VmList] = {}
        self._ops: dict[str, OperationState] = {}
        self._problems: dict[str, tuple[str, ...]] = {}
        self._listed_at: float | None = None

    # --- reading ---------------------------------------------------------------------------

    def get(self, key: str) -> VmssRecord | None:
        """The record of the scale set named `key`, in any case."""
        return super().get(key.lower())

    def problems(self) -> Mapping[str, tuple[str, ...]]:
        with self._lock:
            merged = dict(self._problems)
            for key, vm_list in self._vm_lists.items():
                record = self.get(key)
                if vm_list.error and record is not None:
                    merged[record.name] = (*merged.get(record.name, ()), vm_list.error)
            return merged

    def base_capacity(self, name: str) -> int:
        """The capacity asked of ARM: ours while an operation is in flight, else ARM's."""
        with self._lock:
            record = self._require(name)
            ops = self._ops.get(name.lower(), OperationState())
            return ops.expected if ops.expected is not None else record.description.capacity

    def target(self, name: str) -> int:
        """The base capacity plus the failed placeholders not cleaned up yet."""
        with self._lock:
            ops = self._ops.get(name.lower(), OperationState())
            return self.base_capacity(name) + ops.phantom

    def operation_state(self, name: str) -> OperationState:
        with self._lock:
            return self._ops.setdefault(name.lower(), OperationState())

    def vms(self, name: str) -> tuple[VmDescription, ...]:
        with self._lock:
            vm_list = self._vm_lists.get(name.lower())
            return vm_list.vms if vm_list is not None else ()

    def live_vms(self, name: str) -> list[VmDescription]:
        """VMs that count towards the capacity: not being deleted."""
        with self._lock:
            ops = self._ops.get(name.lower(), OperationState())
            return [
                vm for vm in self.vms(name)
                if vm.provisioning_state.lower() != "deleting"
                and ids.key(vm.provider_id) not in ops.deleting
            ]

    def instances(self, name: str) -> tuple[Instance, ...]:
        """The VMs with their states, then placeholders for capacity without VMs yet."""
        with self._lock:
            record = self._require(name)
            key = name.lower()
            ops = self._ops.get(key, OperationState())
            result: list[Instance] = []
            for vm in self.vms(name):
                if ids.key(vm.provider_id) in ops.deleting:
                    result.append(Instance(id=vm.provider_id, state=InstanceState.DELETING))
                    continue
                state, error = instance_state(vm)
                result.append(Instance(id=vm.provider_id, state=state, error=error))
            live = len(self.live_vms(name))
            base = ops.expected if ops.expected is not None else record.description.capacity
            missing = max(0, base - live)
            desc = record.description
            for index in range(missing + ops.phantom):
                result.append(
                    Instance(
                        id=self.placeholder_id(desc, index),
                        state=InstanceState.CREATING,
                        error=ops.launch_error,
                    )
                )
            return tuple(result)

    def placeholder_id(self, desc: VmssDescription, index: int) -> str:
        return ids.vmss_provider_id(
            self._service.config.subscription_id,
            self._service.resource_group,
            desc.name,
            f"{PLACEHOLDER_PREFIX}{index}",
        )

    def vmss_for(self, provider_id: str) -> str | None:
        """The managed scale set listing this VM (or whose ID names it), if any."""
        ref = ids.parse_provider_id(provider_id)
        if ref is None:
            return None
        with self._lock:
            found = self.group_of(ids.key(provider_id))
            if found is not None:
                listing = self.get(found)
                return listing.name if listing is not None else None
            if ref.flexible or not self._same_resource_group(ref):
                return None
            record = self.get(ref.vmss)
            return record.name if record is not None else None

    def is_listed(self, provider_id: str) -> bool:
        with self._lock:
            return self.group_of(ids.key(provider_id)) is not None

    def _same_resource_group(self, ref: ids.VmRef) -> bool:
        return (
            ref.subscription.lower() == self._service.config.subscription_id.lower()
            and ref.resource_group.lower() == self._service.resource_group.lower()
        )

    def _require(self, name: str) -> VmssRecord:
        record = self.get(name)
        if record is None:
            raise CloudProviderError(f"VMSS {name!r} is no longer managed or no longer exists")
        return record

    # --- refreshing ------------------------------------------------------------------------

    def refresh(self, force: bool = False) -> None:
        """Regenerate the scale sets when due, then list the VMs of those that need it."""
        now = self._clock()
        with self._lock:
            due = force or self._listed_at is None or now - self._listed_at >= self._vmss_ttl
        if due:
            self.regenerate()
        for record in self.records():
            if self._vms_due(record.name, now) or force:
                self.refresh_vms(record.name)

    def invalidate(self, name: str | None = None) -> None:
        """Make the next `refresh` list the scale sets, and the VMs of `name` (or of all)."""
        with self._lock:
            self._listed_at = None
            for key in [name.lower()] if name else list(self._vm_lists):
                vm_list = self._vm_lists.get(key)
                if vm_list is not None:
                    vm_list.at = float("-inf")

    def _vms_due(self, name: str, now: float) -> bool:
        with self._lock:
            vm_list = self._vm_lists.get(name.lower())
            if vm_list is None or now - vm_list.at >= self._vms_ttl:
                return True
            record = self.get(name)
            if record is None:
                return False
            ops = self._ops.get(name.lower(), OperationState())
            base = ops.expected if ops.expected is not None else record.description.capacity
            # VMs coming or going: the list is read at every refresh until it settles.
            return len(vm_list.vms) != base or bool(ops.deleting)

    def vms_listed_at(self, name: str) -> datetime | None:
        """When the VMs of `name` were last read successfully (UTC)."""
        with self._lock:
            vm_list = self._vm_lists.get(name.lower())
            return vm_list.wall if vm_list is not None else None

    def refresh_vms(self, name: str) -> None:
        """List the VMs of one scale set now. A failure is recorded as this scale set's
        problem and keeps its previous list; other scale sets are not affected."""
        record = self.get(name)
        if record is None:
            return
        key = name.lower()
        now = self._clock()
        wall = self._wall_clock()
        try:
            vms = tuple(self._service.list_vms(record.description))
        except CloudProviderError as exc:
            log.warning("azure_vmss_vms_unavailable", node_group=record.name, error=str(exc))
            with self._lock:
                previous = self._vm_lists.get(key)
                # Retried at the next refresh, keeping what was known.
                self._vm_lists[key] = _VmList(
                    vms=previous.vms if previous else (),
                    at=float("-inf"),
                    wall=previous.wall if previous else None,
                    error=str(exc),
                )
            return
        with self._lock:
            self._vm_lists[key] = _VmList(vms=vms, at=now, wall=wall)
            listed = {ids.key(vm.provider_id) for vm in vms}
            self.relist(key, listed)
            ops = self._ops.get(key)
            if ops is not None:
                ops.deleting &= listed

    def regenerate(self) -> None:
        raws = self._service.list_vmss()
        described: dict[str, tuple[VmssDescription, bool, tuple[int, int]]] = {}
        problems: dict[str, tuple[str, ...]] = {}
        for raw in raws:
            name = str(raw.get("name") or "")
            key = name.lower()
            explicit = self._explicit.get(key)
            tags = {str(k): "" if v is None else str(v) for k, v in (raw.get("tags") or {}).items()}
            discovered = None if explicit else match_discovery(self._discovery, tags)
            if explicit is None and discovered is None:
                continue
            try:
                desc = vmss_from_api(raw)
                if desc.provisioning_state.lower() == "deleting":
                    continue
                if desc.flexible and not self._enable_flex:
                    raise ConfigurationError(
                        f"VMSS {name!r} uses Flexible orchestration; expected "
                        "enableVmssFlexNodes=true in the cloud-config (or "
                        "AZURE_ENABLE_VMSS_FLEX_NODES=true) to manage it"
                    )
                if explicit is not None:
                    limits = (explicit.min_size, explicit.max_size)
                else:
                    assert discovered is not None
                    limits = limits_from_tags(name, tags, discovered)
            except ConfigurationError as exc:
                problems[name] = (str(exc),)
                continue
            described[key] = (desc, explicit is not None, limits)
        for key, spec in self._explicit.items():
            if key not in described and spec.name not in problems:
                problems[spec.name] = (
                    f"VMSS {spec.name!r} given by --nodes does not exist in resource group "
                    f"{self._service.resource_group!r}",
                )
        records: dict[str, VmssRecord] = {}
        for key, (desc, explicit_flag, (min_size, max_size)) in sorted(described.items()):
            template_tags = parse_template_tags(desc.name, desc.tags)
            options, option_errors = parse_node_group_options(desc.name, template_tags.options)
            record_problems = [str(e) for e in (*template_tags.errors, *option_errors)]
            if self._catalogue.get(desc.sku_name, desc.location) is None:
                record_problems.append(unknown_sku_message(desc))
            records[key] = VmssRecord(
                description=desc,
                min_size=min_size,
                max_size=max_size,
                explicit=explicit_flag,
                template_tags=template_tags,
                options=options,
                problems=tuple(record_problems),
            )
            if record_problems:
                problems[desc.name] = tuple(record_problems)
        with self._lock:
            previous = self._problems
            self.replace(records)
            self._problems = problems
            self._listed_at = self._clock()
            self._vm_lists = {k: v for k, v in self._vm_lists.items() if k in records}
            for key, ops in list(self._ops.items()):
                if key not in records:
                    del self._ops[key]
                elif ops.in_flight == 0:
                    # ARM's capacity is the truth again.
                    ops.expected = None
        for name, messages in problems.items():
            if previous.get(name) != messages:
                for message in messages:
                    log.warning("azure_vmss_problem", node_group=name, problem=message)
        log.debug("azure_vmss_refreshed", node_groups=[r.name for r in records.values()])

    # --- bookkeeping of our operations -------------------------------------------------------

    def begin_operation(
        self, name: str, expected: int, deleting: Sequence[str] = ()
    ) -> int | None:
        """Book an operation about to be asked of ARM: the target becomes `expected`.
        Returns the previous expectation, for `abandon_operation`."""
        with self._lock:
            ops = self._ops.setdefault(name.lower(), OperationState())
            previous = ops.expected
            ops.in_flight += 1
            ops.expected = expected
            ops.deleting.update(ids.key(p) for p in deleting)
            if not deleting:
                # A new request starts with a clean slate.
                ops.launch_error = None
            vm_list = self._vm_lists.get(name.lower())
            if vm_list is not None:
                vm_list.at = float("-inf")
            return previous

    def abandon_operation(
        self, name: str, previous: int | None, deleting: Sequence[str] = ()
    ) -> None:
        """Take back a booking whose ARM call was refused (`previous` is what
        `begin_operation` returned)."""
        with self._lock:
            ops = self._ops.setdefault(name.lower(), OperationState())
            ops.in_flight = max(0, ops.in_flight - 1)
            ops.deleting -= {ids.key(p) for p in deleting}
            ops.expected = previous

    def end_operation(
        self,
        name: str,
        error: ArmError | None,
        *,
        requested: int | None = None,
        deleting: Sequence[str] = (),
    ) -> None:
        """An operation ended. For a failed capacity update, what ARM kept is read back:
        capacity it did not keep is reported as failed instances (with ARM's error), so the
        autoscaler backs the group off at once."""
        key = name.lower()
        kept: int | None = None
        if error is not None and requested is not None:
            try:
                raw = self._service.get_vmss(name)
                kept = vmss_from_api(raw).capacity if raw is not None else None
            except (CloudProviderError, ConfigurationError) as exc:
                log.warning("azure_vmss_reread_failed", node_group=name, error=str(exc))
        with self._lock:
            ops = self._ops.setdefault(key, OperationState())
            ops.in_flight = max(0, ops.in_flight - 1)
            if error is not None:
                if deleting:
                    ops.deleting -= {ids.key(p) for p in deleting}
                if requested is not None:
                    ops.launch_error = instance_error(error.code, error.detail or str(error))
                    if kept is not None and kept < requested:
                        ops.phantom += requested - kept
                    if ops.in_flight == 0:
                        ops.expected = None
                        record = self.get(key)
                        if record is not None and kept is not None:
                            record.description = _with_capacity(record.description, kept)
            self._listed_at = None
            vm_list = self._vm_lists.get(key)
            if vm_list is not None:
                vm_list.at = float("-inf")

    def drop_phantoms(self, name: str, count: int) -> int:
        """Forget up to `count` failed placeholders; returns how many were dropped."""
        with self._lock:
            ops = self._ops.setdefault(name.lower(), OperationState())
            dropped = min(count, ops.phantom)
            ops.phantom -= dropped
            if ops.phantom == 0 and not ops.in_flight:
                ops.launch_error = None
            return dropped

    def set_capacity_view(self, name: str, capacity: int) -> None:
        """Record a capacity this process just set and ARM completed synchronously."""
        with self._lock:
            record = self.get(name)
            if record is not None:
                record.description = _with_capacity(record.description, capacity)


def _with_capacity(desc: VmssDescription, capacity: int) -> VmssDescription:
    from dataclasses import replace

    return replace(desc, capacity=capacity)


def unknown_sku_message(desc: VmssDescription) -> str:
    return (
        f"VMSS {desc.name!r}: field sku.name={desc.sku_name!r} is not a known VM size; "
        "expected a size of the bundled table or, with enableDynamicInstanceList=true, one "
        f"the Resource SKUs API lists in {desc.location!r} (scale from zero is not possible)"
    )
