"""Our scheduling simulation against the real kube-scheduler, over generated workloads.

`run_batch` puts a batch of `Workload`s (`clusterscaler.testing.workloads`) side by side on
one real control plane, each in its own namespace with its own kwok node groups, and:

1. waits until kube-scheduler has tried every pending pod on the existing nodes (each pod is
   bound or marked `PodScheduled=False`);
2. asks clusterscaler, read-only, what it makes of each pending pod: `clusterscaler explain
   --from-cluster --json --cloud-provider=kwok` (one loop on the live objects, the kwok
   provider's node groups): the groups a new node of which helps it, or none;
3. runs `clusterscaler --cloud-provider=kwok` (as deploy/kwok's ServiceAccount), which
   creates the nodes as it decides them, while kube-scheduler binds;
4. compares, per pod: a pod some group helps is bound within `bind_timeout` (or fits none of
   its workload's nodes by our predicates either, once kube-scheduler has bound the others:
   `OVERTAKEN`); a pod no group helps is still pending once the others are bound, or was
   bound to a node made for other pods (`HELPED_LATER`, `BESIDE_OTHERS`: one loop's plan
   kept it off, and the replay checks the binding); a pod our simulation fits on an
   existing node is bound there. And per node: replaying kube-scheduler's bindings in the
   order it made them (its `Scheduled` events), each pod passes our predicates on its node,
   with the nodes that existed then and the pods bound before it.

Each workload's outcome (`WorkloadOutcome`) lists its disagreements; `Tally` counts
workloads and agreements per feature of the generator.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from clusterscaler.model import Node, Pod
from clusterscaler.model.node import parse_node
from clusterscaler.model.pod import parse_pod
from clusterscaler.model.storage import (
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    parse_pv,
    parse_pvc,
    parse_storage_class,
)
from clusterscaler.simulator.predicates import check_predicates
from clusterscaler.simulator.snapshot import ClusterSnapshot
from clusterscaler.testing.kwokenv import NAMESPACE, KwokEnv
from clusterscaler.testing.realcluster import RealCluster
from clusterscaler.testing.workloads import WORKLOAD_LABEL, Workload, priority_classes

# A batch's objects are read faster than CA's default client rate (5 QPS) allows.
CLIENT_FLAGS = ("--kube-client-qps=200", "--kube-client-burst=400")
# The autoscaler's flags for the run: scale-up only, loops back to back.
RUN_FLAGS = (
    *CLIENT_FLAGS,
    "--scale-down-enabled=false",
    "--scan-interval=1s",
    "--max-node-provision-time=2m",
)

# Seconds without a new binding or node after which a batch whose claimed pods are not
# all bound is over (the autoscaler makes no more nodes; kube-scheduler has bound what fits).
QUIET = 25.0

# Claims, as explain's answer for a pending pod reads.
HELPS = "helps"
NO_GROUP = "no-group"
FITS_EXISTING = "fits-existing"
LEFT_OUT = "left-out"
# A pod a new node helped when the claim was made, that the pods kube-scheduler bound since
# leave no room for, by our predicates as by kube-scheduler.
OVERTAKEN = "helps-overtaken"
# A pod no group helped in the claim's loop, that a later loop scaled up for (its
# TriggeredScaleUp event) once the nodes planned for the other pods were upcoming.
HELPED_LATER = "no-group-helped-later"
# A pod no group helped in the claim's loop, that kube-scheduler bound to a node made for
# other pods (binding first what the plan put beside it).
BESIDE_OTHERS = "no-group-bound-beside-others"
# A pod kube-scheduler preempted (deleted for a pending pod of higher priority, its
# Preempted event) after the claim: nothing left to compare.
PREEMPTED = "preempted"


@dataclass
class PodOutcome:
    pod: str
    claim: str
    groups: tuple[str, ...]
    node: str | None
    agreed: bool
    detail: str = ""


@dataclass
class WorkloadOutcome:
    workload: Workload
    tag: str
    namespace: str
    pods: list[PodOutcome] = field(default_factory=list)
    placement: list[str] = field(default_factory=list)
    new_nodes: dict[str, int] = field(default_factory=dict)

    @property
    def disagreements(self) -> list[str]:
        found = [
            f"{p.pod}: {p.claim}{' ' + ','.join(p.groups) if p.groups else ''}, "
            f"{'bound to ' + p.node if p.node else 'pending'}: {p.detail}"
            for p in self.pods
            if not p.agreed
        ]
        return found + self.placement

    @property
    def agreed(self) -> bool:
        return not self.disagreements

    def report(self) -> str:
        lines = [f"workload {self.tag} (namespace {self.namespace}): {self.workload!r}"]
        lines += [f"  {d}" for d in self.disagreements]
        return "\n".join(lines)


@dataclass
class Tally:
    """Workloads and agreements per feature; claims per kind."""

    workloads: int = 0
    agreed: int = 0
    by_feature: dict[str, list[int]] = field(default_factory=dict)
    claims: dict[str, list[int]] = field(default_factory=dict)
    seconds: float = 0.0

    def add(self, outcome: WorkloadOutcome) -> None:
        self.workloads += 1
        self.agreed += outcome.agreed
        for feature in outcome.workload.features:
            counts = self.by_feature.setdefault(feature, [0, 0])
            counts[0] += 1
            counts[1] += outcome.agreed
        for pod in outcome.pods:
            counts = self.claims.setdefault(pod.claim, [0, 0])
            counts[0] += 1
            counts[1] += pod.agreed

    def table(self) -> str:
        lines = [f"{self.agreed}/{self.workloads} workloads agree ({self.seconds:.0f}s)", "",
                 "| feature | workloads | agree |", "|---|---:|---:|"]
        lines += [f"| {name} | {n} | {ok} |" for name, (n, ok) in sorted(self.by_feature.items())]
        lines += ["", "| claim | pods | agree |", "|---|---:|---:|"]
        lines += [f"| {name} | {n} | {ok} |" for name, (n, ok) in sorted(self.claims.items())]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"workloads": self.workloads, "agreed": self.agreed, "seconds": round(self.seconds),
                "features": self.by_feature, "claims": self.claims}


class Cluster:
    """Raw-JSON reads of the admin view (fast enough to poll), kubectl for writes."""

    def __init__(self, real: RealCluster) -> None:
        from kubernetes import client

        self.real = real
        self.core = client.CoreV1Api(real.api_client())

    def _items(self, response: Any) -> list[dict[str, Any]]:
        return list(json.loads(response.data).get("items") or [])

    def pods(self, label_selector: str = "") -> list[dict[str, Any]]:
        return [
            p for p in self._items(self.core.list_pod_for_all_namespaces(
                label_selector=label_selector, _preload_content=False))
            if not p["metadata"].get("deletionTimestamp")
        ]

    def nodes(self) -> list[dict[str, Any]]:
        return self._items(self.core.list_node(_preload_content=False))

    def volumes(self) -> list[dict[str, Any]]:
        return self._items(self.core.list_persistent_volume(_preload_content=False))

    def claims(self) -> list[dict[str, Any]]:
        return self._items(self.core.list_persistent_volume_claim_for_all_namespaces(
            _preload_content=False))

    def storage(self) -> Storage:
        """The cluster's volumes, claims and storage classes, as our simulation reads them."""
        from kubernetes import client

        classes = self._items(client.StorageV1Api(self.real.api_client()).list_storage_class(
            _preload_content=False))
        return Storage(
            tuple(parse_pv(v) for v in self.volumes()),
            tuple(parse_pvc(c) for c in self.claims()),
            tuple(parse_storage_class(c) for c in classes),
            listed=True,
        )

    def _named(self, reason: str) -> set[str]:
        return {
            f"{(e.get('involvedObject') or {}).get('namespace')}/"
            f"{(e.get('involvedObject') or {}).get('name')}"
            for e in self._items(self.core.list_event_for_all_namespaces(
                field_selector=f"reason={reason}", _preload_content=False))
        }

    def triggered(self) -> set[str]:
        """The pods the autoscaler's TriggeredScaleUp events name."""
        return self._named("TriggeredScaleUp")

    def preempted(self) -> set[str]:
        """The pods kube-scheduler's Preempted events name (victims of preemption)."""
        return self._named("Preempted")

    def scheduled_events(self) -> list[dict[str, Any]]:
        return self._items(self.core.list_event_for_all_namespaces(
            field_selector="reason=Scheduled", _preload_content=False))

    def create(self, objects: Sequence[dict[str, Any]]) -> None:
        if objects:
            listing = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
            self.real.kubectl("create", "-f", "-", input=json.dumps(listing))


