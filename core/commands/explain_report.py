"""What `clusterscaler explain` reports, built from one loop's `LoopResult` and rendered.

`explain` turns the result into a `Report`: for each pending pod, per node group, whether a
new node would help and if not why, and the pods the loop leaves out; for each node,
whether it is removable and if not why. `render` prints it for people, `report_json` for
tools (the keys of `simulate --once --json`, then `pendingPods`). How the loop is run (a
snapshot, a live cluster, what-if changes) is `clusterscaler.commands.explain`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog
from clusterscaler.framework.durations import format_duration
from clusterscaler.framework.options import AutoscalingOptions
from clusterscaler.interfaces.cloudprovider import CloudProvider, CloudProviderError
from clusterscaler.loop.decisions import BlockingPod, LoopResult, NoScaleUpReason
from clusterscaler.loop.pending import classify_pending, scale_up_delay
from clusterscaler.model import ClusterObjects, Node, Pod
from clusterscaler.offline import output
from clusterscaler.offline.loader import input_notes
from clusterscaler.simulator.dra import DeviceUse
from clusterscaler.simulator.snapshot import dra_state
from clusterscaler.simulator.utilization import node_utilization

log = structlog.get_logger()

ALL_GROUPS = "*"
# The `sim` provider's group label: a node's group when no provider is at hand.
_GROUP_LABEL = "clusterscaler.io/node-group"


@dataclass(frozen=True, slots=True)
class GroupVerdict:
    """Whether a new node of `node_group` would help a pod, and why (not)."""

    node_group: str
    helps: bool
    why: str


@dataclass(frozen=True, slots=True)
class PodReport:
    pod: str
    verdicts: tuple[GroupVerdict, ...]


@dataclass(frozen=True, slots=True)
class NodeReport:
    node: str
    node_group: str
    removable: bool
    reason: str
    blocking_pod: BlockingPod | None = None
    detail: str = ""
    # What --scale-down-utilization-threshold compares (the loop's figure for an unneeded
    # node), and of which resource; None for a node nothing was computed for.
    utilization: float | None = None
    utilization_of: str = ""
    # The DRA devices the node can reach, each with the claim holding it ("" when free).
    devices: tuple[DeviceUse, ...] = ()


@dataclass(frozen=True, slots=True)
class Report:
    time: datetime
    result: LoopResult = field(compare=False)
    pods: tuple[PodReport, ...] = ()
    nodes: tuple[NodeReport, ...] = ()
    halted: str = ""
    errors: tuple[str, ...] = ()
    # What the input left unchecked (`output.input_notes`).
    notes: tuple[str, ...] = ()


def _age(pod: Pod, now: datetime) -> timedelta:
    return now - pod.creation_time if pod.creation_time is not None else timedelta(0)


def _short(value: timedelta) -> str:
    return format_duration(timedelta(seconds=round(value.total_seconds())))


def _left_out(pods: Sequence[Pod], options: AutoscalingOptions, now: datetime) -> dict[str, str]:
    """Pending pods the loop does not try to help, with why (same for every group)."""
    pending = classify_pending(pods, options, now)
    why: dict[str, str] = {}
    cutoff = options.expendable_pods_priority_cutoff
    for pod in pending.expendable:
        why[pod.key] = (
            f"expendable: priority {pod.priority} is below "
            f"--expendable-pods-priority-cutoff={cutoff}"
        )
    for pod in pending.too_young:
        delay, _ = scale_up_delay(pod, options.new_pod_scale_up_delay)
        why[pod.key] = (
            f"too young: pending for {_short(_age(pod, now))}, scale-up waits {_short(delay)} "
            "(--new-pod-scale-up-delay or the pod-scale-up-delay annotation)"
        )
    for pod in pending.awaiting_preemption:
        why[pod.key] = f"waiting for preemption on node {pod.nominated_node_name}"
    return why


def node_group_namer(provider: CloudProvider | None) -> Callable[[Node], str]:
    """A node's group as `provider` sees it ("" for a node it does not autoscale); without a
    provider, the `clusterscaler.io/node-group` label."""
    if provider is None:
        return lambda node: node.labels.get(_GROUP_LABEL, "")

    def group_of(node: Node) -> str:
        try:
            group = provider.node_group_for_node(node)
        except CloudProviderError as exc:
            # One node the provider cannot place must not hide the answers for the others.
            log.warning("explain_node_group_unknown", node=node.name, error=str(exc))
            return ""
        return group.id if group is not None else ""

    return group_of


def explain(
    result: LoopResult,
    objects: ClusterObjects,
    options: AutoscalingOptions,
    now: datetime,
    provider: CloudProvider | None = None,
) -> Report:
    """Combine one loop's decisions with the cluster it looked at into per-pod and
    per-node answers. `provider` names the groups of the nodes the loop did not act on
    (nodes adopted by a group's selector carry no group label)."""
    groups = [g.name for g in result.node_groups]
    left_out = _left_out(objects.pods, options, now)
    verdicts: dict[str, list[GroupVerdict]] = {}
    for decision in result.scale_up.decisions:
        text = f"scale-up {decision.target_before} -> {decision.target_before + decision.delta}"
        for pod in decision.pods:
            verdicts.setdefault(pod, []).append(GroupVerdict(decision.node_group, True, text))
    chosen = {d.node_group for d in result.scale_up.decisions}
    for option in result.scale_up.options:
        if option.node_group in chosen:
            continue
        for pod in option.pods:
            verdicts.setdefault(pod, []).append(
                GroupVerdict(option.node_group, True, NoScaleUpReason.NOT_SELECTED.value)
            )
    # A pod some group helps: why each other group cannot (the loop keeps those reasons
    # for every pod it planned for, and reports only those of the pods left pending).
    for pod, helping in verdicts.items():
        named = {v.node_group for v in helping}
        helping.extend(
            GroupVerdict(r.node_group, False, output.rejection_text(r))
            for r in result.scale_up.group_rejections.get(pod, ())
            if r.node_group not in named
        )
    for pod, rejections in result.scale_up.pods_remaining.items():
        verdicts.setdefault(pod, []).extend(
            GroupVerdict(r.node_group, False, output.rejection_text(r)) for r in rejections
        )
    for pod, why in left_out.items():
        verdicts.setdefault(pod, []).extend(
            GroupVerdict(g, False, why) for g in groups or [ALL_GROUPS]
        )
    for waiting in objects.pods:
        if waiting.node_name or waiting.is_terminal or waiting.key in verdicts:
            continue
        why = (
            "fits on an existing or upcoming node: no new node needed"
            if waiting.unschedulable
            else "not marked unschedulable by the scheduler (yet): the autoscaler waits"
        )
        verdicts[waiting.key] = [GroupVerdict(ALL_GROUPS, False, why)]
    pod_reports = tuple(
        PodReport(pod, tuple(sorted(v, key=lambda x: (not x.helps, x.node_group))))
        for pod, v in sorted(verdicts.items())
    )
    return Report(
        time=now,
        pods=pod_reports,
        nodes=_node_reports(
            result,
            objects,
            options,
            node_group_namer(provider),
            provider.gpu_label() if provider is not None else "",
        ),
        halted=result.halted,
        errors=result.errors,
        result=result,
        notes=tuple(input_notes(objects)),
    )


def _node_reports(
    result: LoopResult,
    objects: ClusterObjects,
    options: AutoscalingOptions,
    group_of: Callable[[Node], str],
    gpu_label: str = "",
) -> tuple[NodeReport, ...]:
    down = result.scale_down
    pods_by_node: dict[str, list[Pod]] = {}
    for pod in objects.pods:
        if pod.node_name:
            pods_by_node.setdefault(pod.node_name, []).append(pod)
    # The devices as the cluster's claims hold them (the loop's own view is discarded).
    dra = dra_state(objects)

    def utilization(node: Node, report: NodeReport, loop_figure: float | None = None) -> NodeReport:
        # As the loop measures it; an unneeded node keeps the loop's own figure.
        util = node_utilization(
            node,
            pods_by_node.get(node.name, ()),
            now=result.time,
            gpu_label=gpu_label,
            ignore_daemonsets=options.ignore_daemonsets_utilization,
            ignore_mirror_pods=options.ignore_mirror_pods_utilization,
            dra=dra,
        )
        value = util.value if loop_figure is None else loop_figure
        devices = tuple(dra.node_devices(node)) if dra is not None else ()
        return dataclasses.replace(
            report, utilization=value, utilization_of=util.resource, devices=devices
        )

    unremovable = {u.node: u for u in down.unremovable}
    # Unneeded nodes that something else keeps (the group's minimum, a resource minimum)
    # are answered by that reason; "not unneeded long enough" only means "not yet".
    unneeded = {
        u.node: u
        for u in down.unneeded
        if u.node not in unremovable or unremovable[u.node].reason in output.WAITING_REASONS
    }
    deleting = {d.node: d for d in down.deletions}
    reports = []
    for node in sorted(objects.nodes, key=lambda n: n.name):
        figure: float | None = None
        if node.name in deleting:
            d = deleting[node.name]
            report = NodeReport(
                node.name, d.node_group, True, f"being deleted ({d.kind.value})", detail=d.error
            )
        elif node.name in unneeded:
            u = unneeded[node.name]
            # As the loop decided it, by the group's own unneeded (or unready) time.
            left = u.removable_at - result.time
            when = "now" if left <= timedelta(0) else f"after {_short(left)} more unneeded"
            kind = "empty" if u.empty else f"drain {output.plural(len(u.destinations), 'pod')}"
            report = NodeReport(
                node.name, u.node_group, True, f"unneeded ({kind}): removable {when}"
            )
            figure = u.utilization
        elif node.name in unremovable:
            u2 = unremovable[node.name]
            report = NodeReport(
                node.name, group_of(node), False, u2.reason.value, u2.blocking_pod, u2.detail
            )
        else:
            why = down.cooldown_reason or f"scale-down {down.status.value}"
            report = NodeReport(node.name, group_of(node), False, f"not evaluated: {why}")
        reports.append(utilization(node, report, figure))
    return tuple(reports)


def report_json(report: Report) -> dict[str, Any]:
    """The keys of `simulate --once --json` (every removable node listed), plus
    `pendingPods`: every pending pod with every node group's answer, `helps` and `why`, as
    the table shows them (a pod a scale-up helps included, with why each other group
    cannot; `unschedulable` keeps simulate's shape and lists only the pods left pending)."""
    doc = output.decision_json(report.result, include_waiting=True)
    # Listed as removable, a node is not also "not unneeded long enough".
    removable = {entry["node"] for entry in doc["scaleDown"]}
    doc["unremovable"] = [u for u in doc["unremovable"] if u["node"] not in removable]
    listed = {entry["pod"] for entry in doc["unschedulable"]}
    for pod in report.pods:
        if pod.pod in listed or any(v.helps for v in pod.verdicts):
            continue
        doc["unschedulable"].append(
            {"pod": pod.pod, "reasons": {v.node_group: v.why for v in pod.verdicts}}
        )
    doc["unschedulable"].sort(key=lambda e: e["pod"])
    doc["pendingPods"] = [
        {
            "pod": pod.pod,
            "nodeGroups": {v.node_group: {"helps": v.helps, "why": v.why} for v in pod.verdicts},
        }
        for pod in report.pods
    ]
    devices = [
        _device_json(n.node, d) for n in report.nodes for d in n.devices
    ]
    if devices:
        doc["devices"] = devices
    if report.notes:
        doc["notes"] = list(report.notes)
    return doc


def _device_json(node: str, d: DeviceUse) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "node": node, "driver": d.driver, "pool": d.pool, "device": d.device,
        "claim": d.claim or None, "nodeLocal": d.local,
    }
    if d.taints:
        entry["taints"] = [t.to_k8s() for t in d.taints]
    return entry


