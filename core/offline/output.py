"""What `clusterscaler simulate` prints: the `--once --json` document, the timeline table,
the summary, JSON lines and the `--plot` image.

Everything here is a pure function of plain data (`LoopResult`, timeline rows, samples),
so the same values feed the table, the JSON and the plot.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal, TextIO

from clusterscaler.framework.durations import format_duration
from clusterscaler.loop.decisions import GroupRejection, LoopResult, UnremovableReason
from clusterscaler.model.capacityquota import VALID
from clusterscaler.model.provisioning import find_condition

# Unremovable reasons that only mean "not yet": the node is unneeded and its timer runs.
WAITING_REASONS = frozenset(
    {UnremovableReason.NOT_UNNEEDED_LONG_ENOUGH, UnremovableReason.NOT_UNREADY_LONG_ENOUGH}
)


def rejection_text(rejection: GroupRejection) -> str:
    """`<CA's reason>` or `<reason>: <detail>`; for a pod the group's planned scale-up left
    out, what happened instead."""
    if rejection.left_out_by_plan:
        return rejection.left_out_by_plan
    text = rejection.reason.value
    return f"{text}: {rejection.detail}" if rejection.detail else text


def removable_now(result: LoopResult, *, include_waiting: bool = False) -> list[dict[str, Any]]:
    """Nodes the loop acts on now: deletions it started, plus unneeded nodes whose time has
    come by their group's own unneeded time (budgets may defer some of those to later
    loops); with `include_waiting`, also those still waiting for it."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for deletion in result.scale_down.deletions:
        if deletion.error or deletion.node in seen:
            continue
        seen.add(deletion.node)
        out.append(
            {
                "node": deletion.node,
                "nodeGroup": deletion.node_group,
                "empty": deletion.kind.value == "empty",
            }
        )
    # An unneeded node can still be kept (the group's minimum, a resource minimum, the
    # deletion budget): the loop reports it as unremovable too, and does not act on it.
    kept = {
        u.node
        for u in result.scale_down.unremovable
        if u.reason not in WAITING_REASONS
    }
    for unneeded in result.scale_down.unneeded:
        if (
            unneeded.node in seen
            or unneeded.node in kept
            or (not include_waiting and unneeded.removable_at > result.time)
        ):
            continue
        seen.add(unneeded.node)
        out.append(
            {"node": unneeded.node, "nodeGroup": unneeded.node_group, "empty": unneeded.empty}
        )
    return out


def decision_json(result: LoopResult, *, include_waiting: bool = False) -> dict[str, Any]:
    """The `simulate --once --json` / `explain --json` document."""
    scale_up = [
        {
            "nodeGroup": d.node_group,
            "from": d.target_before,
            "to": d.target_before + d.delta,
            "pods": list(d.pods),
        }
        for d in result.scale_up.decisions
    ]
    unschedulable = [
        {
            "pod": pod,
            "reasons": {r.node_group: rejection_text(r) for r in rejections},
        }
        for pod, rejections in sorted(result.scale_up.pods_remaining.items())
    ]
    unremovable = []
    for u in sorted(result.scale_down.unremovable, key=lambda u: u.node):
        entry: dict[str, Any] = {
            "node": u.node,
            "reason": u.reason.value,
            "detail": u.detail,
            "blockingPod": None,
        }
        if u.blocking_pod is not None:
            entry["blockingPod"] = {
                "pod": u.blocking_pod.pod,
                "reason": u.blocking_pod.reason.value,
            }
        unremovable.append(entry)
    doc: dict[str, Any] = {
        "scaleUp": scale_up,
        "scaleDown": removable_now(result, include_waiting=include_waiting),
        "unschedulable": unschedulable,
        "unremovable": unremovable,
    }
    if result.provisioning_requests:
        # As the loop leaves them (--enable-provisioning-requests): what it would write.
        doc["provisioningRequests"] = [
            {
                "namespace": r.namespace,
                "name": r.name,
                "class": r.class_name,
                "conditions": r.statuses(),
            }
            for r in result.provisioning_requests
            if not r.delete
        ]
    if result.capacity_quotas:
        # Each CapacityQuota (--capacity-quotas-enabled) as its status would say: the usage
        # of the nodes it covers, and whether it is enforced (valid) or why not.
        doc["capacityQuotas"] = []
        for q in result.capacity_quotas:
            valid = find_condition(q.conditions, VALID)
            doc["capacityQuotas"].append({
                "name": q.name,
                "used": dict(q.used) if q.used is not None else None,
                "valid": valid is not None and valid.is_true,
                "message": valid.message if valid is not None else "",
            })
    if result.capacity_buffers:
        # Each CapacityBuffer as its status would say (--capacity-buffer-controller-enabled,
        # --capacity-buffer-pod-injection-enabled), and the placeholder pods injected for it
        # (named in the scale-up and unschedulable pods above).
        doc["capacityBuffers"] = [
            {
                "namespace": b.namespace,
                "name": b.name,
                "podTemplate": b.status.pod_template_ref,
                "replicas": b.status.replicas,
                "conditions": b.status.statuses(),
                "injectedPods": len(b.pods),
            }
            for b in result.capacity_buffers
        ]
    if result.unreadable:
        # Objects the loop could not read and left out; the nodes of such pods are kept.
        doc["unreadable"] = [
            {"kind": u.kind, "object": u.key, "node": u.node_name, "error": u.error}
            for u in result.unreadable
        ]
    return doc


