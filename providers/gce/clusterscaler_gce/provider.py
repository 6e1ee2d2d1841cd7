"""The `gce` cloud provider: Managed Instance Groups as node groups.

Scaling goes through instanceGroupManagers.resize (the MIG's target size is the truth) and
deleteInstances with the instances' URLs, both waited for. The limits are enforced here
before any call. Instances that never came are cancelled by resizing down to the instances
that exist, listed afresh just before, so that no instance is deleted by a resize.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import fields

import structlog
from clusterscaler.api import (
    CachedNodeGroup,
    CloudProviderError,
    ConfigurationError,
    Instance,
    Node,
    NodeGroupMemo,
    NodeGroupOptions,
    NodeInfo,
    PricingModel,
    ProviderDefaults,
    ProviderProblem,
    TtlCache,
    checked_delete,
    checked_increase,
)

from clusterscaler_gce import PROVIDER_NAME
from clusterscaler_gce.compute import ComputeService, chunks
from clusterscaler_gce.machine_types import MachineTypeCatalogue
from clusterscaler_gce.mig_cache import MigCache, MigRecord
from clusterscaler_gce.pricing import GcePriceModel
from clusterscaler_gce.refs import InstanceRef, MigRef, parse_provider_id
from clusterscaler_gce.template import GPU_LABEL, TemplateInput, build_template_node_info

log = structlog.get_logger()

# deleteInstances takes at most 1000 instances per call.
DELETE_BATCH = 1000
# "Does this instance still exist" is reused for a minute.
INSTANCE_TTL = 60.0


class GceNodeGroup(CachedNodeGroup[MigRecord]):
    """One MIG. Reads go through the provider's cache; writes call GCE and update it."""

    def __init__(self, provider: GceCloudProvider, ref: MigRef) -> None:
        self._provider = provider
        self.ref = ref

    gone_reason = "could not be read"

    def lookup(self) -> MigRecord | None:
        return self._provider.cache.get(self.ref)

    def describe(self) -> str:
        return f"MIG {self.ref}"

    @property
    def id(self) -> str:
        return self.ref.url

    def target_size(self) -> int:
        return self.record().target_size

    def increase_size(self, delta: int) -> None:
        record = self.record()
        size = checked_increase(f"MIG {self.ref}", record.target_size, delta, record.max_size)
        try:
            self._provider.service.resize(self.ref, size)
        except CloudProviderError:
            # The resize may or may not have reached GCE: the next refresh reads the truth.
            self._provider.cache.invalidate(self.ref)
            raise
        self._provider.cache.set_target(self.ref, size)
        log.info("gce_scale_up", node_group=self.id, delta=delta, target=size)

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        self._delete(nodes, force=False)

    def force_delete_nodes(self, nodes: Sequence[Node]) -> None:
        """`delete_nodes` even below the MIG's min size (as CA's MIGs do for
        --force-delete-unregistered-nodes and --force-delete-failed-nodes): the instances
        are broken or not nodes at all."""
        self._delete(nodes, force=True)

    def _delete(self, nodes: Sequence[Node], *, force: bool) -> None:
        if not nodes:
            return
        record = self.record()
        listed = {i.ref: i for i in record.instances}
        targets: list[InstanceRef] = []
        for node in nodes:
            ref = parse_provider_id(node.provider_id)
            if ref is None or ref not in listed:
                # The listing may predate the instance: look again before refusing.
                record = self._provider.cache.fresh_instances(self.ref)
                listed = {i.ref: i for i in record.instances}
            if ref is None or ref not in listed:
                raise CloudProviderError(
                    f"MIG {self.ref}: node {node.name!r} (providerID {node.provider_id!r}) does "
                    "not belong to this MIG; nothing was deleted"
                )
            if listed[ref].current_action in ("DELETING", "ABANDONING"):
                continue
            if ref not in targets:
                targets.append(ref)
        if not targets:
            return
        size = record.target_size - len(targets)
        if not force:
            checked_delete(f"MIG {self.ref}", record.target_size, len(targets), record.min_size)
        done = 0
        try:
            for batch in chunks(targets, DELETE_BATCH):
                self._provider.service.delete_instances(self.ref, batch)
                done += len(batch)
        finally:
            self._provider.cache.mark_deleting(self.ref, targets[:done], record.target_size - done)
        log.info("gce_instances_deleted", node_group=self.id, instances=[t.name for t in targets], target=size)

    def decrease_target_size(self, delta: int) -> None:
        if delta >= 0:
            raise ValueError(f"MIG {self.ref}: decrease_target_size delta must be negative, got {delta}")
        # A resize below the instances that exist would delete some: count them afresh.
        record = self._provider.cache.fresh_instances(self.ref)
        size = record.target_size + delta
        existing = len(record.live_instances())
        if size < existing:
            raise CloudProviderError(
                f"MIG {self.ref}: cannot decrease the target size to {size}: {existing} instance(s) "
                f"exist and only requested capacity can be cancelled ({record.target_size - existing} not created)"
            )
        if size < record.min_size:
            raise CloudProviderError(f"MIG {self.ref}: cannot decrease the target size to {size}, below min {record.min_size}")
        try:
            self._provider.service.resize(self.ref, size)
        except CloudProviderError:
            self._provider.cache.invalidate(self.ref)
            raise
        self._provider.cache.set_target(self.ref, size)
        log.info("gce_decrease_target_size", node_group=self.id, delta=delta, target=size)

    def nodes(self) -> Sequence[Instance]:
        return self.record().core_instances

    def template_node_info(self) -> NodeInfo:
        return self._provider.template_for(self.record())

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        overrides = self.record().options
        if overrides is None:
            return None
        merged = {
            f.name: getattr(overrides, f.name) if getattr(overrides, f.name) is not None else getattr(defaults, f.name)
            for f in fields(NodeGroupOptions)
        }
        return NodeGroupOptions(**merged)


