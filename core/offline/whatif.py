"""What-if changes on top of a snapshot, applied in command-line order to the in-memory
cluster before the loop runs: `--apply FILE` (manifests, see
`clusterscaler.offline.manifests`), `--scale <kind>/<ns>/<name>=<replicas>`, `--drain-node
NAME` and `--remove-node-group NAME`.

Each change acts as the cluster's own machinery would: scaling a workload adds pending pods
copied from one of its pods (or removes pending pods first, then the newest); draining a
node cordons it and evicts its pods through the Eviction API, as `kubectl drain
--ignore-daemonsets` does (a PodDisruptionBudget with no disruption left keeps the pod,
controllers recreate the others as pending pods, bare pods are gone); removing a node group
deletes its nodes (their pods are recreated by their controllers) and the group itself.
The report of each change says what happened, and for drained pods where their
replacements go once the scheduler has run.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterscaler.framework.clusteractions import EvictionError
from clusterscaler.interfaces.cloudprovider import CloudProvider, CloudProviderError
from clusterscaler.loop.decisions import LoopResult
from clusterscaler.model import ClusterObjects, Node
from clusterscaler.offline.loader import InputError
from clusterscaler.offline.manifests import APPLY, apply_file, pdb_status, refresh_pdb
from clusterscaler.offline.output import plural, render_table
from clusterscaler.offline.simulatedcluster import SimulatedCluster, SimulationError

SCALE, DRAIN_NODE, REMOVE_NODE_GROUP = "--scale", "--drain-node", "--remove-node-group"
SCALE_FORM = "<kind>/<namespace>/<name>=<replicas>, kind one of deployment, replicaset, statefulset, replicationcontroller, job"
_KINDS = {
    "deployment": "Deployment",
    "deploy": "Deployment",
    "replicaset": "ReplicaSet",
    "rs": "ReplicaSet",
    "statefulset": "StatefulSet",
    "sts": "StatefulSet",
    "replicationcontroller": "ReplicationController",
    "rc": "ReplicationController",
    "job": "Job",
}
_SCALE = re.compile(r"^(?P<kind>[A-Za-z]+)/(?P<ns>[^/=]+)/(?P<name>[^/=]+)=(?P<replicas>\d+)$")


@dataclass(frozen=True, slots=True)
class Change:
    """One change as given: the flag and its value."""

    flag: str
    value: str

    @property
    def text(self) -> str:
        return f"{self.flag}={self.value}" if self.flag == SCALE else f"{self.flag} {self.value}"


@dataclass(frozen=True, slots=True)
class ScaleTarget:
    kind: str
    namespace: str
    name: str
    replicas: int


def parse_scale(value: str) -> ScaleTarget:
    match = _SCALE.match(value)
    kind = _KINDS.get(match["kind"].lower()) if match else None
    if match is None or kind is None:
        raise InputError(f"--scale={value!r}: expected {SCALE_FORM}")
    return ScaleTarget(kind, match["ns"], match["name"], int(match["replicas"]))


class RecordChange(argparse.Action):
    """Keeps every change flag in one list, in command-line order (the order they apply)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        changes = list(getattr(namespace, self.dest, None) or [])
        changes.append(Change(option_string or self.option_strings[0], str(values)))
        setattr(namespace, self.dest, changes)


def add_change_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        APPLY,
        action=RecordChange,
        dest="changes",
        default=[],
        metavar="FILE",
        help="Create the objects of a manifest file (Deployments, ReplicaSets, StatefulSets, "
        "Jobs, DaemonSets, Pods, PodDisruptionBudgets; YAML or JSON) before the loop runs, "
        "controllers creating their pods. Repeatable; changes apply in order.",
    )
    group.add_argument(
        SCALE,
        action=RecordChange,
        dest="changes",
        default=[],
        metavar="KIND/NS/NAME=N",
        help="Set a workload's replicas before the loop runs (deployment, replicaset, "
        "statefulset, replicationcontroller or job). Repeatable; changes apply in order.",
    )
    group.add_argument(
        DRAIN_NODE,
        action=RecordChange,
        dest="changes",
        default=[],
        metavar="NAME",
        help="Cordon the node and evict its pods (PDBs honoured, DaemonSet and mirror pods "
        "stay) before the loop runs. Repeatable.",
    )
    group.add_argument(
        REMOVE_NODE_GROUP,
        action=RecordChange,
        dest="changes",
        default=[],
        metavar="NAME",
        help="Delete the node group and its nodes before the loop runs. Repeatable.",
    )