# --------------------------------------------------------------------------- timeline


@dataclass(frozen=True, slots=True)
class TimelineRow:
    """One line of the timeline: what happened, to which group, sizes after, pods pending."""

    offset: timedelta
    action: str
    node_group: str
    detail: str
    sizes: Mapping[str, int]
    pending: int

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "event",
            "time": self.offset.total_seconds(),
            "action": self.action,
            "nodeGroup": self.node_group,
            "detail": self.detail,
            "sizes": dict(self.sizes),
            "pending": self.pending,
        }


@dataclass(frozen=True, slots=True)
class Sample:
    """The cluster after one loop: ready and upcoming nodes per group, pending pods, cost so
    far."""

    offset: timedelta
    nodes: Mapping[str, int]
    pending: int
    cost: float
    # Nodes requested but not ready yet (instances starting, nodes registered but not
    # ready), per group.
    upcoming: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "sample",
            "time": self.offset.total_seconds(),
            "nodes": dict(self.nodes),
            "upcoming": dict(self.upcoming),
            "pending": self.pending,
            "cost": round(self.cost, 6),
        }


def plural(count: int, noun: str) -> str:
    """`1 pod`, `2 pods`: a count with its noun (`noun` singular; plurals add an s)."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def clock_text(offset: timedelta) -> str:
    total = int(offset.total_seconds())
    hours, rem = divmod(total, 3600)
    minutes, seconds = divmod(rem, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}"


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return " ".join(f"{g}={n}" for g, n in sorted(sizes.items()))


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(header)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return "\n".join(lines)


def render_timeline(rows: Sequence[TimelineRow]) -> str:
    if not rows:
        return "(nothing happened)"
    return render_table(
        ("TIME", "ACTION", "GROUP", "DETAIL", "NODES", "PENDING"),
        [
            (
                clock_text(r.offset),
                r.action,
                r.node_group or "-",
                r.detail,
                _sizes_text(r.sizes),
                str(r.pending),
            )
            for r in rows
        ],
    )


# --------------------------------------------------------------------------- summary


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (`q` in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True, slots=True)
class Summary:
    """A run in numbers. Scale-ups and scale-downs count as the timeline shows them: one per
    node group per loop. Requested nodes end up provisioned (registered and ready), failed
    (their instances removed by the loop: errors, or too slow to register) or still
    provisioning when the run ends; removed nodes are counted one by one."""

    duration: timedelta
    loops: int
    scale_ups: int
    nodes_requested: int
    nodes_provisioned: int
    nodes_failed: int
    nodes_provisioning: int
    scale_downs: int
    nodes_removed: int
    node_hours: Mapping[str, float]
    cost: float
    pending_p50: timedelta | None
    pending_p95: timedelta | None
    pending_max: timedelta | None
    still_pending: int
    final_sizes: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        def secs(value: timedelta | None) -> float | None:
            return None if value is None else value.total_seconds()

        return {
            "type": "summary",
            "duration": self.duration.total_seconds(),
            "loops": self.loops,
            "scaleUps": self.scale_ups,
            "nodesRequested": self.nodes_requested,
            "nodesProvisioned": self.nodes_provisioned,
            "nodesFailed": self.nodes_failed,
            "nodesProvisioning": self.nodes_provisioning,
            "scaleDowns": self.scale_downs,
            "nodesRemoved": self.nodes_removed,
            "nodeHours": {g: round(h, 4) for g, h in sorted(self.node_hours.items())},
            "cost": round(self.cost, 4),
            "podPendingSeconds": {
                "p50": secs(self.pending_p50),
                "p95": secs(self.pending_p95),
                "max": secs(self.pending_max),
            },
            "stillPending": self.still_pending,
            "finalNodes": dict(sorted(self.final_sizes.items())),
        }


def pending_stats(waits: Sequence[timedelta]) -> tuple[timedelta | None, ...]:
    if not waits:
        return (None, None, None)
    secs = [w.total_seconds() for w in waits]
    return (
        timedelta(seconds=percentile(secs, 50)),
        timedelta(seconds=percentile(secs, 95)),
        timedelta(seconds=max(secs)),
    )


def render_summary(summary: Summary) -> str:
    def dur(value: timedelta | None) -> str:
        return (
            "-"
            if value is None
            else format_duration(timedelta(seconds=round(value.total_seconds())))
        )

    hours = ", ".join(f"{g} {h:.2f}" for g, h in sorted(summary.node_hours.items())) or "-"
    outcomes = [f"{summary.nodes_provisioned} provisioned", f"{summary.nodes_failed} failed"]
    if summary.nodes_provisioning:
        outcomes.append(f"{summary.nodes_provisioning} still provisioning")
    requested = plural(summary.nodes_requested, "node") + " requested"
    if summary.nodes_requested:
        requested += ": " + ", ".join(outcomes)
    lines = [
        f"simulated       {format_duration(summary.duration)} in {plural(summary.loops, 'loop')}",
        f"scale-ups       {summary.scale_ups} ({requested})",
        f"scale-downs     {summary.scale_downs} ({plural(summary.nodes_removed, 'node')} removed)",
        "                (a scale-up or scale-down is one node group's in one loop)",
        f"node-hours      {sum(summary.node_hours.values()):.2f} ({hours})",
        f"cost            {summary.cost:.2f}",
        f"pod pending     p50 {dur(summary.pending_p50)}, p95 {dur(summary.pending_p95)}, "
        f"max {dur(summary.pending_max)}",
        f"still pending   {plural(summary.still_pending, 'pod')}",
        f"final nodes     {_sizes_text(summary.final_sizes) or '-'}",
    ]
    return "\n".join(lines)


def write_json_line(stream: TextIO, doc: Mapping[str, Any]) -> None:
    stream.write(json.dumps(doc, sort_keys=False) + "\n")


# --------------------------------------------------------------------------- plot


class PlotError(RuntimeError):
    """The plot cannot be drawn (matplotlib missing, file not writable)."""


def check_plotting() -> None:
    """Fail before a long run, not after it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotError(
            "--plot: needs matplotlib; install it with `pip install clusterscaler[plot]`"
        ) from None


