"""The cached view of the managed ASGs, their instances and their errors.

Regenerated from DescribeAutoScalingGroups at most once per refresh interval (and right after
this process terminated instances). Between regenerations, scaling calls update the cached
desired capacity so that the next loop sees what was asked for.

A problem with one ASG (bad tags, impossible limits, no availability zone, an explicitly named
ASG that does not exist) is recorded in `errors` under the ASG's name and logged; the other
ASGs are still managed. A failing describe call fails the refresh as a whole and keeps the
previous view, as the loop must not act on a partial picture.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import structlog
from clusterscaler.api import (
    CloudProviderError,
    GroupIndex,
    Instance,
    InstanceErrorInfo,
    InstanceState,
    NodeGroupOptions,
)

from clusterscaler_aws.activities import launch_error
from clusterscaler_aws.service import AsgDescription, AwsService
from clusterscaler_aws.specs import DiscoverySpec, NodeGroupSpec
from clusterscaler_aws.tags import AsgTemplateTags, parse_node_group_options, parse_template_tags

log = structlog.get_logger()

DEFAULT_REFRESH_INTERVAL = 60.0
PLACEHOLDER_PREFIX = "i-placeholder"
DELETE_IN_PROGRESS = "Delete in progress"

_CREATING_STATES = frozenset(
    {"Pending", "Pending:Wait", "Pending:Proceed", "Warmed:Pending", "Warmed:Pending:Wait",
     "Warmed:Pending:Proceed"}
)
_DELETING_STATES = frozenset(
    {"Terminating", "Terminating:Wait", "Terminating:Proceed", "Terminated", "Detaching",
     "Detached", "Warmed:Terminating", "Warmed:Terminating:Wait",
     "Warmed:Terminating:Proceed", "Warmed:Terminated"}
)


def instance_state(lifecycle_state: str) -> InstanceState:
    if lifecycle_state in _CREATING_STATES:
        return InstanceState.CREATING
    if lifecycle_state in _DELETING_STATES:
        return InstanceState.DELETING
    return InstanceState.RUNNING


def is_terminating(lifecycle_state: str) -> bool:
    return lifecycle_state in _DELETING_STATES


def placeholder_id(asg: str, index: int) -> str:
    return f"{PLACEHOLDER_PREFIX}-{asg}-{index}"


def is_placeholder(instance_id: str) -> bool:
    return instance_id.startswith(PLACEHOLDER_PREFIX + "-")


def instance_id_of(provider_id: str) -> str:
    """`aws:///us-east-1a/i-0123` -> `i-0123` (the zone part is not needed to match)."""
    return provider_id.rstrip("/").rsplit("/", 1)[-1]


@dataclass
class AsgRecord:
    """One managed ASG as the cache knows it."""

    description: AsgDescription
    min_size: int
    max_size: int
    desired: int
    explicit: bool
    template_tags: AsgTemplateTags
    options: NodeGroupOptions | None
    errors: tuple[str, ...] = ()
    launch_error: InstanceErrorInfo | None = None
    # When this process last changed the desired capacity (wall clock, UTC).
    last_update: datetime | None = None
    instances: tuple[Instance, ...] = field(default_factory=tuple)

    @property
    def name(self) -> str:
        return self.description.name

    def live_instance_count(self) -> int:
        """Instances that count towards the desired capacity (not terminating)."""
        return sum(1 for i in self.description.instances if not is_terminating(i.lifecycle_state))


class AsgCache(GroupIndex[str, AsgRecord, str]):
    """Discovery, caching and bookkeeping of the managed ASGs: the records by ASG name,
    and the ASG of each instance ID."""

    def __init__(
        self,
        service: AwsService,
        explicit: Sequence[NodeGroupSpec],
        discovery: Sequence[DiscoverySpec],
        *,
        refresh_interval: float = DEFAULT_REFRESH_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__()
        self._service = service
        self._explicit = {spec.name: spec for spec in explicit}
        self._discovery = list(discovery)
        self._refresh_interval = refresh_interval
        self._clock = clock
        self._now = now
        self._errors: dict[str, tuple[str, ...]] = {}
        self._last_refresh: float | None = None
        # Kept across regenerations so that a scale-up's time survives the next describe.
        self._last_update: dict[str, datetime] = {}

    # --- reading ---------------------------------------------------------------------------

    def asg_for_instance(self, provider_id: str) -> str | None:
        """The managed ASG listing this instance (placeholders included), if any."""
        instance_id = instance_id_of(provider_id)
        with self._lock:
            found = self.group_of(instance_id)
            if found is not None or not is_placeholder(instance_id):
                return found
            # i-placeholder-<asg>-<n>: ASG names may contain '-', so strip both ends.
            name = instance_id[len(PLACEHOLDER_PREFIX) + 1 :].rpartition("-")[0]
            record = self.get(name)
            if record is None:
                return None
            listed = any(instance_id_of(i.id) == instance_id for i in record.instances)
            return name if listed else None

    def errors(self) -> Mapping[str, tuple[str, ...]]:
        """Problems found per ASG at the last regeneration."""
        with self._lock:
            return dict(self._errors)

    # --- refreshing ------------------------------------------------------------------------

    def refresh(self, force: bool = False) -> None:
        """Regenerate when the interval has passed (or when forced)."""
        now = self._clock()
        with self._lock:
            due = (
                force
                or self._last_refresh is None
                or now - self._last_refresh >= self._refresh_interval
            )
        if due:
            self.regenerate()

    def invalidate(self) -> None:
        """Make the next `refresh` regenerate (after terminating instances)."""
        with self._lock:
            self._last_refresh = None

    def regenerate(self) -> None:
        described: dict[str, tuple[AsgDescription, bool]] = {}
        if self._explicit:
            for desc in self._service.describe_asgs_by_names(list(self._explicit)):
                described[desc.name] = (desc, True)
        for spec in self._discovery:
            for desc in self._service.describe_asgs_by_filters(spec.filters()):
                # The filters already select these; matching again guards against an API
                # that ignores a filter, since managing a foreign ASG would be harmful.
                if desc.name not in described and spec.matches(desc.tags):
                    described[desc.name] = (desc, False)

        records: dict[str, AsgRecord] = {}
        by_instance: dict[str, str] = {}
        errors: dict[str, tuple[str, ...]] = {}
        for name in sorted(set(self._explicit) - set(described)):
            errors[name] = (f"ASG {name!r} given by --nodes does not exist",)
        for name in sorted(described):
            desc, explicit = described[name]
            if desc.status == DELETE_IN_PROGRESS:
                continue
            record, problems = self._build_record(desc, explicit)
            if problems:
                errors[name] = problems
            if record is None:
                continue
            records[name] = record
            for inst in desc.instances:
                by_instance[inst.instance_id] = name
        with self._lock:
            previous_errors = self._errors
            self.replace(records, by_instance)
            self._errors = errors
            self._last_refresh = self._clock()
            self._last_update = {
                k: v for k, v in self._last_update.items() if k in records
            }
        for name, problems in errors.items():
            if previous_errors.get(name) != problems:
                for problem in problems:
                    log.warning("aws_asg_problem", node_group=name, problem=problem)
        log.debug("aws_asgs_refreshed", node_groups=sorted(records))

    def _build_record(
        self, desc: AsgDescription, explicit: bool
    ) -> tuple[AsgRecord | None, tuple[str, ...]]:
        problems: list[str] = []
        if explicit:
            spec = self._explicit[desc.name]
            min_size, max_size = spec.min_size, spec.max_size
        else:
            min_size, max_size = desc.min_size, desc.max_size
        if not desc.zones:
            return None, (f"ASG {desc.name!r} has no availability zone",)
        if min_size < 0 or max_size < min_size:
            return None, (
                f"ASG {desc.name!r}: min {min_size} and max {max_size} are not a valid range; "
                "expected 0 <= min <= max",
            )
        tags = parse_template_tags(desc.name, desc.tags)
        options, option_errors = parse_node_group_options(desc.name, tags.options)
        problems.extend(str(e) for e in (*tags.errors, *option_errors))
        last_update = self._last_update.get(desc.name)
        error: InstanceErrorInfo | None = None
        live = sum(1 for i in desc.instances if not is_terminating(i.lifecycle_state))
        if desc.desired_capacity > live:
            try:
                activities = self._service.describe_scaling_activities(desc.name)
            except CloudProviderError as exc:
                # Without activities the placeholders still count as upcoming; only the
                # fast back-off is lost, so this is not worth failing the refresh.
                log.warning("aws_scaling_activities_unavailable", node_group=desc.name, error=str(exc))
            else:
                error = launch_error(activities, last_update)
        record = AsgRecord(
            description=desc,
            min_size=min_size,
            max_size=max_size,
            desired=desc.desired_capacity,
            explicit=explicit,
            template_tags=tags,
            options=options,
            errors=tuple(problems),
            launch_error=error,
            last_update=last_update,
        )
        record.instances = self._instances(record)
        return record, tuple(problems)

    def _instances(self, record: AsgRecord) -> tuple[Instance, ...]:
        desc = record.description
        result = [
            Instance(id=inst.provider_id, state=instance_state(inst.lifecycle_state))
            for inst in desc.instances
        ]
        # Desired capacity AWS has not turned into instances yet: placeholders, so that the
        # autoscaler counts them as upcoming and, on a launch failure, backs off at once.
        # Terminating instances no longer count: their decrement is already in the desired
        # capacity.
        zone = desc.zones[0]
        for index in range(record.live_instance_count(), record.desired):
            result.append(
                Instance(
                    id=f"aws:///{zone}/{placeholder_id(desc.name, index)}",
                    state=InstanceState.CREATING,
                    error=record.launch_error,
                )
            )
        return tuple(result)

    # --- bookkeeping after scaling calls ---------------------------------------------------

    def set_desired(self, name: str, desired: int) -> None:
        """Record a desired capacity this process just set."""
        with self._lock:
            record = self.get(name)
            if record is None:
                return
            now = self._now()
            self._last_update[name] = now
            record.desired = desired
            record.last_update = now
            # A new request starts with a clean slate; the next describe tells if it failed.
            record.launch_error = None
            record.instances = self._instances(record)

    def mark_terminating(self, name: str, instance_id: str, desired: int) -> None:
        """Record that this process terminated `instance_id`, decrementing the desired capacity."""
        with self._lock:
            record = self.get(name)
            if record is None:
                return
            desc = record.description
            instances = tuple(
                replace(inst, lifecycle_state="Terminating")
                if inst.instance_id == instance_id
                else inst
                for inst in desc.instances
            )
            record.description = replace(desc, instances=instances)
            record.desired = desired
            record.instances = self._instances(record)
