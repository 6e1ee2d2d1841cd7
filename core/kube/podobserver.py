"""Says when a pod newly becomes unschedulable, so the loop need not wait out --scan-interval.

Cluster Autoscaler's `UnschedulablePodObserver`: with --frequent-loops-enabled, a pod the
scheduler has just marked unschedulable (no `spec.nodeName`, not Succeeded or Failed, and
`PodScheduled=False` with reason `Unschedulable`) starts the next loop at once. The pod
cache feeds this observer every pod it lists, adds, updates and deletes; the run loop
waits on it (`wait`) and is woken by the first new unschedulable pod.

Like CA's one-slot channel, any number of pods appearing before the loop waits again is one
signal: a storm of pending pods wakes the loop once, and the loop's snapshot holds them all.
CA only signals for a pod whose `PodScheduled` condition changed in the last 10 seconds
(compared with the local clock); here a pod signals once per unschedulable spell, the first
time this process sees it unschedulable, with no dependence on clocks. The pods of the
first list do not signal: the first loop starts right after it anyway.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import structlog
from clusterscaler.model import Pod

__all__ = ["UnschedulablePodObserver", "waits_unschedulable"]

log = structlog.get_logger()


def waits_unschedulable(pod: Pod) -> bool:
    """Whether a pod waits for a node the scheduler found none for: not bound, not
    finished, and marked `PodScheduled=False`, reason `Unschedulable`."""
    return pod.unschedulable and not pod.node_name and not pod.is_terminal


def _identity(pod: Pod) -> tuple[str, str, str]:
    # The uid: a pod deleted and created again under the same name is a new pod.
    return (pod.namespace, pod.name, pod.uid)


class UnschedulablePodObserver:
    """Remembers the pods seen unschedulable and wakes one waiting loop when a new one
    appears. The informer's thread calls `listed`, `changed` and `deleted`; the loop calls
    `take`, `wait` and, at shutdown, `interrupt`."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str, str]] = set()
        self._cond = threading.Condition()
        self._appeared = False
        self._interrupted = False
        self.signals = 0

    # ------------------------------------------------------------------ the pod cache

    def listed(self, pods: Iterable[Pod], *, initial: bool) -> None:
        """A complete list of the pods (the first one when `initial`): those unschedulable
        and not seen so before signal, unless it is the first list; pods gone since are
        forgotten."""
        now = {_identity(p) for p in pods if waits_unschedulable(p)}
        with self._cond:
            new = len(now - self._seen)
            self._seen = now
        if new and not initial:
            self._signal(f"{new} pods found unschedulable by a relist")

    def changed(self, pod: Pod) -> None:
        """A pod was added or updated."""
        identity = _identity(pod)
        with self._cond:
            if not waits_unschedulable(pod):
                self._seen.discard(identity)
                return
            if identity in self._seen:
                return
            self._seen.add(identity)
        self._signal(pod.key)

    def deleted(self, pod: Pod) -> None:
        """A pod was deleted."""
        with self._cond:
            self._seen.discard(_identity(pod))

    def _signal(self, what: str) -> None:
        with self._cond:
            self.signals += 1
            self._appeared = True
            self._cond.notify_all()
        log.debug("unschedulable_pod_appeared", pod=what)

    # ------------------------------------------------------------------ the loop

    def take(self) -> bool:
        """Whether a new unschedulable pod appeared since the last `take` or `wait`; the
        signal is spent."""
        with self._cond:
            appeared, self._appeared = self._appeared, False
            return appeared

    def wait(self, timeout: float) -> bool:
        """Block until a new unschedulable pod appears (True, the signal spent), `timeout`
        seconds pass or `interrupt` is called (False)."""
        with self._cond:
            self._cond.wait_for(lambda: self._appeared or self._interrupted, max(0.0, timeout))
            if self._interrupted:
                return False
            appeared, self._appeared = self._appeared, False
            return appeared

    def interrupt(self) -> None:
        """Wake the waiting loop now and from now on (shutdown)."""
        with self._cond:
            self._interrupted = True
            self._cond.notify_all()