# Timeline actions marked on the plot, by what an operator looks for.
MARKED_ACTIONS: Mapping[str, str] = {
    "scale-up": "scale-up",
    "scale-down": "scale-down",
    "scale-up-failed": "failed provisioning",
    "cleanup": "failed provisioning",
    "backoff": "backoff",
}
_MARKER_STYLE: Mapping[str, tuple[str, Literal["-", "--", ":"]]] = {
    "scale-up": ("tab:green", "-"),
    "scale-down": ("tab:blue", "-"),
    "failed provisioning": ("tab:red", "--"),
    "backoff": ("tab:orange", ":"),
}


def event_marks(rows: Sequence[TimelineRow]) -> dict[str, list[float]]:
    """The minutes at which each marked kind of event happened (one mark per minute and
    kind, however many rows share it)."""
    marks: dict[str, list[float]] = {}
    for row in rows:
        kind = MARKED_ACTIONS.get(row.action)
        if kind is None:
            continue
        minute = row.offset.total_seconds() / 60
        seen = marks.setdefault(kind, [])
        if minute not in seen:
            seen.append(minute)
    return marks


def scale_labels(rows: Sequence[TimelineRow]) -> list[tuple[float, str]]:
    """What each scale-up and scale-down mark says, by minute: the group and its change
    (`general 2 -> 5`, `highmem -1`), one label per minute and group."""
    changes: dict[tuple[float, str, str], list[str]] = {}
    for row in rows:
        if row.action not in ("scale-up", "scale-down"):
            continue
        key = (row.offset.total_seconds() / 60, row.action, row.node_group)
        changes.setdefault(key, []).append(row.detail)
    labels = []
    for (minute, action, group), details in changes.items():
        if action == "scale-up":
            change = " ".join(details[-1].split(" for ")[0].split())
        else:
            change = f"-{len(details)}"
        labels.append((minute, f"{group} {change}"))
    return labels


def cost_rates(samples: Sequence[Sample]) -> list[float]:
    """The cost per hour between each sample and the one before (the first: 0)."""
    rates = [0.0]
    for before, after in pairwise(samples):
        hours = (after.offset - before.offset).total_seconds() / 3600
        rates.append((after.cost - before.cost) / hours if hours > 0 else rates[-1])
    return rates


def plot_format(path: str | Path) -> str:
    """`svg` when the file name ends in .svg, else `png`."""
    return "svg" if str(path).lower().endswith(".svg") else "png"


