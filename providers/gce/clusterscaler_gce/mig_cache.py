"""The cached view of the managed MIGs: which MIGs, their target sizes, instances and options.

Refreshed once per loop. Discovery (`mig:namePrefix=`) lists the MIGs of the location at most
once a minute; every registered MIG is then read (instanceGroupManagers.get) and its
instances listed, at most once per `--gce-mig-instances-min-refresh-wait-time` unless this
process changed the MIG since, with `--gce-concurrent-refreshes` MIGs read at a time.
Instance templates never change (a new template is a new URL), so each is read once.

A MIG that cannot be read is a problem for that MIG only: it is left out of the node groups
of this loop (nothing is decided about it on stale data) and reported; the others are
managed as usual. A failing discovery keeps the MIGs found before.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import structlog
from clusterscaler.api import (
    CloudProviderError,
    ConfigurationError,
    GroupIndex,
    Instance,
    InstanceErrorClass,
    InstanceErrorInfo,
    InstanceState,
    NodeGroupNotFoundError,
    NodeGroupOptions,
    ProviderProblem,
)

from clusterscaler_gce.cloud_config import Location
from clusterscaler_gce.compute import (
    ComputeService,
    InstanceTemplate,
    ManagedInstance,
    MigDescription,
)
from clusterscaler_gce.kube_env import parse_kube_env
from clusterscaler_gce.refs import InstanceRef, MigRef
from clusterscaler_gce.specs import DiscoverySpec, NodeGroupSpec

log = structlog.get_logger()

DISCOVERY_INTERVAL = 60.0
DEFAULT_INSTANCES_MIN_WAIT = 5.0

_CREATING = frozenset({"CREATING", "RECREATING", "CREATING_WITHOUT_RETRIES"})
_DELETING = frozenset({"DELETING", "ABANDONING"})
_NOT_RUNNING_YET = frozenset({"", "PROVISIONING", "STAGING"})
_EXTERNAL_IP_POLICY = re.compile(r"Constraint constraints/compute\.vmExternalIpAccess violated for project")


def instance_state(action: str) -> InstanceState:
    if action in _CREATING:
        return InstanceState.CREATING
    if action in _DELETING:
        return InstanceState.DELETING
    return InstanceState.RUNNING


def creation_error(instance: ManagedInstance) -> InstanceErrorInfo | None:
    """Why an instance being created failed, in the core's classes: stockouts and quota are
    OUT_OF_RESOURCES (the group backs off and another is tried), the rest OTHER."""
    if instance_state(instance.current_action) is not InstanceState.CREATING or not instance.errors:
        return None
    found: tuple[InstanceErrorClass, str] | None = None
    messages: list[str] = []
    for error in instance.errors:
        code = error.code
        kind: tuple[InstanceErrorClass, str] | None
        if "RESOURCE_POOL_EXHAUSTED" in code or "STOCKOUT" in code:
            kind = (InstanceErrorClass.OUT_OF_RESOURCES, "RESOURCE_POOL_EXHAUSTED")
        elif "QUOTA" in code:
            kind = (InstanceErrorClass.OUT_OF_RESOURCES, "QUOTA_EXCEEDED")
        elif "IP_SPACE_EXHAUSTED" in code:
            kind = (InstanceErrorClass.OTHER, "IP_SPACE_EXHAUSTED")
        elif "PERMISSIONS_ERROR" in code:
            kind = (InstanceErrorClass.OTHER, "PERMISSIONS_ERROR")
        elif "CONDITION_NOT_MET" in code and _EXTERNAL_IP_POLICY.search(error.message):
            kind = (InstanceErrorClass.OTHER, "VM_EXTERNAL_IP_ACCESS_POLICY_CONSTRAINT")
        elif instance.instance_status in _NOT_RUNNING_YET:
            kind = (InstanceErrorClass.OTHER, "OTHER")
        else:
            continue
        # A specific reason wins over the generic OTHER.
        if found is None or found[1] == "OTHER":
            found = kind
        if error.message:
            messages.append(error.message)
    if found is None:
        return None
    return InstanceErrorInfo(error_class=found[0], error_code=found[1], error_message="; ".join(messages))


@dataclass
class MigRecord:
    """One MIG as the cache knows it after its last successful read."""

    ref: MigRef
    min_size: int
    max_size: int
    explicit: bool
    description: MigDescription
    target_size: int
    instances: tuple[ManagedInstance, ...] = ()
    listed_at: float = 0.0
    template: InstanceTemplate | None = None
    options: NodeGroupOptions | None = None
    core_instances: tuple[Instance, ...] = field(default_factory=tuple)

    def live_instances(self) -> list[ManagedInstance]:
        """Instances that count towards the target size (not being deleted or abandoned)."""
        return [i for i in self.instances if i.current_action not in _DELETING]

    def rebuild(self) -> None:
        self.core_instances = tuple(
            Instance(id=i.ref.provider_id, state=instance_state(i.current_action), error=creation_error(i))
            for i in self.instances
        )


@dataclass(frozen=True, slots=True)
class _Registration:
    ref: MigRef
    min_size: int
    max_size: int
    explicit: bool


class MigCache(GroupIndex[MigRef, MigRecord, InstanceRef]):
    """Discovery, caching and bookkeeping of the managed MIGs: the records by MIG, and the
    MIG of each instance."""

    def __init__(
        self,
        service: ComputeService,
        explicit: Sequence[NodeGroupSpec],
        discovery: Sequence[DiscoverySpec],
        location: Callable[[], Location],
        *,
        concurrency: int = 1,
        instances_min_wait: float = DEFAULT_INSTANCES_MIN_WAIT,
        discovery_interval: float = DISCOVERY_INTERVAL,
        multizone: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._service = service
        self._explicit = {spec.name: spec for spec in explicit}
        self._discovery = list(discovery)
        self._location = location
        self._multizone = multizone
        self._concurrency = max(1, concurrency)
        self._instances_min_wait = instances_min_wait
        self._discovery_interval = discovery_interval
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=self._concurrency, thread_name_prefix="gce-refresh")
        self._registered: dict[MigRef, _Registration] = {
            ref: _Registration(ref, s.min_size, s.max_size, True) for ref, s in self._explicit.items()
        }
        self._discovered_at: float | None = None
        self._problems: dict[str, list[ProviderProblem]] = {}
        self._discovery_problems: dict[str, list[ProviderProblem]] = {}
        self._templates: dict[str, InstanceTemplate] = {}
        self._stale: set[MigRef] = set()

    # --- reading ------------------------------------------------------------------------------

    def problems(self) -> list[ProviderProblem]:
        with self._lock:
            found = {**self._discovery_problems, **self._problems}
            return [p for key in sorted(found) for p in found[key]]

    def template(self, url: str) -> InstanceTemplate:
        """The instance template at `url`, read once (templates are immutable)."""
        with self._lock:
            found = self._templates.get(url)
        if found is None:
            found = self._service.get_instance_template(url)
            with self._lock:
                self._templates[url] = found
        return found

    # --- refreshing ---------------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> None:
        """Discover when due, then read every registered MIG (in parallel)."""
        problems: dict[str, list[ProviderProblem]] = {}
        now = self._clock()
        with self._lock:
            due = force or self._discovered_at is None or now - self._discovered_at >= self._discovery_interval
        if self._discovery and due:
            discovery_problems: dict[str, list[ProviderProblem]] = {}
            self._discover(discovery_problems)
            with self._lock:
                before = self._discovery_problems
                self._discovery_problems = discovery_problems
            for key, found in discovery_problems.items():
                if [p.message for p in before.get(key, [])] != [p.message for p in found]:
                    log.warning("gce_discovery_problem", spec=key, problem=found[0].message)
        with self._lock:
            registrations = sorted(self._registered.values(), key=lambda r: r.ref)
        results = list(self._pool.map(lambda r: self._read(r, force), registrations))
        records: dict[MigRef, MigRecord] = {}
        by_instance: dict[InstanceRef, MigRef] = {}
        for registration, (record, mig_problems) in zip(registrations, results, strict=True):
            if mig_problems:
                problems[registration.ref.url] = mig_problems
            if record is None:
                continue
            records[record.ref] = record
            for inst in record.instances:
                by_instance[inst.ref] = record.ref
        with self._lock:
            previous = self._problems
            self.replace(records, by_instance)
            self._problems = problems
            used = {r.description.instance_template for r in records.values()}
            self._templates = {k: v for k, v in self._templates.items() if k in used}
        for key, found in problems.items():
            if [p.message for p in previous.get(key, [])] != [p.message for p in found]:
                for problem in found:
                    log.warning("gce_mig_problem", node_group=key, reason=problem.reason, problem=problem.message)
        log.debug("gce_migs_refreshed", node_groups=[r.url for r in sorted(records)])

    def _discover(self, problems: dict[str, list[ProviderProblem]]) -> None:
        try:
            location = self._location()
        except ConfigurationError as exc:
            for spec in self._discovery:
                key = f"mig:namePrefix={spec.name_prefix}"
                problems[key] = [ProviderProblem(key, "DiscoveryFailed", str(exc))]
            return
        found: dict[MigRef, _Registration] = {}
        failed = False
        for spec in self._discovery:
            key = f"mig:namePrefix={spec.name_prefix}"
            try:
                migs = self._list_matching(location, spec)
            except CloudProviderError as exc:
                problems[key] = [ProviderProblem(key, "DiscoveryFailed", f"{key}: {exc}")]
                failed = True
                continue
            for desc in migs:
                if desc.ref in self._explicit or desc.ref in found:
                    continue
                found[desc.ref] = _Registration(desc.ref, spec.min_size, spec.max_size, False)
        with self._lock:
            if failed:
                # Keep what was found before: dropping MIGs on a failed list would stop
                # managing them for no reason.
                kept = {r: g for r, g in self._registered.items() if not g.explicit}
                found = {**kept, **found}
            else:
                self._discovered_at = self._clock()
            self._registered = {
                **found,
                **{ref: _Registration(ref, s.min_size, s.max_size, True) for ref, s in self._explicit.items()},
            }

    def _list_matching(self, location: Location, spec: DiscoverySpec) -> list[MigDescription]:
        scopes: list[tuple[str, bool]] = []
        if location.regional or self._multizone:
            if location.regional:
                scopes.append((location.region, True))
            zones = self._service.region_zones(location.project, location.region)
            scopes.extend((zone, False) for zone in zones)
        else:
            scopes.append((location.location, False))
        found: list[MigDescription] = []
        for scope, regional in scopes:
            for desc in self._service.list_migs(location.project, scope, spec.filter, regional=regional):
                # The filter already selects these; matching again guards against an API that
                # ignored it, since managing a foreign MIG would be harmful.
                if spec.matches(desc.ref.name):
                    found.append(desc)
        return found

    def _read(self, registration: _Registration, force: bool) -> tuple[MigRecord | None, list[ProviderProblem]]:
        ref = registration.ref
        key = ref.url
        try:
            desc = self._service.get_mig(ref)
        except NodeGroupNotFoundError as exc:
            return None, [ProviderProblem(key, "MigNotFound", f"MIG {ref} does not exist: {exc}")]
        except CloudProviderError as exc:
            return None, [ProviderProblem(key, "MigUnreadable", str(exc))]
        with self._lock:
            previous = self.get(ref)
            stale = ref in self._stale
        now = self._clock()
        instances: tuple[ManagedInstance, ...]
        if (
            force
            or stale
            or previous is None
            or now - previous.listed_at >= self._instances_min_wait
            or previous.target_size != desc.target_size
        ):
            try:
                instances = tuple(self._service.list_managed_instances(ref))
            except CloudProviderError as exc:
                return None, [ProviderProblem(key, "MigUnreadable", str(exc))]
            listed_at = now
            with self._lock:
                self._stale.discard(ref)
        else:
            instances, listed_at = previous.instances, previous.listed_at
        problems: list[ProviderProblem] = []
        if registration.min_size > registration.max_size:
            return None, [
                ProviderProblem(key, "InvalidLimits", f"MIG {ref}: min {registration.min_size} > max {registration.max_size}")
            ]
        record = MigRecord(
            ref=ref,
            min_size=registration.min_size,
            max_size=registration.max_size,
            explicit=registration.explicit,
            description=desc,
            target_size=desc.target_size,
            instances=instances,
            listed_at=listed_at,
        )
        try:
            record.template = self.template(desc.instance_template)
        except CloudProviderError as exc:
            problems.append(ProviderProblem(key, "InstanceTemplateUnreadable", f"MIG {ref}: {exc}"))
        if record.template is not None:
            source = f"MIG {ref} instance template {record.template.name!r}"
            try:
                env = parse_kube_env(record.template.metadata.get("kube-env", ""), source)
                record.options = env.autoscaling_options()
            except ConfigurationError as exc:
                problems.append(ProviderProblem(key, "InvalidKubeEnv", str(exc)))
        record.rebuild()
        return record, problems

    # --- bookkeeping after scaling calls ------------------------------------------------------

    def fresh_instances(self, ref: MigRef) -> MigRecord:
        """Re-list the MIG's instances now (before acting on them)."""
        instances = tuple(self._service.list_managed_instances(ref))
        with self._lock:
            record = self.get(ref)
            if record is None:
                raise NodeGroupNotFoundError(f"MIG {ref} is no longer managed")
            record.instances = instances
            record.listed_at = self._clock()
            record.rebuild()
            self.add_instances(ref, (inst.ref for inst in instances))
            return record

    def invalidate(self, ref: MigRef) -> None:
        """The MIG may have changed (a call failed part-way): re-list it at the next refresh."""
        with self._lock:
            self._stale.add(ref)

    def set_target(self, ref: MigRef, size: int) -> None:
        with self._lock:
            record = self.get(ref)
            self._stale.add(ref)
            if record is not None:
                record.target_size = size

    def mark_deleting(self, ref: MigRef, deleted: Sequence[InstanceRef], target: int) -> None:
        gone = set(deleted)
        with self._lock:
            self._stale.add(ref)
            record = self.get(ref)
            if record is None:
                return
            record.instances = tuple(
                replace(i, current_action="DELETING") if i.ref in gone else i for i in record.instances
            )
            record.target_size = target
            record.rebuild()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
