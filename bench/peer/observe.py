"""What `python -m bench peer` reads while a scenario runs: the API server's watches, an
autoscaler process's CPU and memory, and its /metrics.

`ClusterWatch` follows Nodes and the scenario namespace's Pods through two watch streams
of the API server (one thread each, the standard library's HTTPS client, only the fields
it needs decoded by msgspec), and stamps each change with this process's monotonic clock:
the first Node an autoscaler creates is its first node-group increase (the kwok provider
grows a group by creating Node objects), a Node deleted is a node removed (it shrinks a
group by deleting them), and a pod is bound once `spec.nodeName` is set.

`ProcessUsage` reads `/proc` for an autoscaler process and the processes it started: CPU
seconds (user + system) and the peak resident set (`VmHWM`), so both autoscalers are
measured the same way whatever their language.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from clusterscaler.testing import controlplane

# ---------------------------------------------------------------------------------------------
# Watches


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""
    labels: dict[str, str] = {}
    deletionTimestamp: str | None = None


class _PodSpec(msgspec.Struct):
    nodeName: str = ""


class _Object(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)


class _Event(msgspec.Struct):
    type: str
    object: _Object


_decode_event = msgspec.json.Decoder(_Event).decode


@dataclass
class ClusterWatch:
    """Nodes and one namespace's Pods as the API server reports them, with arrival times."""

    server: str  # https://127.0.0.1:PORT
    ca_file: Path
    token: str
    namespace: str
    group_label: str
    ignore_nodes: frozenset[str] = frozenset()  # nodes made before the run: only deletions
    node_added: dict[str, float] = field(default_factory=dict)  # name -> first seen
    node_group: dict[str, str] = field(default_factory=dict)  # name -> group label
    nodes_deleted: dict[str, float] = field(default_factory=dict)
    pods: dict[str, bool] = field(default_factory=dict)  # name -> bound
    last_bound_at: float = 0.0
    errors: list[str] = field(default_factory=list)
    reconnects: int = 0  # watch streams opened again after the first (a clean end included)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _connections: list[http.client.HTTPSConnection] = field(default_factory=list)

    def start(self) -> None:
        for path, handle in (
            ("/api/v1/nodes", self._on_node),
            (f"/api/v1/namespaces/{self.namespace}/pods", self._on_pod),
        ):
            thread = threading.Thread(target=self._follow, args=(path, handle), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for conn in list(self._connections):
            if conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(2)
        for thread in self._threads:
            thread.join(timeout=5)

    # -- the streams

    def _follow(self, path: str, handle: Callable[[_Event], None]) -> None:
        host, port = self.server.removeprefix("https://").rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.check_hostname = False
        first = True
        resume = ""  # the resource version the next watch starts after
        while not self._stop.is_set():
            if not first:
                with self._lock:
                    self.reconnects += 1
            first = False
            conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=None)
            self._connections.append(conn)
            try:
                query = "watch=true&allowWatchBookmarks=true"
                if resume:
                    query += f"&resourceVersion={resume}"
                conn.request("GET", f"{path}?{query}",
                             headers={"Authorization": f"Bearer {self.token}"})
                response = conn.getresponse()
                if response.status != 200:
                    self.errors.append(f"watch {path}: HTTP {response.status}")
                    time.sleep(0.5)
                    continue
                resume = self._consume(response, handle, resume)
            except (OSError, http.client.HTTPException, msgspec.DecodeError) as err:
                if not self._stop.is_set():
                    self.errors.append(f"watch {path}: {err}")
                    time.sleep(0.5)
            finally:
                conn.close()
                self._connections.remove(conn)

    def _consume(self, lines: Iterable[bytes], handle: Callable[[_Event], None],
                 resume: str) -> str:
        """Hand each event of one watch stream to `handle`; returns the resource version to
        resume from when the stream ends.

        The API server closes a watch whose reader falls behind ("Forcing watcher close due
        to unresponsiveness"). A watch opened again without a resource version starts with
        every object as ADDED: on a loaded machine that burst is closed again at the same
        point, over and over, and the objects after it are never seen. So the next watch
        starts after the last event read (bookmarks keep that recent); only when the
        server no longer has that version (an ERROR event, 410 Gone) does it start over.
        """
        for line in lines:
            if self._stop.is_set():
                break
            if not line.strip():
                continue
            event = _decode_event(line)
            if event.type == "ERROR":
                return ""
            if event.object.metadata.resourceVersion:
                resume = event.object.metadata.resourceVersion
            if event.type != "BOOKMARK":
                handle(event)
        return resume

    def _on_node(self, event: _Event) -> None:
        now = time.monotonic()
        name = event.object.metadata.name
        with self._lock:
            if event.type == "DELETED":
                self.nodes_deleted.setdefault(name, now)
                return
            if name in self.ignore_nodes:
                return
            if event.type in ("ADDED", "MODIFIED") and name not in self.node_added:
                self.node_added[name] = now
                self.node_group[name] = event.object.metadata.labels.get(self.group_label, "")

    def _on_pod(self, event: _Event) -> None:
        now = time.monotonic()
        obj = event.object
        name = obj.metadata.name
        with self._lock:
            if event.type == "DELETED" or obj.metadata.deletionTimestamp:
                self.pods.pop(name, None)
                return
            bound = bool(obj.spec.nodeName)
            if bound and not self.pods.get(name):
                self.last_bound_at = now
            self.pods[name] = bound

    # -- reading

    def first_node_at(self) -> float | None:
        with self._lock:
            return min(self.node_added.values(), default=None)

    def removals(self) -> list[float]:
        """When each node deleted since the start was seen deleted (made before the run or
        during it), in order."""
        with self._lock:
            return sorted(self.nodes_deleted.values())

    def bound_and_pending(self) -> tuple[int, int]:
        with self._lock:
            bound = sum(1 for b in self.pods.values() if b)
            return bound, len(self.pods) - bound

    def unbound(self, limit: int = 3) -> list[str]:
        """Names of pods the watch holds as not bound (at most `limit`)."""
        with self._lock:
            return [name for name, bound in self.pods.items() if not bound][:limit]

    def nodes_per_group(self) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = {}
            for name, group in self.node_group.items():
                if name not in self.nodes_deleted:
                    counts[group] = counts.get(group, 0) + 1
            return dict(sorted(counts.items()))


