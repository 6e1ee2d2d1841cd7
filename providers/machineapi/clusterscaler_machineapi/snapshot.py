"""One consistent view of the Machine API objects, built once per refresh.

`build_snapshot` is a pure function of the listed objects: it decides which scalable
resources are node groups, maps Machines to them through controller owner references
(uids checked) and indexes Machines for node lookups. Problems with one resource are
recorded as `Problem`s and never stop the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.api import CloudProviderError, ConfigurationError, Node, ProviderProblem

from clusterscaler_machineapi.apigroups import (
    MACHINE_DEPLOYMENT,
    MACHINE_POOL,
    MACHINE_SET,
    PAUSED_ANNOTATION,
    REVISION_ANNOTATION,
    ApiGroup,
)
from clusterscaler_machineapi.discovery import DiscoverySpec, allowed
from clusterscaler_machineapi.infrastructure import InfraTemplate, TemplateLookup
from clusterscaler_machineapi.objects import (
    Machine,
    ScalableResource,
    normalize_provider_id,
    parse_machine,
    parse_scalable,
)
from clusterscaler_machineapi.settings import SizeLimits, size_limits
from clusterscaler_machineapi.template import (
    CannotScaleFromZeroError,
    read_capacity,
    system_info_labels,
)

PLACEHOLDER_SCHEME = "clusterapi://"

REASON_INVALID_OBJECT = "InvalidObject"
REASON_INVALID_SIZE = "InvalidSizeAnnotations"
REASON_CANNOT_SCALE_FROM_ZERO = "CannotScaleFromZero"
REASON_INVALID_CAPACITY = "InvalidCapacityAnnotations"
REASON_DUPLICATE = "DuplicateNodeGroup"
REASON_PAUSED = "Paused"
REASON_INVALID_REVISION = "InvalidRevisionAnnotation"
REASON_INVALID_TEMPLATE = "InvalidInfrastructureTemplate"
REASON_TEMPLATE_UNAVAILABLE = "InfrastructureTemplateUnavailable"


# Problems are reported in the core's shape, so status and `explain` can show them.
Problem = ProviderProblem


@dataclass(frozen=True, slots=True)
class GroupRecord:
    resource: ScalableResource
    limits: SizeLimits
    machines: tuple[Machine, ...] = ()
    # Whose machine template new machines come from: a MachineDeployment's current
    # MachineSet (highest revision), else the resource itself.
    template_source: ScalableResource | None = None
    # The infrastructure template, when it was read (groups that are or may go at zero).
    template: InfraTemplate | None = None
    template_read: bool = False
    # MachinePools: the provider IDs of `spec.providerIDList` no Machine carries (pools
    # whose infrastructure provider makes no Machines, or not yet).
    pool_instances: tuple[str, ...] = ()
    # A MachineDeployment rolling out: why its nodes may not be removed now ("" if not).
    rollout: str = ""

    @property
    def source(self) -> ScalableResource:
        return self.template_source or self.resource


@dataclass(frozen=True, slots=True)
class Listing:
    """Raw objects of one API group as listed from the API server."""

    api: ApiGroup
    scalable: Mapping[str, Sequence[Mapping[str, Any]]]  # kind -> raw objects
    machines: Sequence[Mapping[str, Any]] = ()
    clusters: Sequence[Mapping[str, Any]] = ()


@dataclass
class Snapshot:
    groups: dict[str, GroupRecord] = field(default_factory=dict)
    machines: dict[tuple[str, str], Machine] = field(default_factory=dict)  # (group, ns/name)
    group_of_machine: dict[tuple[str, str], str] = field(default_factory=dict)
    by_provider_id: dict[str, Machine] = field(default_factory=dict)
    # Normalised provider IDs of MachinePool instances without a Machine -> node group id.
    pool_of_provider_id: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    apis: tuple[ApiGroup, ...] = ()

    def machine_for_node(self, node: Node) -> Machine | None:
        """The Machine behind `node`: by normalised providerID, else the machine annotation."""
        if node.provider_id:
            machine = self.by_provider_id.get(normalize_provider_id(node.provider_id))
            if machine is not None:
                return machine
        for api in self.apis:
            ref = node.annotations.get(api.node_machine_key)
            if ref:
                machine = self.machines.get((api.group, ref.strip()))
                if machine is not None:
                    return machine
        return None

    def pool_group_of_node(self, node: Node) -> str | None:
        """The MachinePool listing `node`'s providerID when no Machine carries it."""
        if not node.provider_id:
            return None
        return self.pool_of_provider_id.get(normalize_provider_id(node.provider_id))

    def names_missing_machine(self, node: Node) -> bool:
        """Whether `node` names (by annotation) a Machine that no longer exists."""
        for api in self.apis:
            ref = node.annotations.get(api.node_machine_key)
            if ref and (api.group, ref.strip()) not in self.machines:
                return True
        return False

    def problems_of(self, group_id: str) -> list[Problem]:
        return [p for p in self.problems if p.node_group == group_id]

    def group_id_of(self, machine: Machine) -> str | None:
        return self.group_of_machine.get((machine.api.group, machine.key))


