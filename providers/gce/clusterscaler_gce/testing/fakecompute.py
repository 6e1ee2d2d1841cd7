"""A small fake of the Compute Engine REST API (and the metadata server) on 127.0.0.1.

Enough for the `gce` provider through google-cloud-compute's REST transport: zonal and
regional instanceGroupManagers (get, list with a `name eq` filter, listManagedInstances,
resize, deleteInstances), instanceTemplates get (global and regional), machineTypes get/list,
regions get, instances get, zoneOperations/regionOperations get and wait, and the metadata
server's project-id and zone. Faults: HTTP errors (500, 429, ...) on matching requests,
instances that fail to be created (stockouts, quota), slow and failing operations.

Point a client at it with `ClientOptions(api_endpoint=server.endpoint)` (the scheme matters)
and `AnonymousCredentials()`, or set `api-endpoint = <server.endpoint>` in a gce.conf.

    with FakeComputeServer() as gce:
        gce.add_template("proj", "workers-template", machine_type="n1-standard-4")
        gce.add_mig("proj", "us-central1-b", "workers", template="workers-template")
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.testing.fakehttp import FakeHttpHandler, FakeHttpServer

BASE = "https://www.googleapis.com/compute/v1/projects/"
# A few predefined machine types (guestCpus, memoryMb), served in every zone.
MACHINE_TYPES: dict[str, tuple[int, int]] = {
    "e2-medium": (2, 4096),
    "e2-standard-2": (2, 8192),
    "e2-standard-4": (4, 16384),
    "e2-standard-8": (8, 32768),
    "n1-standard-1": (1, 3840),
    "n1-standard-2": (2, 7680),
    "n1-standard-4": (4, 15360),
    "n1-standard-8": (8, 30720),
    "n1-highmem-4": (4, 26624),
    "n2-standard-4": (4, 16384),
    "n2-standard-8": (8, 32768),
    "n2-highcpu-16": (16, 16384),
    "t2a-standard-4": (4, 16384),
    "g2-standard-8": (8, 32768),
}


@dataclass
class FakeInstance:
    name: str
    zone: str
    current_action: str = "NONE"
    status: str = "RUNNING"
    errors: list[dict[str, str]] = field(default_factory=list)


@dataclass
class FakeMig:
    project: str
    location: str
    name: str
    template: str  # URL
    target_size: int = 0
    base_instance_name: str = ""
    zones: list[str] = field(default_factory=list)
    instances: dict[str, FakeInstance] = field(default_factory=dict)
    # What new instances look like: None = RUNNING at once; else (code, message) of a
    # creation error, the instance staying CREATING.
    create_error: tuple[str, str] | None = None
    # True: a resize up sets the target and creates no instance (capacity requested, not
    # yet begun), as GCE does for a moment after a resize.
    held: bool = False
    created: int = 0

    @property
    def regional(self) -> bool:
        return not re.search(r"[0-9]-[a-z][a-z0-9]*$", self.location)


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    reason: str


@dataclass
class FakeOperation:
    name: str
    project: str
    scope: str  # "zones/<z>" or "regions/<r>"
    kind: str
    target: str
    done_at: float
    error: tuple[str, str] | None = None


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, list[str]]
    body: Any


class FakeComputeServer(FakeHttpServer):
    """The fake API: state, faults and the HTTP server. Thread-safe."""

    def __init__(self, *, metadata_project: str = "", metadata_zone: str = "") -> None:
        self.lock = threading.RLock()
        self.migs: dict[tuple[str, str, str], FakeMig] = {}
        self.templates: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.regions: dict[tuple[str, str], list[str]] = {}
        self.machine_types: dict[str, tuple[int, int]] = dict(MACHINE_TYPES)
        self.operations: dict[str, FakeOperation] = {}
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.operation_delay = 0.0
        self.failing_operations: dict[str, tuple[str, str]] = {}
        self.page_size = 500
        self.metadata_project = metadata_project
        self.metadata_zone = metadata_zone
        self._op_counter = 0

    # --- lifecycle ----------------------------------------------------------------------------

    thread_name = "fake-compute-api"

    def handler(self) -> type[FakeHttpHandler]:
        return _handler(self)

    @property
    def endpoint(self) -> str:
        """The API endpoint (`url`), for `api-endpoint` in a gce.conf and `ClientOptions`."""
        return self.url

    @property
    def metadata_host(self) -> str:
        """For GCE_METADATA_HOST: the metadata server is served on the same port."""
        return self.endpoint.removeprefix("http://")

    def reset(self) -> None:
        with self.lock:
            self.migs.clear()
            self.templates.clear()
            self.regions.clear()
            self.machine_types = dict(MACHINE_TYPES)
            self.operations.clear()
            self.requests.clear()
            self.faults.clear()
            self.failing_operations.clear()
            self.operation_delay = 0.0
            self.page_size = 500

    # --- setting up -----------------------------------------------------------------------------

    def add_template(
        self,
        project: str,
        name: str,
        *,
        machine_type: str = "n1-standard-4",
        kube_env: str | None = None,
        metadata: Mapping[str, str] | None = None,
        accelerators: Mapping[str, int] | None = None,
        boot_disk_gb: int = 100,
        local_ssds: int = 0,
        preemptible: bool = False,
        provisioning_model: str = "",
        region: str = "",
    ) -> str:
        """Add an instance template; returns its URL."""
        items = [{"key": k, "value": v} for k, v in (metadata or {}).items()]
        if kube_env is not None:
            items.append({"key": "kube-env", "value": kube_env})
        disks: list[dict[str, Any]] = [
            {
                "boot": True,
                "type": "PERSISTENT",
                "initializeParams": {"diskSizeGb": str(boot_disk_gb), "diskType": "pd-balanced"},
            }
        ]
        for _ in range(local_ssds):
            disks.append({"type": "SCRATCH", "initializeParams": {"diskType": "local-ssd", "diskSizeGb": "375"}})
        properties: dict[str, Any] = {
            "machineType": machine_type,
            "disks": disks,
            "metadata": {"items": items},
            "scheduling": {"preemptible": preemptible},
        }
        if provisioning_model:
            properties["scheduling"]["provisioningModel"] = provisioning_model
        if accelerators:
            properties["guestAccelerators"] = [
                {"acceleratorType": t, "acceleratorCount": c} for t, c in accelerators.items()
            ]
        scope = f"regions/{region}" if region else "global"
        url = f"{BASE}{project}/{scope}/instanceTemplates/{name}"
        with self.lock:
            self.templates[(project, region, name)] = {
                "kind": "compute#instanceTemplate",
                "name": name,
                "selfLink": url,
                "properties": properties,
            }
        return url

    def add_mig(
        self,
        project: str,
        location: str,
        name: str,
        *,
        template: str,
        size: int = 0,
        zones: list[str] | None = None,
    ) -> FakeMig:
        """Add a MIG (`location` a zone, or a region with `zones`) using the template named
        `template` (a name of a global template, or a URL)."""
        url = template if "/" in template else f"{BASE}{project}/global/instanceTemplates/{template}"
        mig = FakeMig(project=project, location=location, name=name, template=url, base_instance_name=name)
        if mig.regional:
            mig.zones = list(zones or [f"{location}-a", f"{location}-b"])
            self.regions.setdefault((project, location), sorted(mig.zones))
        with self.lock:
            self.migs[(project, location, name)] = mig
            self._resize(mig, size)
        return mig

    def add_region(self, project: str, region: str, zones: list[str]) -> None:
        with self.lock:
            self.regions[(project, region)] = list(zones)

    def mig(self, project: str, location: str, name: str) -> FakeMig:
        with self.lock:
            return self.migs[(project, location, name)]

    def target_size(self, project: str, location: str, name: str) -> int:
        with self.lock:
            return self.migs[(project, location, name)].target_size

    def provider_ids(self, project: str, location: str, name: str, *, running_only: bool = True) -> list[str]:
        with self.lock:
            mig = self.migs[(project, location, name)]
            return sorted(
                f"gce://{project}/{i.zone}/{i.name}"
                for i in mig.instances.values()
                if not running_only or (i.current_action == "NONE" and i.status == "RUNNING")
            )

    def set_instance(self, project: str, location: str, name: str, instance: str, **changes: Any) -> None:
        with self.lock:
            inst = self.migs[(project, location, name)].instances[instance]
            for key, value in changes.items():
                setattr(inst, key, value)

    def stockout(self, project: str, location: str, name: str, code: str = "ZONE_RESOURCE_POOL_EXHAUSTED",
                 message: str = "The zone does not have enough resources available to fulfill the request.") -> None:
        """New instances of this MIG fail to be created with `code` (None clears)."""
        with self.lock:
            self.migs[(project, location, name)].create_error = (code, message) if code else None

    def hold(self, project: str, location: str, name: str) -> None:
        """Resizes of this MIG from now on create no instance (requested capacity stays
        requested)."""
        with self.lock:
            self.migs[(project, location, name)].held = True

    def fail(self, method: str, path_regex: str, status: int = 500, *, times: int = 1, reason: str = "backendError") -> None:
        """The next `times` requests matching method and path answer `status`."""
        with self.lock:
            self.faults.append(Fault(method.upper(), re.compile(path_regex), status, times, reason))

    def count(self, method: str, path_regex: str) -> int:
        pattern = re.compile(path_regex)
        with self.lock:
            return sum(1 for r in self.requests if r.method == method.upper() and pattern.search(r.path))

    # --- behaviour ------------------------------------------------------------------------------

    def _resize(self, mig: FakeMig, size: int) -> None:
        mig.target_size = size
        while len(mig.instances) > size:
            newest = max(mig.instances, key=lambda n: n)
            del mig.instances[newest]
        while len(mig.instances) < size and not mig.held:
            mig.created += 1
            name = f"{mig.base_instance_name}-{mig.created:04x}"
            zones = mig.zones or [mig.location]
            zone = zones[(mig.created - 1) % len(zones)]
            inst = FakeInstance(name=name, zone=zone)
            if mig.create_error is not None:
                code, message = mig.create_error
                inst.current_action, inst.status = "CREATING", ""
                inst.errors = [{"code": code, "message": message}]
            mig.instances[name] = inst

    def _operation(self, project: str, scope: str, kind: str, target: str) -> dict[str, Any]:
        self._op_counter += 1
        name = f"operation-{self._op_counter}"
        op = FakeOperation(name, project, scope, kind, target, time.monotonic() + self.operation_delay)
        if kind in self.failing_operations:
            op.error = self.failing_operations.pop(kind)
        self.operations[name] = op
        return self._op_json(op)

    def _op_json(self, op: FakeOperation) -> dict[str, Any]:
        done = time.monotonic() >= op.done_at
        out: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(abs(hash(op.name)) % 10**12),
            "name": op.name,
            "operationType": op.kind,
            "targetLink": op.target,
            "status": "DONE" if done else "RUNNING",
            "selfLink": f"{BASE}{op.project}/{op.scope}/operations/{op.name}",
        }
        key = op.scope.partition("/")[0]
        out["zone" if key == "zones" else "region"] = f"{BASE}{op.project}/{op.scope}"
        if done and op.error is not None:
            out["error"] = {"errors": [{"code": op.error[0], "message": op.error[1]}]}
            out["httpErrorStatusCode"] = 400
        return out

    def _mig_json(self, mig: FakeMig) -> dict[str, Any]:
        scope = f"regions/{mig.location}" if mig.regional else f"zones/{mig.location}"
        creating = any(i.current_action != "NONE" for i in mig.instances.values())
        out: dict[str, Any] = {
            "kind": "compute#instanceGroupManager",
            "name": mig.name,
            "baseInstanceName": mig.base_instance_name,
            "instanceTemplate": mig.template,
            "targetSize": mig.target_size,
            "selfLink": f"{BASE}{mig.project}/{scope}/instanceGroupManagers/{mig.name}",
            "instanceGroup": f"{BASE}{mig.project}/{scope}/instanceGroups/{mig.name}",
            "status": {"isStable": not creating},
        }
        if mig.regional:
            out["region"] = f"{BASE}{mig.project}/regions/{mig.location}"
            out["distributionPolicy"] = {"zones": [{"zone": f"{BASE}{mig.project}/zones/{z}"} for z in mig.zones]}
        else:
            out["zone"] = f"{BASE}{mig.project}/zones/{mig.location}"
        return out

    def _instance_json(self, mig: FakeMig, inst: FakeInstance) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instance": f"{BASE}{mig.project}/zones/{inst.zone}/instances/{inst.name}",
            "name": inst.name,
            "currentAction": inst.current_action,
        }
        if inst.status:
            out["instanceStatus"] = inst.status
        if inst.errors:
            out["lastAttempt"] = {"errors": {"errors": list(inst.errors)}}
        return out

    def _page(self, items: list[Any], query: Mapping[str, list[str]], kind: str) -> dict[str, Any]:
        start = int(query.get("pageToken", ["0"])[0] or 0)
        size = min(self.page_size, int(query.get("maxResults", [str(self.page_size)])[0]))
        out: dict[str, Any] = {"kind": kind, "items": items[start : start + size]}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out

    # --- request dispatch -----------------------------------------------------------------------

    def handle(self, method: str, path: str, query: Mapping[str, list[str]], body: Any, headers: Mapping[str, str]) -> tuple[int, Any]:
        with self.lock:
            self.requests.append(Request(method, path, query, body))
            for fault in self.faults:
                if fault.times > 0 and fault.method == method and fault.pattern.search(path):
                    fault.times -= 1
                    return fault.status, _error(fault.status, f"injected fault on {path}", fault.reason)
        if path.startswith("/computeMetadata/v1/"):
            return self._metadata(path.removeprefix("/computeMetadata/v1/"), headers)
        parts = path.strip("/").split("/")
        if parts[:3] != ["compute", "v1", "projects"] or len(parts) < 5:
            return 404, _error(404, f"unknown path {path}", "notFound")
        project, rest = parts[3], parts[4:]
        if method == "POST" and len(rest) == 5 and rest[2] == "operations" and rest[4] == "wait":
            rest = rest[:4]
            # operations.wait returns when the operation is done, or after a while.
            with self.lock:
                op = self.operations.get(rest[3])
            if op is not None:
                time.sleep(max(0.0, min(op.done_at - time.monotonic(), 1.0)))
            method = "GET"
        with self.lock:
            return self._route(method, project, rest, query, body)

    def _metadata(self, path: str, headers: Mapping[str, str]) -> tuple[int, Any]:
        if headers.get("metadata-flavor", "").lower() != "google":
            return 403, "Missing Metadata-Flavor: Google header"
        if path == "project/project-id" and self.metadata_project:
            return 200, self.metadata_project
        if path == "instance/zone" and self.metadata_zone:
            return 200, f"projects/123456789/zones/{self.metadata_zone}"
        return 404, "not found"

    def _route(self, method: str, project: str, rest: list[str], query: Mapping[str, list[str]], body: Any) -> tuple[int, Any]:
        if rest[0] == "global" and rest[1:2] == ["instanceTemplates"] and len(rest) == 3 and method == "GET":
            template = self.templates.get((project, "", rest[2]))
            return (200, template) if template else (404, _error(404, f"template {rest[2]} not found", "notFound"))
        if rest[0] == "regions" and len(rest) == 2 and method == "GET":
            zones = self.regions.get((project, rest[1]))
            if zones is None:
                return 404, _error(404, f"region {rest[1]} not found", "notFound")
            return 200, {"name": rest[1], "zones": [f"{BASE}{project}/zones/{z}" for z in zones]}
        if rest[0] not in ("zones", "regions") or len(rest) < 3:
            return 404, _error(404, "unknown resource", "notFound")
        location, collection, tail = rest[1], rest[2], rest[3:]
        scope = f"{rest[0]}/{location}"
        if collection == "instanceTemplates" and rest[0] == "regions" and len(tail) == 1:
            template = self.templates.get((project, location, tail[0]))
            return (200, template) if template else (404, _error(404, f"template {tail[0]} not found", "notFound"))
        if collection == "operations" and len(tail) == 1:
            op = self.operations.get(tail[0])
            return (200, self._op_json(op)) if op else (404, _error(404, "operation not found", "notFound"))
        if collection == "machineTypes":
            return self._machine_types(project, location, tail, query)
        if collection == "instances" and len(tail) == 1:
            for owner in self.migs.values():
                inst = owner.instances.get(tail[0])
                if owner.project == project and inst is not None and inst.zone == location:
                    return 200, {"name": inst.name, "status": inst.status or "PROVISIONING"}
            return 404, _error(404, f"instance {tail[0]} not found", "notFound")
        if collection != "instanceGroupManagers":
            return 404, _error(404, f"unknown collection {collection}", "notFound")
        if not tail:
            items = [
                self._mig_json(m)
                for (p, loc, _), m in sorted(self.migs.items())
                if p == project and loc == location and _filter_matches(query, m.name)
            ]
            return 200, self._page(items, query, "compute#instanceGroupManagerList")
        mig = self.migs.get((project, location, tail[0]))
        if mig is None:
            return 404, _error(404, f"The resource 'projects/{project}/{scope}/instanceGroupManagers/{tail[0]}' was not found", "notFound")
        target = f"{BASE}{project}/{scope}/instanceGroupManagers/{mig.name}"
        action = tail[1] if len(tail) > 1 else ""
        if method == "GET" and not action:
            return 200, self._mig_json(mig)
        if method == "POST" and action == "listManagedInstances":
            items = [self._instance_json(mig, i) for _, i in sorted(mig.instances.items())]
            page = self._page(items, query, "compute#instanceGroupManagersListManagedInstancesResponse")
            page["managedInstances"] = page.pop("items")
            return 200, page
        if method == "POST" and action == "resize":
            size = int(query.get("size", ["-1"])[0])
            if size < 0:
                return 400, _error(400, "size must be >= 0", "invalid")
            self._resize(mig, size)
            return 200, self._operation(project, self._op_scope(mig), "compute.instanceGroupManagers.resize", target)
        if method == "POST" and action == "deleteInstances":
            urls = list((body or {}).get("instances") or [])
            names = []
            for url in urls:
                name = url.rstrip("/").rsplit("/", 1)[-1]
                if name not in mig.instances:
                    return 400, _error(400, f"Instance '{url}' is not a member of {mig.name}", "invalid")
                names.append(name)
            for name in names:
                del mig.instances[name]
            mig.target_size = max(0, mig.target_size - len(names))
            return 200, self._operation(project, self._op_scope(mig), "compute.instanceGroupManagers.deleteInstances", target)
        return 404, _error(404, f"unsupported {method} {action}", "notFound")

    def _op_scope(self, mig: FakeMig) -> str:
        return f"regions/{mig.location}" if mig.regional else f"zones/{mig.location}"

    def _machine_types(self, project: str, zone: str, tail: list[str], query: Mapping[str, list[str]]) -> tuple[int, Any]:
        def item(name: str) -> dict[str, Any]:
            cpus, memory = self.machine_types[name]
            return {
                "kind": "compute#machineType",
                "name": name,
                "guestCpus": cpus,
                "memoryMb": memory,
                "zone": zone,
                "selfLink": f"{BASE}{project}/zones/{zone}/machineTypes/{name}",
            }

        if not tail:
            return 200, self._page([item(n) for n in sorted(self.machine_types)], query, "compute#machineTypeList")
        if tail[0] not in self.machine_types:
            return 404, _error(404, f"machine type {tail[0]} not found", "notFound")
        return 200, item(tail[0])


def _filter_matches(query: Mapping[str, list[str]], name: str) -> bool:
    text = query.get("filter", [""])[0].strip()
    if not text:
        return True
    match = re.fullmatch(r"name\s+(eq|ne)\s+(.+)", text)
    if match is None:
        return True
    found = re.fullmatch(match.group(2).strip().strip("\"'"), name) is not None
    return found if match.group(1) == "eq" else not found


def _error(status: int, message: str, reason: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "errors": [{"reason": reason, "message": message}]}}


def _handler(fake: FakeComputeServer) -> type[FakeHttpHandler]:
    class Handler(FakeHttpHandler):
        def serve(self, method: str) -> None:
            split = urllib.parse.urlsplit(self.path)
            raw = self.read_body()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, payload = fake.handle(method, split.path, urllib.parse.parse_qs(split.query), body, headers)
            if isinstance(payload, str):
                # The metadata server's answers.
                self.send_body(status, payload.encode("utf-8"), "text/plain", {"Metadata-Flavor": "Google"})
            else:
                self.send_json(status, payload)

    return Handler


def iter_instances(fake: FakeComputeServer) -> Iterator[tuple[FakeMig, FakeInstance]]:
    with fake.lock:
        pairs = [(m, i) for m in fake.migs.values() for i in m.instances.values()]
    yield from pairs
