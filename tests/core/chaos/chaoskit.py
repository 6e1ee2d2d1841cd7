"""A cluster on the fake API server for chaos tests of the real `clusterscaler run` process.

- `Workload` plays the ReplicaSet controller and the scheduler: it keeps `replicas` pods of
  1.5 CPU (two fit a 4-CPU node) and binds pending pods, most-allocated first, to Ready
  nodes without NoSchedule taints, marking them Running and Ready. It acts through the
  server's direct access, so its writes are neither faulted nor recorded as requests: every
  request the server sees comes from the autoscaler.
- `Audit` watches, under the server's lock, each request the autoscaler makes as it is
  carried out, and records every breach of the safety rules: a Node deleted without our
  `ToBeDeletedByClusterAutoscaler` taint (an instance deleted while its Node exists, not
  through scale-down), a Node deleted with pods still bound to it, a Node deleted when the
  workload no longer fits on the nodes left, a pod deleted instead of evicted, an eviction
  the PodDisruptionBudget did not allow.
- `Autoscaler` runs `clusterscaler run` with the `sim` provider, which creates and deletes
  Node objects through the API server (its instances are the Nodes).
"""

from __future__ import annotations

import itertools
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from clusterscaler.testing.fakekube import ApiError, FakeKubeServer

TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"
OUR_TAINTS = frozenset({TO_BE_DELETED, DELETION_CANDIDATE})
GROUP = "general"
NODE_GROUP_LABEL = "clusterscaler.io/node-group"
APP = "web"
NAMESPACE = "default"
NODE_CPU_MILLI = 4000
POD_CPU_MILLI = 1500
EXECUTABLE = str(Path(sys.executable).with_name("clusterscaler"))

Obj = dict[str, Any]


