"""List+watch caches that read raw JSON and keep parsed model objects.

An ``Informer`` lists a resource page by page (``_preload_content=False``, so the client's
generated models are never built: they are far too slow for 100,000 pods), then watches
from the list's resourceVersion with bookmarks. A watch that ends is resumed from the last
resourceVersion seen; a 410 Gone (too old resourceVersion, expired continue token) relists;
other errors back off exponentially. ``has_synced`` is false until the first complete list,
and the cache is replaced atomically on relists, so readers never see a partial cluster.

Health cannot lie: a watch answer must be a stream of watch events. Anything else (a list
body, a line that is not JSON, an event of no known type) or a stream that ends at once
without a single event counts as a failure, is logged with its reason, backs off and
relists, since the server evidently does not stream changes. ``stale_reason()`` says when
the cache was last known to follow the cluster (an open watch stream, or the end of a
successful list, event or full-length watch) longer ago than ``stale_after`` seconds, or
whose last list or watch failed: the loop then refuses destructive actions until the cache
is current again.

Objects that cannot be parsed are left out and remembered (``unreadable()``), so that the
loop keeps the nodes they are bound to; an optional resource the API server does not serve
is a synced, empty cache.

(Long on purpose: listing, watching, health and the unreadable objects share one cache,
one lock and one resourceVersion; apart, each would reach into the others' state.)
"""

from __future__ import annotations

import contextlib
import gc
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

import structlog
import urllib3
from clusterscaler.model import (
    UnreadableObject,
    decode_json,
    decode_list_page,
    gc_paused,
    object_key,
    parse_pod,
    parse_pod_json,
    read_guarded,
)
from kubernetes.client.rest import ApiException

__all__ = [
    "Backoff",
    "Informer",
    "InformerObserver",
    "ListerSpec",
    "WatchErrorEvent",
    "WatchExpiredError",
    "WatchProtocolError",
]

log = structlog.get_logger()

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Lister(Protocol):
    """A list method of the Kubernetes client (`CoreV1Api(...).list_node`, ...), called
    with keyword arguments only."""

    def __call__(self, **kwargs: object) -> object: ...


# A watch that ends cleanly this soon after it opened, without one event, is a server or
# proxy that does not stream (a real API server holds a watch until its timeout).
IMMEDIATE_END_SECONDS = 1.0
WATCH_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})


class WatchExpiredError(Exception):
    """The resourceVersion the cache holds is too old: the resource must be relisted."""


# A list of at least this many objects moves the heap out of the collector's sight.
SETTLE_AFTER_LIST = 5_000


def _settle_heap() -> None:
    """A cache just listed lives until the next list: collect what is garbage now, then
    freeze what is left (`gc.freeze`), so that the collector's full passes, due every few
    loops in a process allocating as a loop does, no longer walk millions of cached
    objects (about 1 s per pass at 150,000 pods). Cached objects replaced by watch events
    are still freed by reference counting: they hold no reference cycles. What an earlier
    list froze is unfrozen first, so that cycles which became garbage since are collected
    rather than kept for good."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class WatchProtocolError(Exception):
    """The answer to a watch request is not a stream of watch events."""


class WatchErrorEvent(Exception):
    """The watch stream carried an ERROR event other than 410 Gone: the watch failed, and
    the resource is relisted after the backoff, as client-go's reflector does (watching again
    from the same resourceVersion would be answered with the same event)."""


def _status_code(code: Any) -> int:
    """The HTTP status of an ERROR event's Status, 500 when it carries none that is one."""
    if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599:
        return code
    return 500


def _resource_version(obj: Mapping[str, Any]) -> str:
    """An event object's metadata.resourceVersion; empty when it has none that is a string
    (whatever the shape of its metadata)."""
    meta = obj.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return version if isinstance(version, str) else ""