def plot(
    samples: Sequence[Sample],
    path: str | Path,
    title: str = "",
    *,
    subtitle: str = "",
    rows: Sequence[TimelineRow] = (),
) -> None:
    """Nodes per group, pending pods and cost ($/hour and cumulative $) over time, with the
    timeline's scale-ups, scale-downs, failed provisioning and backoffs marked; a PNG, or
    an SVG when the file name ends in .svg."""
    check_plotting()
    import matplotlib
    from matplotlib import pyplot as plt

    # Text stays text in an SVG: searchable, and smaller than outlined glyphs.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig = figure(samples, title, subtitle=subtitle, rows=rows)
        try:
            fig.savefig(str(path), format=plot_format(path), bbox_inches="tight")
        except OSError as exc:
            raise PlotError(
                f"--plot {str(path)!r}: cannot write the file: {exc.strerror or exc}"
            ) from None
        finally:
            plt.close(fig)


def figure(
    samples: Sequence[Sample],
    title: str = "",
    *,
    subtitle: str = "",
    rows: Sequence[TimelineRow] = (),
) -> Any:
    """The matplotlib figure `plot` writes (the caller closes it)."""
    check_plotting()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    minutes = [s.offset.total_seconds() / 60 for s in samples]
    groups = sorted({g for s in samples for g in s.nodes})
    fig, axes = plt.subplots(3, 1, figsize=(11, 8.5), sharex=True)
    nodes_ax, pending_ax, cost_ax = axes
    if groups:
        # Light colours for the groups, so that the event marks stand out over them.
        palette = matplotlib.colormaps["Set3"]
        nodes_ax.stackplot(
            minutes,
            [[s.nodes.get(g, 0) for s in samples] for g in groups],
            labels=groups,
            colors=[palette(i % palette.N) for i in range(len(groups))],
            step="post",
        )
    ready = [sum(s.nodes.values()) for s in samples]
    requested = [r + sum(s.upcoming.values()) for r, s in zip(ready, samples, strict=True)]
    if any(r > n for r, n in zip(requested, ready, strict=True)):
        # Capacity requested but not ready yet, above the ready nodes.
        nodes_ax.fill_between(minutes, ready, requested, step="post", facecolor="none",
                              edgecolor="grey", hatch="//", linewidth=0.0,
                              label="requested, not ready")
    for minute, text in scale_labels(rows):
        nodes_ax.annotate(text, xy=(minute, 1.0), xycoords=("data", "axes fraction"),
                          rotation=90, fontsize="x-small", ha="right", va="top",
                          xytext=(-2, -2), textcoords="offset points")
    nodes_ax.set_ylabel("nodes (ready; hatched: requested)")
    pending_ax.step(minutes, [s.pending for s in samples], where="post", color="black")
    pending_ax.set_ylabel("pending pods")
    for ax in (nodes_ax, pending_ax):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(bottom=0)
    cost_ax.step(minutes, cost_rates(samples), where="pre", color="tab:brown")
    cost_ax.set_ylabel("cost rate ($/hour)", color="tab:brown")
    cumulative_ax = cost_ax.twinx()
    cumulative_ax.plot(minutes, [s.cost for s in samples], color="tab:purple")
    cumulative_ax.set_ylabel("cumulative cost ($)", color="tab:purple")
    cost_ax.set_xlabel("minutes")
    marks = event_marks(rows)
    for kind, at in marks.items():
        color, style = _MARKER_STYLE[kind]
        for ax in axes:
            for minute in at:
                ax.axvline(minute, color=color, linestyle=style, linewidth=1, alpha=0.8)
    handles, labels = nodes_ax.get_legend_handles_labels()
    for kind in _MARKER_STYLE:
        if kind in marks:
            color, style = _MARKER_STYLE[kind]
            handles.append(Line2D([], [], color=color, linestyle=style))
            labels.append(kind)
    if handles:
        # Outside the axes, so that it never hides a bar or a mark.
        nodes_ax.legend(
            handles,
            labels,
            loc="upper left",
            bbox_to_anchor=(1.09, 1.0),
            borderaxespad=0.0,
            fontsize="small",
        )
    if title:
        fig.suptitle(f"{title}\n{subtitle}" if subtitle else title, fontsize="medium")
    elif subtitle:
        fig.suptitle(subtitle, fontsize="small")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- progress


class Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(
        self, total: timedelta, stream: TextIO | None = None, enabled: bool | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.total = total.total_seconds()
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._last = -1

    def update(self, elapsed: timedelta) -> None:
        if not self.enabled or self.total <= 0:
            return
        pct = min(100, int(elapsed.total_seconds() * 100 / self.total))
        if pct == self._last:
            return
        self._last = pct
        filled = pct * 30 // 100
        self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {pct:3d}% simulated")
        self.stream.flush()

    def done(self) -> None:
        if self.enabled and self._last >= 0:
            self.stream.write("\r" + " " * 50 + "\r")
            self.stream.flush()