def placeholder_id(machine: Machine) -> str:
    """The instance id of a Machine without a providerID yet (pending or failed early)."""
    return f"{PLACEHOLDER_SCHEME}{machine.api.group}/{machine.namespace}/{machine.name}"


def instance_id(machine: Machine) -> str:
    return machine.provider_id or placeholder_id(machine)


def _owner_of(
    owner_kind: str,
    resource_owner: Any,
    index: Mapping[tuple[str, str, str], ScalableResource],
    namespace: str,
) -> ScalableResource | None:
    """The controller owner of the given kind, if it exists with the referenced uid."""
    if resource_owner is None or resource_owner.kind != owner_kind:
        return None
    owner = index.get((owner_kind, namespace, resource_owner.name))
    if owner is None:
        return None
    # A recreated owner with the same name is a different object: its uid differs.
    if resource_owner.uid and owner.uid and resource_owner.uid != owner.uid:
        return None
    return owner


def build_snapshot(
    listings: Iterable[Listing],
    specs: Sequence[DiscoverySpec],
    templates: TemplateLookup | None = None,
) -> Snapshot:
    """The node groups of `listings`; `templates` reads infrastructure templates (none
    are read without it)."""
    snap = Snapshot()
    apis: list[ApiGroup] = []
    for listing in listings:
        apis.append(listing.api)
        _add_listing(snap, listing, specs, templates)
    snap.apis = tuple(apis)
    snap.groups = dict(sorted(snap.groups.items()))
    return snap


def _paused_clusters(snap: Snapshot, listing: Listing) -> dict[tuple[str, str], str]:
    """(namespace, name) of every paused Cluster -> how it is paused."""
    out: dict[tuple[str, str], str] = {}
    for raw in listing.clusters:
        meta = raw.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            continue
        key = (str(meta.get("namespace") or ""), str(meta["name"]))
        spec = raw.get("spec")
        paused = spec.get("paused") if isinstance(spec, Mapping) else None
        annotations = meta.get("annotations")
        if paused is not None and not isinstance(paused, bool):
            snap.problems.append(
                Problem(
                    f"Cluster/{key[0]}/{key[1]}",
                    REASON_INVALID_OBJECT,
                    f"Cluster {key[0]}/{key[1]}: spec.paused: expected true or false, got "
                    f"{paused!r}; its node groups are treated as paused",
                )
            )
            out[key] = f"spec.paused is {paused!r}"
        elif paused is True:
            out[key] = "spec.paused is true"
        elif isinstance(annotations, Mapping) and PAUSED_ANNOTATION in annotations:
            out[key] = f"annotation {PAUSED_ANNOTATION}"
    return out


def _current_machine_sets(
    snap: Snapshot, index: Mapping[tuple[str, str, str], ScalableResource]
) -> dict[str, ScalableResource]:
    """Each MachineDeployment's MachineSet of the highest revision, by deployment id."""
    best: dict[str, tuple[int, ScalableResource]] = {}
    bad: set[str] = set()
    for (kind, namespace, _name), ms in index.items():
        if kind != MACHINE_SET:
            continue
        md = _owner_of(MACHINE_DEPLOYMENT, ms.owner, index, namespace)
        if md is None:
            continue
        raw = ms.annotations.get(REVISION_ANNOTATION)
        if raw is None:
            continue
        text = raw.strip()
        if not text.isascii() or not text.isdigit():
            snap.problems.append(
                Problem(
                    md.id,
                    REASON_INVALID_REVISION,
                    f"{ms.ref}: annotation {REVISION_ANNOTATION}: expected a non-negative "
                    f"integer, got {raw!r}; the templates of {md.ref} are read from the "
                    "deployment itself",
                )
            )
            bad.add(md.id)
            continue
        revision = int(text)
        if md.id not in best or revision > best[md.id][0]:
            best[md.id] = (revision, ms)
    return {rid: ms for rid, (_rev, ms) in best.items() if rid not in bad}


def _machine_count(ms: ScalableResource) -> str:
    status = "unreadable" if ms.status_replicas is None else str(ms.status_replicas)
    return f"{ms.ref} (spec.replicas {ms.replicas}, status.replicas {status})"


def _has_machines(ms: ScalableResource) -> bool:
    # An unreadable status.replicas counts as machines: a node is kept when in doubt.
    return ms.replicas > 0 or ms.status_replicas is None or ms.status_replicas > 0


