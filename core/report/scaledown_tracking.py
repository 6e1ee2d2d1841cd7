"""What two of Cluster Autoscaler's optional scale-down metrics remember between loops.

``node_removal_latency_seconds{deleted}`` (--node-removal-latency-tracking-enabled): for
each node that was unneeded, how long past its removal threshold (the moment its
--scale-down-unneeded-time, or --scale-down-unready-time, ran out) it waited until its
deletion started (``deleted="true"``) or until it stopped being unneeded
(``deleted="false"``). As in CA, a node that left the list before its threshold is not
observed.

``max_node_skip_eval_duration_seconds`` (--max-node-skip-eval-time-tracker-enabled): the
longest time any node has been skipped, loop after loop without a break, by the removal
simulation (cut short by --scale-down-simulation-timeout or by
--scale-down-non-empty-candidates-count); 0 when no node was skipped.

Both read only the loop's result: a loop that did not plan scale-down (it halted, or
scale-down is disabled or came after a scale-up) changes neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from clusterscaler.loop.decisions import ScaleDownResult, ScaleDownStatus

__all__ = ["MaxNodeSkipEvalTracker", "NodeRemovalLatencyTracker", "planned"]


def planned(scale_down: ScaleDownResult) -> bool:
    """Whether the loop planned scale-down, so its unneeded and unremovable nodes are the
    loop's verdict (and not left empty because nothing was evaluated)."""
    if scale_down.status is ScaleDownStatus.NOT_TRIED:
        return False
    if scale_down.status is ScaleDownStatus.IN_COOLDOWN:
        # In cooldown after a scale-up in the same loop nothing is evaluated; in any other
        # cooldown the plan runs, and has a verdict on some node.
        return bool(scale_down.unneeded or scale_down.unremovable)
    return True


@dataclass(slots=True)
class _Unneeded:
    removable_at: datetime


class NodeRemovalLatencyTracker:
    """The unneeded nodes seen so far, each with its removal threshold."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Unneeded] = {}

    def tracked(self) -> set[str]:
        return set(self._nodes)

    def update(self, scale_down: ScaleDownResult, now: datetime) -> list[tuple[bool, float]]:
        """The latencies this loop ends, as ``(deleted, seconds)``."""
        if not planned(scale_down):
            return []
        current: dict[str, _Unneeded] = {}
        for u in scale_down.unneeded:
            # The threshold follows the node's latest options, as CA updates it.
            current[u.node] = _Unneeded(u.removable_at)
        out: list[tuple[bool, float]] = []
        started = {d.node for d in scale_down.started}
        for name in sorted(started):
            entry = current.pop(name, None) or self._nodes.get(name)
            if entry is not None:
                out.append((True, (now - entry.removable_at).total_seconds()))
        in_flight = set(scale_down.in_flight)
        for name, entry in sorted(self._nodes.items()):
            if name in current or name in started or name in in_flight:
                continue
            out.append((False, (now - entry.removable_at).total_seconds()))
        self._nodes = current
        # Only time past the threshold is latency.
        return [(deleted, seconds) for deleted, seconds in out if seconds > 0]


class MaxNodeSkipEvalTracker:
    """For each node skipped by the last planned loop, since when it has been skipped."""

    def __init__(self) -> None:
        self._last: datetime | None = None
        self._since: dict[str, datetime] = {}

    def update(self, scale_down: ScaleDownResult, now: datetime) -> float | None:
        """The longest run of skips, in seconds, after this loop; None when the loop did
        not plan scale-down."""
        if not planned(scale_down):
            return None
        skipped = sorted(u.node for u in scale_down.unremovable if u.skipped)
        # A node skipped again keeps its start; a node newly skipped was last evaluated by
        # the previous planned loop.
        previous = self._last or now
        self._since = {name: self._since.get(name, previous) for name in skipped}
        self._last = now
        if not self._since:
            return 0.0
        return (now - min(self._since.values())).total_seconds()