class _MetaList(msgspec.Struct):
    items: list[_Object] | None = None  # the API server writes null for no items


_decode_list = msgspec.json.Decoder(_MetaList).decode
# Lists ask for metadata only (names, labels, deletion), which is all `FinalState` reads.
_METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


@dataclass(frozen=True)
class FinalState:
    """Nodes per group and pods bound or not, from fresh lists (not the watches)."""

    nodes_per_group: dict[str, int]
    pods_bound: int
    pods_pending: int


def final_state(watch: ClusterWatch) -> FinalState:
    """List Nodes and the namespace's Pods (the unbound ones by field selector); objects
    being deleted are left out."""
    host, port = watch.server.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(watch.ca_file))
    context.check_hostname = False

    def items(path: str) -> list[_Object]:
        conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=120)
        try:
            conn.request("GET", path, headers={"Authorization": f"Bearer {watch.token}",
                                               "Accept": _METADATA_ONLY})
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise OSError(f"GET {path}: HTTP {response.status}: {body[:300]!r}")
            return [o for o in _decode_list(body).items or () if not o.metadata.deletionTimestamp]
        finally:
            conn.close()

    groups: dict[str, int] = {}
    for node in items("/api/v1/nodes"):
        group = node.metadata.labels.get(watch.group_label, "")
        groups[group] = groups.get(group, 0) + 1
    pods = f"/api/v1/namespaces/{watch.namespace}/pods"
    total = len(items(pods))
    pending = len(items(pods + "?fieldSelector=spec.nodeName%3D"))
    return FinalState(dict(sorted(groups.items())), total - pending, pending)


def cluster_watch(cluster: controlplane.Cluster, namespace: str, group_label: str, *,
                  ignore_nodes: Sequence[str] = ()) -> ClusterWatch:
    return ClusterWatch(cluster.server, Path(cluster.root) / "pki" / "apiserver.crt",
                        controlplane.ADMIN_TOKEN, namespace, group_label, frozenset(ignore_nodes))