def _device_rows(report: Report) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for n in report.nodes:
        for i, d in enumerate(n.devices):
            taints = ",".join(
                f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                for t in d.taints
            )
            rows.append((
                n.node if i == 0 else "",
                d.driver,
                d.pool if d.local else f"{d.pool} (shared)",
                d.device,
                d.claim or "free",
                taints,
            ))
    return rows


def render(report: Report) -> str:
    lines: list[str] = []
    if report.halted:
        lines += [f"The loop stopped early: {report.halted}", ""]
    if report.notes:
        lines += [f"Note: {n}" for n in report.notes] + [""]
    lines.append("Pending pods")
    if report.pods:
        rows = []
        for pod in report.pods:
            for i, v in enumerate(pod.verdicts):
                rows.append(
                    (pod.pod if i == 0 else "", v.node_group, "yes" if v.helps else "no", v.why)
                )
        lines.append(output.render_table(("POD", "NODE GROUP", "NEW NODE HELPS", "WHY"), rows))
    else:
        lines.append("(none)")
    lines += ["", "Nodes"]
    if report.nodes:
        node_rows = [
            (
                n.node,
                n.node_group or "-",
                "yes" if n.removable else "no",
                "-" if n.utilization is None else f"{n.utilization:.0%} {n.utilization_of}",
                n.reason,
                f"{n.blocking_pod.pod} ({n.blocking_pod.reason.value})" if n.blocking_pod else "",
            )
            for n in report.nodes
        ]
        lines.append(
            output.render_table(
                ("NODE", "NODE GROUP", "REMOVABLE", "UTILIZATION", "REASON", "BLOCKING POD"),
                node_rows,
            )
        )
    else:
        lines.append("(none)")
    device_rows = _device_rows(report)
    if device_rows:
        lines += ["", "Devices (DRA)"]
        lines.append(
            output.render_table(
                ("NODE", "DRIVER", "POOL", "DEVICE", "CLAIM", "TAINTS"), device_rows
            )
        )
    blocked = [
        (g.name, g.scale_down_blocked) for g in report.result.node_groups if g.scale_down_blocked
    ]
    if blocked:
        # The provider keeps every node of these groups for now (a Cluster API
        # MachineDeployment rolling out); each node above says NotUnneededOtherReason.
        lines += ["", "Node groups not scaled down now"]
        lines.append(output.render_table(("NODE GROUP", "WHY"), blocked))
    problems = report.result.problems
    if problems:
        # A misconfigured node group (bad tags or annotations, a scale set or MIG that
        # cannot be read) is left out of the loop: say which and why.
        lines += ["", "Node group problems"]
        lines.append(
            output.render_table(
                ("NODE GROUP", "PROBLEM", "DETAIL"),
                [(p.node_group, p.reason, p.message) for p in problems],
            )
        )
    if report.errors:
        lines += ["", "Errors"] + [f"  {e}" for e in report.errors]
    return "\n".join(lines)
