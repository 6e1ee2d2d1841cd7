"""Correlates core/v1 Events before they are written, as client-go's ``EventCorrelator`` does.

Cluster Autoscaler writes its events through client-go's event recorder, which passes each
one through three rules before it reaches the API server (``tools/record/events_cache.go``,
client-go v0.36):

1. aggregation: events alike but for the message (same source, object, type, reason and
   reporting controller/instance) are counted by distinct message; from the
   ``max_events``-th distinct one within ``max_interval`` of the previous, they become one
   event whose message is ``(combined from similar events): <message>``;
2. logging: an event equal to one already written (same key, message included) is not
   created again: the existing Event is patched with its count plus one, the new
   ``lastTimestamp`` and the message;
3. spam filter: a token bucket per spam key (``burst`` tokens, refilled at ``qps``); an event
   finding it empty is dropped. It runs after the two others, so a dropped duplicate still
   counts in the next patch's ``count``.

Events are plain core/v1 Event documents (``dict``), as sent to and returned by the server.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

__all__ = [
    "AUTOSCALER_OPTIONS",
    "COMBINED_PREFIX",
    "Correlation",
    "CorrelatorOptions",
    "EventCorrelator",
    "autoscaler_spam_key",
    "event_key",
    "spam_key",
]

Obj = dict[str, Any]
SpamKey = Callable[[Obj], str]

COMBINED_PREFIX = "(combined from similar events): "

_K = TypeVar("_K")
_V = TypeVar("_V")


def _involved(event: Obj) -> Obj:
    involved: Obj = event.get("involvedObject") or {}
    return involved


def _source(event: Obj) -> Obj:
    source: Obj = event.get("source") or {}
    return source


def _join(*parts: Any) -> str:
    return "".join(str(part or "") for part in parts)


def event_key(event: Obj) -> str:
    """The key of identical events (client-go's ``getEventKey``): written once, then patched."""
    ref, source = _involved(event), _source(event)
    return _join(
        source.get("component"),
        source.get("host"),
        ref.get("kind"),
        ref.get("namespace"),
        ref.get("name"),
        ref.get("fieldPath"),
        ref.get("uid"),
        ref.get("apiVersion"),
        event.get("type"),
        event.get("reason"),
        event.get("message"),
    )


def spam_key(event: Obj) -> str:
    """client-go's default spam key (``getSpamKey``): source, object and type."""
    ref, source = _involved(event), _source(event)
    return _join(
        source.get("component"),
        source.get("host"),
        ref.get("kind"),
        ref.get("namespace"),
        ref.get("name"),
        ref.get("uid"),
        ref.get("apiVersion"),
        event.get("type"),
    )


def autoscaler_spam_key(event: Obj) -> str:
    """Cluster Autoscaler's spam key: reason, source and object, or for its status ConfigMap
    the message alone, so that every distinct status event is written."""
    ref, source = _involved(event), _source(event)
    if (
        ref.get("name") == "cluster-autoscaler-status"
        and ref.get("namespace") == "kube-system"
        and ref.get("kind") == "ConfigMap"
    ):
        return _join(event.get("message"))
    return _join(
        event.get("reason"),
        source.get("component"),
        source.get("host"),
        ref.get("kind"),
        ref.get("namespace"),
        ref.get("name"),
        ref.get("uid"),
        ref.get("apiVersion"),
    )


def _aggregate_key(event: Obj) -> str:
    """client-go's ``EventAggregatorByReasonFunc``: alike but for the message."""
    ref, source = _involved(event), _source(event)
    return _join(
        source.get("component"),
        source.get("host"),
        ref.get("kind"),
        ref.get("namespace"),
        ref.get("name"),
        ref.get("uid"),
        ref.get("apiVersion"),
        event.get("type"),
        event.get("reason"),
        event.get("reportingComponent"),
        event.get("reportingInstance"),
    )


@dataclass(frozen=True)
class CorrelatorOptions:
    """client-go's ``CorrelatorOptions``; the defaults are client-go's."""

    lru_cache_size: int = 4096
    burst: int = 25
    qps: float = 1.0 / 300.0
    max_events: int = 10
    max_interval_seconds: int = 600
    spam_key: SpamKey = field(default=spam_key)


# What Cluster Autoscaler gives client-go unless --record-duplicated-events
# (utils/kubernetes/factory.go): one event per reason and object every five minutes.
AUTOSCALER_OPTIONS = CorrelatorOptions(
    lru_cache_size=8192, burst=1, qps=1.0 / 300.0, spam_key=autoscaler_spam_key
)


class _LRU(Generic[_K, _V]):
    """k8s.io/utils/lru: a read or a write makes an entry the newest; the oldest goes first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def add(self, key: _K, value: _V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class _TokenBucket:
    """golang.org/x/time/rate's limiter as ``TryAccept`` uses it: starts full."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self.tokens = float(burst)
        self.last: float | None = None

    def try_accept(self, now: float) -> bool:
        if self.last is not None and now > self.last:
            self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
        if self.last is None or now > self.last:
            self.last = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


@dataclass
class _Aggregate:
    messages: set[str]
    last: float


@dataclass(frozen=True)
class _Observation:
    count: int
    first_timestamp: str | None
    name: str
    resource_version: str


@dataclass(frozen=True)
class Correlation:
    """What to write: ``event`` is created, or when ``patch`` is set the Event named in
    ``event`` is patched with it (and created as ``event`` if it is gone)."""

    event: Obj
    patch: Obj | None = None


def _timestamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventCorrelator:
    """client-go's ``EventCorrelator``: ``correlate`` says what to write for an event (None:
    drop it), ``update_state`` is told the Event the server returned."""

    def __init__(
        self,
        options: CorrelatorOptions | None = None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.options = options or CorrelatorOptions()
        self.clock = clock
        size = self.options.lru_cache_size
        self._spam: _LRU[str, _TokenBucket] = _LRU(size)
        self._aggregates: _LRU[str, _Aggregate] = _LRU(size)
        self._observed: _LRU[str, _Observation] = _LRU(size)
        self._lock = threading.Lock()
        self.filtered = 0

    def correlate(self, event: Obj) -> Correlation | None:
        with self._lock:
            aggregated, key = self._aggregate(event)
            observed, patch = self._observe(aggregated, key)
            if self._filter(observed):
                self.filtered += 1
                return None
            return Correlation(observed, patch)

    def update_state(self, event: Obj) -> None:
        """Remember the server's copy (its name, resourceVersion and count) of ``event``."""
        with self._lock:
            self._remember(event_key(event), event)

    def _aggregate(self, event: Obj) -> tuple[Obj, str]:
        now = self.clock()
        seconds = now.timestamp()
        key = _aggregate_key(event)
        record = self._aggregates.get(key)
        if record is None or seconds - record.last > self.options.max_interval_seconds:
            record = _Aggregate(set(), seconds)
        record.messages.add(str(event.get("message") or ""))
        record.last = seconds
        self._aggregates.add(key, record)
        if len(record.messages) < self.options.max_events:
            return event, event_key(event)
        # The record stays one short of the limit, so every later message of the key within
        # the interval is combined too.
        record.messages.pop()
        stamp = _timestamp(now)
        involved = _involved(event)
        combined: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved.get('name', '')}.{int(seconds * 1e9):x}",
                "namespace": (event.get("metadata") or {}).get("namespace", ""),
            },
            "involvedObject": involved,
            "reason": event.get("reason"),
            "message": COMBINED_PREFIX + str(event.get("message") or ""),
            "type": event.get("type"),
            "source": _source(event),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        return combined, key

    def _observe(self, event: Obj, key: str) -> tuple[Obj, Obj | None]:
        last = self._observed.get(key)
        patch: Obj | None = None
        if last is not None and last.count > 0:
            metadata = dict(event.get("metadata") or {})
            metadata["name"] = last.name
            if last.resource_version:
                metadata["resourceVersion"] = last.resource_version
            event = {
                **event,
                "metadata": metadata,
                "firstTimestamp": last.first_timestamp,
                "count": last.count + 1,
            }
            # client-go's two-way strategic merge patch between the event and itself with
            # count, lastTimestamp and message cleared: exactly these three fields.
            patch = {"count": event["count"], "lastTimestamp": event.get("lastTimestamp")}
            if event.get("message"):
                patch["message"] = event["message"]
        self._remember(key, event)
        return event, patch

    def _remember(self, key: str, event: Obj) -> None:
        metadata = event.get("metadata") or {}
        self._observed.add(
            key,
            _Observation(
                count=int(event.get("count") or 0),
                first_timestamp=event.get("firstTimestamp"),
                name=str(metadata.get("name", "")),
                resource_version=str(metadata.get("resourceVersion") or ""),
            ),
        )

    def _filter(self, event: Obj) -> bool:
        key = self.options.spam_key(event)
        bucket = self._spam.get(key)
        if bucket is None:
            bucket = _TokenBucket(self.options.qps, self.options.burst)
        accepted = bucket.try_accept(self.clock().timestamp())
        self._spam.add(key, bucket)
        return not accepted