def _rollouts(index: Mapping[tuple[str, str, str], ScalableResource]) -> dict[str, str]:
    """MachineDeployment id -> why it is rolling out, for those that are.

    As CA's clusterapi provider: a deployment is rolling out while any MachineSet it owns,
    other than the current one (the highest `machinedeployment.clusters.x-k8s.io/revision`),
    still has replicas, wanted (`spec.replicas`) or counted (`status.replicas`). A
    MachineSet without the annotation is an old one, unless none of them has it: then the
    deployment is rolling out while more than one has replicas. A revision that is not an
    integer leaves the current MachineSet unknown, which counts as rolling out.
    """
    owned: dict[str, tuple[ScalableResource, list[ScalableResource]]] = {}
    for (kind, namespace, _name), ms in index.items():
        if kind != MACHINE_SET:
            continue
        md = _owner_of(MACHINE_DEPLOYMENT, ms.owner, index, namespace)
        if md is not None:
            owned.setdefault(md.id, (md, []))[1].append(ms)
    out: dict[str, str] = {}
    for mid, (md, sets) in owned.items():
        sets.sort(key=lambda ms: ms.name)
        revisions: dict[str, int] = {}
        unreadable = ""
        for ms in sets:
            raw = ms.annotations.get(REVISION_ANNOTATION)
            if raw is None:
                continue
            text = raw.strip()
            if not text.isascii() or not text.isdigit():
                unreadable = f"{ms.ref} has annotation {REVISION_ANNOTATION}={raw!r}"
                break
            revisions[ms.name] = int(text)
        if unreadable:
            out[mid] = (
                f"{md.ref} may be rolling out: {unreadable}, not an integer, so its current "
                "MachineSet is unknown"
            )
            continue
        busy = [ms for ms in sets if _has_machines(ms)]
        if not revisions:
            if len(busy) > 1:
                out[mid] = (
                    f"{md.ref} is rolling out: "
                    + ", ".join(_machine_count(ms) for ms in busy)
                    + f" have replicas and none carries annotation {REVISION_ANNOTATION}"
                )
            continue
        latest = max(revisions.values())
        old = [ms for ms in busy if revisions.get(ms.name) != latest]
        if old:
            current = [ms.ref for ms in sets if revisions.get(ms.name) == latest]
            several = len(old) > 1
            out[mid] = (
                f"{md.ref} is rolling out: old MachineSet{'s' if several else ''} "
                + ", ".join(_machine_count(ms) for ms in old)
                + f" still {'have' if several else 'has'} replicas; the current one is "
                f"{' and '.join(current)} (revision {latest})"
            )
    return out