@dataclass(frozen=True)
class Storage:
    """The volumes, claims and classes the volume filters read."""

    pvs: tuple[PersistentVolume, ...] = ()
    pvcs: tuple[PersistentVolumeClaim, ...] = ()
    classes: tuple[StorageClass, ...] = ()
    # Read from the cluster's complete lists: a claim not among them does not exist.
    listed: bool = False

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(
            pvs=self.pvs,
            pvcs=self.pvcs,
            storage_classes=self.classes,
            storage_known=True if self.listed else None,
        )


def _unschedulable(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _ready(node: Mapping[str, Any]) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    ) and not any(t.get("key", "").startswith("node.kubernetes.io/") for t in taints)


def _key(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def _time(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class Placed:
    """The batch as applied: per workload its tag, namespace and pending pod keys."""

    workloads: list[tuple[Workload, str, str]]
    pending: dict[str, set[str]]
    running: dict[str, set[str]]


def apply_batch(cluster: Cluster, env: KwokEnv, workloads: Sequence[Workload]) -> Placed:
    """Namespaces, node groups (the provider's templates ConfigMap), existing nodes, their
    running pods, storage (classes, volumes, claims; the pre-bound claims bound by
    kube-controller-manager and every volume available or bound before any pod comes),
    then the pending pods, for every workload of the batch."""
    real = cluster.real
    suffix = uuid.uuid4().hex[:4]
    placed: list[tuple[Workload, str, str]] = []
    namespaces: list[dict[str, Any]] = []
    for i, workload in enumerate(workloads):
        tag = f"w{i}-{suffix}"
        namespace = f"diff-{tag}"
        placed.append((workload, tag, namespace))
        namespaces.append({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": namespace}})
    real.namespaces.extend(n["metadata"]["name"] for n in namespaces)
    cluster.create(namespaces)
    real.apply(*priority_classes())
    rendered = [w.objects(ns, tag) for w, tag, ns in placed]
    env.configure(*[t for r in rendered for t in r.templates])
    nodes = [n for r in rendered for n in r.nodes]
    cluster.create(nodes)
    names = {n["metadata"]["name"] for n in nodes}
    real.wait_for(
        lambda: names <= {n["metadata"]["name"] for n in cluster.nodes() if _ready(n)},
        "the existing nodes to be ready", timeout=60,
    )
    wanted = {ns for _, _, ns in placed}
    real.wait_for(
        lambda: wanted <= {a["metadata"]["namespace"] for a in real.items(
            "serviceaccounts", "-A", "--field-selector=metadata.name=default")},
        "the default ServiceAccounts of the batch's namespaces", timeout=60,
    )
    storage = [o for r in rendered for o in r.storage]
    if storage:
        cluster.create(storage)
        volumes = {o["metadata"]["name"] for o in storage if o["kind"] == "PersistentVolume"}
        pre_bound = {k for r in rendered for k in r.pre_bound}
        real.wait_for(
            lambda: volumes <= {v["metadata"]["name"] for v in cluster.volumes()
                                if (v.get("status") or {}).get("phase") in ("Available", "Bound")}
            and pre_bound <= {_key(c) for c in cluster.claims()
                              if (c.get("status") or {}).get("phase") == "Bound"},
            "the volumes to be available and the pre-bound claims bound", timeout=60,
        )
    cluster.create([p for r in rendered for p in r.running])
    cluster.create([p for r in rendered for p in r.pending])
    return Placed(
        placed,
        {ns: {f"{ns}/{p['metadata']['name']}" for p in r.pending}
         for (_, _, ns), r in zip(placed, rendered, strict=True)},
        {ns: {f"{ns}/{p['metadata']['name']}" for p in r.running}
         for (_, _, ns), r in zip(placed, rendered, strict=True)},
    )


def wait_for_scheduler(cluster: Cluster, placed: Placed, timeout: float = 180) -> None:
    """Until kube-scheduler has tried every pending pod (bound, or `PodScheduled=False`),
    and the answer held for a second (preemption settles). A pending pod that is gone was
    bound and then preempted by one of higher priority: nothing is left to try."""
    wanted = set().union(*placed.pending.values())
    previous: dict[str, tuple[str, str]] | None = None
    deadline = time.monotonic() + timeout
    while True:
        pods = cluster.pods()
        present = wanted & {_key(p) for p in pods}
        state = {
            _key(p): (p["spec"].get("nodeName") or "",
                      (p.get("status") or {}).get("nominatedNodeName") or "")
            for p in pods
            if _key(p) in wanted and (p["spec"].get("nodeName") or _unschedulable(p))
        }
        if len(state) == len(present) and state == previous:
            return
        if time.monotonic() > deadline:
            missing = sorted(present - set(state))
            raise AssertionError(f"kube-scheduler did not try pods {missing[:10]} in {timeout}s")
        previous = state
        time.sleep(1.0)


def scheduled_events(cluster: Cluster, bound: set[str], timeout: float = 30) -> list[dict[str, Any]]:
    """kube-scheduler's `Scheduled` events, once every pod of `bound` has one (it writes them
    after the binding, asynchronously) or after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        events = cluster.scheduled_events()
        named = {f"{(e.get('involvedObject') or e.get('regarding') or {}).get('namespace')}/"
                 f"{(e.get('involvedObject') or e.get('regarding') or {}).get('name')}"
                 for e in events}
        if bound <= named or time.monotonic() > deadline:
            return events
        time.sleep(1.0)


def claims(env: KwokEnv) -> dict[str, tuple[str, tuple[str, ...], str]]:
    """Per pending pod: the claim, the groups that help, and explain's reasons. `explain`
    runs in this process (its imports are paid once per session), as the autoscaler's
    ServiceAccount."""
    from clusterscaler.commands.cli import main

    out_text, err_text = io.StringIO(), io.StringIO()
    saved = os.environ.get("POD_NAMESPACE")
    os.environ["POD_NAMESPACE"] = NAMESPACE
    try:
        with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text):
            code = main(["explain", "--from-cluster", "--json", "--cloud-provider=kwok",
                         f"--kubeconfig={env.kubeconfig}", f"--namespace={NAMESPACE}",
                         *CLIENT_FLAGS])
    finally:
        if saved is None:
            os.environ.pop("POD_NAMESPACE", None)
        else:
            os.environ["POD_NAMESPACE"] = saved
    if code != 0:
        raise AssertionError(f"clusterscaler explain exited {code}: {err_text.getvalue()[-3000:]}")
    doc = json.loads(out_text.getvalue())
    out: dict[str, tuple[str, tuple[str, ...], str]] = {}
    for entry in doc["pendingPods"]:
        verdicts: dict[str, dict[str, Any]] = entry["nodeGroups"]
        helping = tuple(sorted(g for g, v in verdicts.items() if v["helps"]))
        # The answers of the pod's own workload's groups (the others only say "not mine").
        tag = entry["pod"].split("/", 1)[0].removeprefix("diff-")
        why = "; ".join(f"{g}: {v['why']}" for g, v in sorted(verdicts.items())
                        if g.startswith(f"{tag}-") or g == "*")
        if helping:
            out[entry["pod"]] = (HELPS, helping, why)
        elif any(v["why"].startswith("fits on an existing") for v in verdicts.values()):
            out[entry["pod"]] = (FITS_EXISTING, (), why)
        elif set(verdicts) == {"*"} or not verdicts:
            out[entry["pod"]] = (LEFT_OUT, (), why)
        else:
            out[entry["pod"]] = (NO_GROUP, (), why)
    return out


def run_batch(
    real: RealCluster,
    env: KwokEnv,
    workloads: Sequence[Workload],
    *,
    bind_timeout: float | None = None,
    settle: float = 4.0,
    timings: dict[str, float] | None = None,
) -> list[WorkloadOutcome]:
    """The differential run of one batch (module docstring); the cluster is left as the run
    made it (the caller resets it). `bind_timeout` defaults to a minute plus 8 seconds a
    workload. `timings`, when given, receives the seconds each step
    took."""
    timings = {} if timings is None else timings
    # The autoscaler scales one node group per loop, as CA: a batch takes about one loop
    # per workload.
    if bind_timeout is None:
        bind_timeout = 60.0 + 8.0 * len(workloads)
    cluster = Cluster(real)
    started = time.monotonic()
    placed = apply_batch(cluster, env, workloads)
    applied = time.monotonic()
    wait_for_scheduler(cluster, placed)
    tried = time.monotonic()
    before = {_key(p): p["spec"].get("nodeName") for p in cluster.pods() if p["spec"].get("nodeName")}
    said = claims(env)
    explained = time.monotonic()
    expected_bound = {pod for pod, (claim, _, _) in said.items() if claim in (HELPS, FITS_EXISTING)}
    with env.run(*RUN_FLAGS, name=f"run-{uuid.uuid4().hex[:4]}") as run:
        deadline = time.monotonic() + bind_timeout
        last_change = time.monotonic()
        seen: tuple[int, int] | None = None
        while time.monotonic() < deadline:
            pods = cluster.pods()
            bound = {_key(p) for p in pods if p["spec"].get("nodeName")}
            nodes = cluster.nodes()
            state = (len(bound), len(nodes))
            if state != seen:
                seen, last_change = state, time.monotonic()
            quiet = time.monotonic() - last_change
            ready = all(_ready(n) for n in nodes)
            if ready and quiet >= settle and expected_bound <= bound:
                break
            if ready and quiet >= QUIET:
                # Nothing bound and no node made for a while: what is pending stays so.
                break
            if run.process.poll() is not None:
                raise AssertionError(f"clusterscaler exited {run.returncode}:\n{run.tail()}")
            time.sleep(0.5)
        pods = cluster.pods()
        nodes = cluster.nodes()
        events = scheduled_events(cluster, {_key(p) for p in pods if p["spec"].get("nodeName")}
                                  & set().union(*placed.pending.values()))
        triggered = cluster.triggered()
        preempted = cluster.preempted()
        storage = cluster.storage()
    ran = time.monotonic()
    timings.update(apply=applied - started, scheduler=tried - applied,
                   explain=explained - tried, run=ran - explained)
    return [
        compare(workload, tag, namespace, pods, nodes, events, said, before,
                placed.running[namespace], triggered, preempted, storage)
        for workload, tag, namespace in placed.workloads
    ]


def compare(
    workload: Workload,
    tag: str,
    namespace: str,
    pods: Iterable[dict[str, Any]],
    nodes: Iterable[dict[str, Any]],
    events: Iterable[dict[str, Any]],
    said: Mapping[str, tuple[str, tuple[str, ...], str]],
    before: Mapping[str, str | None],
    running: set[str],
    triggered: set[str] | None = None,
    preempted: set[str] | None = None,
    storage: Storage | None = None,
) -> WorkloadOutcome:
    """One workload's outcome (module docstring); `storage` is the cluster's volumes,
    claims and classes as the run left them (every claim kube-scheduler bound is bound)."""
    storage = storage or Storage()
    outcome = WorkloadOutcome(workload, tag, namespace)
    mine = {_key(p): p for p in pods if p["metadata"]["namespace"] == namespace}
    own_nodes = [n for n in nodes if (n["metadata"].get("labels") or {}).get(WORKLOAD_LABEL) == tag]
    groups = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get("kwok-nodegroup", "")
              for n in own_nodes}
    for group in groups.values():
        if group:
            outcome.new_nodes[group] = outcome.new_nodes.get(group, 0) + 1
    pending_names = [f"{namespace}/{p.name}" for p in workload.pending]
    for key in pending_names:
        pod = mine.get(key)
        node = pod["spec"].get("nodeName") if pod else None
        if key in before:
            # Bound by kube-scheduler before the autoscaler looked: no claim, only the
            # placement check below.
            continue
        if key not in said:
            if pod is None:
                # Preempted or evicted before the claim: nothing to compare.
                continue
            outcome.pods.append(PodOutcome(key, LEFT_OUT, (), node, False,
                                           "explain did not report this pending pod"))
            continue
        claim, helping, why = said[key]
        if pod is None and key in (preempted or set()):
            # kube-scheduler deleted it for a pod of higher priority once the claim was
            # made (a bare pod does not come back). Preemption is not compared: neither
            # clusterscaler nor CA simulates it.
            outcome.pods.append(PodOutcome(key, PREEMPTED, helping, None, True, why))
            continue
        if pod is None:
            outcome.pods.append(PodOutcome(key, claim, helping, None, False,
                                           "deleted, with no Preempted event"))
            continue
        if claim == HELPS:
            group = groups.get(node or "", "")
            ok = node is not None
            detail = "" if ok else f"not bound in time; explain: {why}"
            if not ok and pod is not None:
                fits = fits_now(pod, own_nodes, mine.values(), storage)
                if fits is None:
                    # Our predicates agree with kube-scheduler on the cluster as it is now:
                    # pods bound since the claim (kube-scheduler chose their nodes) took the
                    # room or the topology domain the claim counted on (docs/testing.md).
                    outcome.pods.append(PodOutcome(key, OVERTAKEN, helping, None, True, why))
                    continue
                detail = f"our predicates fit it on {fits} now, kube-scheduler does not"
            if ok and group and group not in helping:
                # Bound to a node of a group we said does not help: fine only if the
                # placement check below accepts it (it runs on every binding).
                detail = f"bound to group {group}, not one explain named"
            outcome.pods.append(PodOutcome(key, claim, helping, node, ok, detail))
        elif claim == FITS_EXISTING:
            ok = node is not None and not groups.get(node)
            outcome.pods.append(PodOutcome(
                key, claim, (), node, ok,
                "" if ok else "kube-scheduler found no existing node for it"))
        elif claim == NO_GROUP:
            ok = node is None
            if node and groups.get(node):
                # One loop's claim: each group's option plans every pending pod on that
                # group's template, so a pod kept off by another pod planned beside it may
                # be helped by a later loop once that pod's node is upcoming elsewhere
                # (TriggeredScaleUp), or bound by kube-scheduler, in its own order, to a
                # node made for the others. Either way the binding must pass the replay
                # below, which compares the predicates.
                kind = HELPED_LATER if key in (triggered or set()) else BESIDE_OTHERS
                outcome.pods.append(PodOutcome(key, kind, (), node, True, why))
                continue
            outcome.pods.append(PodOutcome(
                key, claim, (), node, ok, "" if ok else f"explain: {why}"))
        else:
            outcome.pods.append(PodOutcome(key, claim, (), node, True, why))
    outcome.placement = check_placement(
        own_nodes, list(mine.values()), events, set(pending_names), running, storage
    )
    return outcome


def fits_now(
    pod: Mapping[str, Any],
    nodes: Sequence[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    storage: Storage | None = None,
) -> str | None:
    """The first of `nodes` our predicates fit the pending `pod` on, with every bound pod
    where it is and the volumes as they are; None when none."""
    snapshot = (storage or Storage()).snapshot()
    for node in nodes:
        snapshot.add_node(parse_node(node))
    for other in pods:
        name = other["spec"].get("nodeName")
        if name and name in snapshot:
            snapshot.add_pod(parse_pod(other), name)
    candidate = parse_pod(pod)
    for info in snapshot:
        if check_predicates(candidate, info, snapshot) is None:
            return info.name
    return None


def check_placement(
    nodes: Sequence[dict[str, Any]],
    pods: Sequence[dict[str, Any]],
    events: Iterable[dict[str, Any]],
    pending: set[str],
    running: set[str],
    storage: Storage | None = None,
) -> list[str]:
    """Replay kube-scheduler's bindings of the pending pods in the order of its `Scheduled`
    events (a binding that fails is retried after the others): each must pass our
    predicates on its node, with the nodes created by then and the pods placed before it,
    and the volumes as the run left them (a claim kube-scheduler bound is bound to the
    volume it chose). A node created in the same second as a binding may or may not
    have existed: a spread rejection is retried without such nodes."""
    storage = storage or Storage()
    bound_at: dict[str, float] = {}
    for event in events:
        obj = event.get("involvedObject") or event.get("regarding") or {}
        key = f"{obj.get('namespace')}/{obj.get('name')}"
        if key in pending:
            stamp = _time(event.get("eventTime") or event.get("firstTimestamp"))
            bound_at[key] = max(bound_at.get(key, 0.0), stamp)
    parsed_nodes: list[tuple[float, Node]] = sorted(
        ((_time(n["metadata"].get("creationTimestamp")), parse_node(n)) for n in nodes),
        key=lambda x: x[0],
    )
    by_key = {_key(p): p for p in pods}
    order = sorted(
        (k for k in pending if k in by_key and by_key[k]["spec"].get("nodeName")),
        key=lambda k: bound_at.get(k, float("inf")),
    )
    errors: list[str] = []
    for k in order:
        if k not in bound_at:
            errors.append(f"{k}: bound to {by_key[k]['spec']['nodeName']} without a Scheduled event")
    placed_pods: list[tuple[Pod, str]] = [
        (parse_pod(by_key[k]), by_key[k]["spec"]["nodeName"]) for k in sorted(running)
        if k in by_key and by_key[k]["spec"].get("nodeName")
    ]
    # kube-scheduler binds asynchronously: a pod's binding (and its event) can finish after
    # that of a pod it scheduled later with the first one assumed on its node. A binding
    # that fails is tried again after the others; only one no order admits is reported.
    remaining = list(order)
    reasons: dict[str, str] = {}
    progress = True
    while remaining and progress:
        progress = False
        for k in remaining:
            pod = parse_pod(by_key[k])
            target = by_key[k]["spec"]["nodeName"]
            at = bound_at.get(k, float("inf"))
            reason = _fits(pod, target, placed_pods, parsed_nodes,
                           lambda t, at=at: at == math.inf or t <= int(at), storage)
            if reason is not None and "topology spread" in reason:
                # Nodes created in the binding's own second are left out on this try.
                reason = _fits(pod, target, placed_pods, parsed_nodes,
                               lambda t, at=at: at == math.inf or t < int(at), storage)
            if reason is None:
                placed_pods.append((pod, target))
                remaining.remove(k)
                progress = True
                break
            reasons[k] = reason
    for k in remaining:
        errors.append(f"{k}: kube-scheduler bound it to {by_key[k]['spec']['nodeName']}, "
                      f"our predicates say: {reasons[k]}")
    return errors


def _fits(
    pod: Pod,
    target: str,
    placed: Sequence[tuple[Pod, str]],
    nodes: Sequence[tuple[float, Node]],
    existed: Any,
    storage: Storage,
) -> str | None:
    snapshot = storage.snapshot()
    present = set()
    for created, node in nodes:
        if node.name == target or existed(created):
            snapshot.add_node(node)
            present.add(node.name)
    if target not in present:
        return f"node {target} is not in the cluster"
    for other, name in placed:
        if name in present:
            snapshot.add_pod(other, name)
    return check_predicates(pod, snapshot.get(target), snapshot)


def clear_batch(real: RealCluster, placed_namespaces: Sequence[str]) -> None:
    """Between two batches of one test: the batch's pods (force-deleted: pods of nodes
    already gone have no kubelet to confirm it), its namespaces (left to the namespace
    controller, not waited for), every node, and the workloads' volumes and storage
    classes. Only the batch's own namespaces: a run of
    many batches costs the same per batch."""
    from kubernetes import client

    core = client.CoreV1Api(real.api_client())
    for namespace in placed_namespaces:
        with contextlib.suppress(client.ApiException):
            core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        with contextlib.suppress(client.ApiException):
            core.delete_namespace(namespace, propagation_policy="Background")
    done = set(placed_namespaces)
    real.namespaces[:] = [ns for ns in real.namespaces if ns not in done]
    real.kubectl("delete", "nodes", "--all", "--wait=false", check=False)
    # The workloads' volumes and storage classes (cluster-wide, each named per workload;
    # a volume goes once its claim has, with the namespace).
    real.kubectl("delete", "persistentvolumes,storageclasses", "-l", WORKLOAD_LABEL,
                 "--wait=false", check=False)
    real.wait_for(lambda: not real.items("nodes"), "every node to be deleted")


def write_report(path: Path, tally: Tally, outcomes: Sequence[WorkloadOutcome],
                 errors: Sequence[str] = ()) -> None:
    """The tally, every disagreement and every batch the harness failed on, as JSON (the
    slow run's record)."""
    path.write_text(json.dumps({
        **tally.to_json(),
        "disagreements": [o.report() for o in outcomes if not o.agreed],
        "harness_errors": list(errors),
    }, indent=2))
