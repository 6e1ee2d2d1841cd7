"""The `machineapi` cloud provider: MachineSets and MachineDeployments as node groups.

Sizes are changed through the scale subresource, each change reading it first; the target
size between changes is the `spec.replicas` of the (watched) object. Scale-down marks the chosen
Machine with the delete-machine annotation before lowering replicas, so that the
MachineSet controller removes exactly that machine; the mark is taken back if the resize
fails. Nothing else about a Machine is ever changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from clusterscaler.api import (
    CloudProviderError,
    ConfigurationError,
    Instance,
    InstanceErrorClass,
    InstanceErrorInfo,
    InstanceState,
    NodeGroupOptions,
    ProviderDefaults,
    checked_delete,
    checked_increase,
)

from clusterscaler_machineapi import PROVIDER_NAME
from clusterscaler_machineapi.apigroups import DEFAULT_ARCH, PLURALS, ApiGroup
from clusterscaler_machineapi.discovery import DiscoverySpec
from clusterscaler_machineapi.infrastructure import TemplateLookup
from clusterscaler_machineapi.kubeapi import KubeApi
from clusterscaler_machineapi.listings import DirectListings, ListingSource
from clusterscaler_machineapi.objects import Machine, ScalableResource
from clusterscaler_machineapi.settings import group_options
from clusterscaler_machineapi.snapshot import (
    GroupRecord,
    Problem,
    Snapshot,
    build_snapshot,
    instance_id,
)
from clusterscaler_machineapi.template import CannotScaleFromZeroError, build_template_node_info

if TYPE_CHECKING:
    from clusterscaler.api import Node, NodeInfo

log = structlog.get_logger()

GPU_LABEL = "cluster-api/accelerator"
PROVISIONING_FAILED = "ProvisioningFailed"


class MachineApiNodeGroup:
    """One MachineSet or MachineDeployment, as seen at the last refresh."""

    def __init__(self, provider: MachineApiCloudProvider, record: GroupRecord) -> None:
        self._provider = provider
        self._record = record
        self._target: int | None = None
        # Machines marked and paid for by a decrement since the last refresh; the
        # snapshot does not show their mark yet.
        self._decremented: set[str] = set()

    @property
    def resource(self) -> ScalableResource:
        return self._record.resource

    @property
    def id(self) -> str:
        return self._record.resource.id

    @property
    def min_size(self) -> int:
        return self._record.limits.min_size

    @property
    def max_size(self) -> int:
        return self._record.limits.max_size

    # ------------------------------------------------------------------ sizes

    def _api_args(self) -> tuple[str, str, str, str, str]:
        r = self.resource
        return (r.api.group, r.api.version, PLURALS[r.kind], r.namespace, r.name)

    def _read_replicas(self) -> int:
        try:
            replicas = self._provider.api.get_scale(*self._api_args())
        except CloudProviderError as exc:
            raise CloudProviderError(f"{self.id}: reading the scale subresource failed: {exc}") from exc
        self._target = replicas
        return replicas

    def _write_replicas(self, replicas: int) -> int:
        try:
            written = self._provider.api.set_scale(*self._api_args(), replicas)
        except CloudProviderError as exc:
            self._target = None
            raise CloudProviderError(
                f"{self.id}: setting replicas to {replicas} through the scale subresource "
                f"failed: {exc}"
            ) from exc
        self._target = written
        return written

    def target_size(self) -> int:
        """`spec.replicas` as of the last refresh, or as the last scale write answered.

        That is the field the scale subresource reads and writes. Taking it from the
        (watched) object costs no request per group and loop; every change reads the scale
        subresource afresh before writing.
        """
        if self._target is None:
            return self.resource.replicas
        return self._target

    def increase_size(self, delta: int) -> None:
        with self._provider.write_lock:
            self._increase_size(delta)

    def _increase_size(self, delta: int) -> None:
        wanted = checked_increase(self.id, self._read_replicas(), delta, self.max_size)
        self._write_replicas(wanted)
        log.info("scale_up", node_group=self.id, delta=delta, replicas=wanted)

    # ------------------------------------------------------------------ marking machines

    def _mark(self, machine: Machine) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._patch_machine(machine, dict.fromkeys(machine.api.delete_machine_keys, stamp))

    def _unmark(self, machine: Machine) -> None:
        try:
            self._patch_machine(machine, dict.fromkeys(machine.api.delete_machine_keys))
        except CloudProviderError as exc:
            # The resize failed and so did taking the mark back: the next scale-down of
            # this group (by anyone) would remove this machine first. Say so loudly.
            log.error(
                "machineapi_unmark_failed",
                node_group=self.id,
                machine=machine.key,
                error=str(exc),
            )

    def _patch_machine(self, machine: Machine, annotations: dict[str, str | None]) -> None:
        api = machine.api
        try:
            self._provider.api.patch_annotations(
                api.group, api.version, PLURALS["Machine"], machine.namespace, machine.name, annotations
            )
        except CloudProviderError as exc:
            raise CloudProviderError(
                f"{self.id}: annotating {machine.ref} failed: {exc}"
            ) from exc

    def _machines_to_delete(self, nodes: Sequence[Node]) -> tuple[list[Machine], list[Node]]:
        """The Machines of `nodes`, and the nodes of this MachinePool that have none."""
        snapshot = self._provider.snapshot
        out: dict[str, Machine] = {}
        bare: dict[str, Node] = {}
        for node in nodes:
            machine = snapshot.machine_for_node(node)
            if machine is None:
                if snapshot.pool_group_of_node(node) == self.id:
                    bare[node.name] = node
                    continue
                raise CloudProviderError(
                    f"{self.id}: node {node.name} (providerID {node.provider_id!r}) has no "
                    "Machine; nothing was deleted"
                )
            owner = snapshot.group_id_of(machine)
            if owner != self.id:
                raise CloudProviderError(
                    f"{self.id}: node {node.name} ({machine.ref}) belongs to "
                    f"{owner or 'no node group'}; nothing was deleted"
                )
            out[machine.key] = machine
        return list(out.values()), list(bare.values())

    def _is_marked(self, machine: Machine) -> bool:
        if machine.key in self._decremented:
            return True
        return any(key in machine.annotations for key in machine.api.delete_machine_keys)

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        with self._provider.write_lock:
            self._delete_nodes(nodes)

    def _delete_nodes(self, nodes: Sequence[Node]) -> None:
        if not nodes:
            return
        machines, bare = self._machines_to_delete(nodes)
        replicas = self._read_replicas()
        # Machines the controller still has to remove for an earlier decrement: a marked
        # machine among them was already paid for, and decrementing again would take an
        # extra machine with it.
        surplus = sum(1 for m in self._record.machines if not m.deleting) - replicas
        to_delete = []
        for machine in machines:
            if machine.deleting:
                log.info("machineapi_already_deleting", node_group=self.id, machine=machine.key)
            elif surplus > 0 and self._is_marked(machine):
                surplus -= 1
                log.info("machineapi_already_marked", node_group=self.id, machine=machine.key)
            else:
                to_delete.append(machine)
        if not to_delete and not bare:
            return
        checked_delete(self.id, replicas, len(to_delete) + len(bare), self.min_size)
        for machine in to_delete:
            self._mark(machine)
            try:
                current = self._read_replicas()
                if current - 1 < self.min_size:
                    raise CloudProviderError(
                        f"{self.id}: replicas changed to {current} meanwhile; deleting "
                        f"{machine.ref} would go below the min size {self.min_size}"
                    )
                self._write_replicas(current - 1)
            except CloudProviderError:
                self._unmark(machine)
                raise
            self._decremented.add(machine.key)
            log.info(
                "scale_down",
                node_group=self.id,
                machine=machine.key,
                node=machine.node_name,
                replicas=current - 1,
            )
        for node in bare:
            # A MachinePool instance without a Machine cannot be marked: lowering replicas
            # lets the pool's infrastructure provider choose the instance to remove, as
            # upstream does.
            current = self._read_replicas()
            if current - 1 < self.min_size:
                raise CloudProviderError(
                    f"{self.id}: replicas changed to {current} meanwhile; deleting node "
                    f"{node.name} would go below the min size {self.min_size}"
                )
            self._write_replicas(current - 1)
            log.warning(
                "scale_down_pool_instance_without_machine",
                node_group=self.id,
                node=node.name,
                replicas=current - 1,
            )

    def decrease_target_size(self, delta: int) -> None:
        """Cancel `-delta` machines that never became nodes.

        The chosen machines are marked for deletion first, failed ones before pending
        ones, so the controller cannot pick a machine that already runs a node instead.
        """
        if delta >= 0:
            raise CloudProviderError(f"{self.id}: size decrease must be negative, got {delta}")
        with self._provider.write_lock:
            self._decrease_target_size(delta)

    def _decrease_target_size(self, delta: int) -> None:
        replicas = self._read_replicas()
        record = self._provider.current_record(self)
        machines = list(record.machines)
        # A MachinePool's instances without Machines count as nodes, as upstream.
        with_nodes = len([m for m in machines if m.node_name and not m.deleting])
        with_nodes += len(record.pool_instances)
        if replicas + delta < with_nodes:
            raise CloudProviderError(
                f"{self.id}: decreasing the target size by {-delta} would delete existing "
                f"nodes (target {replicas}, nodes {with_nodes})"
            )
        nodeless = [m for m in machines if not m.node_name and not m.deleting]
        nodeless.sort(key=lambda m: (not m.failed, m.name))
        chosen = nodeless[:-delta]
        marked: list[Machine] = []
        try:
            for machine in chosen:
                self._mark(machine)
                marked.append(machine)
            self._write_replicas(replicas + delta)
        except CloudProviderError:
            for machine in marked:
                self._unmark(machine)
            raise
        log.info(
            "decrease_target_size",
            node_group=self.id,
            delta=delta,
            replicas=replicas + delta,
            machines=[m.key for m in chosen],
        )

    # ------------------------------------------------------------------ instances

    def nodes(self) -> Sequence[Instance]:
        out = []
        for machine in self._record.machines:
            if machine.deleting:
                out.append(Instance(instance_id(machine), InstanceState.DELETING))
            elif machine.failed:
                detail = machine.failure_message or machine.failure_reason or "phase Failed"
                out.append(
                    Instance(
                        instance_id(machine),
                        InstanceState.CREATING,
                        InstanceErrorInfo(
                            error_class=InstanceErrorClass.OTHER,
                            error_code=PROVISIONING_FAILED,
                            error_message=f"{machine.ref} failed: {detail}",
                        ),
                    )
                )
            elif machine.provider_id and machine.node_name:
                out.append(Instance(machine.provider_id, InstanceState.RUNNING))
            else:
                out.append(Instance(instance_id(machine), InstanceState.CREATING))
        for provider_id in self._record.pool_instances:
            out.append(Instance(provider_id, InstanceState.RUNNING))
        return out

    def template_node_info(self) -> NodeInfo:
        record = self._record
        provider = self._provider
        template = record.template
        error: Exception | None = None
        if not record.template_read and provider.templates is not None:
            # Groups that cannot go to zero have their template read only when asked.
            try:
                template = provider.templates(record.source)
            except (ConfigurationError, CloudProviderError) as exc:
                error = exc
        try:
            return build_template_node_info(
                self.resource, template, source=record.source, default_arch=provider.default_arch
            )
        except CannotScaleFromZeroError as exc:
            if error is not None:
                raise ConfigurationError(f"{exc}; reading the template failed: {error}") from exc
            raise

    def exist(self) -> bool:
        return self.id in self._provider.snapshot.groups

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        return group_options(self.resource, defaults)

    def scale_down_blocked(self) -> str | None:
        """Why no node may be removed now: a MachineDeployment rolling out (as upstream,
        whose deployment controller is replacing these machines anyway), else None."""
        return self._record.rollout or None

    def debug(self) -> str:
        text = (
            f"{self.id} (min: {self.min_size}, max: {self.max_size}, "
            f"replicas: {self.resource.replicas}, machines: {len(self._record.machines)})"
        )
        if self._record.rollout:
            text += f"; scale-down blocked: {self._record.rollout}"
        for problem in self._provider.snapshot.problems_of(self.id):
            text += f"; {problem.reason}: {problem.message}"
        return text

    def __repr__(self) -> str:
        return f"MachineApiNodeGroup({self.id!r})"


class MachineApiCloudProvider(ProviderDefaults):
    """Node groups from the Machine API objects of one cluster."""

    PROVIDER_NAME = PROVIDER_NAME
    GPU_LABEL = GPU_LABEL

    def __init__(
        self,
        api: KubeApi,
        apis: Sequence[ApiGroup],
        specs: Sequence[DiscoverySpec] = (),
        *,
        source: ListingSource | None = None,
        on_problem: Callable[[Problem], None] | None = None,
        templates: TemplateLookup | None = None,
        default_arch: str = DEFAULT_ARCH,
        owned_client: Any = None,
    ) -> None:
        if not apis:
            raise CloudProviderError("machineapi provider: no Machine API group to watch")
        self.api = api
        self.apis = tuple(apis)
        self.specs = tuple(specs)
        self.direct = DirectListings(api, self.apis, self.specs)
        self.source: ListingSource = source if source is not None else self.direct
        self.snapshot = Snapshot(apis=self.apis)
        # Reads infrastructure machine templates (Cluster API scale from zero).
        self.templates = templates
        self.default_arch = default_arch
        # The management cluster's client, when the provider made one: closed on cleanup.
        self._owned_client = owned_client
        self._groups: dict[str, MachineApiNodeGroup] = {}
        self._reported: dict[tuple[str, str], str] = {}
        self._on_problem = on_problem
        # Replicas are read, checked and written in steps; one writer at a time keeps two
        # scale-downs from computing their new size from the same old one.
        self.write_lock = threading.RLock()

    # ------------------------------------------------------------------ refresh

    def refresh(self) -> None:
        try:
            listings = self.source.listings()
        except CloudProviderError as exc:
            raise CloudProviderError(f"machineapi provider: {exc}") from exc
        snapshot = build_snapshot(listings, self.specs, self.templates)
        self.snapshot = snapshot
        self._groups = {
            rid: MachineApiNodeGroup(self, record) for rid, record in snapshot.groups.items()
        }
        self._report(snapshot.problems)
        log.debug(
            "machineapi_refreshed",
            node_groups=list(self._groups),
            machines=len(snapshot.machines),
            problems=len(snapshot.problems),
        )

    def _report(self, problems: Sequence[Problem]) -> None:
        current = {(p.node_group, p.reason): p.message for p in problems}
        for problem in problems:
            key = (problem.node_group, problem.reason)
            # Log a problem when it appears or changes, not on every loop.
            if self._reported.get(key) != problem.message:
                log.error(
                    "machineapi_node_group_problem",
                    node_group=problem.node_group,
                    reason=problem.reason,
                    message=problem.message,
                )
                if self._on_problem is not None:
                    self._on_problem(problem)
        for key in set(self._reported) - set(current):
            log.info("machineapi_node_group_problem_resolved", node_group=key[0], reason=key[1])
        self._reported = current

    def problems(self) -> list[Problem]:
        """What is wrong with individual resources at the last refresh (status, `explain`)."""
        return list(self.snapshot.problems)

    def current_record(self, group: MachineApiNodeGroup) -> GroupRecord:
        """The group's Machines (and pool instances) as they are now, not as of the last
        refresh."""
        resource = group.resource
        try:
            listing = self.direct.listing(resource.api, [resource.namespace])
        except CloudProviderError as exc:
            raise CloudProviderError(f"{group.id}: {exc}") from exc
        record = build_snapshot([listing], self.specs).groups.get(group.id)
        if record is None:
            raise CloudProviderError(
                f"{group.id}: no longer a node group (deleted, or its size annotations were "
                "removed or became invalid)"
            )
        return record

    # ------------------------------------------------------------------ CloudProvider

    def node_groups(self) -> Sequence[MachineApiNodeGroup]:
        return list(self._groups.values())

    def node_group_for_node(self, node: Node) -> MachineApiNodeGroup | None:
        machine = self.snapshot.machine_for_node(node)
        if machine is None:
            pool = self.snapshot.pool_group_of_node(node)
            return self._groups.get(pool) if pool else None
        group_id = self.snapshot.group_id_of(machine)
        return self._groups.get(group_id) if group_id else None

    def has_instance(self, node: Node) -> bool:
        """False only when the node names a Machine that is gone.

        A node this provider cannot place (no Machine matches its providerID and it names
        none) may be a control-plane or hand-made node: it is assumed to exist, since
        "gone" would let the autoscaler treat it as deleted.
        """
        if self.snapshot.machine_for_node(node) is not None:
            return True
        if self.snapshot.pool_group_of_node(node) is not None:
            return True
        return not self.snapshot.names_missing_machine(node)

    def cleanup(self) -> None:
        """Stop the watches (and close the management cluster's client)."""
        self.source.close()
        if self._owned_client is not None:
            self._owned_client.close()
            self._owned_client = None
        log.debug("machineapi_cleanup")

