"""When the next loop starts (CA's LoopTrigger, --frequent-loops-enabled).

A loop starts --scan-interval after the previous one ended, as in CA (its main loop waits
the interval after `RunOnce` returns): a loop longer than the interval still leaves the
interval idle before the next. With --frequent-loops-enabled (the default):

- a productive loop (one that scaled up, or started deleting a node) is followed at once by
  the next (CA: "Autoscaler loop triggered immediately after a productive iteration"): a
  loop that scales up does not scale down, so the scale-down it skipped is not left
  waiting a whole interval;
- a pod that newly becomes unschedulable starts the next loop at once instead of at the
  end of the interval (CA: "Autoscaler loop triggered by unschedulable pod appearing"). Any
  number of pods appearing together wake the loop once. CA starts such a loop right after
  the previous one ends; here it starts `MIN_POD_TRIGGER_GAP` (1 second) after the
  previous loop ended at the earliest, so pods appearing one after another while loops run
  leave the process a moment idle between loops, and never later than the interval.

Without it, each loop starts --scan-interval after the previous one ended, whatever
happens in between.

This module decides; `clusterscaler run` waits (`commands/run.py`).
"""

from __future__ import annotations

from datetime import timedelta

from clusterscaler.framework.durations import format_duration
from clusterscaler.loop.decisions import LoopResult, ScaleDownStatus, ScaleUpStatus

__all__ = [
    "MIN_POD_TRIGGER_GAP",
    "POD_APPEARED",
    "PRODUCTIVE",
    "LoopTrigger",
    "productive",
]

# The shortest idle time between the end of a loop and a loop an unschedulable pod starts.
MIN_POD_TRIGGER_GAP = 1.0
# The reasons a loop starts, as CA logs them ("Autoscaler loop triggered ...").
PRODUCTIVE = "immediately after a productive iteration"
POD_APPEARED = "by unschedulable pod appearing"


def productive(result: LoopResult) -> bool:
    """Whether a loop scaled up or started a node's deletion."""
    return (
        result.scale_up.status is ScaleUpStatus.SUCCESSFUL
        or result.scale_down.status is ScaleDownStatus.NODE_DELETE_STARTED
    )


class LoopTrigger:
    """Remembers whether the last loop was productive, and says whether the next starts at
    once; else it starts `interval` seconds after the last ended, or earlier for a pod
    (`pod_trigger_delay`)."""

    def __init__(self, scan_interval: timedelta, *, frequent_loops_enabled: bool) -> None:
        self.interval = scan_interval.total_seconds()
        self.frequent = frequent_loops_enabled
        self.timer_reason = f"by a {format_duration(scan_interval)} timer"
        self._productive = False

    def record(self, result: LoopResult | None) -> None:
        """The loop that just ended (`None`: it ended early, without a result)."""
        self._productive = result is not None and productive(result)

    @property
    def pod_triggered(self) -> bool:
        """Whether a new unschedulable pod starts the next loop early."""
        return self.frequent

    def immediate(self) -> bool:
        """Whether the next loop starts at once, after a productive loop."""
        return self.frequent and self._productive

    def pod_trigger_delay(self, idle: float) -> float:
        """How much longer to wait once an unschedulable pod appeared `idle` seconds after
        the last loop ended: until `MIN_POD_TRIGGER_GAP` after its end, and never past the
        interval."""
        return max(0.0, min(MIN_POD_TRIGGER_GAP, self.interval) - idle)