class GceCloudProvider(ProviderDefaults):
    """MIGs found by `--nodes` and `--node-group-auto-discovery=mig:namePrefix=`."""

    PROVIDER_NAME = PROVIDER_NAME
    GPU_LABEL = GPU_LABEL

    def __init__(
        self,
        service: ComputeService,
        cache: MigCache,
        *,
        pricing: GcePriceModel | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = service
        self.cache = cache
        self.machine_types = MachineTypeCatalogue(service.get_machine_type, clock=clock)
        self._pricing = pricing or GcePriceModel()
        self._clock = clock
        self._groups: NodeGroupMemo[MigRef, GceNodeGroup] = NodeGroupMemo(lambda ref: GceNodeGroup(self, ref))
        self._templates: dict[tuple[MigRef, str, str], NodeInfo] = {}
        self._instances: TtlCache[bool] = TtlCache(INSTANCE_TTL, clock)
        self._lock = threading.Lock()

    def node_groups(self) -> Sequence[GceNodeGroup]:
        return [self._group(record.ref) for record in self.cache.records()]

    def _group(self, ref: MigRef) -> GceNodeGroup:
        return self._groups.get(ref)

    def node_group_for_node(self, node: Node) -> GceNodeGroup | None:
        ref = parse_provider_id(node.provider_id)
        if ref is None:
            return None
        mig = self.cache.group_of(ref)
        return None if mig is None else self._group(mig)

    def has_instance(self, node: Node) -> bool:
        ref = parse_provider_id(node.provider_id)
        if ref is None or self.cache.group_of(ref) is not None:
            # Not a GCE instance (or no providerID yet): never claim it is gone.
            return True
        try:
            return self._instances.get_or(ref, lambda: self.service.instance_exists(ref))
        except CloudProviderError as exc:
            log.warning("gce_instance_check_failed", node=node.name, error=str(exc))
            return True

    def pricing(self) -> PricingModel | None:
        return self._pricing

    def refresh(self) -> None:
        self.cache.refresh()

    def cleanup(self) -> None:
        self.cache.close()
        self._groups.clear()

    def problems(self) -> list[ProviderProblem]:
        """Problems per MIG (or discovery spec) found at the last refresh."""
        return self.cache.problems()

    def template_for(self, record: MigRecord) -> NodeInfo:
        desc = record.description
        if not desc.zones:
            raise ConfigurationError(f"MIG {record.ref}: no zone to place new instances in; expected distributionPolicy.zones")
        zone = desc.zones[0]
        key = (record.ref, desc.instance_template, zone)
        with self._lock:
            cached = self._templates.get(key)
        if cached is not None:
            return cached
        template = self.cache.template(desc.instance_template)
        source = f"MIG {record.ref} instance template {template.name!r}"
        if not template.machine_type:
            raise ConfigurationError(f"{source}: no machine type; expected properties.machineType")
        machine = self.machine_types.get(record.ref.project, zone, template.machine_type, source)
        info = build_template_node_info(
            TemplateInput(mig=record.ref, zone=zone, template=template, machine_type=machine)
        )
        with self._lock:
            self._templates = {k: v for k, v in self._templates.items() if k[0] != record.ref}
            self._templates[key] = info
        return info
