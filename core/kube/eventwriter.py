"""Writes events as core/v1 Event objects, as Cluster Autoscaler's event recorder does.

Each event goes through an ``EventCorrelator`` (``eventcorrelator.py``) first, as client-go's
recorder passes them: an event already written is patched (its ``count`` plus one) rather
than created again, a run of similar ones is combined into one, and spam is dropped. A patch
finding its Event gone (expired, deleted) creates it again, as client-go does.

A write that cannot reach the API server (no connection, a connection dropped, a timeout)
is tried again, as client-go's recorder does: up to 12 tries, 10 seconds apart (the first
wait a random part of that, so that clients do not retry in step), holding the events
behind it. A write the server refuses (403, 422, ...) is not tried again. Either way a
failed write loses that one event: it is logged on one line (the event's object and reason,
the status and reason of the failure) and counted through ``on_error``; the loop and the
other events go on.
"""

from __future__ import annotations

import queue
import random
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from clusterscaler.framework.errors import ErrorType, describe, is_transport_error
from clusterscaler.report.events import Event, EventSink
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from .eventcorrelator import Correlation, CorrelatorOptions, EventCorrelator
from .responses import read_json

__all__ = ["COMPONENT", "BackgroundEventSink", "KubeEventSink"]

log = structlog.get_logger()

COMPONENT = "cluster-autoscaler"
# client-go's recorder: maxTriesPerEvent and its sleep between two tries.
MAX_TRIES_PER_EVENT = 12
RETRY_INTERVAL_SECONDS = 10.0


