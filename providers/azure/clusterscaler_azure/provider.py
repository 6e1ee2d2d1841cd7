"""The `azure` cloud provider: Virtual Machine Scale Sets as node groups.

Scaling up sets the scale set's `sku.capacity` (a long-running operation, polled in the
background); scaling down deletes the named VMs with deleteInstances, which lowers the
capacity with them. The group's limits are enforced here before any call, and the target
moves only once ARM accepted the operation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta

import structlog
from clusterscaler.api import (
    CachedNodeGroup,
    CloudProviderError,
    ConfigurationError,
    Instance,
    InstanceCreationError,
    Node,
    NodeGroupOptions,
    NodeInfo,
    ProviderDefaults,
    ProviderProblem,
    checked_delete,
    checked_increase,
    problems_by_group,
)

from clusterscaler_azure import PROVIDER_NAME, ids
from clusterscaler_azure.errors import error_class, instance_error
from clusterscaler_azure.service import ArmError, ArmService, Operation
from clusterscaler_azure.skus import SkuCatalogue
from clusterscaler_azure.template import GPU_LABEL, TemplateInput, build_template_node_info
from clusterscaler_azure.vmss_cache import (
    VmssCache,
    VmssRecord,
    is_placeholder,
    unknown_sku_message,
)

log = structlog.get_logger()

# Clocks of ARM, the API server and this process may disagree by this much.
LIST_SKEW = timedelta(seconds=60)


class AzureNodeGroup(CachedNodeGroup[VmssRecord]):
    """One scale set. Reads go through the provider's cache; writes call ARM and update it."""

    def __init__(self, provider: AzureCloudProvider, name: str) -> None:
        self._provider = provider
        self._name = name

    @property
    def _cache(self) -> VmssCache:
        return self._provider.cache

    def lookup(self) -> VmssRecord | None:
        return self._cache.get(self._name)

    def describe(self) -> str:
        return f"VMSS {self._name!r}"

    @property
    def id(self) -> str:
        return self._name

    def target_size(self) -> int:
        self.record()
        return self._cache.target(self._name)

    def increase_size(self, delta: int) -> None:
        record = self.record()
        ops = self._cache.operation_state(self._name)
        if ops.phantom:
            raise CloudProviderError(
                f"VMSS {self._name!r}: {ops.phantom} instance(s) of a failed scale-up are not "
                "cleaned up yet; not scaling up again before they are"
            )
        new_size = checked_increase(
            f"VMSS {self._name!r}", self._cache.target(self._name), delta, record.max_size
        )
        self._set_capacity(record, new_size, reason="scale_up", delta=delta)

    def _set_capacity(self, record: VmssRecord, new_size: int, *, reason: str, delta: int) -> Operation:
        name = record.name

        def done(error: ArmError | None) -> None:
            self._cache.end_operation(name, error, requested=new_size)
            if error is None:
                log.info("azure_capacity_updated", node_group=name, capacity=new_size)
            else:
                log.warning(
                    "azure_capacity_update_failed",
                    node_group=name,
                    capacity=new_size,
                    error_code=error.code,
                    error_class=error_class(error.code, str(error)).value,
                    error=str(error),
                )

        # Booked before the call: the operation may end (and its callback run) before the
        # call returns. Taken back when ARM refuses it.
        previous = self._cache.begin_operation(name, new_size)
        try:
            operation = self._provider.service.begin_set_capacity(record.description, new_size, done)
        except ArmError as exc:
            self._cache.abandon_operation(name, previous)
            # Whatever ARM did before failing, the next refresh reads it back.
            self._cache.invalidate(name)
            info = instance_error(exc.code, str(exc))
            log.warning("azure_capacity_update_refused", node_group=name, capacity=new_size,
                        error_code=exc.code, error_class=info.error_class.value)
            # Classified, so that SkuNotAvailable or a quota backs the group off as
            # OutOfResources and scale-up turns to another group at once.
            raise InstanceCreationError(
                f"VMSS {name!r}: ARM refused the capacity update to {new_size} "
                f"({info.error_class.value}): {exc}",
                info,
            ) from exc
        self._provider.track(operation)
        log.info(f"azure_{reason}", node_group=name, delta=delta, target=new_size)
        return operation

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        self._delete(nodes, force=False)

    def force_delete_nodes(self, nodes: Sequence[Node]) -> None:
        """`delete_nodes` even below the scale set's min size (as CA's ScaleSet does for
        --force-delete-unregistered-nodes and --force-delete-failed-nodes): the VMs are
        broken or not nodes at all, and the scale set brings the count back up."""
        self._delete(nodes, force=True)

    def _delete(self, nodes: Sequence[Node], *, force: bool) -> None:
        record = self.record()
        name = record.name
        listed = {ids.key(vm.provider_id): vm for vm in self._cache.vms(name)}
        ops = self._cache.operation_state(name)
        real: list[tuple[str, str]] = []  # (provider ID, instance ID)
        placeholders = 0
        for node in nodes:
            pid = node.provider_id
            if not pid or self._provider.cache.vmss_for(pid) != name:
                raise CloudProviderError(
                    f"VMSS {name!r}: node {node.name!r} (providerID {pid!r}) does not belong "
                    "to this scale set"
                )
            if is_placeholder(pid):
                placeholders += 1
                continue
            vm = listed.get(ids.key(pid))
            if vm is None:
                # Known by its ID only: never delete what the last VM list did not show.
                raise CloudProviderError(
                    f"VMSS {name!r}: node {node.name!r} (providerID {pid!r}) is not among the "
                    "scale set's VMs as last listed; not deleting it"
                )
            if ids.key(pid) in ops.deleting or vm.provisioning_state.lower() == "deleting":
                continue
            real.append((pid, vm.instance_id))
        target = self._cache.target(name)
        if placeholders:
            self._drop_placeholders(record, placeholders)
            target = self._cache.target(name)
        if not real:
            return
        if not force:
            checked_delete(f"VMSS {name!r}", target, len(real), record.min_size)
        provider_ids = [pid for pid, _ in real]
        instance_ids = [iid for _, iid in real]

        def done(error: ArmError | None) -> None:
            self._cache.end_operation(name, error, deleting=provider_ids)
            if error is None:
                log.info("azure_instances_deleted", node_group=name, instances=instance_ids)
            else:
                log.error("azure_delete_instances_failed", node_group=name,
                          instances=instance_ids, error_code=error.code, error=str(error))

        # The target drops with the booking, which is taken back when ARM refuses the
        # deletion: it stays down only once the cloud accepted it.
        new_base = self._cache.base_capacity(name) - len(real)
        previous = self._cache.begin_operation(name, new_base, deleting=provider_ids)
        try:
            operation = self._provider.service.begin_delete_instances(
                record.description, instance_ids, done,
                force=self._provider.service.config.enable_force_delete,
            )
        except ArmError as exc:
            self._cache.abandon_operation(name, previous, deleting=provider_ids)
            self._cache.invalidate(name)
            raise CloudProviderError(f"VMSS {name!r}: ARM refused the deletion: {exc}") from exc
        self._provider.track(operation)
        log.info("azure_delete_instances", node_group=name, instances=instance_ids,
                 target=self._cache.target(name))

    def _drop_placeholders(self, record: VmssRecord, count: int) -> None:
        """Capacity that never became VMs: failed requests are forgotten, capacity ARM
        still holds is lowered (never below what exists, never below min)."""
        dropped = self._cache.drop_phantoms(record.name, count)
        rest = count - dropped
        if rest <= 0:
            return
        self._lower_capacity(record, rest, clamp_to_min=True)

    def _lower_capacity(self, record: VmssRecord, count: int, *, clamp_to_min: bool) -> None:
        name = record.name
        # A fresh list: lowering the capacity below the VMs that exist would make Azure
        # pick VMs to delete, and nothing is deleted on a guess.
        self._cache.refresh_vms(name)
        live = len(self._cache.live_vms(name))
        base = self._cache.base_capacity(name)
        new_size = base - count
        floor = max(live, record.min_size) if clamp_to_min else live
        if new_size < floor:
            if clamp_to_min and base > floor:
                new_size = floor
            else:
                raise CloudProviderError(
                    f"VMSS {name!r}: cannot lower the capacity to {new_size}: {live} VM(s) exist "
                    f"and min is {record.min_size}; only requested capacity can be cancelled "
                    f"({max(0, base - live)} not created)"
                )
        if new_size == base:
            return
        self._set_capacity(record, new_size, reason="cancel_requested", delta=new_size - base)

    def decrease_target_size(self, delta: int) -> None:
        if delta >= 0:
            raise ValueError(
                f"VMSS {self._name!r}: decrease_target_size delta must be negative, got {delta}"
            )
        record = self.record()
        wanted = -delta
        target = self._cache.target(self._name)
        if target + delta < record.min_size:
            raise CloudProviderError(
                f"VMSS {self._name!r}: cannot decrease the target to {target + delta}, "
                f"below min {record.min_size}"
            )
        dropped = self._cache.drop_phantoms(self._name, wanted)
        if wanted - dropped > 0:
            self._lower_capacity(record, wanted - dropped, clamp_to_min=False)
        log.info("azure_decrease_target_size", node_group=self._name, delta=delta,
                 target=self._cache.target(self._name))

    def nodes(self) -> Sequence[Instance]:
        self.record()
        return self._cache.instances(self._name)

    def template_node_info(self) -> NodeInfo:
        record = self.record()
        tags = record.template_tags
        if tags.errors:
            # Bad tags would give a wrong template; refusing makes the autoscaler skip this
            # scale set for scale-from-zero instead of launching nodes pods cannot use.
            raise ConfigurationError("; ".join(str(e) for e in tags.errors))
        desc = record.description
        sku = self._provider.catalogue.get(desc.sku_name, desc.location)
        if sku is None:
            raise ConfigurationError(unknown_sku_message(desc))
        return build_template_node_info(TemplateInput(vmss=desc, sku=sku, tags=tags))

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        # Only the overrides of the tags: the core lays them over the flags.
        return self.record().options

    def debug_details(self, record: VmssRecord) -> str:
        return f", {record.description.sku_name}"

    def debug_problems(self, record: VmssRecord) -> Sequence[object]:
        return record.problems


