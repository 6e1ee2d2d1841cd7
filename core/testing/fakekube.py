"""A fake Kubernetes API server over HTTP on 127.0.0.1, for tests.

It speaks enough of the real API for the official ``kubernetes`` client (typed APIs,
``CustomObjectsApi``, the dynamic client and ``watch.Watch``) and for subprocesses given a
kubeconfig: discovery, CRUD with resourceVersion and 409 conflicts, label and field
selectors, pagination, watch with bookmarks and 410 Gone, merge / strategic merge / JSON
patches and server-side apply, the status, scale, binding and eviction subresources
(evictions honour PodDisruptionBudgets, whose status is kept as the disruption controller
would), finalizers, ``dryRun``, and fault injection: error answers, slow answers, dropped
connections, unanswered requests, and watches that end at once, answer a list, carry garbage
or expire (``add_fault`` for one-off rules, ``set_fault_schedule`` for seeded random faults;
see ``clusterscaler.testing.faults``). Every request is recorded with its RBAC attributes
and any injected fault (``requests``) so tests can check what a component called;
``on_handle`` observes each request as it is carried out.

Deliberate simplifications: namespaces need not exist; there is no admission or schema
validation beyond names, resourceVersions and the fields the subresources use; deleted pods
go at once unless ``pod_termination_seconds`` is set; owned objects are not garbage-collected; nothing
schedules pods or runs controllers (tests bind pods and create objects themselves).

Tests arrange and inspect state directly::

    with FakeKubeServer() as kube:
        kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        api = kubernetes.client.CoreV1Api(kube.api_client())
        assert api.read_node("n1").metadata.name == "n1"
        assert kube.get("nodes", "n1")["metadata"]["resourceVersion"]
"""

from __future__ import annotations

import bisect
import builtins
import contextlib
import copy
import json
import math
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

import structlog
import yaml

from .fakehttp import FakeHttpHandler, FakeHttpServer
from .fakekube_patch import (
    PatchError,
    PatchTestFailed,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)
from .fakekube_resources import (
    BUILTIN_RESOURCES,
    ResourceType,
    ScaleSubresource,
    capacity_buffer_resources,
    capacity_quota_resources,
    cluster_api_resources,
    openshift_machine_api_resources,
    provisioning_request_resources,
)
from .fakekube_selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    label_selector_matches,
)
from .faults import GARBAGE_LINES, Fault, FaultKind, FaultSchedule, Injection

__all__ = [
    "ApiError",
    "FakeKubeServer",
    "Fault",
    "FaultKind",
    "FaultSchedule",
    "RecordedRequest",
    "ResourceType",
    "ScaleSubresource",
    "capacity_buffer_resources",
    "capacity_quota_resources",
    "cluster_api_resources",
    "openshift_machine_api_resources",
    "provisioning_request_resources",
]

log = structlog.get_logger()

Obj = dict[str, Any]

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error answer of the fake API server, rendered as a ``Status`` object."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: Obj | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details or {}
        self.headers = headers or {}

    def status(self) -> Obj:
        return _status_object(self.code, self.message, self.reason, self.details)


