"""ProvisioningRequests in the loop (--enable-provisioning-requests), as Cluster Autoscaler's
`processors/provreq` and `provisioningrequest/` packages handle them.

Each loop:
1. `start_loop`: the requests of a supported class this autoscaler serves (`_serves`:
   --check-capacity-processor-instance) are read with the conditions this process wrote and
   the cache has not shown yet; a booking older than `RESERVATION_TIME` gets
   BookingExpired, a request not provisioned `EXPIRATION_TIME` after its creation gets
   Failed (at most `MAX_UPDATED` such per loop); a request Provisioned or Failed longer than
   `TERMINAL_TTL` ago, of any class, is to be deleted.
2. `book`: the pods of every request with Provisioned=True (and not Failed or
   BookingExpired) are placed on the snapshot, minus the pods already running for it (the
   consume annotation), so that neither other pending pods nor scale-down take that room.
3. `ProvisioningRequestPodsFilter`, the pod-list processor `provisioning-request-consumers`
   the standard plugins register: pending pods that consume a request (its annotation)
   trigger no scale-up of their own; the room booked for them is theirs.
4. `provision`: the requests due (never tried, or Provisioned=False and their backoff
   between --provisioning-request-initial-backoff-time and
   --provisioning-request-max-backoff-time over) get Accepted; their pods are made from
   their PodTemplates, never created in the cluster. check-capacity: Provisioned=True when
   every pod fits the cluster as it is (the room is booked from then on), else
   Provisioned=False, or Failed with the `noRetry` parameter; --check-capacity-batch-processing
   takes up to --check-capacity-provisioning-request-max-batch-size of them within
   --check-capacity-provisioning-request-batch-timebox, else one per loop.
   best-effort-atomic-scale-up (one per loop): when its pods all fit the cluster,
   Provisioned=True at once; otherwise their pods are what this loop's scale-up plans for
   (`atomic_pods`), and `all_or_nothing` keeps that plan only when it fits every pod.
5. `after_scale_up`: the atomic request is Provisioned when its scale-up was made.

The conditions written are `results()`; the caller writes the updated ones to the
requests' status.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.podlistprocessor import PodListContext, PodListProcessor
from clusterscaler.loop.decisions import ProvisioningRequestResult, ScaleUpResult, ScaleUpStatus
from clusterscaler.loop.pending import PendingPods, drop_schedulable
from clusterscaler.model import OwnerRef, Pod
from clusterscaler.model.provisioning import (
    ACCEPTED,
    BEST_EFFORT_ATOMIC,
    BOOKING_EXPIRED,
    CHECK_CAPACITY,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    DEPRECATED_CONSUME_ANNOTATION,
    FAILED,
    PROVISIONED,
    SUPPORTED_CLASSES,
    Condition,
    PodTemplate,
    ProvisioningRequest,
)
from clusterscaler.simulator.scheduler import HintingSimulator
from clusterscaler.simulator.snapshot import ClusterSnapshot

__all__ = [
    "EXPIRATION_TIME",
    "MAX_UPDATED",
    "RESERVATION_TIME",
    "TERMINAL_TTL",
    "ProvisioningRequestPodsFilter",
    "ProvisioningRequestProcessor",
    "ProvisioningRequestResult",
    "consumed_request",
    "provisioning_request_consumers",
]

log = structlog.get_logger()

# CA's processors/provreq defaults: how long a Provisioned request keeps its room, how long
# a request nobody answered lives, and how many of these updates one loop makes.
RESERVATION_TIME = timedelta(minutes=10)
EXPIRATION_TIME = timedelta(days=7)
MAX_UPDATED = 20
# How long a request stays once Provisioned or Failed; then CA deletes it.
TERMINAL_TTL = timedelta(days=7)

NO_RETRY_PARAMETER = "noRetry"
PROCESSOR_INSTANCE_PARAMETER = "processorInstance"

# Reasons and messages, as CA's provisioningrequest/conditions writes them.
ACCEPTED_REASON = "Accepted"
ACCEPTED_MSG = "ProvisioningRequest is accepted by ClusterAutoscaler"
CAPACITY_IS_NOT_FOUND_REASON = "CapacityIsNotFound"
CAPACITY_IS_NOT_FOUND_MSG = "Capacity is not found, CA will try to find it later."
CAPACITY_NOT_FOUND_NO_RETRY_MSG = "CA could not find requested capacity"
CAPACITY_IS_FOUND_REASON = "CapacityIsFound"
CAPACITY_IS_FOUND_MSG = "Capacity is found in the cluster"
CAPACITY_IS_PROVISIONED_REASON = "CapacityIsProvisioned"
CAPACITY_IS_PROVISIONED_MSG = "Capacity is found in the cluster"
FAILED_TO_CREATE_PODS_REASON = "FailedToCreatePods"
FAILED_TO_BOOK_CAPACITY_REASON = "FailedToBookCapacity"
RESERVATION_EXPIRED_REASON = "CapacityReservationTimeExpired"
RESERVATION_EXPIRED_MSG = "Capacity reservation time is expired"
EXPIRED_REASON = "Expired"
EXPIRED_MSG = "ProvisioningRequest is expired"


def consumed_request(pod: Pod) -> str:
    """The name of the request `pod` consumes (its namespace's), or ""."""
    annotations = pod.annotations
    return annotations.get(CONSUME_ANNOTATION) or annotations.get(
        DEPRECATED_CONSUME_ANNOTATION, ""
    )


def _is_due_for_booking(pr: ProvisioningRequest) -> bool:
    """CA's ShouldCapacityBeBooked."""
    if pr.class_name not in SUPPORTED_CLASSES:
        return False
    if pr.is_true(FAILED) or pr.is_true(BOOKING_EXPIRED):
        return False
    return pr.is_true(PROVISIONED)


@dataclass
class ProvisioningRequestPodsFilter:
    """Pending pods that consume a request run on its room and trigger no scale-up (CA's
    ProvisioningRequestPodsFilter, which asks no more than the annotation); a pod-list
    processor, switched on by --enable-provisioning-requests."""

    enabled: bool = False
    name: str = "provisioning-request-consumers"
    order: int = 100
    # The pending pods the last `process` left out, with the request each consumes
    # (`namespace/name`).
    ignored: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def from_options(cls, options: AutoscalingOptions) -> ProvisioningRequestPodsFilter:
        return cls(enabled=options.enable_provisioning_requests)

    def process(self, pods: Sequence[Pod], context: PodListContext) -> list[Pod]:
        """`pods` less the pending ones that consume a request."""
        self.ignored = []
        if not self.enabled:
            return list(pods)
        kept: list[Pod] = []
        ignored = self.ignored
        for p in pods:
            if p.node_name or p.is_terminal or not (name := consumed_request(p)):
                kept.append(p)
            elif p.unschedulable:
                ignored.append((p.key, f"{p.namespace}/{name}"))
        if ignored:
            log.info("pods_consuming_provisioning_requests_ignored", pods=len(ignored),
                     sample=[f"{k} ({r})" for k, r in ignored[:5]])
        return kept


def provisioning_request_consumers(options: AutoscalingOptions) -> PodListProcessor:
    """The pod-list processor `provisioning-request-consumers` (see
    `ProvisioningRequestPodsFilter`)."""
    return ProvisioningRequestPodsFilter.from_options(options)


class ProvisioningRequestProcessor:
    """The requests' state between loops (backoff, conditions written and not yet read
    back) and the steps of one loop (see the module's docstring)."""

    def __init__(
        self, options: AutoscalingOptions, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.options = options
        self.monotonic = monotonic
        self.enabled = options.enable_provisioning_requests
        # The backoff of each request that found no capacity, least recently used first.
        self._backoff: OrderedDict[str, timedelta] = OrderedDict()
        # Conditions written, by key, with the resourceVersion of the request they were
        # computed from: until the cache shows a newer version, they are what it holds.
        self._written: dict[str, tuple[str, tuple[Condition, ...]]] = {}
        self._requests: dict[str, ProvisioningRequest] = {}
        self._templates: dict[str, PodTemplate] = {}
        # Pods bound to a node that consume a request, by request key.
        self._consumed: dict[str, int] = {}
        self._changed: dict[str, list[str]] = {}
        self._atomic: ProvisioningRequest | None = None
        self._atomic_pods: list[Pod] = []
        self._delete: list[ProvisioningRequest] = []
        self._now = datetime.min

    # ------------------------------------------------------------------ state

    def _serves(self, pr: ProvisioningRequest) -> bool:
        """CA's SupportedProvisioningClass: with --check-capacity-processor-instance, only
        the check-capacity requests naming that instance (in their `processorInstance`
        parameter, or in the deprecated form of a class name prefixed with it); without it,
        best-effort-atomic requests and the check-capacity ones naming no instance."""
        instance = self.options.check_capacity_processor_instance
        if pr.class_name == BEST_EFFORT_ATOMIC:
            return not instance
        named = pr.parameters.get(PROCESSOR_INSTANCE_PARAMETER, "")
        if not instance or named:
            return named == instance and pr.class_name == CHECK_CAPACITY
        return pr.class_name == instance + CHECK_CAPACITY

    def _set(self, pr: ProvisioningRequest, type_: str, status: str, reason: str,
             message: str) -> ProvisioningRequest:
        """CA's AddOrUpdateCondition: the condition of that type replaced (or added),
        stamped now and with the request's generation."""
        new = Condition(type_, status, reason, message, self._now, pr.generation)
        conditions = list(pr.conditions)
        for i, c in enumerate(conditions):
            if c.type == type_:
                conditions[i] = new
                break
        else:
            conditions.append(new)
        updated = dataclasses.replace(pr, conditions=tuple(conditions))
        self._requests[pr.key] = updated
        changed = self._changed.setdefault(pr.key, [])
        if type_ not in changed:
            changed.append(type_)
        return updated

    def start_loop(
        self,
        requests: Iterable[ProvisioningRequest],
        templates: Iterable[PodTemplate],
        pods: Sequence[Pod],
        now: datetime,
    ) -> None:
        """Read this loop's requests and expire old bookings and forgotten requests."""
        self._requests = {}
        self._changed = {}
        self._atomic = None
        self._atomic_pods = []
        self._delete = []
        self._now = now
        if not self.enabled:
            return
        requests = list(requests)
        # CA's DeleteOldProvReqs, of every class: a week after Provisioned or Failed.
        for pr in requests:
            ended = [pr.condition(PROVISIONED), pr.condition(FAILED)]
            if any(
                c is not None
                and c.last_transition_time is not None
                and c.last_transition_time + TERMINAL_TTL < now
                for c in ended
            ):
                self._delete.append(pr)
        self._templates = {t.key: t for t in templates}
        self._consumed = {}
        if requests:
            for p in pods:
                if p.node_name and not p.is_terminal and (name := consumed_request(p)):
                    key = f"{p.namespace}/{name}"
                    self._consumed[key] = self._consumed.get(key, 0) + 1
        written: dict[str, tuple[str, tuple[Condition, ...]]] = {}
        deleting = {pr.key for pr in self._delete}
        for pr in sorted(requests, key=lambda r: (r.creation_time or now, r.key)):
            if not self._serves(pr) or pr.key in deleting:
                continue
            seen = self._written.get(pr.key)
            if seen is not None and seen[0] == pr.resource_version:
                pr = dataclasses.replace(pr, conditions=seen[1])
                written[pr.key] = seen
            self._requests[pr.key] = pr
        self._written = written
        updated = 0
        for pr in list(self._requests.values()):
            if updated >= MAX_UPDATED:
                break
            if pr.is_true(BOOKING_EXPIRED) or pr.is_true(FAILED):
                continue
            provisioned = pr.condition(PROVISIONED)
            if provisioned is not None and provisioned.is_true:
                since = provisioned.last_transition_time
                if since is not None and since + RESERVATION_TIME < now:
                    self._set(pr, BOOKING_EXPIRED, "True", RESERVATION_EXPIRED_REASON,
                              RESERVATION_EXPIRED_MSG)
                    updated += 1
            elif pr.creation_time is not None and pr.creation_time + EXPIRATION_TIME < now:
                self._set(pr, FAILED, "True", EXPIRED_REASON, EXPIRED_MSG)
                updated += 1

    def results(self) -> tuple[ProvisioningRequestResult, ...]:
        """Every request served, as this loop leaves it; remembers what it changed."""
        out = []
        for key, pr in self._requests.items():
            changed = tuple(self._changed.get(key, ()))
            if changed:
                self._written[key] = (pr.resource_version, pr.conditions)
            out.append(
                ProvisioningRequestResult(
                    pr.namespace, pr.name, pr.class_name, pr.conditions, changed,
                    pr.api_version,
                )
            )
        out.extend(
            ProvisioningRequestResult(
                pr.namespace, pr.name, pr.class_name, pr.conditions, (), pr.api_version,
                delete=True, uid=pr.uid,
            )
            for pr in self._delete
        )
        return tuple(out)

    # ------------------------------------------------------------------ pods

    def _pods_of(self, pr: ProvisioningRequest) -> list[Pod] | str:
        """The pods of a request, from its PodTemplates; or why they cannot be made (CA's
        words)."""
        owner = OwnerRef("ProvisioningRequest", pr.name, pr.uid, True, pr.api_version)
        missing = [
            s.template for s in pr.pod_sets
            if f"{pr.namespace}/{s.template}" not in self._templates
        ]
        if missing:
            return (
                f"missing pod templates, {len(pr.pod_sets)} pod templates were referenced, "
                f"{len(missing)} templates were missing: {','.join(missing)}"
            )
        out: list[Pod] = []
        for i, pod_set in enumerate(pr.pod_sets):
            template = self._templates[f"{pr.namespace}/{pod_set.template}"]
            base = template.pod
            annotations = {
                **base.annotations,
                CONSUME_ANNOTATION: pr.name,
                CLASS_ANNOTATION: pr.class_name,
            }
            for n in range(pod_set.count):
                out.append(
                    base.with_(
                        name=f"{pr.name}-{i}-{n}",
                        uid=f"{pr.namespace}/{pr.name}-{i}-{n}",
                        annotations=annotations,
                        owner=owner,
                        owners=(owner,),
                        node_name="",
                        unschedulable=True,
                        creation_time=pr.creation_time,
                    )
                )
        return out

    def _consumers(self, pr: ProvisioningRequest) -> int:
        """How many pods bound to a node run on the request's capacity."""
        return self._consumed.get(pr.key, 0)

    @staticmethod
    def _place(
        pods: list[Pod], snapshot: ClusterSnapshot, unusable: Collection[str]
    ) -> list[Pod]:
        """Place what fits on the snapshot; the pods that did not fit."""
        pending = PendingPods(unschedulable=list(pods))
        drop_schedulable(pending, snapshot, HintingSimulator(), unusable=unusable)
        return pending.unschedulable

    def book(self, snapshot: ClusterSnapshot, unusable: Collection[str] = ()) -> None:
        """Hold the room of every Provisioned request, minus its running consumers."""
        for pr in self._requests.values():
            if not _is_due_for_booking(pr):
                continue
            pods = self._pods_of(pr)
            if isinstance(pods, str):
                self._set(pr, FAILED, "True", FAILED_TO_BOOK_CAPACITY_REASON,
                          f"Couldn't create pods, err: {pods}")
                continue
            left = pods[: max(0, len(pods) - self._consumers(pr))]
            if left and (missed := self._place(left, snapshot, unusable)):
                log.warning(
                    "provisioning_request_booking_incomplete",
                    request=pr.key,
                    booked=len(left) - len(missed),
                    pods=len(left),
                )

    # ------------------------------------------------------------------ provisioning

    def _due(self, pr: ProvisioningRequest) -> bool:
        """CA's injector: never answered, or Provisioned=False and its backoff over."""
        if pr.is_true(FAILED) or pr.is_true(PROVISIONED) or pr.is_true(BOOKING_EXPIRED):
            self._backoff.pop(pr.key, None)
            return False
        provisioned = pr.condition(PROVISIONED)
        if provisioned is None:
            return True
        since = provisioned.last_transition_time
        return since is None or since + self._backoff_of(pr) < self._now

    def _backoff_of(self, pr: ProvisioningRequest) -> timedelta:
        return self._backoff.get(pr.key, self.options.provisioning_request_initial_backoff_time)

    def _retried(self, pr: ProvisioningRequest) -> None:
        """A retry after Provisioned=False doubles the request's backoff, up to the max."""
        if pr.condition(PROVISIONED) is None:
            return
        o = self.options
        backoff = min(2 * self._backoff_of(pr), o.provisioning_request_max_backoff_time)
        self._backoff.pop(pr.key, None)
        self._backoff[pr.key] = backoff
        while len(self._backoff) > max(1, o.provisioning_request_max_backoff_cache_size):
            self._backoff.popitem(last=False)

    def _no_capacity(self, pr: ProvisioningRequest) -> None:
        no_retry = pr.parameters.get(NO_RETRY_PARAMETER)
        if no_retry == "true":
            # As CA: Failed=True lets Kueue retry elsewhere at once; Provisioned=False would
            # hold the quota through the backoff.
            self._set(pr, FAILED, "True", CAPACITY_IS_NOT_FOUND_REASON,
                      CAPACITY_NOT_FOUND_NO_RETRY_MSG)
            return
        if no_retry not in (None, "false"):
            log.error(
                "provisioning_request_parameter_ignored",
                request=pr.key,
                parameter=NO_RETRY_PARAMETER,
                value=no_retry,
                expected='"true" or "false"',
            )
        self._set(pr, PROVISIONED, "False", CAPACITY_IS_NOT_FOUND_REASON,
                  CAPACITY_IS_NOT_FOUND_MSG)

    def _accept(self, pr: ProvisioningRequest) -> tuple[ProvisioningRequest, list[Pod] | None]:
        self._retried(pr)
        pr = self._set(pr, ACCEPTED, "True", ACCEPTED_REASON, ACCEPTED_MSG)
        pods = self._pods_of(pr)
        if isinstance(pods, str):
            self._set(pr, FAILED, "True", FAILED_TO_CREATE_PODS_REASON,
                      pods)
            return pr, None
        return pr, pods

    def provision(self, snapshot: ClusterSnapshot, unusable: Collection[str] = ()) -> None:
        """Answer the requests due this loop (the cluster's room as `snapshot` has it,
        pending pods placed): check-capacity ones at once; a best-effort-atomic one that
        needs new nodes is left in `atomic_pods` for the scale-up."""
        if not self._requests:
            return
        due = [pr for pr in self._requests.values() if self._due(pr)]
        if not due:
            return
        o = self.options
        batch = o.check_capacity_batch_processing and o.check_capacity_provisioning_request_max_batch_size > 1
        if batch:
            checks = [pr for pr in due if pr.class_name != BEST_EFFORT_ATOMIC]
            checks = checks[: o.check_capacity_provisioning_request_max_batch_size]
            atomic = next((pr for pr in due if pr.class_name == BEST_EFFORT_ATOMIC), None)
        else:
            # One request per loop, the oldest first.
            first = due[0]
            checks = [first] if first.class_name != BEST_EFFORT_ATOMIC else []
            atomic = first if first.class_name == BEST_EFFORT_ATOMIC else None
        started = self.monotonic()
        timebox = o.check_capacity_provisioning_request_batch_timebox.total_seconds()
        for pr in checks:
            pr, pods = self._accept(pr)
            if pods is not None:
                snapshot.fork()
                if self._place(pods, snapshot, unusable):
                    snapshot.revert()
                    self._no_capacity(pr)
                else:
                    snapshot.commit()
                    self._set(pr, PROVISIONED, "True", CAPACITY_IS_FOUND_REASON,
                              CAPACITY_IS_FOUND_MSG)
            if batch and self.monotonic() - started > timebox:
                log.info("provisioning_request_batch_timebox_exceeded", processed=len(checks))
                break
        if atomic is not None:
            pr, pods = self._accept(atomic)
            if pods is None:
                return
            snapshot.fork()
            missed = self._place(pods, snapshot, unusable)
            if not missed:
                snapshot.commit()
                self._set(pr, PROVISIONED, "True", CAPACITY_IS_FOUND_REASON,
                          CAPACITY_IS_FOUND_MSG)
                return
            # As CA: the scale-up is for the pods that do not fit the cluster as it is. The
            # room the others found is not held yet: this loop makes no other scale-up and
            # no scale-down, and once Provisioned the booking holds all of them.
            snapshot.revert()
            self._atomic = pr
            self._atomic_pods = missed

    @property
    def atomic_pods(self) -> list[Pod]:
        """The pods of the best-effort-atomic request this loop's scale-up is for (empty:
        the scale-up is for the pending pods)."""
        return self._atomic_pods

    def all_or_nothing(self, result: ScaleUpResult) -> ScaleUpResult:
        """The plan for `atomic_pods`, kept only when it fits every one of them. The
        request's pods are virtual: no event or report names them."""
        covered = bool(result.decisions) and not result.pods_remaining
        reason = f"ProvisioningRequest {self._atomic.key}" if self._atomic else ""
        return dataclasses.replace(
            result,
            status=result.status if covered else ScaleUpStatus.NO_OPTIONS_AVAILABLE,
            decisions=tuple(
                dataclasses.replace(d, pods=(), reason=reason) for d in result.decisions
            )
            if covered
            else (),
            triggered_pods=(),
            pods_remaining={},
            group_rejections={},
        )

    def after_scale_up(self, result: ScaleUpResult) -> None:
        """The atomic request's verdict: Provisioned when its scale-up was made."""
        pr = self._atomic
        if pr is None:
            return
        pr = self._requests[pr.key]
        if result.status is ScaleUpStatus.SUCCESSFUL and any(d.delta > 0 for d in result.decisions):
            self._backoff.pop(pr.key, None)
            self._set(pr, PROVISIONED, "True", CAPACITY_IS_PROVISIONED_REASON,
                      CAPACITY_IS_PROVISIONED_MSG)
        else:
            self._no_capacity(pr)