def _timestamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeEventSink:
    """An ``EventSink`` creating core/v1 Events; failures are logged, never raised.

    Events about cluster-scoped objects (nodes) go to the ``default`` namespace, as the
    Kubernetes event recorder puts them. ``on_error`` is told the type of each failure
    (``Metrics.register_error``); it is called from the thread that writes. ``correlation``
    are the correlator's options (client-go's defaults unless given); ``clock`` is the
    correlator's. A write failing for want of the API server is tried `max_tries` times in
    all, `retry_interval` seconds apart (the first wait a random part of it); `stop()` ends
    the waiting.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        component: str = COMPONENT,
        instance: str = "",
        on_error: Callable[[ErrorType], None] | None = None,
        correlation: CorrelatorOptions | None = None,
        clock: Callable[[], datetime] | None = None,
        max_tries: int = MAX_TRIES_PER_EVENT,
        retry_interval: float = RETRY_INTERVAL_SECONDS,
    ) -> None:
        self.core = k8s.CoreV1Api(api_client)
        self.correlator = (
            EventCorrelator(correlation)
            if clock is None
            else EventCorrelator(correlation, clock=clock)
        )
        self.component = component
        self.instance = instance or socket.gethostname()
        self.on_error = on_error
        self.failures = 0
        self.max_tries = max_tries
        self.retry_interval = retry_interval
        self._stopped = threading.Event()

    def stop(self) -> None:
        """End any wait between two tries: the event being written is given up."""
        self._stopped.set()

    def body(self, event: Event, timestamp: datetime) -> dict[str, Any]:
        ref = event.involved
        namespace = ref.namespace or "default"
        involved: dict[str, Any] = {
            "kind": ref.kind,
            "name": ref.name,
            "apiVersion": ref.api_version,
        }
        if ref.namespace:
            involved["namespace"] = ref.namespace
        if ref.uid:
            involved["uid"] = ref.uid
        stamp = _timestamp(timestamp)
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref.name}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": involved,
            "reason": event.reason,
            "message": event.message,
            "type": event.type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }

    def write(self, event: Event, timestamp: datetime) -> None:
        correlation = self.correlator.correlate(self.body(event, timestamp))
        if correlation is None:
            return
        tries = 0
        while True:
            tries += 1
            try:
                written = self._send(correlation)
                break
            except Exception as exc:
                if tries > 1 and isinstance(exc, ApiException) and exc.status == 409:
                    # An earlier try was written though its answer was lost: the event is
                    # there, as client-go takes an AlreadyExists.
                    return
                # Events are informational: losing one must never stop the loop, nor (a bug
                # here) the worker writing the next ones.
                retry = is_transport_error(exc) and tries < self.max_tries
                info = describe(exc)
                log.warning(
                    "event_write_failed",
                    action="patch_event" if correlation.patch is not None else "create_event",
                    object=str(event.involved),
                    event_reason=event.reason,
                    tries=tries,
                    retrying=retry,
                    **info.fields(exc),
                )
                if retry and not self._wait_before_try(tries + 1):
                    continue
                self.failures += 1
                if self.on_error is not None:
                    self.on_error(info.type)
                return
        self.correlator.update_state(written)

    def _wait_before_try(self, attempt: int) -> bool:
        """Wait before try number `attempt` (2 or later); True when `stop()` ended the wait."""
        delay = self.retry_interval
        if attempt == 2:
            delay *= random.random()
        return self._stopped.wait(delay)

    def _send(self, correlation: Correlation) -> dict[str, Any]:
        body = correlation.event
        namespace = body["metadata"]["namespace"]
        if correlation.patch is not None:
            try:
                return read_json(
                    self.core.patch_namespaced_event(
                        body["metadata"]["name"],
                        namespace,
                        correlation.patch,
                        _content_type="application/strategic-merge-patch+json",
                        _preload_content=False,
                    )
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
        metadata = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
        return read_json(
            self.core.create_namespaced_event(
                namespace, {**body, "metadata": metadata}, _preload_content=False
            )
        )


class BackgroundEventSink:
    """Writes events from a worker thread so the loop never waits on the API server.

    Event writes share the client's rate limit (`--kube-client-qps`); a scale-up that
    triggers thousands of `TriggeredScaleUp` events must not stall the next loop. When the
    queue is full, new events are dropped and counted, as client-go's broadcaster does.
    Drops are logged on one line at most every `DROP_LOG_INTERVAL` seconds, with their
    count, and once more when the queue has room again, not a line per event: a scale-up
    of 5,000 pods drops thousands.
    """

    DROP_LOG_INTERVAL = 10.0

    def __init__(self, sink: EventSink, *, max_queued: int = 1000) -> None:
        self.sink = sink
        self.queue: queue.Queue[tuple[Event, datetime] | None] = queue.Queue(max_queued)
        self.dropped = 0
        self._drops_lock = threading.Lock()
        # Drops not logged yet, the first of them, and when drops were last logged.
        self._unlogged = 0
        self._first_unlogged: Event | None = None
        self._logged_at = -float("inf")
        self._thread = threading.Thread(target=self._work, name="events", daemon=True)
        self._thread.start()

    def write(self, event: Event, timestamp: datetime) -> None:
        try:
            self.queue.put_nowait((event, timestamp))
        except queue.Full:
            with self._drops_lock:
                self.dropped += 1
                self._unlogged += 1
                if self._first_unlogged is None:
                    self._first_unlogged = event
                due = time.monotonic() - self._logged_at >= self.DROP_LOG_INTERVAL
            if due:
                self._log_drops()

    def _log_drops(self) -> None:
        """Log the drops not logged yet, if any, on one line."""
        with self._drops_lock:
            count, first = self._unlogged, self._first_unlogged
            if not count or first is None:
                return
            self._unlogged, self._first_unlogged = 0, None
            self._logged_at = time.monotonic()
            total = self.dropped
        log.warning(
            "events_dropped",
            count=count,
            total=total,
            queue_size=self.queue.maxsize,
            first_reason=first.reason,
            first_object=str(first.involved),
        )

    def _work(self) -> None:
        while True:
            item = self.queue.get()
            try:
                if item is None:
                    return
                self.sink.write(*item)
            except Exception as exc:
                # Sinks handle their failures; one that does not must not end the worker
                # (every later event would be lost without a word).
                log.error(
                    "event_write_failed",
                    object=str(item[0].involved) if item else "",
                    **describe(exc).fields(exc),
                )
            finally:
                self.queue.task_done()
                if self._unlogged and self.queue.empty():
                    self._log_drops()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued event was written; False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued (up to `timeout`) and stop the worker. A sink still waiting
        to write again to an API server it cannot reach is stopped (`stop()`) after it."""
        try:
            self.queue.put(None, timeout=timeout)
        except queue.Full:
            pass
        else:
            self._thread.join(timeout)
        stop = getattr(self.sink, "stop", None)
        if self._thread.is_alive() and callable(stop):
            stop()
            self._thread.join(timeout)
        self._log_drops()