@dataclass(frozen=True, slots=True)
class MovedPod:
    """A pod a change evicted or deleted, and where its replacement went."""

    pod: str
    # The replacement's node, "pending", "not recreated" (no controller) or
    # "stays: <why>" (the eviction was refused).
    to: str
    replacement: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"pod": self.pod, "replacement": self.replacement or None, "to": self.to}


@dataclass(slots=True)
class ChangeReport:
    change: Change
    detail: str
    pods: list[MovedPod] = field(default_factory=list)
    # Keys of the replacements, by the pod they replace (resolved by `settle`); a pod
    # created by `--apply` is its own.
    replacements: dict[str, str] = field(default_factory=dict)
    # PodDisruptionBudgets created and their line in `objects`: `settle` brings their
    # status up to date.
    pdbs: list[tuple[str, int]] = field(default_factory=list)
    # One line per object applied.
    objects: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"change": self.change.text, "detail": self.detail}
        if self.objects:
            doc["objects"] = list(self.objects)
        if self.pods:
            doc["pods"] = [p.to_json() for p in self.pods]
        return doc


def _kept_on_drain(pod: Any) -> bool:
    return bool(pod.is_daemonset or pod.is_mirror)


def _replaced(cluster: SimulatedCluster, act: Callable[[], None]) -> list[str]:
    """The pods `act` creates, by key."""
    before = set(cluster.pods)
    act()
    return sorted(set(cluster.pods) - before)


def _scale(cluster: SimulatedCluster, change: Change) -> ChangeReport:
    target = parse_scale(change.value)
    kind, name = target.kind, target.name
    if kind == "Deployment":
        owned = [
            c
            for c in cluster.controllers
            if c.kind == "ReplicaSet"
            and c.namespace == target.namespace
            and c.owner is not None
            and c.owner.kind == "Deployment"
            and c.owner.name == target.name
        ]
        if not owned:
            raise InputError(
                f"--scale={change.value!r}: Deployment {target.namespace}/{target.name}: "
                "expected a ReplicaSet of it in the snapshot (Deployments are read through "
                "their ReplicaSets: list rs with kubectl get)"
            )
        # The current ReplicaSet of a rollout is the one with replicas; ties by pods.
        current = max(owned, key=lambda c: (c.replicas or 0, len(cluster.owned_pods(c)), c.name))
        kind, name = "ReplicaSet", current.name
    try:
        delta = cluster.scale(f"{kind}/{target.namespace}/{name}", target.replicas)
    except SimulationError as exc:
        raise InputError(f"--scale={change.value!r}: {exc}") from None
    via = f" (ReplicaSet {name})" if target.kind == "Deployment" else ""
    return ChangeReport(change, f"{target.replicas} replicas{via}: {delta:+d} {'pod' if abs(delta) == 1 else 'pods'}")


def _apply(cluster: SimulatedCluster, change: Change) -> ChangeReport:
    applied = apply_file(cluster, change.value)
    # The scheduler places the new pods before the next change, as it would within
    # moments of `kubectl apply` (pods a scheduler already found no room for stay so).
    cluster.schedule(retry_unschedulable=False)
    report = ChangeReport(change, "", pdbs=applied.pdbs, objects=applied.objects)
    _refresh_pdbs(cluster, report)
    for key in applied.pods:
        report.replacements[key] = key
    count = len(applied.objects)
    report.detail = f"{count} object{'s' if count != 1 else ''}, {len(applied.pods)} pods created"
    return report


def _refresh_pdbs(cluster: SimulatedCluster, report: ChangeReport) -> None:
    """The status of the budgets `report` created, as the disruption controller has it now."""
    for key, line in report.pdbs:
        if key in cluster.pdbs:
            budget = refresh_pdb(cluster, key)
            what = report.objects[line].rsplit(": ", 1)[0]
            report.objects[line] = f"{what}: {pdb_status(budget)}"