def _status_object(code: int, message: str, reason: str, details: Obj | None = None) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the RBAC authorizer would see it, plus the answer's status code.

    ``status`` is 0 when the request got no answer and was not carried out (a dropped
    connection); ``fault`` names the ``FaultKind`` injected into the request, if any (with
    ``timeout``, the request was carried out with ``status`` but not answered).
    """

    method: str
    path: str
    query: dict[str, str]
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    status: int
    content_type: str = ""
    fault: str = ""


@dataclass(frozen=True)
class _Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED (or anything, for raw events)
    key: tuple[str, str]
    obj: Any
    old: Obj | None
    raw: bool = False  # sent as is to every watch of the resource


@dataclass
class _Route:
    rtype: ResourceType
    version: str
    namespace: str
    name: str
    subresource: str


@dataclass(eq=False)
class _WatchHandle:
    dropped: bool = False
    clean: bool = False


def _truthy(value: str | None) -> bool:
    """Query booleans as Go's strconv.ParseBool reads them (the client sends ``True``)."""
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _get_path(obj: Any, path: str) -> Any:
    node = obj
    for part in path.strip(".").split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _set_path(obj: Obj, path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    node = obj
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _label_selector_string(selector: Any) -> str:
    if not isinstance(selector, dict):
        return ""
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        values = ",".join(sorted(expr.get("values") or []))
        if op == "In":
            terms.append(f"{expr['key']} in ({values})")
        elif op == "NotIn":
            terms.append(f"{expr['key']} notin ({values})")
        elif op == "Exists":
            terms.append(expr["key"])
        elif op == "DoesNotExist":
            terms.append(f"!{expr['key']}")
    return ",".join(terms)


def _int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(value)


def _validate_node_taints(name: str, node: Obj) -> None:
    """As the API server's node validation: taints unique by key and effect (a JSON patch
    appending a taint the node already carries is refused with 422)."""
    seen: set[tuple[Any, Any]] = set()
    taints = (node.get("spec") or {}).get("taints") or []
    for i, taint in enumerate(taints if isinstance(taints, list) else []):
        if not isinstance(taint, dict):
            continue
        pair = (taint.get("key"), taint.get("effect"))
        if pair in seen:
            raise ApiError(
                422,
                f'Node "{name}" is invalid: metadata.taints[{i}]: Duplicate value: '
                f"{json.dumps(taint, sort_keys=True)}: taints must be unique by key and effect "
                "pair",
            )
        seen.add(pair)


def _validate_core_event(namespace: str, event: Obj) -> None:
    """As the API server's validation of core/v1 Events (without an eventTime): the event
    lives in its object's namespace, or in ``default`` for a cluster-scoped object (a node)."""
    involved = event.get("involvedObject") or {}
    wanted = involved.get("namespace") if isinstance(involved, dict) else None
    allowed = (wanted,) if wanted else ("", "default")
    if event.get("eventTime") or namespace in allowed:
        return
    name = (event.get("metadata") or {}).get("name", "")
    raise ApiError(
        422,
        f'Event "{name}" is invalid: involvedObject.namespace: Invalid value: '
        f'"{wanted or ""}": does not match event.namespace',
    )


def _pod_is_healthy(pod: Obj) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


class FakeKubeServer(FakeHttpServer):
    """A Kubernetes API server double, listening on 127.0.0.1 in a background thread.

    Use as a context manager (or ``start()`` / ``stop()``). ``bookmark_interval`` is how often
    a watch that asked for bookmarks receives one; ``history_limit`` how many changes are
    kept for watches to resume from before they get 410 Gone; ``pdb_controller`` keeps
    PodDisruptionBudget status current like kube-controller-manager does;
    ``pod_termination_seconds`` > 0 makes deleted and evicted pods on a node terminate
    (``deletionTimestamp`` set) for that long before they disappear.
    """

    def __init__(
        self,
        *,
        resources: Iterable[ResourceType] = (),
        bookmark_interval: float = 1.0,
        history_limit: int = 10_000,
        pdb_controller: bool = True,
        pod_termination_seconds: float = 0.0,
    ) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._types: dict[tuple[str, str], ResourceType] = {}
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self._history: builtins.list[_Event] = []
        self._history_rvs: builtins.list[int] = []
        self._compacted_rv = 0
        self._rv = 1
        self._faults: builtins.list[Fault] = []
        self.fault_schedule: FaultSchedule | None = None
        self._watches: set[_WatchHandle] = set()
        self._stopping = False
        self.bookmark_interval = bookmark_interval
        self.history_limit = history_limit
        self.pdb_controller = pdb_controller
        self.pod_termination_seconds = pod_termination_seconds
        self._timers: builtins.list[threading.Timer] = []
        self.requests: builtins.list[RecordedRequest] = []
        # Called with (method, path) before each request is handled: lets a test make a
        # concurrent change land between a client's read and its write.
        self.on_request: Callable[[str, str], None] | None = None
        # Called with (method, path, query) under the server's lock when a request that
        # passed fault injection is about to be carried out (not for watches or discovery):
        # the hook reads the state the request acts on (``get``, ``list``), and nothing can
        # change it in between. An exception it raises fails the request with a 500.
        self.on_handle: Callable[[str, str, dict[str, str]], None] | None = None
        for rtype in (*BUILTIN_RESOURCES, *resources):
            self.register_resource(rtype)

    # ------------------------------------------------------------------ lifecycle

    thread_name = "fake-kube-apiserver"

    def handler(self) -> type[FakeHttpHandler]:
        server = self

        class Handler(_Handler):
            fake = server

        return Handler

    def start(self) -> Self:
        if self.started:
            return self
        self._stopping = False
        super().start()
        log.debug("fake_kube_started", url=self.url)
        return self

    def stop(self) -> None:
        if not self.started:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()
        super().stop()

    def api_client(self) -> Any:
        """An official ``kubernetes.client.ApiClient`` configured for this server."""
        from kubernetes import client

        configuration = client.Configuration(host=self.url)
        configuration.no_proxy = "127.0.0.1,localhost"
        configuration.api_key = {"authorization": "fake-token"}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(configuration)

    def kubeconfig(self, path: str | Path) -> Path:
        """Write a kubeconfig pointing at this server (for subprocesses); return its path."""
        path = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": "default"},
                }
            ],
            "current-context": "fake",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    # ------------------------------------------------------------------ resource types

    def register_resource(self, rtype: ResourceType) -> None:
        """Serve a resource type (custom resources such as Machine API MachineSets)."""
        with self._cond:
            self._types[rtype.key] = rtype
            self._objects.setdefault(rtype.key, {})

    @property
    def resource_types(self) -> builtins.list[ResourceType]:
        with self._cond:
            return list(self._types.values())

    def resolve(self, resource: str, api_version: str | None = None) -> ResourceType:
        """Find a resource type by plural, ``plural.group``, short name or kind.

        ``api_version`` (``apps/v1``, ``v1``) narrows the group. Bare ``events`` means core
        events, as in kubectl.
        """
        with self._cond:
            types = list(self._types.values())
        group: str | None = None
        if api_version is not None:
            group = api_version.rpartition("/")[0]
        name, _, dotted_group = resource.partition(".")
        if dotted_group:
            group = dotted_group
        candidates = [
            t
            for t in types
            if (
                (group is None or t.group == group)
                and name.lower() in (t.plural, t.singular, *t.short_names)
            )
            or ((group is None or t.group == group) and name == t.kind)
        ]
        if len(candidates) > 1:
            core = [t for t in candidates if t.group == ""]
            if len(core) == 1:
                return core[0]
            names = ", ".join(sorted(f"{t.plural}.{t.group}" for t in candidates))
            raise KeyError(f"resource {resource!r} is ambiguous: use one of {names}")
        if not candidates:
            raise KeyError(
                f"resource {resource!r} (apiVersion {api_version!r}) is not served; register it "
                "with FakeKubeServer.register_resource(ResourceType(...))"
            )
        return candidates[0]

    # ------------------------------------------------------------------ direct access

    def create(self, obj: Obj) -> Obj:
        """Store a new object (``apiVersion``, ``kind`` and ``metadata.name`` required)."""
        rtype = self._type_of(obj)
        with self._cond:
            return copy.deepcopy(
                self._create(rtype, copy.deepcopy(obj), self._namespace_of(rtype, obj))
            )

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        """The stored object, or None."""
        rtype = self.resolve(resource)
        with self._cond:
            obj = self._objects[rtype.key].get(self._key(rtype, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        """Stored objects of a type, sorted by namespace and name, optionally filtered."""
        rtype = self.resolve(resource)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector)
        with self._cond:
            return [copy.deepcopy(obj) for obj in self._select(rtype, namespace, labels, fields)]

    def update(self, obj: Obj) -> Obj:
        """Replace an object wholesale (status included); a stale resourceVersion conflicts."""
        rtype = self._type_of(obj)
        namespace = self._namespace_of(rtype, obj)
        name = (obj.get("metadata") or {}).get("name", "")
        with self._cond:
            current = self._require(rtype, namespace, name)
            new = copy.deepcopy(obj)
            self._check_rv(rtype, new, current)
            return copy.deepcopy(self._replace(rtype, current, new))

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
    ) -> Obj:
        """Patch an object (``merge``, ``strategic`` or ``json``), status included."""
        rtype = self.resolve(resource)
        with self._cond:
            current = self._require(rtype, namespace or "", name)
            new = self._apply_patch(rtype, current, patch, patch_type)
            self._check_rv(rtype, new, current)
            return copy.deepcopy(self._replace(rtype, current, new))

    def delete(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        """Delete an object at once, ignoring finalizers; return it, or None if absent."""
        rtype = self.resolve(resource)
        with self._cond:
            current = self._objects[rtype.key].get(self._key(rtype, namespace, name))
            if current is None:
                return None
            return copy.deepcopy(self._remove(rtype, current))

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the server's lock: the direct reads and writes made inside happen at once
        for clients (no request is carried out in between), e.g. a scheduler's check that
        a node has room and the binding of a pod to it."""
        with self._cond:
            yield

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out."""
        with self._cond:
            return self._rv

    # ------------------------------------------------------------------ faults and watches

    def add_fault(
        self,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
        delay: float = 0.0,
        times: int | None = None,
        watch: bool | None = None,
        message: str = "injected fault",
        kind: FaultKind | None = None,
    ) -> Fault:
        """Fail (``status``) and/or slow down (``delay`` seconds) matching requests, or make
        them misbehave as ``kind`` says (see ``clusterscaler.testing.faults``).

        Rules are tried in the order they were added, before the fault schedule.
        """
        fault = Fault(method, path, status, delay, times, watch, message, kind=kind)
        with self._cond:
            self._faults.append(fault)
        return fault

    def remove_fault(self, fault: Fault) -> None:
        with self._cond:
            self._faults = [f for f in self._faults if f is not fault]

    def clear_faults(self) -> None:
        """Remove every rule added by ``add_fault`` (the fault schedule stays)."""
        with self._cond:
            self._faults.clear()

    def set_fault_schedule(self, schedule: FaultSchedule | None) -> None:
        """Inject seeded random faults into every request from now on (None: stop)."""
        with self._cond:
            self.fault_schedule = schedule

    def drop_watches(self, *, clean: bool = False) -> int:
        """End every open watch: abruptly (connection reset) or cleanly (end of stream)."""
        with self._cond:
            for handle in self._watches:
                handle.dropped = True
                handle.clean = clean
            count = len(self._watches)
            self._cond.notify_all()
        return count

    @property
    def open_watches(self) -> int:
        with self._cond:
            return len(self._watches)

    def send_raw_watch_event(self, resource: str, event_type: str, obj: Any) -> None:
        """Send ``{"type": event_type, "object": obj}`` as is to every watch of a resource,
        e.g. a malformed event; the stored objects do not change."""
        rtype = self.resolve(resource)
        with self._cond:
            rv = self._next_rv()
            self._history.append(_Event(rv, event_type, rtype.key, obj, None, raw=True))
            self._history_rvs.append(rv)
            self._cond.notify_all()

    def compact(self) -> int:
        """Forget the change history: watches from an older resourceVersion get 410 Gone."""
        with self._cond:
            self._history.clear()
            self._history_rvs.clear()
            self._compacted_rv = self._rv
            return self._rv

    # ------------------------------------------------------------------ storage internals

    def _type_of(self, obj: Obj) -> ResourceType:
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            raise ValueError("object needs 'apiVersion' and 'kind' strings, e.g. v1 / Node")
        group = api_version.rpartition("/")[0]
        with self._cond:
            for rtype in self._types.values():
                if rtype.group == group and rtype.kind == kind:
                    return rtype
        raise KeyError(f"kind {kind!r} of apiVersion {api_version!r} is not served")

    @staticmethod
    def _namespace_of(rtype: ResourceType, obj: Obj) -> str:
        if not rtype.namespaced:
            return ""
        return str((obj.get("metadata") or {}).get("namespace") or "default")

    @staticmethod
    def _key(rtype: ResourceType, namespace: str | None, name: str) -> tuple[str, str]:
        return ((namespace or "default") if rtype.namespaced else "", name)

    def _require(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        obj = self._objects[rtype.key].get(self._key(rtype, namespace, name))
        if obj is None:
            raise ApiError(
                404,
                f'{rtype.plural}{"." + rtype.group if rtype.group else ""} "{name}" not found',
                details={"name": name, "group": rtype.group, "kind": rtype.plural},
            )
        return obj

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _record(self, rtype: ResourceType, kind: str, obj: Obj, old: Obj | None) -> None:
        rv = int(obj["metadata"]["resourceVersion"]) if kind != "DELETED" else self._rv
        self._history.append(_Event(rv, kind, rtype.key, obj, old))
        self._history_rvs.append(rv)
        if len(self._history) > 2 * self.history_limit:
            drop = len(self._history) - self.history_limit
            self._compacted_rv = self._history_rvs[drop - 1]
            del self._history[:drop]
            del self._history_rvs[:drop]
        self._cond.notify_all()

    def _check_rv(self, rtype: ResourceType, new: Obj, current: Obj) -> None:
        wanted = (new.get("metadata") or {}).get("resourceVersion")
        have = current["metadata"]["resourceVersion"]
        if wanted not in (None, "") and str(wanted) != have:
            name = current["metadata"]["name"]
            raise ApiError(
                409,
                f"Operation cannot be fulfilled on {rtype.plural}{'.' + rtype.group if rtype.group else ''} "
                f'"{name}": the object has been modified; please apply your changes to the '
                "latest version and try again",
                details={"name": name, "group": rtype.group, "kind": rtype.plural},
            )

    def _create(
        self, rtype: ResourceType, obj: Obj, namespace: str, *, dry_run: bool = False
    ) -> Obj:
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, f"{rtype.kind}.metadata: expected an object")
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
            else:
                raise ApiError(
                    422,
                    f"{rtype.kind}.metadata.name: Required value: name or generateName is required",
                )
        if rtype.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(
                    400,
                    f"{rtype.kind} {meta['name']!r}: metadata.namespace {meta['namespace']!r} "
                    f"does not match the request namespace {namespace!r}",
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        key = (namespace if rtype.namespaced else "", meta["name"])
        store = self._objects[rtype.key]
        if key in store:
            raise ApiError(
                409,
                f'{rtype.plural}{"." + rtype.group if rtype.group else ""} "{meta["name"]}" already exists',
                reason="AlreadyExists",
                details={"name": meta["name"], "group": rtype.group, "kind": rtype.plural},
            )
        obj["apiVersion"] = rtype.api_version()
        obj["kind"] = rtype.kind
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta["generation"] = 1
        meta.pop("deletionTimestamp", None)
        if dry_run:
            meta["resourceVersion"] = str(self._rv)
            return obj
        meta["resourceVersion"] = str(self._next_rv())
        store[key] = obj
        self._record(rtype, "ADDED", obj, None)
        self._after_write(rtype, obj)
        return obj

    def _replace(
        self, rtype: ResourceType, current: Obj, new: Obj, *, dry_run: bool = False
    ) -> Obj:
        meta = new.setdefault("metadata", {})
        old_meta = current["metadata"]
        for immutable in ("name", "namespace", "uid", "creationTimestamp"):
            if immutable in old_meta:
                meta[immutable] = old_meta[immutable]
            else:
                meta.pop(immutable, None)
        if "deletionTimestamp" in old_meta:
            meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
        new["apiVersion"] = rtype.api_version()
        new["kind"] = rtype.kind
        spec_changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
            k: v for k, v in current.items() if k not in ("metadata", "status")
        }
        meta["generation"] = int(old_meta.get("generation", 1)) + (1 if spec_changed else 0)
        if dry_run:
            meta["resourceVersion"] = old_meta["resourceVersion"]
            return new
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            meta["resourceVersion"] = old_meta["resourceVersion"]
            return self._remove(rtype, new)
        if {k: v for k, v in new.items() if k != "metadata"} == {
            k: v for k, v in current.items() if k != "metadata"
        } and {k: v for k, v in meta.items() if k != "resourceVersion"} == {
            k: v for k, v in old_meta.items() if k != "resourceVersion"
        }:
            # A no-op write keeps the resourceVersion and emits no event, as on a real server.
            return current
        meta["resourceVersion"] = str(self._next_rv())
        self._objects[rtype.key][self._key(rtype, meta.get("namespace"), meta["name"])] = new
        self._record(rtype, "MODIFIED", new, current)
        self._after_write(rtype, new)
        return new

    def _remove(self, rtype: ResourceType, current: Obj) -> Obj:
        meta = current["metadata"]
        store = self._objects[rtype.key]
        store.pop(self._key(rtype, meta.get("namespace"), meta["name"]), None)
        gone = copy.deepcopy(current)
        gone["metadata"]["resourceVersion"] = str(self._next_rv())
        self._record(rtype, "DELETED", gone, current)
        self._after_write(rtype, gone)
        return gone

    def _select(
        self,
        rtype: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        start_after: tuple[str, str] | None = None,
    ) -> builtins.list[Obj]:
        store = self._objects[rtype.key]
        keys = sorted(store)
        if start_after is not None:
            keys = keys[bisect.bisect_right(keys, start_after) :]
        return [
            store[key]
            for key in keys
            if (not namespace or not rtype.namespaced or key[0] == namespace)
            and labels.matches((store[key].get("metadata") or {}).get("labels"))
            and fields.matches(store[key])
        ]

    def _apply_patch(self, rtype: ResourceType, current: Obj, patch: Any, patch_type: str) -> Obj:
        try:
            if patch_type == "json":
                result = json_patch(current, patch)
            elif patch_type == "strategic":
                result = strategic_merge_patch(current, patch)
            elif patch_type in ("merge", "apply"):
                if not isinstance(patch, dict):
                    raise PatchError("merge patch: expected a JSON object")
                result = merge_patch(current, patch)
            else:
                raise ApiError(415, f"unsupported patch type {patch_type!r}")
        except PatchTestFailed as exc:
            raise ApiError(422, str(exc)) from exc
        except PatchError as exc:
            raise ApiError(422 if patch_type == "json" else 400, str(exc)) from exc
        if not isinstance(result, dict):
            raise ApiError(422, f"patch of {rtype.kind} must produce an object")
        return result

    # PodDisruptionBudget status, as the disruption controller maintains it.
    def _after_write(self, rtype: ResourceType, obj: Obj) -> None:
        if not self.pdb_controller:
            return
        if rtype.key in (("", "pods"), ("policy", "poddisruptionbudgets")) or (
            rtype.scale is not None and rtype.namespaced
        ):
            # Pods, budgets, and controllers whose scale the budgets count.
            namespace = obj["metadata"].get("namespace", "")
            self._sync_pdbs(namespace, only=obj if rtype.key[0] == "policy" else None)

    def _sync_pdbs(self, namespace: str, only: Obj | None = None) -> None:
        pdb_type = self._types[("policy", "poddisruptionbudgets")]
        if not any(ns == namespace for ns, _ in self._objects[pdb_type.key]):
            return
        pods = [
            pod
            for (ns, _), pod in self._objects[("", "pods")].items()
            if ns == namespace and not pod["metadata"].get("deletionTimestamp")
        ]
        for key, pdb in list(self._objects[pdb_type.key].items()):
            if key[0] != namespace:
                continue
            if only is not None and key[1] != only["metadata"]["name"]:
                continue
            status = self._pdb_status(pdb, pods, self._controller_scale)
            if all((pdb.get("status") or {}).get(k) == v for k, v in status.items()):
                continue
            new = copy.deepcopy(pdb)
            new["status"] = {**(pdb.get("status") or {}), **status}
            new["metadata"]["resourceVersion"] = str(self._next_rv())
            self._objects[pdb_type.key][key] = new
            self._record(pdb_type, "MODIFIED", new, pdb)

    def _controller_scale(self, pod: Obj) -> tuple[tuple[str, str, str], int] | None:
        """The pod's controller (kind, namespace, name) and its desired replicas, when the
        controller is a stored object with a scale subresource."""
        meta = pod["metadata"]
        ref = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        if ref is None:
            return None
        api_version = str(ref.get("apiVersion", ""))
        group = api_version.rpartition("/")[0]
        namespace = str(meta.get("namespace", ""))
        for rtype in self._types.values():
            if rtype.group != group or rtype.kind != ref.get("kind") or rtype.scale is None:
                continue
            owner = self._objects[rtype.key].get((namespace, str(ref.get("name", ""))))
            if owner is None:
                return None
            replicas = _get_path(owner, rtype.scale.spec_replicas_path)
            key = (rtype.kind, namespace, str(ref.get("name", "")))
            return key, int(replicas or 0)
        return None

    @staticmethod
    def _pdb_status(
        pdb: Obj,
        pods: builtins.list[Obj],
        controller_scale: Callable[[Obj], tuple[tuple[str, str, str], int] | None],
    ) -> Obj:
        """As the disruption controller: with ``maxUnavailable`` or a percentage
        ``minAvailable``, the expected count is the scale of the pods' controllers (a pod
        evicted and not yet replaced still counts as expected); a pod without a stored
        controller counts as one (the real controller refuses to compute a budget then)."""
        spec = pdb.get("spec") or {}
        selector = spec.get("selector")
        matching = (
            [p for p in pods if label_selector_matches(selector, p["metadata"].get("labels") or {})]
            if selector is not None
            else []
        )
        expected = len(matching)
        healthy = sum(1 for p in matching if _pod_is_healthy(p))
        min_available = spec.get("minAvailable")
        if spec.get("maxUnavailable") is not None or (
            isinstance(min_available, str) and min_available.endswith("%")
        ):
            controllers: dict[tuple[str, str, str], int] = {}
            uncontrolled = 0
            for pod in matching:
                scale = controller_scale(pod)
                if scale is None:
                    uncontrolled += 1
                else:
                    controllers[scale[0]] = scale[1]
            expected = uncontrolled + sum(controllers.values())
        if spec.get("maxUnavailable") is not None:
            desired = max(
                0, expected - _int_or_percent(spec["maxUnavailable"], expected, round_up=True)
            )
        elif min_available is not None:
            desired = _int_or_percent(min_available, expected, round_up=True)
        else:
            desired = 1
        return {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": max(0, healthy - desired),
            "observedGeneration": pdb["metadata"].get("generation", 1),
        }

    # ------------------------------------------------------------------ HTTP API

    def _parse_route(self, path: str) -> tuple[str, str, builtins.list[str]]:
        """Split ``/api/v1/...`` or ``/apis/g/v/...`` into (group, version, remaining parts)."""
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2 and parts[0] == "api":
            return "", parts[1], parts[2:]
        if len(parts) >= 3 and parts[0] == "apis":
            return parts[1], parts[2], parts[3:]
        raise ApiError(404, f"the server could not find the requested resource ({path})")

    def _route(self, path: str) -> _Route:
        group, version, rest = self._parse_route(path)
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self._types.get((group, rest[2]))
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        rtype = self._types.get((group, rest[0]))
        if rtype is None or version not in rtype.versions:
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in self._subresources(rtype):
            raise ApiError(404, f"the server could not find the requested resource ({path})")
        return _Route(rtype, version, namespace, name, sub)

    @staticmethod
    def _subresources(rtype: ResourceType) -> tuple[str, ...]:
        subs: builtins.list[str] = []
        if rtype.status_subresource:
            subs.append("status")
        if rtype.scale is not None:
            subs.append("scale")
        if rtype.key == ("", "pods"):
            subs.extend(("eviction", "binding"))
        return tuple(subs)

    def _versioned(self, obj: Obj, route: _Route) -> Obj:
        out = copy.deepcopy(obj)
        out["apiVersion"] = route.rtype.api_version(route.version)
        return out

    # Discovery documents.
    def _discovery(self, path: str) -> Obj | None:
        parts = [p for p in path.split("/") if p]
        with self._cond:
            types = list(self._types.values())
        groups: dict[str, builtins.list[str]] = {}
        for t in types:
            if t.group:
                known = groups.setdefault(t.group, [])
                known.extend(v for v in t.versions if v not in known)
        if parts == ["version"]:
            return {
                "major": "1",
                "minor": "31",
                "gitVersion": "v1.31.0-clusterscaler-fake",
                "platform": "linux/amd64",
            }
        if parts in (["healthz"], ["livez"], ["readyz"]):
            return {"ok": True}
        if parts == ["api"]:
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.removeprefix("http://")}
                ],
            }
        if parts == ["apis"]:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group_doc(g, vs) for g, vs in sorted(groups.items())],
            }
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
            doc = self._group_doc(parts[1], groups[parts[1]])
            return {"kind": "APIGroup", "apiVersion": "v1", **doc}
        if parts == ["api", "v1"]:
            return self._resource_list("", "v1", types)
        if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], []):
            return self._resource_list(parts[1], parts[2], types)
        return None

    @staticmethod
    def _group_doc(group: str, versions: builtins.list[str]) -> Obj:
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": entries, "preferredVersion": entries[0]}

    def _resource_list(self, group: str, version: str, types: builtins.list[ResourceType]) -> Obj:
        resources: builtins.list[Obj] = []
        for t in types:
            if t.group != group or version not in t.versions:
                continue
            resources.append(
                {
                    "name": t.plural,
                    "singularName": t.singular,
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": [
                        "create",
                        "delete",
                        "deletecollection",
                        "get",
                        "list",
                        "patch",
                        "update",
                        "watch",
                    ],
                    "shortNames": list(t.short_names),
                }
            )
            if t.status_subresource:
                resources.append(
                    {
                        "name": f"{t.plural}/status",
                        "singularName": "",
                        "namespaced": t.namespaced,
                        "kind": t.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if t.scale is not None:
                resources.append(
                    {
                        "name": f"{t.plural}/scale",
                        "singularName": "",
                        "namespaced": t.namespaced,
                        "group": "autoscaling",
                        "version": "v1",
                        "kind": "Scale",
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if t.key == ("", "pods"):
                resources.append(
                    {
                        "name": "pods/eviction",
                        "singularName": "",
                        "namespaced": True,
                        "group": "policy",
                        "version": "v1",
                        "kind": "Eviction",
                        "verbs": ["create"],
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    def _handle_list(self, route: _Route, query: dict[str, str]) -> Obj:
        labels = LabelSelector.parse(query.get("labelSelector"))
        fields = FieldSelector.parse(query.get("fieldSelector"))
        rtype = route.rtype
        with self._cond:
            rv = self._rv
            wanted_rv = query.get("resourceVersion", "")
            if (
                query.get("resourceVersionMatch") == "Exact"
                and wanted_rv.isdigit()
                and int(wanted_rv) != rv
            ):
                raise ApiError(
                    410,
                    f"too old resource version: {wanted_rv} ({rv})",
                    reason="Expired",
                )
            continue_token = query.get("continue", "")
            start_after: tuple[str, str] | None = None
            if continue_token:
                try:
                    token = json.loads(continue_token)
                    start_after = (str(token["ns"]), str(token["name"]))
                    token_rv = int(token["rv"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise ApiError(400, f"continue {continue_token!r}: malformed token") from exc
                if token_rv < self._compacted_rv:
                    raise ApiError(
                        410,
                        "The provided continue parameter is too old to display a consistent list "
                        "result. You can start a new list without the continue parameter.",
                        reason="Expired",
                    )
                rv = token_rv
            items = self._select(rtype, route.namespace, labels, fields, start_after)
            meta: Obj = {"resourceVersion": str(rv)}
            limit = int(query["limit"]) if query.get("limit", "").isdigit() else 0
            if limit and len(items) > limit:
                last = items[limit - 1]["metadata"]
                meta["continue"] = json.dumps(
                    {"rv": rv, "ns": last.get("namespace", ""), "name": last["name"]},
                    separators=(",", ":"),
                )
                meta["remainingItemCount"] = len(items) - limit
                items = items[:limit]
            # Shallow copies are enough: stored objects are replaced on writes, never mutated.
            if rtype.builtin:
                # The real server leaves kind/apiVersion empty on items of built-in lists.
                rendered = [
                    {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                    for obj in items
                ]
            else:
                api_version = rtype.api_version(route.version)
                rendered = [{**obj, "apiVersion": api_version} for obj in items]
        return {
            "kind": f"{rtype.kind}List",
            "apiVersion": rtype.api_version(route.version),
            "metadata": meta,
            "items": rendered,
        }

    def _scale_of(self, route: _Route, obj: Obj) -> Obj:
        scale = route.rtype.scale
        assert scale is not None
        replicas = _get_path(obj, scale.spec_replicas_path)
        status_replicas = _get_path(obj, scale.status_replicas_path)
        if scale.label_selector_path is not None:
            selector = _get_path(obj, scale.label_selector_path)
        else:
            selector = _label_selector_string((obj.get("spec") or {}).get("selector"))
        meta = obj["metadata"]
        out: Obj = {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": int(replicas or 0)} if replicas is not None else {},
            "status": {"replicas": int(status_replicas or 0)},
        }
        if selector:
            out["status"]["selector"] = selector
        return out

    def _write_scale(self, route: _Route, current: Obj, scale: Obj, dry_run: bool) -> Obj:
        self._check_rv(route.rtype, scale, current)
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ApiError(
                422,
                f"Scale.spec.replicas of {route.rtype.plural} {route.name!r}: expected a "
                f"non-negative integer, got {replicas!r}",
            )
        assert route.rtype.scale is not None
        new = copy.deepcopy(current)
        new["metadata"].pop("resourceVersion", None)
        _set_path(new, route.rtype.scale.spec_replicas_path, replicas)
        return self._scale_of(route, self._replace(route.rtype, current, new, dry_run=dry_run))

    def _evict(self, route: _Route, body: Any, dry_run: bool) -> tuple[int, Obj]:
        pod = self._require(route.rtype, route.namespace, route.name)
        if isinstance(body, dict):
            precondition = (body.get("deleteOptions") or {}).get("preconditions") or {}
            self._check_preconditions(route.rtype, pod, precondition)
        phase = (pod.get("status") or {}).get("phase")
        # Pods that are not running (or already terminating) cannot disrupt an application.
        if phase not in ("Succeeded", "Failed", "Pending") and not pod["metadata"].get(
            "deletionTimestamp"
        ):
            labels = pod["metadata"].get("labels") or {}
            pdbs = [
                pdb
                for (ns, _), pdb in sorted(
                    self._objects[("policy", "poddisruptionbudgets")].items()
                )
                if ns == route.namespace
                and (pdb.get("spec") or {}).get("selector") is not None
                and label_selector_matches(pdb["spec"]["selector"], labels)
            ]
            if len(pdbs) > 1:
                raise ApiError(
                    500,
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                )
            if pdbs:
                pdb = pdbs[0]
                status = pdb.get("status") or {}
                if int(status.get("disruptionsAllowed", 0)) <= 0:
                    name = pdb["metadata"]["name"]
                    raise ApiError(
                        429,
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        details={
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": f"The disruption budget {name} needs "
                                    f"{status.get('desiredHealthy', 0)} healthy pods and has "
                                    f"{status.get('currentHealthy', 0)} currently",
                                }
                            ]
                        },
                    )
        if not dry_run:
            self._delete_pod(route.rtype, pod)
        return 201, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def _delete_pod(self, rtype: ResourceType, pod: Obj) -> Obj:
        """Delete a pod: at once, or (with ``pod_termination_seconds``) mark it terminating
        and remove it later, as the kubelet would after the containers stop."""
        delay = self.pod_termination_seconds
        if delay <= 0 or not (pod.get("spec") or {}).get("nodeName"):
            return self._remove(rtype, pod)
        if pod["metadata"].get("deletionTimestamp"):
            return pod
        terminating = copy.deepcopy(pod)
        terminating["metadata"]["deletionTimestamp"] = _now()
        terminating["metadata"]["deletionGracePeriodSeconds"] = math.ceil(delay)
        terminating["metadata"]["resourceVersion"] = str(self._next_rv())
        key = self._key(rtype, pod["metadata"].get("namespace"), pod["metadata"]["name"])
        # Written directly: a plain update with deletionTimestamp and no finalizers deletes.
        self._objects[rtype.key][key] = terminating
        self._record(rtype, "MODIFIED", terminating, pod)
        self._after_write(rtype, terminating)
        updated = terminating
        uid = pod["metadata"].get("uid")

        def finish() -> None:
            with self._cond:
                current = self._objects[rtype.key].get(key)
                if current is not None and current["metadata"].get("uid") == uid:
                    self._remove(rtype, current)

        timer = threading.Timer(delay, finish)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()
        return updated

    def _bind(self, route: _Route, body: Any, dry_run: bool) -> tuple[int, Obj]:
        """``pods/<name>/binding``, as the scheduler binds a pod to a node."""
        pod = self._require(route.rtype, route.namespace, route.name)
        target = (body or {}).get("target") or {} if isinstance(body, dict) else {}
        node_name = target.get("name")
        if not node_name:
            raise ApiError(400, f"Binding of pod {route.name!r}: target.name must name a node")
        if (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(
                409,
                f'pod {route.name} is already assigned to node "{pod["spec"]["nodeName"]}"',
            )
        new = copy.deepcopy(pod)
        new.setdefault("spec", {})["nodeName"] = node_name
        status = new.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        status["conditions"] = [*conditions, {"type": "PodScheduled", "status": "True"}]
        new["metadata"].pop("resourceVersion", None)
        self._replace(route.rtype, pod, new, dry_run=dry_run)
        return 201, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }

    def _check_preconditions(self, rtype: ResourceType, current: Obj, preconditions: Obj) -> None:
        meta = current["metadata"]
        for field_name in ("uid", "resourceVersion"):
            wanted = preconditions.get(field_name)
            if wanted and str(wanted) != str(meta.get(field_name)):
                raise ApiError(
                    409,
                    f"Precondition failed: {field_name} in precondition: {wanted}, "
                    f"{field_name} in object meta: {meta.get(field_name)}",
                    details={"name": meta["name"], "group": rtype.group, "kind": rtype.plural},
                )

    def _handle(
        self, method: str, path: str, query: dict[str, str], body: Any, content_type: str
    ) -> tuple[int, Obj]:
        route = self._route(path)
        rtype = route.rtype
        dry_run = bool(query.get("dryRun"))
        with self._cond:
            hook = self.on_handle
            if hook is not None:
                hook(method, path, query)
            if method == "GET" and not route.name:
                return 200, self._handle_list(route, query)
            if method == "POST" and not route.name:
                if not isinstance(body, dict):
                    raise ApiError(400, f"{rtype.kind}: request body must be a JSON object")
                namespace = route.namespace if rtype.namespaced else ""
                if rtype.namespaced and not namespace:
                    raise ApiError(405, f"{rtype.plural} must be created in a namespace")
                if rtype.kind == "Event" and not rtype.group:
                    _validate_core_event(namespace, body)
                created = self._create(rtype, copy.deepcopy(body), namespace, dry_run=dry_run)
                return 201, self._versioned(created, route)
            if method == "DELETE" and not route.name:
                labels = LabelSelector.parse(query.get("labelSelector"))
                fields = FieldSelector.parse(query.get("fieldSelector"))
                doomed = self._select(rtype, route.namespace, labels, fields)
                if not dry_run:
                    for obj in doomed:
                        self._remove(rtype, obj)
                return 200, {
                    "kind": f"{rtype.kind}List",
                    "apiVersion": rtype.api_version(route.version),
                    "metadata": {"resourceVersion": str(self._rv)},
                    "items": [self._versioned(o, route) for o in doomed],
                }
            if route.subresource == "eviction":
                if method != "POST":
                    raise ApiError(405, f"pods/eviction does not support {method}")
                return self._evict(route, body, dry_run)
            if route.subresource == "binding":
                if method != "POST":
                    raise ApiError(405, f"pods/binding does not support {method}")
                return self._bind(route, body, dry_run)
            if (
                method == "PATCH"
                and not route.subresource
                and content_type.startswith("application/apply-patch")
                and self._objects[rtype.key].get(self._key(rtype, route.namespace, route.name))
                is None
            ):
                # Server-side apply of a missing object creates it.
                if not isinstance(body, dict):
                    raise ApiError(400, f"{rtype.kind}: apply body must be an object")
                created = copy.deepcopy(body)
                created.setdefault("metadata", {})["name"] = route.name
                namespace = route.namespace if rtype.namespaced else ""
                return 201, self._versioned(
                    self._create(rtype, created, namespace, dry_run=dry_run), route
                )
            current = self._require(rtype, route.namespace, route.name)
            if route.subresource == "scale":
                return self._handle_scale(method, route, current, body, content_type, dry_run)
            if method == "GET":
                return 200, self._versioned(current, route)
            if method == "DELETE":
                options = body if isinstance(body, dict) else {}
                self._check_preconditions(rtype, current, options.get("preconditions") or {})
                if dry_run:
                    return 200, self._versioned(current, route)
                if current["metadata"].get("finalizers"):
                    if current["metadata"].get("deletionTimestamp"):
                        return 200, self._versioned(current, route)
                    new = copy.deepcopy(current)
                    new["metadata"]["deletionTimestamp"] = _now()
                    new["metadata"]["deletionGracePeriodSeconds"] = 0
                    new["metadata"]["resourceVersion"] = str(self._next_rv())
                    self._objects[rtype.key][self._key(rtype, route.namespace, route.name)] = new
                    self._record(rtype, "MODIFIED", new, current)
                    return 200, self._versioned(new, route)
                if rtype.key == ("", "pods"):
                    return 200, self._versioned(self._delete_pod(rtype, current), route)
                return 200, self._versioned(self._remove(rtype, current), route)
            if method == "PUT":
                if not isinstance(body, dict):
                    raise ApiError(400, f"{rtype.kind}: request body must be a JSON object")
                new = copy.deepcopy(body)
                body_name = (new.get("metadata") or {}).get("name")
                if body_name not in (None, route.name):
                    raise ApiError(
                        400,
                        f"the name of the object ({body_name}) does not match the name on the URL "
                        f"({route.name})",
                    )
                if not rtype.builtin and not (new.get("metadata") or {}).get("resourceVersion"):
                    # Custom resources do not allow unconditional updates.
                    raise ApiError(
                        422,
                        f"{rtype.kind}.{rtype.group} {route.name!r}: metadata.resourceVersion: "
                        "Invalid value: 0: must be specified for an update",
                    )
                self._check_rv(rtype, new, current)
            elif method == "PATCH":
                patch_type = self._patch_type(rtype, route, content_type)
                new = self._apply_patch(rtype, current, body, patch_type)
                self._check_rv(rtype, new, current)
            else:
                raise ApiError(405, f"method {method} is not allowed on {path}")
            new = self._split_status(rtype, route, current, new)
            new.setdefault("metadata", {}).pop("resourceVersion", None)
            if rtype.kind == "Node" and rtype.builtin:
                _validate_node_taints(route.name, new)
            if rtype.kind == "Event" and not rtype.group:
                _validate_core_event(route.namespace, new)
            return 200, self._versioned(self._replace(rtype, current, new, dry_run=dry_run), route)

    @staticmethod
    def _split_status(rtype: ResourceType, route: _Route, current: Obj, new: Obj) -> Obj:
        """Writes to the main resource keep status; writes to ``/status`` keep everything else."""
        if not rtype.status_subresource:
            return new
        if route.subresource == "status":
            merged = copy.deepcopy(current)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            return merged
        if "status" in current:
            new["status"] = copy.deepcopy(current["status"])
        else:
            new.pop("status", None)
        return new

    def _patch_type(self, rtype: ResourceType, route: _Route, content_type: str) -> str:
        media = content_type.split(";")[0].strip().lower()
        if media == "application/json-patch+json":
            return "json"
        if media == "application/merge-patch+json":
            return "merge"
        if media == "application/apply-patch+yaml":
            return "apply"
        if media == "application/strategic-merge-patch+json":
            if not rtype.builtin and route.subresource != "scale":
                raise ApiError(
                    415,
                    f"strategic merge patch is not supported for custom resource "
                    f"{rtype.plural}.{rtype.group}: use application/merge-patch+json",
                )
            return "strategic"
        raise ApiError(
            415,
            f"the body of the request was in an unknown format - accepted media types include: "
            f"application/json-patch+json, application/merge-patch+json, "
            f"application/apply-patch+yaml, application/strategic-merge-patch+json (got {media!r})",
        )

    def _handle_scale(
        self, method: str, route: _Route, current: Obj, body: Any, content_type: str, dry_run: bool
    ) -> tuple[int, Obj]:
        scale = self._scale_of(route, current)
        if method == "GET":
            return 200, scale
        if method == "PUT":
            if not isinstance(body, dict):
                raise ApiError(400, "Scale: request body must be a JSON object")
            return 200, self._write_scale(route, current, body, dry_run)
        if method == "PATCH":
            patch_type = self._patch_type(route.rtype, route, content_type)
            patched = self._apply_patch(route.rtype, scale, body, patch_type)
            return 200, self._write_scale(route, current, patched, dry_run)
        raise ApiError(405, f"{route.rtype.plural}/scale does not support {method}")

    def _injection(self, method: str, path: str, watch: bool) -> Injection | None:
        """The fault for this request: the first matching rule, else the schedule's."""
        with self._cond:
            fault = next((f for f in self._faults if f.matches(method, path, watch)), None)
            if fault is not None:
                fault.hits += 1
                return fault.injection()
            schedule = self.fault_schedule
        return schedule.decide(method, path, watch) if schedule is not None else None

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or until the server stops."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while not self._stopping:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._cond.wait(remaining)

    # ------------------------------------------------------------------ watch

    def _watch_events(
        self,
        handler: _Handler,
        route: _Route,
        query: dict[str, str],
        injection: Injection | None = None,
    ) -> None:
        fault_kind = injection.kind if injection is not None else None
        if fault_kind is FaultKind.WATCH_LIST:
            handler.send_json(200, self._handle_list(route, query))
            return
        if fault_kind is FaultKind.WATCH_END:
            handler.start_stream()
            handler.end_stream()
            return
        if fault_kind is FaultKind.WATCH_GONE:
            handler.start_stream()
            handler.write_event(
                "ERROR",
                _status_object(
                    410,
                    f"too old resource version: {query.get('resourceVersion', '')} "
                    f"({self.resource_version})",
                    "Expired",
                ),
            )
            handler.end_stream()
            return
        prelude = GARBAGE_LINES if fault_kind is FaultKind.WATCH_GARBAGE else ()
        labels = LabelSelector.parse(query.get("labelSelector"))
        fields = FieldSelector.parse(query.get("fieldSelector"))
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        deadline = time.monotonic() + timeout if timeout else None
        handle = _WatchHandle()
        rtype = route.rtype
        initial: builtins.list[Obj] = []
        rv_text = query.get("resourceVersion", "")
        send_initial = _truthy(query.get("sendInitialEvents"))
        with self._cond:
            if rv_text in ("", "0") or send_initial:
                initial = [
                    copy.deepcopy(o) for o in self._select(rtype, route.namespace, labels, fields)
                ]
                last_rv = self._rv
            elif not rv_text.isdigit():
                raise ApiError(400, f"resourceVersion {rv_text!r}: expected a decimal number")
            else:
                last_rv = int(rv_text)
                if last_rv < self._compacted_rv:
                    handler.start_stream()
                    handler.write_event(
                        "ERROR",
                        _status_object(
                            410,
                            f"too old resource version: {last_rv} ({self._compacted_rv})",
                            "Expired",
                        ),
                    )
                    handler.end_stream()
                    return
            self._watches.add(handle)
        try:
            handler.start_stream()
            for line in prelude:
                handler.write_line(line)
            for obj in initial:
                handler.write_event("ADDED", self._versioned(obj, route))
            if send_initial and bookmarks:
                handler.write_event(
                    "BOOKMARK", self._bookmark(route, last_rv, initial_events_end=True)
                )
            next_bookmark = time.monotonic() + self.bookmark_interval
            while True:
                with self._cond:
                    while True:
                        if self._stopping or handle.dropped:
                            break
                        index = bisect.bisect_right(self._history_rvs, last_rv)
                        if index < len(self._history):
                            break
                        now = time.monotonic()
                        wake = next_bookmark if bookmarks else now + 0.5
                        if deadline is not None:
                            wake = min(wake, deadline)
                        if now >= wake:
                            break
                        self._cond.wait(wake - now)
                    if self._stopping or handle.dropped:
                        if handle.dropped and not handle.clean:
                            handler.abort()
                            return
                        break
                    if last_rv < self._compacted_rv:
                        handler.write_event(
                            "ERROR",
                            _status_object(410, f"too old resource version: {last_rv}", "Expired"),
                        )
                        break
                    index = bisect.bisect_right(self._history_rvs, last_rv)
                    pending = self._history[index:]
                    if pending:
                        last_rv = pending[-1].rv
                for event in pending:
                    if event.key != rtype.key:
                        continue
                    if event.raw:
                        handler.write_event(event.type, event.obj)
                        continue
                    kind = self._filtered_type(event, route, labels, fields)
                    if kind is not None:
                        handler.write_event(kind, self._versioned(event.obj, route))
                now = time.monotonic()
                if bookmarks and now >= next_bookmark:
                    handler.write_event("BOOKMARK", self._bookmark(route, last_rv))
                    next_bookmark = now + self.bookmark_interval
                if deadline is not None and now >= deadline:
                    break
            handler.end_stream()
        except OSError:
            # The client went away; nothing to tell it.
            handler.close_connection = True
        finally:
            with self._cond:
                self._watches.discard(handle)

    @staticmethod
    def _bookmark(route: _Route, rv: int, *, initial_events_end: bool = False) -> Obj:
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_events_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {
            "kind": route.rtype.kind,
            "apiVersion": route.rtype.api_version(route.version),
            "metadata": meta,
        }

    @staticmethod
    def _filtered_type(
        event: _Event, route: _Route, labels: LabelSelector, fields: FieldSelector
    ) -> str | None:
        def visible(obj: Obj | None) -> bool:
            if obj is None:
                return False
            meta: Obj = obj.get("metadata") or {}
            if (
                route.namespace
                and route.rtype.namespaced
                and meta.get("namespace") != route.namespace
            ):
                return False
            return labels.matches(meta.get("labels")) and fields.matches(obj)

        now_visible = visible(event.obj)
        if event.type == "ADDED":
            return "ADDED" if now_visible else None
        if event.type == "DELETED":
            return "DELETED" if now_visible else None
        was_visible = visible(event.old)
        if now_visible and was_visible:
            return "MODIFIED"
        if now_visible:
            return "ADDED"
        if was_visible:
            return "DELETED"
        return None


class _Handler(FakeHttpHandler):
    """HTTP/1.1 front end of FakeKubeServer (keep-alive, chunked watch streams). Requests
    are recorded in FakeKubeServer.requests."""

    fake: FakeKubeServer
    server_version = "fake-kube-apiserver"

    def serve(self, method: str) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        watch = method == "GET" and _truthy(query.get("watch"))
        content_type = self.headers.get("Content-Type", "")
        raw = self.read_body()
        verb, group, resource, subresource, namespace, name = self._attributes(method, path, query)

        injection: Injection | None = None

        def record(status: int) -> None:
            # Recorded before the answer is sent, so a test sees it as soon as its call returns.
            self.fake.requests.append(
                RecordedRequest(
                    method,
                    path,
                    query,
                    verb,
                    group,
                    resource,
                    subresource,
                    namespace,
                    name,
                    status,
                    content_type,
                    injection.kind.value if injection is not None else "",
                )
            )

        try:
            hook = self.fake.on_request
            if hook is not None:
                hook(method, path)
            injection = self.fake._injection(method, path, watch)
            if injection is not None:
                if injection.kind is FaultKind.DROP:
                    record(0)
                    self.abort()
                    return
                self.fake._pause(injection.delay)
                if injection.is_error:
                    assert injection.status is not None
                    raise ApiError(injection.status, injection.message, headers=injection.headers)
            # Carried out, and then the connection closes without an answer.
            unanswered = injection is not None and injection.kind is FaultKind.TIMEOUT
            if method == "GET":
                discovery = self.fake._discovery(path)
                if discovery is not None:
                    record(200)
                    if unanswered:
                        self.abort()
                        return
                    self.send_json(200, discovery)
                    return
            body: Any = None
            if raw:
                try:
                    if content_type.startswith("application/apply-patch+yaml"):
                        body = yaml.safe_load(raw)
                    else:
                        body = json.loads(raw)
                except (ValueError, yaml.YAMLError) as exc:
                    raise ApiError(400, f"request body is not valid JSON: {exc}") from exc
            if watch:
                route = self.fake._route(path)
                if route.name or route.subresource:
                    raise ApiError(405, "watch is only supported on collections")
                record(200)
                if unanswered:
                    self.abort()
                    return
                self.fake._watch_events(self, route, query, injection)
                return
            status, payload = self.fake._handle(method, path, query, body, content_type)
            record(status)
            if unanswered:
                self.abort()
                return
            self.send_json(status, payload)
        except SelectorError as exc:
            record(400)
            self._send_error(ApiError(400, str(exc)), injection)
        except ApiError as exc:
            record(exc.code)
            self._send_error(exc, injection)
        except OSError:
            self.close_connection = True
        except Exception as exc:  # a bug in the fake must reach the test as a 500, not a hang
            log.exception("fake_kube_internal_error", method=method, path=path)
            record(500)
            self.send_json(500, ApiError(500, f"fake API server error: {exc!r}").status())

    def _send_error(self, error: ApiError, injection: Injection | None) -> None:
        if injection is not None and injection.kind is FaultKind.TIMEOUT:
            self.abort()
            return
        self.send_json(error.code, error.status(), error.headers)

    def _attributes(
        self, method: str, path: str, query: dict[str, str]
    ) -> tuple[str, str, str, str, str, str]:
        """The RBAC request attributes: verb, API group, resource, subresource, namespace, name."""
        try:
            group, _, rest = self.fake._parse_route(path)
        except ApiError:
            return method.lower(), "", "", "", "", ""
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self.fake._types.get((group, rest[2]))
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        resource = rest[0] if rest else ""
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if method == "GET":
            verb = "watch" if _truthy(query.get("watch")) else ("get" if name else "list")
        elif method == "POST":
            verb = "create"
        elif method == "PUT":
            verb = "update"
        elif method == "PATCH":
            verb = "patch"
        elif method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            verb = method.lower()
        return verb, group, resource, sub, namespace, name

    # Chunked streaming for watches.
    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def write_event(self, kind: str, obj: Obj) -> None:
        self.write_line(json.dumps({"type": kind, "object": obj}).encode())

    def write_line(self, data: bytes) -> None:
        """One line of a watch stream, as one chunk."""
        line = data + b"\n"
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def abort(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