# ---------------------------------------------------------------------------------------------
# Process usage


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
        except OSError:
            continue
        found.extend(int(child) for child in text.split())
    return found


def _tree(pid: int) -> list[int]:
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        queue.extend(_children(current))
    return pids


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` and its descendants so far (0 for gone ones)."""
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / CLOCK_TICKS


def peak_rss_bytes(pid: int) -> int:
    """`VmHWM` of `pid` plus that of each live descendant: the peak resident set."""
    total = 0
    for p in _tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) * 1024
                break
    return total


# ---------------------------------------------------------------------------------------------
# /metrics


MAIN_LOOP = "cluster_autoscaler_function_duration_seconds"


@dataclass(frozen=True)
class LoopMetric:
    """The main loop's histogram: observations and their sum."""

    count: float
    total: float


def main_loop(port: int) -> LoopMetric | None:
    """`function_duration_seconds{function="main"}` of the process serving /metrics on
    `port` (CA and clusterscaler both name it so), or None when it does not answer."""
    text = _metrics_text(port)
    return None if text is None else parse_main_loop(text)


def _metrics_text(port: int) -> str | None:
    """The /metrics of the process serving it on `port`, or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())
    except (OSError, ValueError):
        return None


REQUESTS = "rest_client_requests_total"


def api_requests(port: int) -> dict[str, float] | None:
    """The requests the process serving /metrics on `port` made to the API server so far,
    by HTTP method (client-go's `rest_client_requests_total`, summed over codes and hosts;
    CA and clusterscaler both expose it), or None when it does not answer."""
    text = _metrics_text(port)
    return None if text is None else parse_requests(text)


def parse_requests(text: str) -> dict[str, float]:
    by_method: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(REQUESTS + "{"):
            continue
        labels, value = line[len(REQUESTS) + 1:].rsplit("} ", 1)
        method = next((part.split("=", 1)[1].strip('"') for part in labels.split(",")
                       if part.startswith("method=")), "")
        by_method[method] = by_method.get(method, 0.0) + float(value)
    return by_method


def parse_main_loop(text: str) -> LoopMetric | None:
    count = total = None
    for line in text.splitlines():
        if not line.startswith(MAIN_LOOP) or 'function="main"' not in line:
            continue
        name = line.split("{", 1)[0]
        value = float(line.rsplit(" ", 1)[1])
        if name == f"{MAIN_LOOP}_count":
            count = value
        elif name == f"{MAIN_LOOP}_sum":
            total = value
    if count is None or total is None:
        return None
    return LoopMetric(count, total)


# ---------------------------------------------------------------------------------------------
# Events

# Both autoscalers record their events as this component (CA's `EventSource`, kept by ours).
EVENT_COMPONENT = "cluster-autoscaler"


def event_counts(event_list: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """The autoscaler's Event objects in a list of core/v1 Events (`kubectl get events -A
    -o json`): uid -> ("<involved kind> <reason>", count). An Event's `count` is the writes
    it took: 1 for its create, one more for each patch (a repeat, or one more event folded
    into a combined one); an event the recorder dropped (spam, a full queue) is not there."""
    counts: dict[str, tuple[str, int]] = {}
    for item in event_list.get("items") or ():
        if (item.get("source") or {}).get("component") != EVENT_COMPONENT:
            continue
        key = f"{(item.get('involvedObject') or {}).get('kind', '')} {item.get('reason', '')}"
        uid = str((item.get("metadata") or {}).get("uid", ""))
        counts[uid] = (key, int(item.get("count") or 1))
    return counts


def events_written(before: dict[str, tuple[str, int]],
                   after: dict[str, tuple[str, int]]) -> dict[str, int]:
    """The event writes between two `event_counts` of one cluster, by involved kind and
    reason (an Event there before counts only its writes since)."""
    written: dict[str, int] = {}
    for uid, (key, count) in after.items():
        n = count - before.get(uid, (key, 0))[1]
        if n > 0:
            written[key] = written.get(key, 0) + n
    return dict(sorted(written.items()))