class AzureCloudProvider(ProviderDefaults):
    """Scale sets found by `--nodes` and `--node-group-auto-discovery=label:...`."""

    PROVIDER_NAME = PROVIDER_NAME
    GPU_LABEL = GPU_LABEL

    def __init__(
        self,
        service: ArmService,
        cache: VmssCache,
        catalogue: SkuCatalogue,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = service
        self.cache = cache
        self.catalogue = catalogue
        self._clock = clock
        self._groups: dict[str, AzureNodeGroup] = {}
        self._operations: list[Operation] = []

    def node_groups(self) -> Sequence[AzureNodeGroup]:
        return [self._group(record.name) for record in self.cache.records()]

    def _group(self, name: str) -> AzureNodeGroup:
        group = self._groups.get(name.lower())
        if group is None or group.id != name:
            group = self._groups[name.lower()] = AzureNodeGroup(self, name)
        return group

    def node_group_for_node(self, node: Node) -> AzureNodeGroup | None:
        name = self.cache.vmss_for(node.provider_id) if node.provider_id else None
        return None if name is None else self._group(name)

    def has_instance(self, node: Node) -> bool:
        ref = ids.parse_provider_id(node.provider_id) if node.provider_id else None
        if ref is None:
            # Not an Azure VM (or no providerID yet): never claim it is gone.
            return True
        if self.cache.is_listed(node.provider_id):
            return True
        name = self.cache.vmss_for(node.provider_id)
        if name is None:
            # Not a managed scale set's VM: this provider cannot tell.
            return True
        # A node may be newer than the last list of its scale set: then the list is read
        # again before the VM is said to be gone. A node older than the list that the list
        # does not show is gone without another call.
        listed_at = self.cache.vms_listed_at(name)
        created = node.creation_time
        if listed_at is None or created is None or created >= listed_at - LIST_SKEW:
            self.cache.refresh_vms(name)
            if self.cache.vms_listed_at(name) == listed_at:
                # The list could not be read: never claim the VM is gone on a guess.
                return True
        return self.cache.is_listed(node.provider_id)

    def refresh(self) -> None:
        self._operations = [op for op in self._operations if not op.done.is_set()]
        self.cache.refresh()

    def cleanup(self) -> None:
        self._groups.clear()
        self.service.close()

    def track(self, operation: Operation) -> None:
        self._operations.append(operation)

    def wait_for_operations(self, timeout: float) -> bool:
        """Wait until the operations started by this process ended (tests, shutdown)."""
        deadline = self._clock() + timeout
        for operation in list(self._operations):
            if not operation.wait(max(0.0, deadline - self._clock())):
                return False
        return True

    def errors(self) -> dict[str, tuple[str, ...]]:
        """Problems per scale set found at the last refresh (bad tags, missing limits, ...)."""
        return dict(self.cache.problems())

    def problems(self) -> list[ProviderProblem]:
        """The same problems in the core's shape, for the status ConfigMap and `explain`."""
        return problems_by_group(self.errors(), "InvalidScaleSet")