def _not_an_event(event: Any) -> str:
    """Why a decoded watch line is not a watch event (empty when it is one)."""
    if not isinstance(event, dict):
        return f"a JSON {type(event).__name__} instead of a watch event"
    kind = event.get("type")
    if kind in WATCH_EVENT_TYPES and isinstance(event.get("object"), dict):
        return ""
    if kind is None and isinstance(event.get("items"), list):
        return f"a {event.get('kind') or 'list'} body instead of watch events"
    if kind is None:
        return f"an object of kind {event.get('kind') or 'unknown'} instead of a watch event"
    if kind in WATCH_EVENT_TYPES:
        return f"{kind} event whose object is not a JSON object"
    return f"a watch event of unknown type {str(kind)[:40]!r}"


@dataclass(frozen=True)
class ListerSpec(Generic[T]):
    """One cached resource: how to list it and how to parse its items.

    ``list_function`` is a typed client method (``CoreV1Api(...).list_node``) called with
    ``_preload_content=False``; ``kind`` is put on items, since the API server leaves it
    out of list items; ``parse`` turns a raw object into a model object. ``index_by``, when
    set, names the value a secondary index groups the objects by (a pod's node), so
    ``Informer.indexed`` answers without walking the whole cache.
    """

    resource: str
    kind: str
    list_function: Lister
    parse: Callable[[Mapping[str, object]], T]
    kwargs: Mapping[str, object] | None = None
    index_by: Callable[[T], str] | None = None
    # A resource the API server may not serve (resource.k8s.io/v1 before Kubernetes 1.34):
    # a 404 on its list means there is none, and the cache is synced and empty.
    optional: bool = False


class Backoff:
    """Exponential backoff with jitter: ``initial`` doubling up to ``maximum`` seconds."""

    def __init__(self, initial: float = 0.8, maximum: float = 30.0, jitter: float = 0.2) -> None:
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self.failures = 0

    def next_delay(self) -> float:
        delay = min(self.maximum, self.initial * (2**self.failures))
        self.failures += 1
        return float(delay * (1 + random.uniform(0, self.jitter)))

    def reset(self) -> None:
        self.failures = 0


class InformerObserver(Protocol[T_contra]):
    """Told of every change the cache takes in, on the informer's thread, after the cache
    holds it (the unschedulable pod trigger: `kube.podobserver`)."""

    def listed(self, items: Sequence[T_contra], *, initial: bool) -> None:
        """A complete list replaced the cache (`initial`: the first one)."""

    def changed(self, item: T_contra) -> None:
        """An object was added or updated."""

    def deleted(self, item: T_contra) -> None:
        """A cached object was deleted."""


def _read_all(response: Any) -> bytes:
    try:
        data = response.data if hasattr(response, "data") else response.read()
        return bytes(data)
    finally:
        _release(response)


def _release(response: Any) -> None:
    for method in ("release_conn", "close"):
        fn = getattr(response, method, None)
        if fn is not None:
            # Releasing a broken connection must not mask the real error.
            with contextlib.suppress(Exception):
                fn()


def _lines(response: Any) -> Iterator[bytes]:
    # One split per chunk keeps a burst of many events in one chunk linear.
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk if isinstance(chunk, bytes) else str(chunk).encode()
        if b"\n" not in buffer:
            continue
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