def _drain(cluster: SimulatedCluster, change: Change) -> ChangeReport:
    name = change.value
    try:
        cluster.cordon(name)
    except SimulationError as exc:
        raise InputError(f"{change.text}: {exc}") from None
    report = ChangeReport(change, "")
    pods = sorted(
        (p for p in cluster.pods.values() if p.node_name == name and not p.is_terminal),
        key=lambda p: p.key,
    )
    evicted = 0
    for pod in pods:
        if _kept_on_drain(pod):
            continue
        try:
            created = _replaced(cluster, functools.partial(cluster.evict, pod, None))
        except EvictionError as exc:
            report.pods.append(MovedPod(pod.key, f"stays: {exc}"))
            continue
        evicted += 1
        if created:
            report.replacements[pod.key] = created[0]
        else:
            report.pods.append(MovedPod(pod.key, "not recreated (no controller)"))
    stayed = sum(1 for p in report.pods if p.to.startswith("stays"))
    report.detail = f"cordoned, {plural(evicted, 'pod')} evicted" + (f", {stayed} kept by a PodDisruptionBudget" if stayed else "")
    return report


def _remove_group(
    cluster: SimulatedCluster, change: Change, group_of: Callable[[Node], str], groups: Sequence[str]
) -> ChangeReport:
    name = change.value
    if name not in groups:
        raise InputError(
            f"{change.text}: node group {name!r}: expected one of {', '.join(groups) or '(none)'}"
        )
    report = ChangeReport(change, "")
    members = sorted(n.name for n in cluster.list_nodes() if group_of(n) == name)
    for node in members:
        orphans = sorted(
            (p for p in cluster.pods.values() if p.node_name == node and not p.is_terminal and not _kept_on_drain(p)),
            key=lambda p: p.key,
        )
        before = set(cluster.pods)
        cluster.delete_node(node)
        created = sorted(set(cluster.pods) - before)
        # A controller recreates a pod under a fresh name (a StatefulSet under the same one).
        fresh = iter(created)
        for pod in orphans:
            if pod.key in cluster.pods:
                report.replacements[pod.key] = pod.key
                continue
            replacement = next(fresh, None)
            if replacement is None:
                report.pods.append(MovedPod(pod.key, "not recreated (no controller)"))
            else:
                report.replacements[pod.key] = replacement
    report.detail = (
        f"{plural(len(members), 'node')} deleted, "
        f"{plural(len(report.replacements), 'pod')} recreated"
    )
    return report


def apply_changes(
    cluster: SimulatedCluster,
    changes: Sequence[Change],
    group_of: Callable[[Node], str],
    groups: Sequence[str],
) -> list[ChangeReport]:
    """Apply `changes` in order; `group_of` names a node's group, `groups` are the node
    groups that exist. Raises `InputError` naming the change for one that cannot apply."""
    reports: list[ChangeReport] = []
    removed: list[str] = []
    for change in changes:
        if change.flag == APPLY:
            reports.append(_apply(cluster, change))
        elif change.flag == SCALE:
            reports.append(_scale(cluster, change))
        elif change.flag == DRAIN_NODE:
            reports.append(_drain(cluster, change))
        elif change.flag == REMOVE_NODE_GROUP:
            live = [g for g in groups if g not in removed]
            reports.append(_remove_group(cluster, change, group_of, live))
            removed.append(change.value)
        else:
            raise InputError(f"{change.flag}: not a change flag")
    return reports


def removed_groups(changes: Sequence[Change]) -> list[str]:
    return [c.value for c in changes if c.flag == REMOVE_NODE_GROUP]


def settle(cluster: SimulatedCluster, reports: Sequence[ChangeReport]) -> None:
    """After the scheduler ran: where each replacement pod went."""
    for report in reports:
        _refresh_pdbs(cluster, report)
        for old, new in sorted(report.replacements.items()):
            pod = cluster.pods.get(new)
            to = pod.node_name if pod is not None and pod.node_name else "pending"
            report.pods.append(MovedPod(old, to, "" if new == old else new))
        report.pods.sort(key=lambda p: p.pod)
        report.replacements.clear()