def cloud_config(max_size: int) -> Obj:
    return {
        "nodeGroups": [
            {
                "name": GROUP,
                "minSize": 0,
                "maxSize": max_size,
                "provisionDelay": "0s",
                "template": {
                    "metadata": {"labels": {"node.kubernetes.io/instance-type": "sim.xlarge"}},
                    "status": {
                        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    },
                },
            }
        ]
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout: float, what: Callable[[], str] | str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {detail}")
        time.sleep(0.05)


def taint_keys(node: Obj) -> set[str]:
    return {t.get("key", "") for t in (node.get("spec") or {}).get("taints") or []}


def is_terminating(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def is_workload_pod(pod: Obj) -> bool:
    return (pod["metadata"].get("labels") or {}).get("app") == APP


def node_slots(node: Obj) -> int:
    """How many workload pods fit on an empty node."""
    cpu = str(((node.get("status") or {}).get("allocatable") or {}).get("cpu", "0"))
    milli = int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)
    return milli // POD_CPU_MILLI


def schedulable(node: Obj) -> bool:
    """Whether the scheduler places new pods on the node (Ready, not cordoned, no taint
    that repels pods without tolerations)."""
    if is_terminating(node) or (node.get("spec") or {}).get("unschedulable"):
        return False
    if any(
        t.get("effect") in ("NoSchedule", "NoExecute")
        for t in (node.get("spec") or {}).get("taints") or []
    ):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def group_node(name: str) -> Obj:
    """A Node of the `sim` group, as the provider creates it."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                NODE_GROUP_LABEL: GROUP,
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "sim.xlarge",
            },
        },
        "spec": {"providerID": f"sim://{GROUP}/{name}"},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def workload_objects() -> list[Obj]:
    """The ReplicaSet the pods belong to and its PodDisruptionBudget (one pod at a time)."""
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": APP, "namespace": NAMESPACE, "uid": "rs-web"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": APP}}},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": APP, "namespace": NAMESPACE},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": APP}}},
        },
    ]


_RUNNING_STATUS: Obj = {
    "phase": "Running",
    "conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True"},
    ],
}


class Workload:
    """The ReplicaSet controller and the scheduler of the cluster (see the module docstring).

    ``replicas`` is changed with ``set_replicas``; ``fewest_replicas_since`` tells the
    smallest number the workload asked for since a time (what a scale-down decided then
    had to leave room for).
    """

    def __init__(self, kube: FakeKubeServer, *, period: float = 0.05) -> None:
        self.kube = kube
        self.period = period
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._history: list[tuple[float, int]] = [(0.0, 0)]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []
        # Pod name -> (node, time.time()) of its binding.
        self.bound_at: dict[str, tuple[str, float]] = {}

    @property
    def replicas(self) -> int:
        with self._lock:
            return self._history[-1][1]

    def set_replicas(self, replicas: int) -> None:
        """Scale the ReplicaSet (its scale is what the PodDisruptionBudget expects)."""
        with self.kube.locked():
            self.kube.patch("replicasets", APP, {"spec": {"replicas": replicas}}, NAMESPACE)
            with self._lock:
                self._history.append((time.time(), replicas))

    def fewest_replicas_since(self, since: float) -> int:
        with self._lock:
            in_force = [r for t, r in self._history if t <= since][-1:]
            later = [r for t, r in self._history if t > since]
        return min(in_force + later)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.step()
            except Exception:
                self.errors.append(traceback.format_exc())

    def pods(self) -> list[Obj]:
        return [
            p
            for p in self.kube.list("pods", NAMESPACE, label_selector=f"app={APP}")
            if not is_terminating(p)
        ]

    def step(self) -> None:
        """One pass of the pod garbage collector and the controller, then of the
        scheduler."""
        kube = self.kube
        replicas = self.replicas
        with kube.locked():
            nodes = {n["metadata"]["name"] for n in kube.list("nodes")}
            for pod in self.pods():
                # As kube-controller-manager's pod GC: pods bound to a Node that is gone.
                if pod["spec"].get("nodeName") and pod["spec"]["nodeName"] not in nodes:
                    kube.delete("pods", pod["metadata"]["name"], NAMESPACE)
            pods = self.pods()
            if len(pods) < replicas:
                for _ in range(replicas - len(pods)):
                    kube.create(self._new_pod())
            elif len(pods) > replicas:
                per_node: dict[str, int] = {}
                for pod in pods:
                    node = pod["spec"].get("nodeName") or ""
                    per_node[node] = per_node.get(node, 0) + 1
                # Pending pods go first, then those on the emptiest nodes: a ReplicaSet
                # scaling down prefers unscheduled pods and spreads nothing back.
                doomed = sorted(
                    pods,
                    key=lambda p: (
                        bool(p["spec"].get("nodeName")),
                        per_node[p["spec"].get("nodeName") or ""],
                        p["metadata"]["name"],
                    ),
                )[: len(pods) - replicas]
                for pod in doomed:
                    kube.delete("pods", pod["metadata"]["name"], NAMESPACE)
        for pod in self.pods():
            if not pod["spec"].get("nodeName"):
                self._schedule(pod["metadata"]["name"])

    def _schedule(self, name: str) -> None:
        kube = self.kube
        # The check that a node has room and the binding happen at once: the autoscaler
        # cannot taint the node in between (a real scheduler races there; this one must
        # not, so that a pod bound to a deleted node is the autoscaler's doing).
        with kube.locked():
            pod = kube.get("pods", name, NAMESPACE)
            if pod is None or pod["spec"].get("nodeName") or is_terminating(pod):
                return
            used: dict[str, int] = {}
            for other in self.pods():
                node = other["spec"].get("nodeName")
                if node:
                    used[node] = used.get(node, 0) + 1
            candidates = [
                (used.get(n["metadata"]["name"], 0), n["metadata"]["name"])
                for n in kube.list("nodes")
                if schedulable(n) and used.get(n["metadata"]["name"], 0) < node_slots(n)
            ]
            if not candidates:
                return
            # Most allocated first (then by name): nodes left underused can go.
            _, node_name = max(candidates, key=lambda c: (c[0], [-ord(ch) for ch in c[1]]))
            try:
                kube.patch(
                    "pods",
                    name,
                    {"spec": {"nodeName": node_name}, "status": _RUNNING_STATUS},
                    NAMESPACE,
                )
            except ApiError:
                return
            self.bound_at[name] = (node_name, time.time())

    def add_running_pod(self, node: str) -> str:
        """One more replica, already bound to ``node`` and running; returns its name."""
        pod = self._new_pod()
        pod["spec"]["nodeName"] = node
        pod["status"] = _RUNNING_STATUS
        name = str(pod["metadata"]["name"])
        with self.kube.locked():
            self.kube.create(pod)
            self.bound_at[name] = (node, time.time())
            self.set_replicas(self.replicas + 1)
        return name

    def _new_pod(self) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{APP}-{next(self._names)}",
                "namespace": NAMESPACE,
                "labels": {"app": APP},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": APP,
                        "uid": "rs-web",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": APP,
                        "resources": {"requests": {"cpu": f"{POD_CPU_MILLI}m", "memory": "1Gi"}},
                    }
                ]
            },
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ],
            },
        }

    def placement(self) -> dict[str, list[str]]:
        """Workload pods per node ("" for pending)."""
        out: dict[str, list[str]] = {}
        for pod in self.pods():
            out.setdefault(pod["spec"].get("nodeName") or "", []).append(pod["metadata"]["name"])
        return out


@dataclass(frozen=True)
class NodeDeletion:
    """A Node DELETE the server carried out, and the cluster as it was at that moment."""

    name: str
    uid: str
    at: float
    taints: frozenset[str]
    pods: tuple[str, ...]
    needed: int
    room_left: int


_NODE = re.compile(r"/api/v1/nodes/([^/]+)")
_POD = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)")
_EVICTION = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction")


class Audit:
    """Checks each request of the autoscaler as the server carries it out (``on_handle``).

    ``violations`` lists every breach, with the cluster state that makes it one.
    """

    def __init__(self, kube: FakeKubeServer, workload: Workload) -> None:
        self.kube = kube
        self.workload = workload
        self.violations: list[str] = []
        self.deletions: list[NodeDeletion] = []
        self.deleted_missing: list[str] = []
        self.evictions = 0
        # Running pods whose eviction the budget did not allow when it was carried out.
        self.refused: set[str] = set()
        self.errors: list[str] = []

    def install(self) -> None:
        self.kube.on_handle = self.observe

    def observe(self, method: str, path: str, query: dict[str, str]) -> None:
        try:
            if query.get("dryRun"):
                return
            if method == "DELETE" and (m := _NODE.fullmatch(path)):
                self._node_deleted(m.group(1))
            elif method == "POST" and (m := _EVICTION.fullmatch(path)):
                self._evicted(m.group(1), m.group(2))
            elif method == "DELETE" and (m := _POD.fullmatch(path)):
                pod = self.kube.get("pods", m.group(2), m.group(1))
                if pod is not None and not is_terminating(pod):
                    self.violations.append(
                        f"pod {m.group(1)}/{m.group(2)} on node "
                        f"{pod['spec'].get('nodeName') or '(none)'} deleted, not evicted: "
                        "no PodDisruptionBudget was consulted"
                    )
        except Exception:
            # A bug here must fail the test, not the request.
            self.errors.append(traceback.format_exc())

    def _node_deleted(self, name: str) -> None:
        kube = self.kube
        node = kube.get("nodes", name)
        if node is None:
            self.deleted_missing.append(name)
            return
        taints = frozenset(taint_keys(node))
        bound = tuple(
            sorted(
                p["metadata"]["name"]
                for p in kube.list("pods")
                if p["spec"].get("nodeName") == name
                and not is_terminating(p)
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            )
        )
        # The workload must fit on the nodes left: schedulable ones other than this (nodes
        # with our deletion taint are going too).
        room = sum(
            node_slots(n)
            for n in kube.list("nodes")
            if n["metadata"]["name"] != name and schedulable(n)
        )
        tainted_at = next(
            (
                float(t.get("value") or 0)
                for t in node["spec"].get("taints") or []
                if t.get("key") == TO_BE_DELETED
            ),
            time.time(),
        )
        # Whatever the workload asked for since the node was chosen (the taint's value is
        # the time in seconds; one more second for its rounding).
        needed = self.workload.fewest_replicas_since(tainted_at - 1)
        deletion = NodeDeletion(
            name, node["metadata"].get("uid", ""), time.time(), taints, bound, needed, room
        )
        self.deletions.append(deletion)
        if TO_BE_DELETED not in taints:
            self.violations.append(
                f"node {name} deleted while its Node exists, without the {TO_BE_DELETED} "
                f"taint (an instance deleted as unregistered or failed, not scaled down): "
                f"{deletion}"
            )
        if bound:
            when = {
                pod: round(self.workload.bound_at[pod][1] - tainted_at, 2)
                for pod in bound
                if pod in self.workload.bound_at
            }
            self.violations.append(
                f"node {name} deleted with pods still bound (seconds from the deletion taint "
                f"to their binding: {when}): {deletion}"
            )
        if needed > room:
            self.violations.append(
                f"node {name} deleted although its pods had nowhere to go: the workload "
                f"needs {needed} slots and the schedulable nodes left have {room}: {deletion}"
            )

    def _evicted(self, namespace: str, name: str) -> None:
        """An eviction about to be carried out: does the budget, counted from the pods
        themselves, allow it? (The server then refuses it with 429 when it does not.)"""
        kube = self.kube
        pod = kube.get("pods", name, namespace)
        if pod is None or not is_workload_pod(pod):
            return
        self.evictions += 1
        phase = (pod.get("status") or {}).get("phase")
        if phase != "Running" or is_terminating(pod):
            return  # not running: evicting it disrupts nothing
        live = [
            p
            for p in kube.list("pods", namespace, label_selector=f"app={APP}")
            if not is_terminating(p)
        ]
        healthy = sum(1 for p in live if _healthy(p))
        # maxUnavailable 1 of the ReplicaSet's scale: an evicted pod not yet replaced is
        # still expected.
        replica_set = kube.get("replicasets", APP, NAMESPACE) or {}
        expected = int((replica_set.get("spec") or {}).get("replicas") or 0)
        allowed = healthy - (expected - 1)
        if allowed <= 0:
            self.refused.add(name)

    def breaches(self) -> list[str]:
        """Every breach: those seen as requests were carried out, and evictions that the
        server answered as done although the budget did not allow them."""
        out = list(self.violations)
        out.extend(
            f"eviction of pod {r.name} succeeded beyond its PodDisruptionBudget"
            for r in self.kube.requests
            if r.subresource == "eviction" and r.status == 201 and r.name in self.refused
        )
        out.extend(f"audit failed: {e}" for e in self.errors)
        out.extend(f"workload failed: {e}" for e in self.workload.errors)
        return out

    def node_history(self) -> str:
        """The Node creations and deletions the autoscaler asked for, with their answers
        and faults, and the deletions carried out: what a failure message needs."""
        lines = [
            f"{r.method} {r.name or '(new)'} -> {r.status} {r.fault}".rstrip()
            for r in self.kube.requests
            if r.resource == "nodes" and r.method in ("POST", "DELETE")
        ]
        lines.extend(str(d) for d in self.deletions)
        return "\n".join(lines)


def _healthy(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


class Autoscaler:
    """One `clusterscaler run` process against the fake server, logging JSON to a file."""

    def __init__(self, workdir: Path, kube: FakeKubeServer, flags: list[str]) -> None:
        self.workdir = workdir
        self.flags = flags
        (workdir / "cloud.yaml").write_text(yaml.safe_dump(cloud_config(8)))
        kube.kubeconfig(workdir / "kubeconfig")
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "autoscaler.log"
        self._starts = itertools.count()

    def start(self) -> subprocess.Popen[bytes]:
        self.log_path = self.workdir / f"autoscaler-{next(self._starts)}.log"
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child has its own descriptor
        self.process = subprocess.Popen(
            [
                EXECUTABLE,
                f"--kubeconfig={self.workdir / 'kubeconfig'}",
                "--cloud-provider=sim",
                f"--cloud-config={self.workdir / 'cloud.yaml'}",
                "--leader-elect=false",
                f"--address=127.0.0.1:{free_port()}",
                "--logging-format=json",
                *self.flags,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        return self.process

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        process = self.process
        assert process is not None
        if process.poll() is None:
            process.send_signal(sig)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()  # never left behind, whatever the test's outcome
            process.wait()
            raise

    def count(self, event: str, path: Path | None = None) -> int:
        needle = f'"msg":"{event}"'
        return (path or self.log_path).read_text(errors="replace").count(needle)

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def group_nodes(kube: FakeKubeServer) -> list[Obj]:
    return [n for n in kube.list("nodes") if not is_terminating(n)]


def convergence_gaps(kube: FakeKubeServer, workload: Workload) -> list[str]:
    """What still keeps the cluster from its steady state (empty when converged): pods
    pending, our taints left, more or fewer nodes than the workload needs."""
    gaps: list[str] = []
    placement = workload.placement()
    pending = placement.get("", [])
    if pending:
        gaps.append(f"{len(pending)} pods pending")
    if sum(len(v) for v in placement.values()) != workload.replicas:
        gaps.append("the workload has not caught up")
    nodes = group_nodes(kube)
    for node in nodes:
        ours = taint_keys(node) & OUR_TAINTS
        if ours:
            gaps.append(f"node {node['metadata']['name']} tainted {sorted(ours)}")
    wanted = math.ceil(workload.replicas / (NODE_CPU_MILLI // POD_CPU_MILLI))
    if len(nodes) != wanted:
        gaps.append(
            f"{len(nodes)} nodes instead of {wanted}: "
            f"{ {k or 'pending': len(v) for k, v in sorted(placement.items())} }"
        )
    return gaps