class Informer(Generic[T]):
    """A list+watch cache of one resource, run by a background thread."""

    def __init__(
        self,
        spec: ListerSpec[T],
        *,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        backoff: Backoff | None = None,
        stale_after: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        observer: InformerObserver[T] | None = None,
    ) -> None:
        self.spec = spec
        self.observer = observer
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self.backoff = backoff or Backoff()
        self._items: dict[str, T] = {}
        self._unreadable: dict[str, UnreadableObject] = {}
        # Set while the API server answers 404 for an optional resource.
        self.not_served = False
        # index value -> key -> object, kept with `_items` under the same lock.
        self._index: dict[str, dict[str, T]] = {}
        self._lock = threading.Lock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: Any = None
        self.resource_version = ""
        self.relists = 0
        self.watch_restarts = 0
        self.parse_errors = 0
        self.last_error: str = ""
        # An open watch keeps the cache current; between streams, the cache is as current
        # as the last list, event or full-length watch. Past `stale_after` it is stale:
        # by default a tenth of the watch timeout (30 s for 300 s), at least 10 s.
        self.stale_after = (
            stale_after if stale_after is not None else max(10.0, watch_timeout_seconds / 10)
        )
        self._clock = clock
        self._confirmed: float | None = None
        self._watching = False
        # Between a failed list or watch and the next successful one the cache is stale at
        # once: whatever changed meanwhile is missing, however recent the last event.
        self._failing = False

    # ------------------------------------------------------------------ readers

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def watching(self) -> bool:
        """Whether a watch stream is open (its answer received, events being read)."""
        return self._watching

    def stale_reason(self) -> str:
        """Why the cache may no longer follow the cluster; empty while it is current.

        Current means a watch stream is open, or the last successful list, watch event or
        full-length watch ended less than ``stale_after`` seconds ago and no list or watch
        has failed since. Not yet synced counts as stale too.
        """
        if not self.has_synced:
            return "not listed yet"
        if self._watching or self.not_served:
            return ""
        if self._failing:
            return f"retrying after a failure ({self.last_error})"
        confirmed = self._confirmed
        age = self._clock() - confirmed if confirmed is not None else float("inf")
        if age <= self.stale_after:
            return ""
        why = f"last list or watch event {age:.0f}s ago"
        return f"{why} ({self.last_error})" if self.last_error else why

    def items(self) -> list[T]:
        """The cached objects (a new list; the objects themselves are immutable)."""
        with self._lock:
            return list(self._items.values())

    def indexed(self, value: str) -> list[T]:
        """The cached objects whose ``spec.index_by`` is ``value`` (in the order they
        entered that index); empty when the spec has no index."""
        with self._lock:
            return list(self._index.get(value, {}).values())

    def _build_index(self, items: Mapping[str, T]) -> dict[str, dict[str, T]]:
        index: dict[str, dict[str, T]] = {}
        index_by = self.spec.index_by
        if index_by is not None:
            for key, item in items.items():
                index.setdefault(index_by(item), {})[key] = item
        return index

    def _unindex(self, key: str) -> None:
        """Drop ``key`` from the index; the caller holds the lock."""
        index_by = self.spec.index_by
        old = self._items.get(key)
        if index_by is None or old is None:
            return
        value = index_by(old)
        bucket = self._index.get(value)
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del self._index[value]

    def get(self, key: str) -> T | None:
        """The cached object ``namespace/name`` (or ``name`` for cluster-scoped kinds)."""
        with self._lock:
            return self._items.get(key)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self.run, name=f"informer-{self.spec.resource}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            # Unblock a watch waiting for the next event.
            shutdown = getattr(response, "shutdown", None)
            try:
                if shutdown is not None:
                    shutdown()
                else:
                    response.close()
            except Exception:
                pass
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def run(self) -> None:
        """List, then watch, until stopped; recover from every error."""
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self.list_once()
                    need_list = False
                self.watch_once()
                self.backoff.reset()
            except WatchExpiredError:
                log.info("informer_relist", resource=self.spec.resource, reason="expired")
                need_list = True
            except WatchProtocolError as exc:
                # The server does not stream changes: whatever it sent, the cache cannot
                # follow through this watch. Lists still work, so relist after the backoff.
                need_list = True
                self._failed(f"watch: {exc}")
            except WatchErrorEvent as exc:
                need_list = True
                self._failed(f"watch: ERROR event: {exc}")
            except ApiException as exc:
                if exc.status == 410:
                    need_list = True
                    continue
                if exc.status == 404 and self.spec.optional and need_list:
                    self._empty_not_served()
                    self._stop.wait(NOT_SERVED_RECHECK_SECONDS)
                    continue
                self._failed(f"HTTP {exc.status} {exc.reason}")
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    break
                self._failed(f"{type(exc).__name__}: {exc}")
            except Exception as exc:
                # Anything unexpected (a malformed event, a client bug) must not end the
                # thread: a cache that silently stops following the cluster would keep
                # answering as synced. Start over from a fresh list.
                log.exception("informer_unexpected_error", resource=self.spec.resource)
                need_list = True
                self._failed(f"{type(exc).__name__}: {exc}")

    def _empty_not_served(self) -> None:
        """The API server does not serve an optional resource: none exist."""
        if not self.not_served:
            log.info("informer_resource_not_served", resource=self.spec.resource)
        with self._lock:
            self._items = {}
            self._unreadable = {}
            self._index = {}
        self.not_served = True
        self._failing = False
        self._confirmed = self._clock()
        self._synced.set()

    def _failed(self, error: str) -> None:
        self.last_error = error
        self._failing = True
        delay = self.backoff.next_delay()
        log.warning(
            "informer_error",
            resource=self.spec.resource,
            error=error,
            retry_in_seconds=round(delay, 2),
        )
        self._stop.wait(delay)

    # ------------------------------------------------------------------ list and watch

    def _call(self, **kwargs: Any) -> Any:
        merged = {**(self.spec.kwargs or {}), **kwargs}
        return self.spec.list_function(_preload_content=False, **merged)

    def _key(self, raw: Mapping[str, Any]) -> str:
        return object_key(raw)

    def _parse(self, raw: Any, unreadable: dict[str, UnreadableObject]) -> T | None:
        """The model object of ``raw``, or None when it cannot be read: then it is logged
        and kept in ``unreadable`` under its key."""
        # Any shape of bad object (`status` a list, deep nesting) is caught: one malformed
        # object must not hide the rest of the cluster, nor stop the cache from following it.
        item = read_guarded(raw, self.spec.kind, self.spec.parse)
        if not isinstance(item, UnreadableObject):
            return item
        self.parse_errors += 1
        unreadable[item.key] = item
        log.warning(
            "informer_parse_error",
            resource=self.spec.resource,
            object=item.key,
            error=item.error,
        )
        return None

    def unreadable(self) -> list[UnreadableObject]:
        """The objects of the last list and watch events that could not be read."""
        with self._lock:
            return list(self._unreadable.values())

    def list_once(self) -> None:
        """Read every page, then swap the cache in at once."""
        items: dict[str, T] = {}
        unreadable: dict[str, UnreadableObject] = {}
        continue_token = ""
        while True:
            kwargs: dict[str, Any] = {"limit": self.page_size}
            if continue_token:
                kwargs["_continue"] = continue_token
            try:
                body = _read_all(self._call(**kwargs))
            except ApiException as exc:
                if exc.status == 410 and continue_token:
                    # The continue token expired mid-list: start over.
                    continue_token = ""
                    items.clear()
                    unreadable.clear()
                    continue
                raise
            # A page of a large cluster is tens of thousands of objects: decoded and parsed
            # in one go, with no collection passes over the growing cache (`gc_paused`).
            with gc_paused():
                page = decode_list_page(body) if self.spec.parse is parse_pod else None
                if page is not None:
                    list_meta, texts = page
                    self._add_pods(texts, items, unreadable)
                else:
                    document = decode_json(body)
                    list_meta = document.get("metadata")
                    for raw in document.get("items") or []:
                        parsed = self._parse(raw, unreadable)
                        if parsed is not None:
                            items[self._key(raw)] = parsed
            meta = list_meta or {}
            continue_token = meta.get("continue") or ""
            if not continue_token:
                resource_version = str(meta.get("resourceVersion") or "")
                break
        index = self._build_index(items)
        with self._lock:
            self._items = items
            self._unreadable = unreadable
            self._index = index
            self.resource_version = resource_version
        if len(items) >= SETTLE_AFTER_LIST:
            _settle_heap()
        if self.observer is not None:
            self.observer.listed(list(items.values()), initial=not self.relists)
        self.relists += 1
        self.not_served = False
        self._confirmed = self._clock()
        self._failing = False
        self._synced.set()
        log.debug(
            "informer_listed",
            resource=self.spec.resource,
            items=len(items),
            resource_version=resource_version,
        )

    def _add_pods(
        self, texts: list[Any], items: dict[str, T], unreadable: dict[str, UnreadableObject]
    ) -> None:
        """Pods of a list page, each parsed from its JSON text (`parse_pod_json`: the
        fields the model drops, such as managedFields, are never built); a pod that is
        not valid goes through `_parse`, which logs why."""
        for text in texts:
            parsed = parse_pod_json(text)
            if parsed is None:
                raw = decode_json(bytes(text))
                item = self._parse(raw, unreadable)
                if item is not None:
                    items[self._key(raw)] = item
                continue
            pod, namespace = parsed
            # As `_key` of the raw pod: the namespace as written, the name (non-empty).
            key = f"{namespace}/{pod.name}" if namespace else pod.name
            items[key] = cast(T, pod)

    def watch_once(self) -> None:
        """Watch from the cached resourceVersion until the server ends the stream.

        Raises ``WatchProtocolError`` when the answer is not a stream of watch events or
        ends at once without any.
        """
        timeout = self.watch_timeout_seconds
        response = self._call(
            watch=True,
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _request_timeout=(10, timeout + 30),
        )
        opened = self._clock()
        events = 0
        self._response = response
        if self._stop.is_set():
            # `stop()` came while the watch was opening: it found no response to shut down,
            # so the watch would block until the server's next event, minutes on a quiet
            # cluster. (It sets the flag before it reads the response, and we publish the
            # response before we read the flag: one of us sees the other.)
            self._response = None
            _release(response)
            return
        self._watching = True
        self._failing = False
        try:
            for line in _lines(response):
                if self._stop.is_set():
                    return
                try:
                    event = decode_json(line)
                except ValueError as exc:
                    raise WatchProtocolError(f"a line that is not JSON ({exc})") from None
                wrong = _not_an_event(event)
                if wrong:
                    raise WatchProtocolError(wrong)
                self._apply(event)
                if not events:
                    # The stream works: a later cut is a fresh failure, not one more in a row.
                    self.backoff.reset()
                events += 1
                self._confirmed = self._clock()
        finally:
            self._watching = False
            self._response = None
            _release(response)
        ended = self._clock()
        if not events and ended - opened < IMMEDIATE_END_SECONDS and not self._stop.is_set():
            raise WatchProtocolError("the watch ended at once without any event")
        # The stream stayed open until the server ended it: nothing was missed meanwhile.
        self._confirmed = ended
        self.watch_restarts += 1

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = _status_code(obj.get("code"))
            message = obj.get("message")
            message = message[:200] if isinstance(message, str) else ""
            if code == 410:
                raise WatchExpiredError(message)
            raise WatchErrorEvent(f"HTTP {code} {message}".strip())
        resource_version = _resource_version(obj)
        if kind == "BOOKMARK":
            if resource_version:
                self.resource_version = resource_version
            return
        key = self._key(obj)
        observer = self.observer
        if kind in ("ADDED", "MODIFIED"):
            failed: dict[str, UnreadableObject] = {}
            parsed = self._parse(dict(obj), failed)
            index_by = self.spec.index_by
            with self._lock:
                self._unreadable.pop(key, None)
                self._unreadable.update(failed)
                self._unindex(key)
                if parsed is None:
                    gone = self._items.pop(key, None)
                else:
                    gone = None
                    self._items[key] = parsed
                    if index_by is not None:
                        self._index.setdefault(index_by(parsed), {})[key] = parsed
            if observer is not None and parsed is not None:
                observer.changed(parsed)
            elif observer is not None and gone is not None:
                observer.deleted(gone)
        elif kind == "DELETED":
            with self._lock:
                self._unreadable.pop(key, None)
                self._unindex(key)
                gone = self._items.pop(key, None)
            if observer is not None and gone is not None:
                observer.deleted(gone)
        if resource_version:
            self.resource_version = resource_version


# How often an optional resource the API server does not serve is asked for again.
NOT_SERVED_RECHECK_SECONDS = 60.0


class Syncing(Protocol):
    """A cache that can be waited on until its first list has been read (an `Informer`)."""

    def wait_for_sync(self, timeout: float) -> bool: ...


def wait_all(informers: Iterable[Syncing], timeout: float) -> bool:
    """Wait until every informer has synced, or the timeout passes."""
    deadline = time.monotonic() + timeout
    for informer in informers:
        if not informer.wait_for_sync(max(0.0, deadline - time.monotonic())):
            return False
    return True