def _add_listing(
    snap: Snapshot,
    listing: Listing,
    specs: Sequence[DiscoverySpec],
    templates: TemplateLookup | None,
) -> None:
    api = listing.api
    index: dict[tuple[str, str, str], ScalableResource] = {}
    for kind, raws in listing.scalable.items():
        for raw in raws:
            try:
                resource = parse_scalable(raw, api, kind)
            except ConfigurationError as exc:
                meta = raw.get("metadata") or {}
                rid = f"{kind}/{meta.get('namespace', '')}/{meta.get('name', '')}"
                snap.problems.append(Problem(rid, REASON_INVALID_OBJECT, str(exc)))
                continue
            index[(kind, resource.namespace, resource.name)] = resource

    current = _current_machine_sets(snap, index)
    rollouts = _rollouts(index)
    paused_clusters = _paused_clusters(snap, listing)
    candidates: dict[str, tuple[ScalableResource, SizeLimits]] = {}
    sources: dict[str, tuple[ScalableResource, InfraTemplate | None, bool]] = {}
    for (kind, _namespace, _name), resource in index.items():
        # A MachineSet run by a MachineDeployment is scaled through its deployment; even
        # when that deployment is not listed (being deleted, other namespace filter),
        # scaling the MachineSet would fight the deployment controller.
        if (
            kind == MACHINE_SET
            and resource.owner is not None
            and resource.owner.kind == MACHINE_DEPLOYMENT
        ):
            continue
        if not allowed(specs, resource):
            continue
        try:
            limits = size_limits(resource)
        except ConfigurationError as exc:
            snap.problems.append(Problem(resource.id, REASON_INVALID_SIZE, str(exc)))
            continue
        if limits is None:
            continue
        if resource.paused:
            # Cluster API's controllers do not act on a paused resource: a new replica
            # count would not be carried out, and a marked machine not removed.
            snap.problems.append(
                Problem(
                    resource.id,
                    REASON_PAUSED,
                    f"{resource.ref} is paused (annotation {PAUSED_ANNOTATION}); it is not "
                    "scaled, up or down, until the annotation is removed",
                )
            )
            continue
        how = paused_clusters.get((resource.namespace, resource.cluster_name))
        if how is not None:
            snap.problems.append(
                Problem(
                    resource.id,
                    REASON_PAUSED,
                    f"{resource.ref} belongs to Cluster {resource.namespace}/"
                    f"{resource.cluster_name}, which is paused ({how}); it is not scaled, up "
                    "or down, until the cluster is resumed",
                )
            )
            continue
        if resource.id in snap.groups:
            # The same kind, namespace and name served by two API groups: which one the
            # autoscaler scales would be a guess, so neither of the later ones is used.
            first = snap.groups[resource.id].resource.api.group
            snap.problems.append(
                Problem(
                    resource.id,
                    REASON_DUPLICATE,
                    f"{resource.ref} exists in both {first} and {api.group}; only the "
                    f"{first} one is autoscaled",
                )
            )
            continue
        candidates[resource.id] = (resource, limits)
        source = current.get(resource.id, resource)
        template, read = _check_capacity(snap, resource, limits, source, templates)
        sources[resource.id] = (source, template, read)

    members: dict[str, list[Machine]] = {rid: [] for rid in candidates}
    for raw in listing.machines:
        try:
            machine = parse_machine(raw, api)
        except ConfigurationError as exc:
            meta = raw.get("metadata") or {}
            rid = f"Machine/{meta.get('namespace', '')}/{meta.get('name', '')}"
            snap.problems.append(Problem(rid, REASON_INVALID_OBJECT, str(exc)))
            continue
        snap.machines[(api.group, machine.key)] = machine
        if machine.provider_id:
            snap.by_provider_id[normalize_provider_id(machine.provider_id)] = machine
        snap.by_provider_id[normalize_provider_id(placeholder_id(machine))] = machine
        pool = _owner_of(MACHINE_POOL, machine.owner, index, machine.namespace)
        machine_set = _owner_of(MACHINE_SET, machine.owner, index, machine.namespace)
        owner: ScalableResource
        if pool is not None:
            owner = pool
        elif machine_set is not None:
            owner = machine_set
            deployment = _owner_of(
                MACHINE_DEPLOYMENT, machine_set.owner, index, machine.namespace
            )
            if deployment is not None:
                owner = deployment
        else:
            continue
        if owner.id in members:
            members[owner.id].append(machine)
            snap.group_of_machine[(api.group, machine.key)] = owner.id

    for rid, (resource, limits) in candidates.items():
        source, template, read = sources[rid]
        pool_instances: list[str] = []
        if resource.kind == MACHINE_POOL:
            with_machine = {
                normalize_provider_id(m.provider_id) for m in members[rid] if m.provider_id
            }
            for provider_id in resource.provider_ids:
                normalized = normalize_provider_id(provider_id)
                if normalized not in with_machine:
                    pool_instances.append(provider_id)
                    snap.pool_of_provider_id[normalized] = rid
        snap.groups[rid] = GroupRecord(
            resource=resource,
            limits=limits,
            machines=tuple(sorted(members[rid], key=lambda m: m.name)),
            template_source=source if source is not resource else None,
            template=template,
            template_read=read,
            pool_instances=tuple(pool_instances),
            rollout=rollouts.get(rid, ""),
        )


def _check_capacity(
    snap: Snapshot,
    resource: ScalableResource,
    limits: SizeLimits,
    source: ScalableResource,
    templates: TemplateLookup | None,
) -> tuple[InfraTemplate | None, bool]:
    """Record groups that could not scale up from zero once they are at zero.

    Only a problem when the group is, or may go, at zero: otherwise live nodes serve as the
    template. Returns the infrastructure template of such a group and whether it was read.
    """
    may_be_at_zero = resource.replicas == 0 or limits.min_size == 0
    template: InfraTemplate | None = None
    read = False
    if templates is not None and may_be_at_zero:
        read = True
        try:
            template = templates(source)
        except ConfigurationError as exc:
            snap.problems.append(Problem(resource.id, REASON_INVALID_TEMPLATE, str(exc)))
        except CloudProviderError as exc:
            snap.problems.append(Problem(resource.id, REASON_TEMPLATE_UNAVAILABLE, str(exc)))
        try:
            system_info_labels(template)
        except ConfigurationError as exc:
            snap.problems.append(Problem(resource.id, REASON_INVALID_TEMPLATE, str(exc)))
    try:
        read_capacity(resource, template)
    except CannotScaleFromZeroError as exc:
        if may_be_at_zero:
            snap.problems.append(Problem(resource.id, REASON_CANNOT_SCALE_FROM_ZERO, str(exc)))
    except ConfigurationError as exc:
        snap.problems.append(Problem(resource.id, REASON_INVALID_CAPACITY, str(exc)))
    return template, read