# --------------------------------------------------------------------------- before/after


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one loop does to a cluster, as the what-if compares it."""

    pending_pods: int
    nodes_added: dict[str, int]
    nodes_removed: tuple[str, ...]
    # Per hour, of the nodes of the groups with a known price once the loop's decisions
    # are carried out; `None` when no group has a price.
    cost_per_hour: float | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "pendingPods": self.pending_pods,
            "nodesAdded": dict(self.nodes_added),
            "nodesRemoved": list(self.nodes_removed),
        }
        if self.cost_per_hour is not None:
            doc["costPerHour"] = round(self.cost_per_hour, 4)
        return doc


def group_prices(provider: CloudProvider) -> dict[str, float]:
    """The node groups whose price per node-hour is known: the `sim` provider's groups
    with a `price` (its estimates for the others are not prices)."""
    prices = getattr(provider.pricing(), "group_prices", None)
    if not isinstance(prices, Mapping):
        return {}
    return {str(g): float(p) for g, p in prices.items()}


def outcome(
    objects: ClusterObjects,
    result: LoopResult,
    removed: Sequence[str] = (),
    provider: CloudProvider | None = None,
) -> Outcome:
    """The pending pods of `objects` (the cluster the loop saw), the nodes the loop adds
    per group and the nodes it removes (`removed`: as listed by the command's output), and
    with `provider`, the cost per hour of its priced groups afterwards."""
    pending = sum(1 for p in objects.pods if not p.node_name and not p.is_terminal)
    added: dict[str, int] = {}
    for d in result.scale_up.decisions:
        added[d.node_group] = added.get(d.node_group, 0) + d.delta
    cost = _cost(objects, added, removed, provider) if provider is not None else None
    return Outcome(pending, dict(sorted(added.items())), tuple(sorted(removed)), cost)


def _cost(
    objects: ClusterObjects,
    added: Mapping[str, int],
    removed: Sequence[str],
    provider: CloudProvider,
) -> float | None:
    prices = group_prices(provider)
    if not prices:
        return None
    gone = set(removed)
    total = 0.0
    for node in objects.nodes:
        if node.name in gone:
            continue
        try:
            group = provider.node_group_for_node(node)
        except CloudProviderError:
            continue
        if group is not None and group.id in prices:
            total += prices[group.id]
    return total + sum(prices[g] * n for g, n in added.items() if g in prices)


def what_if_json(
    reports: Sequence[ChangeReport], before: Outcome, after: Outcome
) -> dict[str, Any]:
    return {
        "changes": [r.to_json() for r in reports],
        "before": before.to_json(),
        "after": after.to_json(),
    }


def render_changes(reports: Sequence[ChangeReport]) -> str:
    """Each change, and where the pods it moved went."""
    lines = ["Changes"]
    for report in reports:
        lines.append(f"  {report.change.text}: {report.detail}")
        lines.extend(f"    {line}" for line in report.objects)
        for moved in report.pods:
            target = f"{moved.replacement} -> {moved.to}" if moved.replacement else moved.to
            lines.append(f"    {moved.pod}: {target}")
    return "\n".join(lines)


def render(reports: Sequence[ChangeReport], before: Outcome, after: Outcome) -> str:
    """The changes, then the loop's outcome before and after them."""
    lines = [render_changes(reports)]
    groups = sorted(set(before.nodes_added) | set(after.nodes_added))

    def added(o: Outcome) -> str:
        return ", ".join(f"{g}+{o.nodes_added[g]}" for g in groups if g in o.nodes_added) or "-"

    rows = [
        ("pending pods", str(before.pending_pods), str(after.pending_pods)),
        ("nodes added", added(before), added(after)),
        ("nodes removed", ", ".join(before.nodes_removed) or "-", ", ".join(after.nodes_removed) or "-"),
    ]
    if before.cost_per_hour is not None or after.cost_per_hour is not None:

        def cost(o: Outcome) -> str:
            return f"{o.cost_per_hour:.2f}" if o.cost_per_hour is not None else "-"

        rows.append(("cost per hour", cost(before), cost(after)))
    lines += ["", render_table(("", "BEFORE", "AFTER"), rows)]
    return "\n".join(lines)
