"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Candidates try every ``retry_period`` to acquire the Lease; a Lease held by someone else is
taken over only after its holder has not renewed it for ``lease_duration`` as observed
locally (clocks of different machines are never compared). Writes carry the Lease's
resourceVersion, so of two candidates racing for an expired Lease exactly one wins (the
other gets 409). The leader renews every ``retry_period``, as client-go does: one PUT of the
Lease it last wrote, reading the Lease first only when that write fails (someone else wrote
it since); ``is_leader`` turns false as
soon as ``renew_deadline`` passes without a successful renewal, even while a renewal
request is still hanging, so a leader that cannot renew stops acting at once. ``stop``
releases the Lease (empty holder), so a successor takes over without waiting.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
import urllib3
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from .responses import discard, read_json

__all__ = ["LeaderElectionConfig", "LeaderElector", "default_identity"]

log = structlog.get_logger()


def default_identity() -> str:
    """Hostname plus a random suffix, as client-go's callers usually build it."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderElectionConfig:
    """``--leader-elect-*`` settings."""

    name: str = "cluster-autoscaler"
    namespace: str = "kube-system"
    lease_duration: timedelta = timedelta(seconds=15)
    renew_deadline: timedelta = timedelta(seconds=10)
    retry_period: timedelta = timedelta(seconds=2)

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline "
                f"(got {self.lease_duration.total_seconds()}s and {self.renew_deadline.total_seconds()}s)"
            )
        if not self.renew_deadline > self.retry_period:
            raise ValueError(
                "--leader-elect-renew-deadline must be greater than --leader-elect-retry-period "
                f"(got {self.renew_deadline.total_seconds()}s and {self.retry_period.total_seconds()}s)"
            )

    @classmethod
    def from_options(cls, options: Any) -> LeaderElectionConfig:
        return cls(
            name=options.leader_elect_resource_name,
            namespace=options.leader_elect_resource_namespace or options.namespace,
            lease_duration=options.leader_elect_lease_duration,
            renew_deadline=options.leader_elect_renew_deadline,
            retry_period=options.leader_elect_retry_period,
        )


class LeaderElector:
    """Acquires and keeps a Lease; ``is_leader`` says whether this process may act."""

    def __init__(
        self,
        api_client: Any,
        config: LeaderElectionConfig,
        *,
        identity: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = k8s.CoordinationV1Api(api_client)
        self.config = config
        self.identity = identity or default_identity()
        self.clock = clock
        self.wall_clock = wall_clock
        self._lock = threading.Lock()
        self._observed_record: tuple[str, str, int] | None = None  # holder, renewTime, transitions
        self._observed_at = 0.0
        self._last_renew: float | None = None
        self._written: dict[str, Any] | None = None  # the Lease as our last write left it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._leading = threading.Event()
        self.on_started_leading: Callable[[], None] | None = None
        self.on_stopped_leading: Callable[[], None] | None = None

    # ------------------------------------------------------------------ state

    @property
    def is_leader(self) -> bool:
        with self._lock:
            return self._last_renew is not None and (
                self.clock() - self._last_renew < self.config.renew_deadline.total_seconds()
            )

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        return self._leading.wait(timeout)

    # ------------------------------------------------------------------ one attempt

    def try_acquire_or_renew(self) -> bool:
        """One attempt to acquire (or, as leader, renew) the Lease; True when we hold it."""
        now_wall = self.wall_clock()
        if self.is_leader and self._written is not None and self._renew_written(now_wall):
            return True
        try:
            response = self.api.read_namespaced_lease(
                self.config.name, self.config.namespace, _preload_content=False
            )
            lease: dict[str, Any] = read_json(response)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return self._create(now_wall)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, str(spec.get("renewTime") or ""), int(spec.get("leaseTransitions") or 0))
        now = self.clock()
        with self._lock:
            if record != self._observed_record:
                self._observed_record = record
                self._observed_at = now
            observed_at = self._observed_at
        duration = float(
            spec.get("leaseDurationSeconds") or self.config.lease_duration.total_seconds()
        )
        held_by_other = bool(holder) and holder != self.identity
        if held_by_other and now - observed_at < duration:
            return False
        new_spec = dict(spec)
        if holder != self.identity:
            new_spec["acquireTime"] = _micro_time(now_wall)
            new_spec["leaseTransitions"] = record[2] + (1 if holder else 0)
        new_spec["holderIdentity"] = self.identity
        new_spec["leaseDurationSeconds"] = int(self.config.lease_duration.total_seconds())
        new_spec["renewTime"] = _micro_time(now_wall)
        lease["spec"] = new_spec
        try:
            written = self._replace(lease)
        except ApiException as exc:
            if exc.status == 409:
                return False  # somebody else wrote first
            raise
        self._renewed(now, written)
        return True

    def _renew_written(self, now_wall: datetime) -> bool:
        """client-go's fast path: the leader writes the Lease it last wrote, new renewTime
        and all, without reading it first; any failure leaves the ordinary path to try."""
        assert self._written is not None
        lease = dict(self._written)
        lease["spec"] = {
            **(lease.get("spec") or {}),
            "renewTime": _micro_time(now_wall),
            "leaseDurationSeconds": int(self.config.lease_duration.total_seconds()),
        }
        now = self.clock()
        try:
            written = self._replace(lease)
        except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            log.debug("leader_election_renewal_retried", lease=self.config.name, error=str(exc))
            self._written = None
            return False
        self._renewed(now, written)
        return True

    def _replace(self, lease: dict[str, Any]) -> object:
        response = self.api.replace_namespaced_lease(
            self.config.name, self.config.namespace, lease, _preload_content=False
        )
        written: object = read_json(response)
        return written

    def _create(self, now_wall: datetime) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.config.name, "namespace": self.config.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.config.lease_duration.total_seconds()),
                "acquireTime": _micro_time(now_wall),
                "renewTime": _micro_time(now_wall),
                "leaseTransitions": 0,
            },
        }
        try:
            written = read_json(
                self.api.create_namespaced_lease(
                    self.config.namespace, body, _preload_content=False
                )
            )
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        self._renewed(self.clock(), written)
        return True

    def _renewed(self, now: float, written: object) -> None:
        # The next renewal writes this Lease as it is; an answer without the object's
        # metadata (and so without its resourceVersion) leaves it to the ordinary path.
        self._written = (
            written if isinstance(written, dict) and isinstance(written.get("metadata"), dict)
            else None
        )
        with self._lock:
            self._last_renew = now

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            log.warning("leader_election_error", lease=self.config.name, error=str(exc))
            return False
        except Exception as exc:
            # A malformed Lease or an unexpected client error must not kill the election
            # thread: a candidate would never lead again.
            log.exception("leader_election_error", lease=self.config.name, error=repr(exc))
            return False

    # ------------------------------------------------------------------ loop

    def run(self) -> None:
        """Acquire, then renew until leadership is lost or ``stop`` is called."""
        retry = self.config.retry_period.total_seconds()
        while not self._stop.is_set():
            if self._attempt():
                break
            self._stop.wait(retry)
        if self._stop.is_set():
            return
        log.info("leader_elected", lease=self.config.name, identity=self.identity)
        self._leading.set()
        if self.on_started_leading is not None:
            self.on_started_leading()
        while not self._stop.wait(retry):
            if self._attempt():
                continue
            if not self.is_leader:
                break
        if not self._stop.is_set():
            log.error("leader_election_lost", lease=self.config.name, identity=self.identity)
            self._leading.clear()
            if self.on_stopped_leading is not None:
                self.on_stopped_leading()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name="leader-election", daemon=True)
            self._thread.start()

    def stop(self, *, release: bool = True) -> None:
        """Stop campaigning; as leader, release the Lease so a successor need not wait."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        was_leader = self.is_leader
        self._written = None
        with self._lock:
            self._last_renew = None
        self._leading.clear()
        if release and was_leader:
            self.release()

    def release(self) -> bool:
        """Clear the holder of a Lease we hold; True when released."""
        try:
            response = self.api.read_namespaced_lease(
                self.config.name, self.config.namespace, _preload_content=False
            )
            lease: dict[str, Any] = read_json(response)
            spec = lease.setdefault("spec", {})
            if spec.get("holderIdentity") != self.identity:
                return False
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = _micro_time(self.wall_clock())
            discard(
                self.api.replace_namespaced_lease(
                    self.config.name, self.config.namespace, lease, _preload_content=False
                )
            )
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("leader_election_release_failed", lease=self.config.name, error=str(exc))
            return False
        log.info("leader_election_released", lease=self.config.name, identity=self.identity)
        return True
